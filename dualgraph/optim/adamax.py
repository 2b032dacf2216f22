"""`Adamax`, as ``torch.optim.Adamax``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from ..ops.elementwise import maximum
from ._functional import as_dtype, lerp_, with_weight_decay
from .optimizer import Optimizer, begin_update, check_betas, check_nonnegative, zeros_state


class Adamax(Optimizer):
    """Adam with the infinity norm: ``u = max(beta2 * u, |g| + eps)``;
    ``p -= lr / (1 - beta1**t) * m / u``.

    >>> opt = Adamax(model.parameters(), lr=2e-3)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        betas = check_betas("Adamax", betas)
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        super().__init__(params, {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
            "capturable": capturable})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        g, step = begin_update(g, group, state, lambda: {
            "exp_avg": zeros_state(p), "exp_inf": zeros_state(p)})
        g = with_weight_decay(p, g, group)
        beta1, beta2 = group["betas"]
        m, u = state["exp_avg"], state["exp_inf"]
        lerp_(m, g, 1 - beta1)
        u.copy_(maximum(u * beta2, g.abs() + group["eps"]))
        clr = as_dtype(group["lr"] / (1 - beta1 ** step.astype(np.float64)), p.dtype)
        p.sub_(m / u * clr)
