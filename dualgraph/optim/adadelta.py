"""`Adadelta`, as ``torch.optim.Adadelta``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..eager.tensor import Tensor
from ._functional import with_weight_decay
from .optimizer import Optimizer, step_state, zeros_state


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
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, {
            "lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "capturable": capturable, "foreach": foreach,
            "differentiable": differentiable})

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; returns ``closure()``."""
        return self._run_updates(closure)

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        if group["maximize"]:
            g = -g
        if len(state) == 0:
            state["step"] = step_state()
            state["square_avg"] = zeros_state(p)
            state["acc_delta"] = zeros_state(p)
        state["step"] += 1
        g = with_weight_decay(p, g, group)
        rho, eps = group["rho"], group["eps"]
        sq, acc = state["square_avg"], state["acc_delta"]
        sq.mul_(rho).add_(g * (1 - rho) * g)
        std = (sq + eps).sqrt()
        delta = (acc + eps).sqrt() / std * g
        acc.mul_(rho).add_(delta * (1 - rho) * delta)
        p.sub_(delta * group["lr"])
