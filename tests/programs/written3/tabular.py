# In the manner of tabular-data MLPs (the fastai-style TabularModel written in plain
# PyTorch): embeddings of categorical columns concatenated with BatchNorm1d-normalised
# continuous ones, Linear/ReLU/BatchNorm1d/Dropout blocks, AdamW with OneCycleLR stepped
# per batch, an exponential moving average of the weights (a deepcopy updated under
# torch.no_grad with lerp_ and copy_ of the buffers), evaluation of both models, and an
# early-stopping check. Dropout is 0 here (a test device: the random streams of the two
# libraries differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader


class TabularDataset(Dataset):
    def __init__(self, cats, conts, y):
        self.cats = torch.tensor(cats, dtype=torch.int64)
        self.conts = torch.tensor(conts, dtype=torch.float32)
        self.y = torch.tensor(y, dtype=torch.float32).unsqueeze(-1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        return self.cats[idx], self.conts[idx], self.y[idx]


class TabularModel(nn.Module):
    def __init__(self, emb_szs, n_cont, out_sz, layers, p=0.0):
        super().__init__()
        self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
        self.emb_drop = nn.Dropout(p)
        self.bn_cont = nn.BatchNorm1d(n_cont)
        layerlist = []
        n_emb = sum((nf for ni, nf in emb_szs))
        n_in = n_emb + n_cont
        for i in layers:
            layerlist.append(nn.Linear(n_in, i))
            layerlist.append(nn.ReLU(inplace=True))
            layerlist.append(nn.BatchNorm1d(i))
            layerlist.append(nn.Dropout(p))
            n_in = i
        layerlist.append(nn.Linear(layers[-1], out_sz))
        self.layers = nn.Sequential(*layerlist)

    def forward(self, x_cat, x_cont):
        embeddings = []
        for i, e in enumerate(self.embeds):
            embeddings.append(e(x_cat[:, i]))
        x = torch.cat(embeddings, 1)
        x = self.emb_drop(x)
        x_cont = self.bn_cont(x_cont)
        x = torch.cat([x, x_cont], 1)
        x = self.layers(x)
        return x


class EMA:
    def __init__(self, model, decay=0.9):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for ema_p, p in zip(self.shadow.parameters(), model.parameters()):
            ema_p.lerp_(p.detach(), 1.0 - self.decay)
        for ema_b, b in zip(self.shadow.buffers(), model.buffers()):
            ema_b.copy_(b)


def run(weights=None, compiled=False):
    torch.manual_seed(33)
    rng = np.random.default_rng(0)
    n = 96
    cats = np.stack([rng.integers(0, 5, n), rng.integers(0, 3, n)], 1)
    conts = rng.standard_normal((n, 3)).astype(np.float32) * np.array([1.0, 10.0, 0.1], np.float32)
    y = (cats[:, 0] * 0.5 - cats[:, 1] + conts[:, 0] + 0.1 * conts[:, 1] + 0.1 * rng.standard_normal(n)).astype(np.float32)
    model = TabularModel([(5, 3), (3, 2)], 3, 1, [16, 8], p=0.0)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    ema = EMA(model)
    train_dl = DataLoader(TabularDataset(cats[:64], conts[:64], y[:64]), batch_size=16, shuffle=False)
    valid_dl = DataLoader(TabularDataset(cats[64:], conts[64:], y[64:]), batch_size=32)
    epochs = 4
    criterion = nn.MSELoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-2, epochs=epochs,
                                                    steps_per_epoch=len(train_dl))

    def train_step(x_cat, x_cont, yb):
        optimizer.zero_grad()
        y_pred = model(x_cat, x_cont)
        loss = torch.sqrt(criterion(y_pred, yb))
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    best, bad_epochs = float("inf"), 0
    for epoch in range(epochs):
        model.train()
        for x_cat, x_cont, yb in train_dl:
            loss = step(x_cat, x_cont, yb)
            scheduler.step()
            ema.update(model)
            losses.append(loss.item())
        losses.append(scheduler.get_last_lr()[0])
        model.eval()
        with torch.no_grad():
            val = sum(F.mse_loss(model(c, x), t, reduction="sum").item() for c, x, t in valid_dl) / len(valid_dl.dataset)
            val_ema = sum(F.mse_loss(ema.shadow(c, x), t, reduction="sum").item() for c, x, t in valid_dl) / len(valid_dl.dataset)
        losses += [val, val_ema]
        if val < best:
            best, bad_epochs = val, 0
        else:
            bad_epochs += 1
    losses.append(bad_epochs)
    return {"losses": losses, "weights": w, "fn": step}
