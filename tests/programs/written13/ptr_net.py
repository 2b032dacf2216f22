# In the manner of the PyTorch Pointer Network implementations (shirgur/PointerNet and
# similar) learning to sort numbers: an ``nn.LSTM(batch_first=True)`` encoder whose final
# ``(h, c)`` start the decoder, a hand-written decoder step around ``nn.LSTMCell``, the
# pointer attention ``self.V(torch.tanh(self.W1(enc) + self.W2(dec).unsqueeze(1))).squeeze(-1)``
# with already-chosen positions masked by ``masked_fill(mask, float('-inf'))``, the mask
# grown by ``mask.scatter(1, idx.unsqueeze(1), True)``, teacher forcing feeding the encoder
# output of the target index back through ``torch.gather(enc, 1, idx.view(-1, 1,
# 1).expand(-1, 1, H))``, a learned first decoder input ``nn.Parameter(torch.FloatTensor(
# dim))`` initialised by ``nn.init.uniform_(-1, 1)`` and ``.unsqueeze(0).expand(batch, -1)``,
# ``torch.stack(outputs, 1)`` of ``log_softmax`` pointers with ``F.nll_loss`` on
# ``.view(-1, n)``, and greedy decoding at evaluation by ``argmax`` (under ``torch.no_grad``).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, hidden_dim):
        super().__init__()
        self.W1 = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.W2 = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.V = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, enc, dec, mask):
        scores = self.V(torch.tanh(self.W1(enc) + self.W2(dec).unsqueeze(1))).squeeze(-1)
        scores = scores.masked_fill(mask, float('-inf'))
        return F.log_softmax(scores, dim=-1)


class PointerNet(nn.Module):
    def __init__(self, embedding_dim=8, hidden_dim=12):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.embedding = nn.Linear(1, embedding_dim)
        self.encoder = nn.LSTM(embedding_dim, hidden_dim, batch_first=True)
        self.decoder_cell = nn.LSTMCell(embedding_dim, hidden_dim)
        self.attention = Attention(hidden_dim)
        self.decoder_input0 = nn.Parameter(torch.FloatTensor(embedding_dim), requires_grad=True)
        nn.init.uniform_(self.decoder_input0, -1, 1)

    def forward(self, inputs, targets=None):
        batch_size, n = inputs.size(0), inputs.size(1)
        embedded = self.embedding(inputs.unsqueeze(-1))
        enc, (h, c) = self.encoder(embedded)
        h, c = h[-1], c[-1]
        mask = torch.zeros(batch_size, n, dtype=torch.bool)
        dec_input = self.decoder_input0.unsqueeze(0).expand(batch_size, -1)
        outputs, pointers = [], []
        for i in range(n):
            h, c = self.decoder_cell(dec_input, (h, c))
            log_p = self.attention(enc, h, mask)
            outputs.append(log_p)
            if targets is not None:
                idx = targets[:, i]
            else:
                idx = log_p.argmax(dim=-1)
            pointers.append(idx)
            mask = mask.scatter(1, idx.unsqueeze(1), True)
            dec_input = torch.gather(embedded, 1, idx.view(-1, 1, 1).expand(-1, 1, embedded.size(-1))).squeeze(1)
        return torch.stack(outputs, 1), torch.stack(pointers, 1)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1307)
    model = PointerNet()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    n = 5
    batches = []
    for _ in range(3):
        x = rng.uniform(0, 1, (4, n)).astype(np.float32)
        batches.append((torch.from_numpy(x), torch.from_numpy(np.argsort(x, 1))))

    def train_step(x, y):
        model.train()
        log_probs, pointers = model(x, y)
        loss = F.nll_loss(log_probs.view(-1, n), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        for x, y in batches:
            losses.append(step(x, y).item())
    model.eval()
    with torch.no_grad():
        x, y = batches[0]
        _, pointers = model(x)
        losses.append(float((pointers == y).float().mean()))
        losses += [float(v) for v in pointers.flatten()]
    return {"losses": losses, "weights": w, "fn": step}
