"""`Adagrad`, as ``torch.optim.Adagrad``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from ._functional import as_dtype, with_weight_decay
from .optimizer import Optimizer, check_nonnegative, full_state, step_state


class Adagrad(Optimizer):
    """``sum += g**2``; ``p -= clr * g / (sqrt(sum) + eps)`` with
    ``clr = lr / (1 + (step - 1) * lr_decay)``. State exists from construction, as in
    PyTorch.

    >>> opt = Adagrad(model.parameters(), lr=1e-2)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_nonnegative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                          initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, {
            "lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable, "fused": fused})
        for group in self.param_groups:
            for p in dict.__getitem__(group, "params"):
                self._init_state(p, dict.__getitem__(group, "initial_accumulator_value"))

    def _init_state(self, p: Tensor, init: float) -> None:
        state = self.state[p]
        state["step"] = step_state()
        state["sum"] = full_state(p, init)

    def _state_of(self, p: Tensor, group: dict) -> dict:
        state = self.state[p]
        if len(state) == 0:  # a group added after construction
            self._init_state(p, float(group["initial_accumulator_value"]))
        return state

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        if group["maximize"]:
            g = -g
        step = state["step"]
        step += 1
        g = with_weight_decay(p, g, group)
        step64 = step.astype(np.float64)
        clr = as_dtype(group["lr"] / (1 + (step64 - 1) * group["lr_decay"]), p.dtype)
        s = state["sum"]
        s.add_(g * g)
        std = s.sqrt() + group["eps"]
        p.sub_(g / std * clr)
