"""`RMSprop`, as ``torch.optim.RMSprop``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..eager.tensor import Tensor
from ._functional import lerp_, with_weight_decay
from .optimizer import Optimizer, begin_update, check_nonnegative, zeros_state


class RMSprop(Optimizer):
    """``sq = alpha * sq + (1 - alpha) * g**2``; ``p -= lr * g / (sqrt(sq) + eps)``, with
    optional momentum and the ``centered`` variant (which subtracts the squared running mean
    of the gradient).

    >>> opt = RMSprop(model.parameters(), lr=1e-2, alpha=0.99)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_nonnegative(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay,
                          alpha=alpha)
        super().__init__(params, {
            "lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
            "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        momentum, centered = group["momentum"], group["centered"]
        g, _ = begin_update(g, group, state, lambda: {
            "square_avg": zeros_state(p),
            **({"momentum_buffer": zeros_state(p)} if momentum > 0 else {}),
            **({"grad_avg": zeros_state(p)} if centered else {})})
        g = with_weight_decay(p, g, group)
        alpha = group["alpha"]
        sq = state["square_avg"]
        sq.mul_(alpha).add_(g * (1 - alpha) * g)
        if centered:
            ga = state["grad_avg"]
            lerp_(ga, g, 1 - alpha)
            avg = (sq - ga * ga).sqrt()
        else:
            avg = sq.sqrt()
        avg = avg + group["eps"]
        lr = group["lr"]
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum).add_(g / avg)
            p.sub_(buf * lr)
        else:
            p.sub_(g / avg * lr)
