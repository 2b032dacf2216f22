# In the manner of word-level LSTM language models trained with truncated backpropagation
# through time (the hidden state (h, c) kept on the model between batches and detached by
# a recursive repackage_hidden), with tied input and output embeddings, gradient clipping
# and a no_grad evaluation of perplexity inside the training loop.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LSTMLM(nn.Module):
    def __init__(self, ntoken=20, ninp=8, nlayers=2, dropout=0.0):
        super(LSTMLM, self).__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, ninp, nlayers, dropout=dropout)
        self.decoder = nn.Linear(ninp, ntoken)
        self.decoder.weight = self.encoder.weight  # tied weights
        self.nlayers, self.nhid = nlayers, ninp
        self.hidden = None
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        self.hidden = (weight.new_zeros(self.nlayers, bsz, self.nhid),
                       weight.new_zeros(self.nlayers, bsz, self.nhid))

    def forward(self, input):
        emb = self.drop(self.encoder(input))
        output, self.hidden = self.rnn(emb, self.hidden)
        output = self.drop(output)
        return F.log_softmax(self.decoder(output), dim=-1)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = LSTMLM()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    # A corpus with structure: each token mostly follows from the one before.
    ids = [0]
    for _ in range(329):
        ids.append((ids[-1] * 3 + 1) % 20 if rng.random() < 0.8 else int(rng.integers(20)))
    corpus = torch.tensor(ids, dtype=torch.long)
    train_data = batchify(corpus[:264], 4)   # 66 x 4
    val_data = batchify(corpus[264:], 2)     # 33 x 2
    bptt, lr, clip = 5, 2.0, 0.25
    criterion = nn.NLLLoss()

    def train_step(data, targets):
        # Starting each batch, we detach the hidden state from how it was previously
        # produced; otherwise the model would try backpropagating all the way back.
        model.hidden = repackage_hidden(model.hidden)
        model.zero_grad()
        output = model(data)
        loss = criterion(output.view(-1, 20), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss

    def evaluate(data_source):
        model.eval()
        total_loss = 0.
        model.init_hidden(2)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, bptt):
                data, targets = get_batch(data_source, i, bptt)
                output = model(data)
                total_loss += len(data) * criterion(output.view(-1, 20), targets).item()
        return total_loss / (len(data_source) - 1)

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        model.train()
        model.init_hidden(4)
        # 60 rows in whole bptt windows (the last partial window left out, so every
        # step sees one shape)
        for batch, i in enumerate(range(0, 60, bptt)):
            data, targets = get_batch(train_data, i, bptt)
            loss = step(data, targets)
            losses.append(loss.item())
        val_loss = evaluate(val_data)
        losses.append(val_loss)
        losses.append(math.exp(val_loss))
    losses.append(model.hidden[0].abs().sum().item())
    return {"losses": losses, "weights": w, "fn": step}
