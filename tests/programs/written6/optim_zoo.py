# In the manner of optimizer comparisons in tutorials and blog posts: one small regression
# MLP copied with ``copy.deepcopy`` per optimizer (SGD with momentum and with
# ``nesterov=True``, RMSprop with ``alpha``/``centered``, Adagrad with ``lr_decay``,
# Adadelta, Adamax, NAdam, RAdam, Adam with ``amsgrad=True``), a dict of optimizers built by
# name, schedulers chained the common ways: ``LinearLR`` warm-up then ``CosineAnnealingLR``
# through ``SequentialLR``, ``MultiStepLR`` with ``milestones``, ``ExponentialLR``,
# ``LambdaLR`` with a lambda, ``ChainedScheduler``, a ``ReduceLROnPlateau`` stepped on the
# validation loss, ``scheduler.get_last_lr()[0]`` and ``optimizer.param_groups[0]['lr']``
# logged every epoch; ``torch.nn.utils.clip_grad_norm_`` before each step.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x):
        return self.layers(x)


def make_optimizer(name, params):
    if name == "sgd_momentum":
        return optim.SGD(params, lr=0.05, momentum=0.9)
    if name == "sgd_nesterov":
        return optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    if name == "rmsprop":
        return optim.RMSprop(params, lr=0.01, alpha=0.9, centered=True, momentum=0.5)
    if name == "adagrad":
        return optim.Adagrad(params, lr=0.1, lr_decay=1e-3)
    if name == "adadelta":
        return optim.Adadelta(params, lr=1.0, rho=0.9)
    if name == "adamax":
        return optim.Adamax(params, lr=0.02)
    if name == "nadam":
        return optim.NAdam(params, lr=0.01)
    if name == "radam":
        return optim.RAdam(params, lr=0.01)
    if name == "amsgrad":
        return optim.Adam(params, lr=0.01, amsgrad=True)
    raise ValueError(name)


def make_scheduler(name, optimizer):
    if name in ("sgd_momentum", "adamax"):
        warmup = lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=2)
        cosine = lr_scheduler.CosineAnnealingLR(optimizer, T_max=4, eta_min=1e-4)
        return lr_scheduler.SequentialLR(optimizer, schedulers=[warmup, cosine], milestones=[2])
    if name in ("sgd_nesterov", "nadam"):
        return lr_scheduler.MultiStepLR(optimizer, milestones=[2, 4], gamma=0.5)
    if name in ("rmsprop", "radam"):
        return lr_scheduler.ExponentialLR(optimizer, gamma=0.8)
    if name == "adagrad":
        return lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda epoch: 0.95 ** epoch)
    if name == "adadelta":
        return lr_scheduler.ChainedScheduler([lr_scheduler.ConstantLR(optimizer, factor=0.5, total_iters=2),
                                              lr_scheduler.ExponentialLR(optimizer, gamma=0.9)])
    return lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=0)


NAMES = ("sgd_momentum", "sgd_nesterov", "rmsprop", "adagrad", "adadelta", "adamax", "nadam",
         "radam", "amsgrad")


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(66)
    base = Net()
    if weights is not None:
        base.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in base.state_dict().items()}
    X = torch.tensor(rng.normal(size=(96, 4)).astype(np.float32))
    y = (X[:, :1] * 2 - X[:, 1:2] ** 2 + 0.5 * torch.sin(X[:, 2:3])).detach()
    criterion = nn.MSELoss()
    losses, fns = [], []
    models = {name: copy.deepcopy(base) for name in NAMES}
    optimizers = {name: make_optimizer(name, models[name].parameters()) for name in NAMES}
    for name in NAMES:
        model, optimizer = models[name], optimizers[name]
        scheduler = make_scheduler(name, optimizer)

        def train_step(xb, yb):
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            return loss

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        for epoch in range(6):
            model.train()
            running = 0.0
            for i in range(0, 64, 32):
                running += step(X[i:i + 32], y[i:i + 32]).item()
            model.eval()
            with torch.no_grad():
                val_loss = criterion(model(X[64:]), y[64:]).item()
            if isinstance(scheduler, lr_scheduler.ReduceLROnPlateau):
                scheduler.step(val_loss)
            else:
                scheduler.step()
            losses += [running / 2, val_loss, optimizer.param_groups[0]['lr']]
        if not isinstance(scheduler, lr_scheduler.ReduceLROnPlateau):
            losses.append(scheduler.get_last_lr()[0])
    return {"losses": losses, "weights": w, "fn": fns}
