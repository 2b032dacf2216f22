# In the manner of lucidrains/lion-pytorch (MIT licence), davda54/sam's sam.py (MIT
# licence) and the common Lookahead wrapper: optimizers written by users as
# ``torch.optim.Optimizer`` subclasses. Lion: ``super().__init__(params, defaults)``,
# ``closure`` run under ``torch.enable_grad()``, ``filter(lambda p: exists(p.grad),
# group['params'])``, ``self.state[p]`` initialised with ``torch.zeros_like``,
# ``p.data.mul_(1. - lr * wd)``, ``exp_avg.clone().mul_(beta1).add(grad, alpha=1. -
# beta1).sign_()``, ``exp_avg.mul_(beta2).add_(grad, alpha=1. - beta2)``. SAM: a
# ``base_optimizer`` class built over ``self.param_groups`` (``self.base_optimizer.param_groups
# = self.param_groups``, ``self.defaults.update(...)``), ``first_step``/``second_step`` with
# ``zero_grad`` arguments, ``self.state[p]["old_p"] = p.data.clone()``, ``_grad_norm`` by
# ``torch.norm(torch.stack([... .norm(p=2).to(shared_device) ...]), p=2)``, the adaptive
# variant (``torch.pow(p, 2)``), ``disable_running_stats``/``enable_running_stats`` through
# ``model.apply`` and ``_BatchNorm`` momentum backups, and ``load_state_dict`` forwarded to
# the base. Lookahead: slow weights in ``self.state``, ``p.data.copy_`` every k steps, and
# ``param_groups``/``state`` taken from the wrapped optimizer.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm
from torch.optim.optimizer import Optimizer


def exists(val):
    return val is not None


class Lion(Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        assert lr > 0.
        assert all([0. <= beta <= 1. for beta in betas])
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if exists(closure):
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in filter(lambda p: exists(p.grad), group['params']):
                grad, lr, wd, beta1, beta2, state = p.grad, group['lr'], group['weight_decay'], *group['betas'], self.state[p]
                if len(state) == 0:
                    state['exp_avg'] = torch.zeros_like(p)
                exp_avg = state['exp_avg']
                p.data.mul_(1. - lr * wd)
                update = exp_avg.clone().mul_(beta1).add(grad, alpha=1. - beta1).sign_()
                p.add_(update, alpha=-lr)
                exp_avg.mul_(beta2).add_(grad, alpha=1. - beta2)
        return loss


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"
        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super(SAM, self).__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)
        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        norm = torch.norm(
            torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                for group in self.param_groups for p in group["params"]
                if p.grad is not None
            ]),
            p=2
        )
        return norm

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.base_optimizer.param_groups = self.param_groups


def disable_running_stats(model):
    def _disable(module):
        if isinstance(module, _BatchNorm):
            module.backup_momentum = module.momentum
            module.momentum = 0

    model.apply(_disable)


def enable_running_stats(model):
    def _enable(module):
        if isinstance(module, _BatchNorm) and hasattr(module, "backup_momentum"):
            module.momentum = module.backup_momentum

    model.apply(_enable)


class Lookahead(Optimizer):
    def __init__(self, optimizer, k=3, alpha=0.5):
        self.optimizer = optimizer
        self.k = k
        self.alpha = alpha
        self.param_groups = self.optimizer.param_groups
        self.state = defaultdict(dict)
        self.fast_state = self.optimizer.state
        for group in self.param_groups:
            group["counter"] = 0

    def update(self, group):
        for fast in group["params"]:
            param_state = self.state[fast]
            if "slow_param" not in param_state:
                param_state["slow_param"] = torch.zeros_like(fast.data)
                param_state["slow_param"].copy_(fast.data)
            slow = param_state["slow_param"]
            slow += (fast.data - slow) * self.alpha
            fast.data.copy_(slow)

    def step(self, closure=None):
        loss = self.optimizer.step(closure)
        for group in self.param_groups:
            if group["counter"] == 0:
                self.update(group)
            group["counter"] += 1
            if group["counter"] >= self.k:
                group["counter"] = 0
        return loss


def make_model():
    # no bias before the batch norm: its gradient is zero up to rounding, and Lion's sign
    # (as Adam's scaling) would turn that rounding into a full step
    return nn.Sequential(nn.Linear(6, 12, bias=False), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 3))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(806)
    models = {"lion": make_model(), "sam": make_model(), "asam": make_model(), "look": make_model()}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    data = [(torch.tensor(rng.normal(size=(8, 6)).astype(np.float32)),
             torch.tensor(rng.integers(0, 3, size=8))) for _ in range(3)]
    lion = Lion(models["lion"].parameters(), lr=1e-3, weight_decay=0.1)
    sam = SAM(models["sam"].parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)
    asam = SAM(models["asam"].parameters(), torch.optim.SGD, rho=0.5, adaptive=True, lr=0.1)
    look = Lookahead(torch.optim.Adam(models["look"].parameters(), lr=0.01), k=3, alpha=0.5)

    def lion_step(x, y):
        model = models["lion"]

        def closure():
            lion.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss

        return lion.step(closure)

    def sam_step(x, y, model, optimizer):
        enable_running_stats(model)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.first_step(zero_grad=True)
        disable_running_stats(model)
        F.cross_entropy(model(x), y).backward()
        optimizer.second_step(zero_grad=True)
        return loss

    def sam_closure_step(x, y):
        model = models["asam"]

        def closure():
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss

        loss = F.cross_entropy(model(x), y)
        loss.backward()
        asam.step(closure)
        asam.zero_grad()
        return loss

    def look_step(x, y):
        look.optimizer.zero_grad()
        loss = F.cross_entropy(models["look"](x), y)
        loss.backward()
        look.step()
        return loss

    fns = [lion_step, lambda x, y: sam_step(x, y, models["sam"], sam), sam_closure_step, look_step]
    if compiled:
        fns = [torch.compile(f) for f in fns]
    losses = [float(len(sam.param_groups)), float(sam.param_groups[0] is sam.base_optimizer.param_groups[0]),
              float(sam.defaults["momentum"]), float(look.param_groups[0]["counter"])]
    for model in models.values():
        model.train()
    for epoch in range(3):
        for x, y in data:
            for f in fns:
                losses.append(f(x, y).item())
    losses.append(float(models["sam"][1].momentum))
    losses.append(float(len(sam.state)))
    losses.append(float(look.param_groups[0]["counter"]))
    sd = sam.state_dict()
    sam2 = SAM(make_model().parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)
    sam2.load_state_dict(sd)
    losses.append(float(sam2.base_optimizer.param_groups[0] is sam2.param_groups[0]))
    losses.append(float(sam2.param_groups[0]["rho"]))
    with torch.no_grad():
        for name, model in models.items():
            model.eval()
            losses += model(data[0][0])[0].tolist()
    return {"losses": losses, "weights": w, "fn": fns}
