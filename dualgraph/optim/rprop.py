"""`Rprop`: resilient backpropagation, as ``torch.optim.Rprop``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from ..ops.elementwise import where
from .optimizer import Optimizer, begin_update, check_nonnegative, full_state, zeros_state


class Rprop(Optimizer):
    """Per-element step sizes: grown by ``etas[1]`` while the gradient keeps its sign,
    shrunk by ``etas[0]`` when it flips (and that step skipped), clamped to
    ``step_sizes``; ``p -= sign(g) * step_size``. Step sizes start at ``lr``.

    >>> opt = Rprop(model.parameters(), lr=1e-2)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2,
                 etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_nonnegative(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, {
            "lr": lr, "etas": tuple(etas), "step_sizes": tuple(step_sizes),
            "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
            "capturable": capturable})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        # step_size is seeded from the lr as the group holds it now, read past the trace:
        # it only seeds the state (PyTorch reads it once), so a later lr is no reason to
        # retrace.
        g, _ = begin_update(g, group, state, lambda: {
            "prev": zeros_state(p),
            "step_size": full_state(p, float(dict.__getitem__(group, "lr")))})
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        s = (g * prev).sign()
        dt = np.dtype(p.dtype)  # the factors in the parameter's dtype, not float32
        factor = where(s > 0, np.asarray(etaplus, dt),
                       where(s < 0, np.asarray(etaminus, dt), np.asarray(1.0, dt)))
        step_size.copy_((step_size * factor).clamp(lo, hi))
        g = where(factor == np.asarray(etaminus, dt), np.asarray(0.0, dt), g)
        p.sub_(g.sign() * step_size)
        prev.copy_(g)
