# In the manner of RealNVP-style normalizing flows for 2-D density estimation: affine
# coupling layers with alternating binary masks kept as buffers (register_buffer), scale
# and translation networks (tanh-bounded scale), the change of variables with the summed
# log-determinant, a MultivariateNormal base distribution, maximum likelihood training with
# Adam and gradient clipping, and the inverse pass under no_grad to map base points back.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# The base points mapped back are fixed NumPy draws (a test device: torch's and
# dualgraph's random streams differ, so prior.sample() would not match).
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
from torch import distributions


class Coupling(nn.Module):
    def __init__(self, mask, hidden=16):
        super().__init__()
        self.register_buffer("mask", mask)
        d = mask.numel()
        self.s = nn.Sequential(nn.Linear(d, hidden), nn.LeakyReLU(), nn.Linear(hidden, d), nn.Tanh())
        self.t = nn.Sequential(nn.Linear(d, hidden), nn.LeakyReLU(), nn.Linear(hidden, d))

    def forward(self, x):
        # data -> latent; returns z and log|det dz/dx|
        x_ = x * self.mask
        s = self.s(x_) * (1 - self.mask)
        t = self.t(x_) * (1 - self.mask)
        z = x_ + (1 - self.mask) * (x - t) * torch.exp(-s)
        return z, -s.sum(dim=1)

    def inverse(self, z):
        z_ = z * self.mask
        s = self.s(z_) * (1 - self.mask)
        t = self.t(z_) * (1 - self.mask)
        return z_ + (1 - self.mask) * (z * torch.exp(s) + t)


class RealNVP(nn.Module):
    def __init__(self, n_layers=4):
        super().__init__()
        masks = [torch.tensor([float(i % 2), float(1 - i % 2)]) for i in range(n_layers)]
        self.layers = nn.ModuleList([Coupling(m) for m in masks])
        self.register_buffer("loc", torch.zeros(2))
        self.register_buffer("cov", torch.eye(2))

    @property
    def prior(self):
        return distributions.MultivariateNormal(self.loc, self.cov)

    def f(self, x):
        log_det_J = x.new_zeros(x.shape[0])
        z = x
        for layer in self.layers:
            z, ld = layer(z)
            log_det_J += ld
        return z, log_det_J

    def g(self, z):
        x = z
        for layer in reversed(self.layers):
            x = layer.inverse(x)
        return x

    def log_prob(self, x):
        z, logp = self.f(x)
        return self.prior.log_prob(z) + logp


def two_moons(rng, n):
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    pts = np.stack([x, y], 1) + 0.05 * rng.standard_normal((n, 2))
    return pts.astype(np.float32)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    flow = RealNVP()
    if weights is not None:
        flow.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in flow.state_dict().items()}
    rng = np.random.default_rng(0)
    data = torch.from_numpy(two_moons(rng, 256))
    optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad], lr=1e-2)

    def train_step(x):
        loss = -flow.log_prob(x).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(flow.parameters(), max_norm=5.0)
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for it in range(12):
        x = data[(it % 8) * 32:(it % 8) * 32 + 32]
        losses.append(step(x).item())
    with torch.no_grad():
        z = torch.from_numpy(rng.standard_normal((5, 2)).astype(np.float32))
        x = flow.g(z)
        losses += x.flatten().tolist()
        z_back, _ = flow.f(x)
        losses.append((z_back - z).abs().max().item() < 1e-4)
        losses.append(flow.log_prob(data).mean().item())
    return {"losses": losses, "weights": w, "fn": step}
