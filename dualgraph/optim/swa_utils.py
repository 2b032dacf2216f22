"""`dg.optim.swa_utils`: stochastic weight averaging and exponential moving averages of a
model's weights (`AveragedModel`), the SWA learning-rate schedule (`SWALR`) and `update_bn`,
which recomputes batch-norm statistics for averaged weights, as PyTorch's.

>>> model = dg.nn.Linear(2, 1)
>>> swa = dg.optim.swa_utils.AveragedModel(model)
>>> swa.update_parameters(model)
>>> int(swa.n_averaged)
1
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

from ..eager.creation import zeros
from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor
from ..nn.modules import Module
from .lr_scheduler import LRScheduler
from .optimizer import Optimizer

__all__ = ["SWALR", "AveragedModel", "get_ema_avg_fn", "get_ema_multi_avg_fn",
           "get_swa_avg_fn", "get_swa_multi_avg_fn", "update_bn"]


def _floating(t: Tensor) -> bool:
    return t.dtype.kind in "fc"


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """An in-place EMA update of lists of averaged parameters:
    ``ema += (1 - decay) * (current - ema)``."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")

    def ema_update(ema_params: list, current_params: list, _: Any) -> None:
        with no_grad():
            for e, c in zip(ema_params, current_params):
                if _floating(e):
                    e.lerp_(c, 1 - decay)
                else:
                    e.copy_(e * decay + c * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """An in-place running-mean update of lists of averaged parameters:
    ``avg += (current - avg) / (n + 1)``."""
    def swa_update(averaged: list, current: list, num_averaged: Any) -> None:
        n = float(num_averaged)
        with no_grad():
            for a, c in zip(averaged, current):
                if _floating(a):
                    a.lerp_(c, 1 / (n + 1))
                else:
                    a.add_((c - a) * (1.0 / (n + 1)))
    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """``(ema, current, n) -> decay * ema + (1 - decay) * current``."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn() -> Callable:
    """``(avg, current, n) -> avg + (current - avg) / (n + 1)``."""
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose weights average ``model``'s over `update_parameters`
    calls: equal weights by default (SWA), or ``avg_fn``/``multi_avg_fn`` (an EMA with
    `get_ema_multi_avg_fn`). ``use_buffers=True`` averages the buffers too; otherwise
    they are copied from ``model`` at each update. Calling it runs the copy."""

    def __init__(self, model: Module, device: Any = None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", zeros((), dtype="int64"))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current weights into the average."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.parameters()), list(model.parameters())
        mine = [p.detach() for p in mine]
        theirs = [p.detach() for p in theirs]
        n = int(self.n_averaged)
        with no_grad():
            if n == 0:
                for a, c in zip(mine, theirs):
                    a.copy_(c)
            elif self.avg_fn is None:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(mine, theirs, self.n_averaged)
            else:
                for a, c in zip(mine, theirs):
                    a.copy_(self.avg_fn(a, c, self.n_averaged))
            if not self.use_buffers:
                for b, c in zip(self.module.buffers(), model.buffers()):
                    b.detach().copy_(c.detach())
            self.n_averaged.add_(1)


def update_bn(loader: Iterable, model: Module, device: Any = None) -> None:
    """One pass over ``loader`` (batches, or tuples whose first item is the input) in
    training mode to recompute every batch-norm layer's running statistics as plain
    averages (``momentum=None``); the layers' momenta and the training flag come back."""
    from ..nn import BatchNorm1d, BatchNorm2d, BatchNorm3d

    momenta = {}
    for module in model.modules():
        if isinstance(module, (BatchNorm1d, BatchNorm2d, BatchNorm3d)):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to ``swa_lr`` over ``anneal_epochs`` steps
    (``"cos"`` or ``"linear"``), then hold it there."""

    def __init__(self, optimizer: Optimizer, swa_lr: Any, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: "
                             f"swa_lr has {len(swa_lrs)}, optimizer.param_groups has "
                             f"{len(groups)}")
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_strategy = anneal_strategy
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t: float) -> float:
        if self._anneal_strategy == "cos":
            return (1 - math.cos(math.pi * t)) / 2
        return t

    @staticmethod
    def _initial_lr(lr: Any, swa_lr: Any, alpha: float) -> Any:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        groups = self.optimizer.param_groups
        prev = [self._initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev)]
