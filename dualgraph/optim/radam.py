"""`RAdam`: Adam with the variance of its adaptive learning rate rectified, as
``torch.optim.RAdam``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from ..ops.elementwise import where
from ._functional import as_dtype, lerp_, with_weight_decay
from .optimizer import Optimizer, begin_update, check_betas, check_nonnegative, zeros_state


class RAdam(Optimizer):
    """Adam's moments; while the variance estimate is unreliable (``rho_t <= 5``, the
    first few steps) the update is the bias-corrected momentum alone, afterwards Adam's
    step scaled by the rectification term ``r_t``.

    >>> opt = RAdam(model.parameters(), lr=1e-3)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        betas = check_betas("RAdam", betas)
        super().__init__(params, {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "foreach": foreach, "maximize": maximize, "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        g, step = begin_update(g, group, state, lambda: {
            "exp_avg": zeros_state(p), "exp_avg_sq": zeros_state(p)})
        lr = group["lr"]
        g = with_weight_decay(p, g, group)
        beta1, beta2 = group["betas"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        lerp_(m, g, 1 - beta1)
        v.mul_(beta2).add_(g * (1 - beta2) * g)
        # The schedule in float64 from the float32 step (PyTorch's Python floats); the
        # branch on rho_t is a `where`, so a compiled step takes it from the step count.
        t = step.astype(np.float64)
        bc1 = 1 - beta1 ** t
        bc2 = 1 - beta2 ** t
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2 ** t / bc2
        rectified = rho_t > 5.0
        safe = where(rectified, rho_t, 6.0)
        rect = ((safe - 4) * (safe - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * safe)).sqrt()
        avg = m / as_dtype(bc1, p.dtype) * lr
        adaptive = as_dtype(bc2.sqrt(), p.dtype) / (v.sqrt() + group["eps"])
        p.sub_(where(rectified, avg * adaptive * as_dtype(rect, p.dtype), avg))
