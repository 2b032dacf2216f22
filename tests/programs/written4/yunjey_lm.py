# In the manner of yunjey/pytorch-tutorial's language model: a Dictionary/Corpus that turns
# text into a LongTensor of word ids viewed as (batch_size, -1), an Embedding/LSTM/Linear
# model that returns (out, (h, c)), truncated backpropagation through
# `states = detach(states)` with `[state.detach() for state in states]`,
# clip_grad_norm_(model.parameters(), 0.5), perplexity np.exp(loss.item()), and greedy
# sampling word by word with torch.no_grad() and fill_.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

embed_size = 16
hidden_size = 24
num_layers = 1
num_epochs = 2
batch_size = 4
seq_length = 5
learning_rate = 0.002

TEXT = """the cat sat on the mat and the dog sat on the log
a bird flew over the house and the cat watched the bird
the dog ran to the park and a bird sang in the tree
""" * 3


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = {}
        self.idx = 0

    def add_word(self, word):
        if not word in self.word2idx:
            self.word2idx[word] = self.idx
            self.idx2word[self.idx] = word
            self.idx += 1

    def __len__(self):
        return len(self.word2idx)


class Corpus(object):
    def __init__(self):
        self.dictionary = Dictionary()

    def get_data(self, text, batch_size=20):
        tokens = 0
        for line in text.splitlines():
            words = line.split() + ['<eos>']
            tokens += len(words)
            for word in words:
                self.dictionary.add_word(word)
        ids = torch.LongTensor(tokens)
        token = 0
        for line in text.splitlines():
            words = line.split() + ['<eos>']
            for word in words:
                ids[token] = self.dictionary.word2idx[word]
                token += 1
        num_batches = ids.size(0) // batch_size
        ids = ids[:num_batches * batch_size]
        return ids.view(batch_size, -1)


class RNNLM(nn.Module):
    def __init__(self, vocab_size, embed_size, hidden_size, num_layers):
        super(RNNLM, self).__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, h):
        x = self.embed(x)
        out, (h, c) = self.lstm(x, h)
        out = out.reshape(out.size(0) * out.size(1), out.size(2))
        out = self.linear(out)
        return out, (h, c)


def detach(states):
    return [state.detach() for state in states]


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    corpus = Corpus()
    ids = corpus.get_data(TEXT, batch_size)
    vocab_size = len(corpus.dictionary)
    num_batches = ids.size(1) // seq_length
    model = RNNLM(vocab_size, embed_size, hidden_size, num_layers).to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    def train_step(inputs, targets, states):
        states = detach(states)
        outputs, states = model(inputs, states)
        loss = criterion(outputs, targets.reshape(-1))
        model.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return loss, states

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(num_epochs):
        states = (torch.zeros(num_layers, batch_size, hidden_size).to(device),
                  torch.zeros(num_layers, batch_size, hidden_size).to(device))
        for i in range(0, (ids.size(1) - 1) - ((ids.size(1) - 1) % seq_length), seq_length):
            inputs = ids[:, i:i + seq_length].to(device)
            targets = ids[:, (i + 1):(i + 1) + seq_length].to(device)
            loss, states = step(inputs, targets, states)
            losses.append(loss.item())
        losses.append(np.exp(loss.item()))

    words = []
    with torch.no_grad():
        state = (torch.zeros(num_layers, 1, hidden_size).to(device),
                 torch.zeros(num_layers, 1, hidden_size).to(device))
        input = torch.ones(1, 1, dtype=torch.long).to(device)
        for i in range(12):
            output, state = model(input, state)
            prob = output.exp()
            word_id = torch.argmax(prob, dim=1).item()
            input.fill_(word_id)
            words.append(word_id)
    losses += words
    return {"losses": losses, "weights": w, "fn": step}
