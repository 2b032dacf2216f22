# In the manner of the popular seq2seq-with-LSTM tutorial repositories: an Encoder of
# ``nn.Embedding`` + multi-layer ``nn.LSTM(emb_dim, hid_dim, n_layers, dropout=dropout)``
# returning ``hidden, cell``, a Decoder fed one token at a time (``input.unsqueeze(0)``,
# ``self.fc_out(output.squeeze(0))``), a Seq2Seq module filling ``outputs = torch.zeros(trg_len,
# batch_size, trg_vocab_size)`` with ``outputs[t] = output`` and choosing the next input with
# teacher forcing ``teacher_force = random.random() < teacher_forcing_ratio`` against
# ``output.argmax(1)``; ``init_weights`` applying ``nn.init.uniform_(param.data, -0.08, 0.08)``
# over ``named_parameters()``, ``count_parameters`` by ``p.numel()`` where ``p.requires_grad``,
# ``CrossEntropyLoss(ignore_index=TRG_PAD_IDX)`` on ``output[1:].view(-1, output_dim)``,
# ``clip_grad_norm_`` and evaluation with ``teacher_forcing_ratio=0``. Python's ``random`` is
# seeded; the ratio is 1.0 in training (a test device: the draw order differs between a
# compiled call that traces and one that does not).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math
import random

import numpy as np
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, hid_dim, n_layers, dropout):
        super().__init__()
        self.hid_dim = hid_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(input_dim, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hid_dim, n_layers, dropout=dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        embedded = self.dropout(self.embedding(src))
        outputs, (hidden, cell) = self.rnn(embedded)
        return hidden, cell


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, hid_dim, n_layers, dropout):
        super().__init__()
        self.output_dim = output_dim
        self.hid_dim = hid_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(output_dim, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hid_dim, n_layers, dropout=dropout)
        self.fc_out = nn.Linear(hid_dim, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, cell):
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        output, (hidden, cell) = self.rnn(embedded, (hidden, cell))
        prediction = self.fc_out(output.squeeze(0))
        return prediction, hidden, cell


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.device = device
        assert encoder.hid_dim == decoder.hid_dim, "Hidden dimensions of encoder and decoder must be equal!"
        assert encoder.n_layers == decoder.n_layers, "Encoder and decoder must have equal number of layers!"

    def forward(self, src, trg, teacher_forcing_ratio=0.5):
        batch_size = trg.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size).to(self.device)
        hidden, cell = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg_len):
            output, hidden, cell = self.decoder(input, hidden, cell)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


def init_weights(m):
    for name, param in m.named_parameters():
        nn.init.uniform_(param.data, -0.08, 0.08)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    random.seed(1234)
    rng = np.random.default_rng(69)
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    INPUT_DIM, OUTPUT_DIM, ENC_EMB_DIM, DEC_EMB_DIM, HID_DIM, N_LAYERS = 14, 12, 8, 8, 16, 2
    TRG_PAD_IDX, CLIP = 0, 1
    enc = Encoder(INPUT_DIM, ENC_EMB_DIM, HID_DIM, N_LAYERS, 0.0)
    dec = Decoder(OUTPUT_DIM, DEC_EMB_DIM, HID_DIM, N_LAYERS, 0.0)
    model = Seq2Seq(enc, dec, device).to(device)
    model.apply(init_weights)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    losses = [count_parameters(model)]
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss(ignore_index=TRG_PAD_IDX)

    def train_step(src, trg):
        optimizer.zero_grad()
        output = model(src, trg, 1.0)
        output_dim = output.shape[-1]
        output = output[1:].view(-1, output_dim)
        trg = trg[1:].view(-1)
        loss = criterion(output, trg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    batches = []
    for _ in range(3):
        src = torch.tensor(rng.integers(2, INPUT_DIM, (6, 4)))
        trg = torch.cat([torch.ones(1, 4, dtype=torch.long), (src[:5] % (OUTPUT_DIM - 2)) + 2], 0)
        trg[4:, 0] = TRG_PAD_IDX
        batches.append((src.to(device), trg.to(device)))
    for epoch in range(3):
        model.train()
        epoch_loss = 0
        for src, trg in batches:
            loss = step(src, trg)
            epoch_loss += loss.item()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            src, trg = batches[0]
            output = model(src, trg, 0)
            loss = criterion(output[1:].view(-1, output.shape[-1]), trg[1:].view(-1))
        losses += [epoch_loss / len(batches), loss.item(), math.exp(loss.item())]
    return {"losses": losses, "weights": w, "fn": step}
