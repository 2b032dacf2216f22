# In the manner of sequence taggers over variable-length sentences: a map-style Dataset,
# a DataLoader whose collate_fn pads with pad_sequence and returns the lengths, an
# embedding with padding_idx, a bidirectional two-layer GRU run over a PackedSequence
# (pack_padded_sequence with enforce_sorted=False, pad_packed_sequence back), a
# CrossEntropyLoss that ignores the padding label, Adam, and token accuracy under no_grad.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# Each batch is built to have the same longest sentence (a test device: a compiled step
# then sees one padded shape; the sentences' own lengths vary).
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD = 0


class TagDataset(Dataset):
    def __init__(self, sentences, tags):
        self.sentences, self.tags = sentences, tags

    def __len__(self):
        return len(self.sentences)

    def __getitem__(self, idx):
        return torch.tensor(self.sentences[idx]), torch.tensor(self.tags[idx])


def collate(batch):
    words, tags = zip(*batch)
    lengths = torch.tensor([len(w) for w in words])
    return (pad_sequence(words, batch_first=True, padding_value=PAD),
            pad_sequence(tags, batch_first=True, padding_value=-100), lengths)


class Tagger(nn.Module):
    def __init__(self, vocab_size=15, n_tags=4, emb_dim=6, hidden_dim=5):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.rnn = nn.GRU(emb_dim, hidden_dim, num_layers=2, bidirectional=True,
                          batch_first=True)
        self.fc = nn.Linear(hidden_dim * 2, n_tags)

    def forward(self, words, lengths):
        embedded = self.embedding(words)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True,
                                      enforce_sorted=False)
        packed_out, hidden = self.rnn(packed)
        out, _ = pad_packed_sequence(packed_out, batch_first=True,
                                     total_length=words.size(1))
        return self.fc(out)


def make_data(rng, n):
    sentences, tags = [], []
    for k in range(n):
        length = 7 if k % 4 == 0 else int(rng.integers(2, 7))  # one of each 4 is longest
        words = rng.integers(1, 15, length)
        sentences.append(words.tolist())
        tags.append(((words % 4 + np.arange(length)) % 4).tolist())
    return sentences, tags


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = Tagger()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    loader = DataLoader(TagDataset(*make_data(rng, 24)), batch_size=4, collate_fn=collate)
    criterion = nn.CrossEntropyLoss(ignore_index=-100)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)

    def train_step(words, tags, lengths):
        optimizer.zero_grad()
        logits = model(words, lengths)
        loss = criterion(logits.view(-1, logits.shape[-1]), tags.view(-1))
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        model.train()
        for words, tags, lengths in loader:
            losses.append(step(words, tags, lengths).item())
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for words, tags, lengths in loader:
                pred = model(words, lengths).argmax(-1)
                mask = tags != -100
                correct += (pred[mask] == tags[mask]).sum().item()
                total += mask.sum().item()
        losses.append(correct / total)
    return {"losses": losses, "weights": w, "fn": step}
