# In the manner of juho-lee/set_transformer's modules.py and its max-regression demo (MIT
# licence) and the Deep Sets models written beside it: ``MAB`` with heads split by
# ``torch.cat(Q.split(dim_split, 2), 0)``, ``torch.softmax(Q_.bmm(K_.transpose(1, 2)) /
# math.sqrt(self.dim_V), 2)``, heads joined by ``torch.cat((Q_ + A.bmm(V_)).split(Q.size(0),
# 0), 2)``, optional LayerNorms found by ``getattr(self, 'ln0', None)``; ``ISAB`` with
# inducing points ``nn.Parameter(torch.Tensor(1, num_inds, dim_out))`` initialised by
# ``nn.init.xavier_uniform_`` and ``self.I.repeat(X.size(0), 1, 1)``; ``PMA`` seeds;
# ``SAB``; a ``DeepSet`` with ``X.mean(-2)`` pooling and ``.squeeze(-1)``; ``nn.L1Loss``
# against ``torch.max(x, dim=1)[0]``; Adam; and the models saved with ``torch.save`` to an
# in-memory buffer and loaded back for a ``no_grad`` evaluation.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import io
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MAB(nn.Module):
    def __init__(self, dim_Q, dim_K, dim_V, num_heads, ln=False):
        super(MAB, self).__init__()
        self.dim_V = dim_V
        self.num_heads = num_heads
        self.fc_q = nn.Linear(dim_Q, dim_V)
        self.fc_k = nn.Linear(dim_K, dim_V)
        self.fc_v = nn.Linear(dim_K, dim_V)
        if ln:
            self.ln0 = nn.LayerNorm(dim_V)
            self.ln1 = nn.LayerNorm(dim_V)
        self.fc_o = nn.Linear(dim_V, dim_V)

    def forward(self, Q, K):
        Q = self.fc_q(Q)
        K, V = self.fc_k(K), self.fc_v(K)
        dim_split = self.dim_V // self.num_heads
        Q_ = torch.cat(Q.split(dim_split, 2), 0)
        K_ = torch.cat(K.split(dim_split, 2), 0)
        V_ = torch.cat(V.split(dim_split, 2), 0)
        A = torch.softmax(Q_.bmm(K_.transpose(1, 2)) / math.sqrt(self.dim_V), 2)
        O = torch.cat((Q_ + A.bmm(V_)).split(Q.size(0), 0), 2)
        O = O if getattr(self, 'ln0', None) is None else self.ln0(O)
        O = O + F.relu(self.fc_o(O))
        O = O if getattr(self, 'ln1', None) is None else self.ln1(O)
        return O


class SAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads, ln=False):
        super(SAB, self).__init__()
        self.mab = MAB(dim_in, dim_in, dim_out, num_heads, ln=ln)

    def forward(self, X):
        return self.mab(X, X)


class ISAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads, num_inds, ln=False):
        super(ISAB, self).__init__()
        self.I = nn.Parameter(torch.Tensor(1, num_inds, dim_out))
        nn.init.xavier_uniform_(self.I)
        self.mab0 = MAB(dim_out, dim_in, dim_out, num_heads, ln=ln)
        self.mab1 = MAB(dim_in, dim_out, dim_out, num_heads, ln=ln)

    def forward(self, X):
        H = self.mab0(self.I.repeat(X.size(0), 1, 1), X)
        return self.mab1(X, H)


class PMA(nn.Module):
    def __init__(self, dim, num_heads, num_seeds, ln=False):
        super(PMA, self).__init__()
        self.S = nn.Parameter(torch.Tensor(1, num_seeds, dim))
        nn.init.xavier_uniform_(self.S)
        self.mab = MAB(dim, dim, dim, num_heads, ln=ln)

    def forward(self, X):
        return self.mab(self.S.repeat(X.size(0), 1, 1), X)


class DeepSet(nn.Module):
    def __init__(self, dim_input, num_outputs, dim_output, dim_hidden=16):
        super(DeepSet, self).__init__()
        self.num_outputs = num_outputs
        self.dim_output = dim_output
        self.enc = nn.Sequential(
            nn.Linear(dim_input, dim_hidden),
            nn.ReLU(),
            nn.Linear(dim_hidden, dim_hidden))
        self.dec = nn.Sequential(
            nn.Linear(dim_hidden, dim_hidden),
            nn.ReLU(),
            nn.Linear(dim_hidden, num_outputs * dim_output))

    def forward(self, X):
        X = self.enc(X).mean(-2)
        X = self.dec(X).reshape(-1, self.num_outputs, self.dim_output)
        return X


class SetTransformer(nn.Module):
    def __init__(self, dim_input, num_outputs, dim_output, num_inds=4, dim_hidden=16, num_heads=2, ln=False):
        super(SetTransformer, self).__init__()
        self.enc = nn.Sequential(
            ISAB(dim_input, dim_hidden, num_heads, num_inds, ln=ln),
            ISAB(dim_hidden, dim_hidden, num_heads, num_inds, ln=ln))
        self.dec = nn.Sequential(
            PMA(dim_hidden, num_heads, num_outputs, ln=ln),
            SAB(dim_hidden, dim_hidden, num_heads, ln=ln),
            nn.Linear(dim_hidden, dim_output))

    def forward(self, X):
        return self.dec(self.enc(X))


def gen_data(rng, batch_size, max_length=6, test=False):
    length = rng.integers(2, max_length + 1)
    x = rng.integers(1, 20, (batch_size, length, 1))
    y = np.max(x, axis=1)
    x, y = torch.from_numpy(x).float(), torch.from_numpy(y).float()
    return x, y


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(910)
    models = {"set_transformer": SetTransformer(1, 1, 1, ln=True), "deepset": DeepSet(1, 1, 1)}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    criterion = nn.L1Loss()
    data = [gen_data(rng, batch_size=4, max_length=5) for _ in range(3)]
    x_fixed = torch.from_numpy(rng.integers(1, 20, (4, 5, 1))).float()
    data += [(x_fixed, torch.max(x_fixed, dim=1)[0]) for _ in range(3)]
    losses = []
    fns = []
    for name, model in models.items():
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def train_step(x, y):
            model.train()
            optimizer.zero_grad()
            loss = criterion(model(x).squeeze(-1), y)
            loss.backward()
            optimizer.step()
            return loss

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        for x, y in data:
            losses.append(step(x, y).item())
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        buffer.seek(0)
        state = torch.load(buffer, weights_only=True)
        model.load_state_dict(state)
        model.eval()
        with torch.no_grad():
            x, y = data[0]
            losses.append(criterion(model(x).squeeze(-1), y).item())
            losses += model(x)[:, 0, 0].tolist()
    return {"losses": losses, "weights": w, "fn": fns}
