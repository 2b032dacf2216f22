"""`SGD`: stochastic gradient descent with momentum, dampening, Nesterov momentum and
weight decay, as ``torch.optim.SGD``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..eager.internal import sub_scaled_
from ..eager.tensor import Tensor
from . import _tracing as T
from .optimizer import Optimizer, check_nonnegative, zeros_state


class SGD(Optimizer):
    """``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` on the first step);
    ``p -= lr * (g + momentum * buf if nesterov else buf)``, with ``g`` the gradient plus
    ``weight_decay * p`` (negated when ``maximize``).

    >>> opt = SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        if not isinstance(lr, (int, float, Tensor)) or isinstance(lr, bool):
            raise TypeError(f"SGD: lr must be a number, got {lr!r}")
        check_nonnegative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, {
            "lr": lr, "momentum": momentum, "dampening": dampening,
            "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
            "foreach": foreach, "differentiable": differentiable, "fused": fused})

    def _state_of(self, p: Tensor, group: dict) -> dict:
        # As PyTorch, state exists only with momentum (state_dict shows it).
        return self.state[p] if group["momentum"] != 0 else {}

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        lr = group["lr"]
        if group["maximize"]:
            g = -g
        momentum = group["momentum"]
        # Plain SGD eagerly: one in-place update, without a product tensor.
        if (type(lr) is not T.TracedNumber and not momentum and not group["weight_decay"]
                and sub_scaled_(p, g, lr)):
            return
        wd = group["weight_decay"]
        if wd != 0:
            g = g + p * wd
        if momentum != 0:
            dampening = group["dampening"]
            buf = state.get("momentum_buffer")
            if buf is None and dampening == 0:
                # PyTorch starts the buffer at g; 0 * momentum + g is g exactly, and keeps
                # the first step's ops those of later steps (a traced step is then right
                # for both).
                buf = state["momentum_buffer"] = zeros_state(p)
                buf.mul_(momentum).add_(g)
            elif buf is None:
                buf = state["momentum_buffer"] = g.clone()
            else:
                buf.mul_(momentum).add_(g, alpha=1 - dampening)
            g = g + buf * momentum if group["nesterov"] else buf
        # Momentum's compiled update rounds the product and the difference apart.
        if not sub_scaled_(p, g, lr, fused=not momentum):
            p.sub_(g * lr)
