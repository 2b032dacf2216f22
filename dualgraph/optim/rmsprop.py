"""`RMSprop`, as ``torch.optim.RMSprop``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..eager.tensor import Tensor
from ._functional import lerp_, with_weight_decay
from .optimizer import Optimizer, step_state, zeros_state


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
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, {
            "lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
            "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable})

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; returns ``closure()``."""
        return self._run_updates(closure)

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        if group["maximize"]:
            g = -g
        momentum, centered = group["momentum"], group["centered"]
        if len(state) == 0:
            state["step"] = step_state()
            state["square_avg"] = zeros_state(p)
            if momentum > 0:
                state["momentum_buffer"] = zeros_state(p)
            if centered:
                state["grad_avg"] = zeros_state(p)
        state["step"] += 1
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
