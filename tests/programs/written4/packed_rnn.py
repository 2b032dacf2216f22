# In the manner of sequence classifiers over variable-length text (the padded-batch
# idiom of many tutorials and repositories): a collate_fn that sorts by length and pads
# with pad_sequence(batch_first=True), lengths as a tensor, Embedding(padding_idx=0),
# pack_padded_sequence(..., lengths.cpu(), batch_first=True, enforce_sorted=...), a
# bidirectional GRU, pad_packed_sequence back, the final states of both directions
# concatenated from h_n[-2] and h_n[-1], and a masked mean of the padded outputs; an LSTM
# variant takes enforce_sorted=False batches.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_IDX = 0


class SeqDataset(Dataset):
    def __init__(self, seqs, labels):
        self.seqs = seqs
        self.labels = labels

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, idx):
        return torch.tensor(self.seqs[idx], dtype=torch.long), self.labels[idx]


def collate_sorted(batch):
    batch.sort(key=lambda x: len(x[0]), reverse=True)
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    padded = pad_sequence(seqs, batch_first=True, padding_value=PAD_IDX)
    return padded, lengths, torch.tensor(labels)


def collate_unsorted(batch):
    seqs = [item[0] for item in batch]
    labels = torch.LongTensor([item[1] for item in batch])
    lengths = torch.LongTensor([len(s) for s in seqs])
    return pad_sequence(seqs, batch_first=True), lengths, labels


class GRUClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_IDX)
        self.rnn = nn.GRU(embed_dim, hidden_dim, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(hidden_dim * 4, num_classes)

    def forward(self, text, lengths):
        embedded = self.embedding(text)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True)
        packed_output, hidden = self.rnn(packed)
        output, output_lengths = pad_packed_sequence(packed_output, batch_first=True)
        mask = (torch.arange(output.size(1))[None, :] < output_lengths[:, None]).unsqueeze(-1)
        mean = (output * mask).sum(1) / output_lengths.unsqueeze(1).float()
        hidden = torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)
        return self.fc(torch.cat([hidden, mean], dim=1))


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_IDX)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x, lengths):
        x = self.embedding(x)
        x = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, (h_n, c_n) = self.lstm(x)
        return self.fc(h_n[-1])


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(8)
    vocab = 12
    seqs, labels = [], []
    for i in range(32):
        n = int(rng.integers(3, 8))
        s = rng.integers(1, vocab, n)
        seqs.append(s.tolist())
        labels.append(int(s.sum() % 3))
    models = [GRUClassifier(vocab, 8, 10, 3), LSTMClassifier(vocab, 8, 10, 3)]
    w = {}
    for j, model in enumerate(models):
        if weights is not None:
            model.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith(f'{j}.')})
        w.update({f'{j}.' + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    losses, fns = [], []
    for model, collate in zip(models, (collate_sorted, collate_unsorted)):
        loader = DataLoader(SeqDataset(seqs, labels), batch_size=8, shuffle=False, collate_fn=collate)
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

        def train_step(text, lengths, label):
            optimizer.zero_grad()
            predictions = model(text, lengths)
            loss = criterion(predictions, label)
            loss.backward()
            optimizer.step()
            acc = (predictions.argmax(1) == label).float().mean()
            return loss, acc

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        for epoch in range(2):
            model.train()
            epoch_loss, epoch_acc = 0, 0
            for text, lengths, label in loader:
                loss, acc = step(text, lengths, label)
                epoch_loss += loss.item()
                epoch_acc += acc.item()
                losses.append(loss.item())
            losses += [epoch_loss / len(loader), epoch_acc / len(loader)]
        model.eval()
        with torch.no_grad():
            text, lengths, label = next(iter(loader))
            losses += model(text, lengths).flatten().tolist()
    return {"losses": losses, "weights": w, "fn": fns}
