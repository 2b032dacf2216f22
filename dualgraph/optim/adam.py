"""`Adam` (and, with decoupled weight decay, `AdamW`'s rule), as ``torch.optim.Adam``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.internal import adam_update_
from ..eager.tensor import Tensor
from . import _tracing as T
from ._functional import as_dtype, lerp_, max_, with_weight_decay
from .optimizer import Optimizer, check_betas, check_nonnegative, step_state, zeros_state


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction; ``amsgrad`` keeps the running maximum of
    the second moment; ``decoupled_weight_decay=True`` is AdamW's rule. The step count is
    a float32 tensor in ``state["step"]``, as PyTorch keeps it.

    >>> opt = Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999))  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        betas = check_betas(type(self).__name__, betas)
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        super().__init__(params, {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
            "capturable": capturable, "differentiable": differentiable, "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        amsgrad = group["amsgrad"]
        if len(state) == 0:
            state["step"] = step_state()
            state["exp_avg"] = zeros_state(p)
            state["exp_avg_sq"] = zeros_state(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_state(p)
        # Eagerly, the same update straight on the arrays (the same bits): a step of
        # twenty tensor ops per parameter is otherwise mostly their dispatch.
        if not T.tracing() and adam_update_(
                p, g, state, group["lr"], group["betas"], group["eps"],
                group["weight_decay"], group["decoupled_weight_decay"], group["maximize"],
                amsgrad):
            return
        if group["maximize"]:
            g = -g
        step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        step += 1
        lr = group["lr"]
        g = with_weight_decay(p, g, group)
        beta1, beta2 = group["betas"]
        lerp_(m, g, 1 - beta1)
        v.mul_(beta2).add_(g * (1 - beta2) * g)
        # Bias corrections in float64 from the float32 step, rounded to the parameter's
        # dtype once: PyTorch computes them from a Python-float step.
        step64 = step.astype(np.float64)
        bc1 = 1 - beta1 ** step64
        bc2_sqrt = as_dtype((1 - beta2 ** step64).sqrt(), p.dtype)
        step_size = as_dtype(lr / bc1, p.dtype)
        if amsgrad:
            vmax = state["max_exp_avg_sq"]
            max_(vmax, v)
            v = vmax
        denom = v.sqrt() / bc2_sqrt + group["eps"]
        p.sub_(m / denom * step_size)
