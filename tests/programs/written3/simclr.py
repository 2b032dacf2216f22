# In the manner of public SimCLR implementations: two augmented views through an encoder
# and a projection head, F.normalize, the NT-Xent (InfoNCE) loss as cross_entropy over a
# temperature-scaled similarity matrix with the diagonal masked_fill-ed with -inf (torch.eye
# as a bool mask, labels from torch.arange and roll), then a linear probe on frozen
# features (encoder.eval(), requires_grad_(False)). Augmentations use NumPy (a test
# device: the random streams of the two libraries differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class SimCLR(nn.Module):
    def __init__(self, in_dim=16, hidden_dim=32, out_dim=8):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(in_dim, hidden_dim, bias=False), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, hidden_dim), nn.ReLU(inplace=True))
        self.projector = nn.Sequential(
            nn.Linear(hidden_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, out_dim))

    def forward(self, x):
        h = self.encoder(x)
        z = self.projector(h)
        return h, z


def info_nce_loss(feats, temperature=0.5):
    cos_sim = F.cosine_similarity(feats[:, None, :], feats[None, :, :], dim=-1)
    self_mask = torch.eye(cos_sim.shape[0], dtype=torch.bool, device=cos_sim.device)
    cos_sim.masked_fill_(self_mask, -9e15)
    pos_mask = self_mask.roll(shifts=cos_sim.shape[0] // 2, dims=0)
    cos_sim = cos_sim / temperature
    nll = -cos_sim[pos_mask] + torch.logsumexp(cos_sim, dim=-1)
    nll = nll.mean()
    comb_sim = torch.cat([cos_sim[pos_mask][:, None], cos_sim.masked_fill(pos_mask, -9e15)], dim=-1)
    sim_argsort = comb_sim.argsort(dim=-1, descending=True).argmin(dim=-1)
    return nll, (sim_argsort == 0).float().mean(), (sim_argsort < 5).float().mean()


def nt_xent(z1, z2, temperature=0.5):
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    n = z1.shape[0]
    sim = z @ z.T / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float('-inf'))
    labels = torch.arange(2 * n).roll(n)
    return F.cross_entropy(sim, labels)


def augment(rng, x):
    return (x * rng.uniform(0.8, 1.2, (x.shape[0], 1)) + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = SimCLR()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items() if not k.startswith("probe.")})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    data = rng.standard_normal((64, 16)).astype(np.float32)
    classes = (data[:, 0] + data[:, 1] > 0).astype(np.int64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=8, eta_min=1e-4)

    def train_step(x1, x2):
        _, z1 = model(x1)
        _, z2 = model(x2)
        loss = nt_xent(z1, z2, temperature=0.5)
        nll, top1, top5 = info_nce_loss(torch.cat([z1, z2], dim=0), temperature=0.5)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, nll.detach(), top1, top5

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    model.train()
    for epoch in range(2):
        for b in range(0, 64, 16):
            x = data[b:b + 16]
            x1, x2 = torch.from_numpy(augment(rng, x)), torch.from_numpy(augment(rng, x))
            loss, nll, top1, top5 = step(x1, x2)
            losses += [loss.item(), nll.item(), top1.item(), top5.item()]
            scheduler.step()

    # linear evaluation on frozen features
    model.eval()
    model.requires_grad_(False)
    probe = nn.Linear(32, 2)
    if weights is not None:
        probe.load_state_dict({k[6:]: torch.tensor(v) for k, v in weights.items() if k.startswith("probe.")})
    w.update({"probe." + k: v.detach().numpy().copy() for k, v in probe.state_dict().items()})
    probe_opt = torch.optim.SGD(probe.parameters(), lr=0.5)
    X = torch.from_numpy(data)
    Y = torch.from_numpy(classes)

    def probe_step(x, y):
        with torch.no_grad():
            feats, _ = model(x)
        logits = probe(feats)
        loss = F.cross_entropy(logits, y)
        probe_opt.zero_grad()
        loss.backward()
        probe_opt.step()
        return loss, (logits.argmax(dim=-1) == y).float().mean()

    pstep = torch.compile(probe_step) if compiled else probe_step
    for _ in range(5):
        loss, acc = pstep(X, Y)
        losses += [loss.item(), acc.item()]
    return {"losses": losses, "weights": w, "fn": [step, pstep]}
