# In the manner of facebookresearch/barlowtwins' main.py and facebookresearch/vicreg's
# main_vicreg.py (MIT licences): ``off_diagonal`` by ``x.flatten()[:-1].view(n - 1, n +
# 1)[:, 1:].flatten()``, a projector built from ``list(map(int, '...'.split('-')))``, a
# ``BatchNorm1d(affine=False)`` on the embeddings, the cross-correlation
# ``self.bn(z1).T @ self.bn(z2)`` with ``torch.diagonal(c).add_(-1).pow_(2).sum()``, VICReg's
# invariance/variance/covariance terms (``torch.sqrt(x.var(dim=0) + 0.0001)``,
# ``F.relu(1 - std_x)``, ``(x.T @ x) / (batch_size - 1)``), and LARS written as a
# ``torch.optim.Optimizer`` subclass (``defaults = dict(...)``, ``@torch.no_grad() def
# step(self)``, ``self.state[p]`` momentum buffers, ``torch.where`` trust ratios,
# ``exclude_bias_and_norm`` by ``p.ndim == 1``), parameter groups of weights and biases,
# and a ``adjust_learning_rate`` with a linear warm-up and a cosine decay.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim


def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class BarlowTwins(nn.Module):
    def __init__(self, projector="16-16-8", lambd=0.005, batch_size=6):
        super().__init__()
        self.lambd = lambd
        self.batch_size = batch_size
        self.backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
        sizes = [16] + list(map(int, projector.split('-')))
        layers = []
        for i in range(len(sizes) - 2):
            layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=False))
            layers.append(nn.BatchNorm1d(sizes[i + 1]))
            layers.append(nn.ReLU(inplace=True))
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        c = self.bn(z1).T @ self.bn(z2)
        c.div_(self.batch_size)
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        loss = on_diag + self.lambd * off_diag
        return loss


class VICReg(nn.Module):
    def __init__(self, batch_size=6, num_features=8, sim_coeff=25.0, std_coeff=25.0, cov_coeff=1.0):
        super().__init__()
        self.batch_size = batch_size
        self.num_features = num_features
        self.sim_coeff, self.std_coeff, self.cov_coeff = sim_coeff, std_coeff, cov_coeff
        self.backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
        self.projector = nn.Sequential(nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU(True), nn.Linear(16, num_features))

    def forward(self, x, y):
        x = self.projector(self.backbone(x))
        y = self.projector(self.backbone(y))
        repr_loss = F.mse_loss(x, y)
        x = x - x.mean(dim=0)
        y = y - y.mean(dim=0)
        std_x = torch.sqrt(x.var(dim=0) + 0.0001)
        std_y = torch.sqrt(y.var(dim=0) + 0.0001)
        std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
        cov_x = (x.T @ x) / (self.batch_size - 1)
        cov_y = (y.T @ y) / (self.batch_size - 1)
        cov_loss = off_diagonal(cov_x).pow_(2).sum().div(
            self.num_features
        ) + off_diagonal(cov_y).pow_(2).sum().div(self.num_features)
        loss = (self.sim_coeff * repr_loss + self.std_coeff * std_loss + self.cov_coeff * cov_loss)
        return loss


def exclude_bias_and_norm(p):
    return p.ndim == 1


class LARS(optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                 weight_decay_filter=None, lars_adaptation_filter=None):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                        eta=eta, weight_decay_filter=weight_decay_filter,
                        lars_adaptation_filter=lars_adaptation_filter)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g['params']:
                dp = p.grad
                if dp is None:
                    continue
                if g['weight_decay_filter'] is None or not g['weight_decay_filter'](p):
                    dp = dp.add(p, alpha=g['weight_decay'])
                if g['lars_adaptation_filter'] is None or not g['lars_adaptation_filter'](p):
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0.,
                                    torch.where(update_norm > 0,
                                                (g['eta'] * param_norm / update_norm), one), one)
                    dp = dp.mul(q)
                param_state = self.state[p]
                if 'mu' not in param_state:
                    param_state['mu'] = torch.zeros_like(p)
                mu = param_state['mu']
                mu.mul_(g['momentum']).add_(dp)
                p.add_(mu, alpha=-g['lr'])


def adjust_learning_rate(optimizer, step, warmup_steps, max_steps, base_lr):
    if step < warmup_steps:
        lr = base_lr * step / warmup_steps
    else:
        step -= warmup_steps
        max_steps -= warmup_steps
        q = 0.5 * (1 + math.cos(math.pi * step / max_steps))
        end_lr = base_lr * 0.001
        lr = base_lr * q + end_lr * (1 - q)
    optimizer.param_groups[0]['lr'] = lr * 0.2
    optimizer.param_groups[1]['lr'] = lr * 0.0048
    return lr


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(805)
    barlow = BarlowTwins()
    vicreg = VICReg()
    models = {"barlow": barlow, "vicreg": vicreg}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    param_weights = []
    param_biases = []
    for param in barlow.parameters():
        if param.ndim == 1:
            param_biases.append(param)
        else:
            param_weights.append(param)
    parameters = [{'params': param_weights}, {'params': param_biases}]
    opt_b = LARS(parameters, lr=0, weight_decay=1e-6,
                 weight_decay_filter=exclude_bias_and_norm, lars_adaptation_filter=exclude_bias_and_norm)
    opt_v = LARS(vicreg.parameters(), lr=0.05, weight_decay=1e-6,
                 weight_decay_filter=exclude_bias_and_norm, lars_adaptation_filter=exclude_bias_and_norm)

    def barlow_step(y1, y2):
        opt_b.zero_grad()
        loss = barlow.forward(y1, y2)
        loss.backward()
        opt_b.step()
        return loss

    def vicreg_step(y1, y2):
        opt_v.zero_grad()
        loss = vicreg.forward(y1, y2)
        loss.backward()
        opt_v.step()
        return loss

    steps = [torch.compile(barlow_step), torch.compile(vicreg_step)] if compiled else [barlow_step, vicreg_step]
    base = [rng.normal(size=(6, 10)).astype(np.float32) for _ in range(3)]
    views = [(torch.tensor(b + 0.2 * rng.normal(size=b.shape).astype(np.float32)),
              torch.tensor(b + 0.2 * rng.normal(size=b.shape).astype(np.float32))) for b in base]
    losses = off_diagonal(torch.arange(9.0).view(3, 3)).tolist()
    losses += [float(len(opt_b.param_groups[0]['params'])), float(len(opt_b.param_groups[1]['params'])),
               float(opt_b.defaults['eta'])]
    gstep = 0
    for epoch in range(3):
        for y1, y2 in views:
            losses.append(adjust_learning_rate(opt_b, gstep, 2, 9, base_lr=1.0))
            losses.append(steps[0](y1, y2).item())
            losses.append(steps[1](y1, y2).item())
            gstep += 1
    losses.append(float(len(opt_v.state)))
    losses.append(float(sum(s['mu'].abs().sum() for s in opt_v.state.values())))
    return {"losses": losses, "weights": w, "fn": steps}
