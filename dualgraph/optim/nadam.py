"""`NAdam`, as ``torch.optim.NAdam``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from ._functional import as_dtype, lerp_, with_weight_decay
from .optimizer import Optimizer, begin_update, check_betas, check_nonnegative, zeros_state


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat), with the momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))``.

    >>> opt = NAdam(model.parameters(), lr=2e-3)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        betas = check_betas("NAdam", betas)
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay,
                          momentum_decay=momentum_decay)
        super().__init__(params, {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize, "foreach": foreach, "capturable": capturable,
            "differentiable": differentiable})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        g, step = begin_update(g, group, state, lambda: {
            "mu_product": Tensor(np.ones((), np.float32)), "exp_avg": zeros_state(p),
            "exp_avg_sq": zeros_state(p)})
        mu_product = state["mu_product"]
        lr = group["lr"]
        g = with_weight_decay(p, g, group)
        beta1, beta2 = group["betas"]
        t = step.astype(np.float64)
        bc2 = 1 - beta2 ** t
        decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * decay))
        mu_product.mul_(mu.astype(np.float32))
        prod = mu_product.astype(np.float64)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        lerp_(m, g, 1 - beta1)
        v.mul_(beta2).add_(g * (1 - beta2) * g)
        denom = (v / as_dtype(bc2, p.dtype)).sqrt() + group["eps"]
        c_grad = as_dtype(lr * (1.0 - mu) / (1.0 - prod), p.dtype)
        c_avg = as_dtype(lr * mu_next / (1.0 - prod * mu_next), p.dtype)
        p.sub_(g / denom * c_grad)
        p.sub_(m / denom * c_avg)
