"""`Adadelta`, as ``torch.optim.Adadelta``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..eager.tensor import Tensor
from ._functional import with_weight_decay
from .optimizer import Optimizer, begin_update, check_nonnegative, zeros_state


class Adadelta(Optimizer):
    """``sq = rho * sq + (1 - rho) * g**2``;
    ``delta = sqrt(acc + eps) / sqrt(sq + eps) * g``; ``acc = rho * acc + (1 - rho) *
    delta**2``; ``p -= lr * delta``.

    >>> opt = Adadelta(model.parameters(), lr=1.0, rho=0.9)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_nonnegative(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        if rho > 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, {
            "lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "capturable": capturable, "foreach": foreach,
            "differentiable": differentiable})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        g, _ = begin_update(g, group, state, lambda: {
            "square_avg": zeros_state(p), "acc_delta": zeros_state(p)})
        g = with_weight_decay(p, g, group)
        rho, eps = group["rho"], group["eps"]
        sq, acc = state["square_avg"], state["acc_delta"]
        sq.mul_(rho).add_(g * (1 - rho) * g)
        std = (sq + eps).sqrt()
        delta = (acc + eps).sqrt() / std * g
        acc.mul_(rho).add_(delta * (1 - rho) * delta)
        p.sub_(delta * group["lr"])
