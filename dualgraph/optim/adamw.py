"""`AdamW`: Adam with decoupled weight decay, as ``torch.optim.AdamW``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .adam import Adam


class AdamW(Adam):
    """Adam whose weight decay shrinks the parameter directly (``p *= 1 - lr *
    weight_decay``) instead of adding to the gradient; parameter groups may set their own
    ``weight_decay`` (commonly 0 for biases and norms).

    >>> opt = AdamW([{"params": decay, "weight_decay": 0.1},
    ...              {"params": no_decay, "weight_decay": 0.0}], lr=3e-4)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
