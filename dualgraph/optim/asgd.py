"""`ASGD`: averaged stochastic gradient descent, as ``torch.optim.ASGD``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from ..ops.elementwise import maximum, where
from ._functional import as_dtype
from .optimizer import Optimizer, begin_update, check_nonnegative, zeros_state


class ASGD(Optimizer):
    """SGD with a decaying step ``eta = lr / (1 + lambd * lr * t) ** alpha`` and the
    parameters' running average ``ax`` (from step ``t0`` on; before it ``ax`` follows the
    parameters).

    >>> opt = ASGD(model.parameters(), lr=1e-2, t0=100)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        check_nonnegative(lr=lr, weight_decay=weight_decay)
        super().__init__(params, {
            "lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
            "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
            "differentiable": differentiable, "capturable": capturable})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        # eta is seeded from the lr the group holds now, read past the trace (a later lr
        # reaches eta through the update below, not through this seed).
        g, step = begin_update(g, group, state, lambda: {
            "eta": Tensor(np.array(float(dict.__getitem__(group, "lr")), np.float32)),
            "mu": Tensor(np.ones((), np.float32)), "ax": zeros_state(p)})
        wd = group["weight_decay"]
        if wd != 0:
            g = g + p * wd
        lr, lambd = group["lr"], group["lambd"]
        eta = state["eta"].astype(np.float64)
        p.mul_(as_dtype(1 - lambd * eta, p.dtype))
        p.sub_(g * as_dtype(eta, p.dtype))
        ax, mu = state["ax"], state["mu"]
        # PyTorch copies the parameter while mu is 1 and averages after; one `where`
        # makes both the same program.
        ax.copy_(where(mu == 1, p, ax + (p - ax) * mu.astype(p.dtype)))
        t = step.astype(np.float64)
        state["eta"].copy_(lr / (1 + lambd * lr * t) ** group["alpha"])
        state["mu"].copy_(1 / maximum(t - group["t0"], 1.0))
