"""`SparseAdam`, as ``torch.optim.SparseAdam``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..eager.tensor import Tensor
from ..ops.elementwise import where
from ._functional import as_dtype
from .optimizer import Optimizer, begin_update, check_betas, check_nonnegative, zeros_state


class SparseAdam(Optimizer):
    """Adam for embedding tables: only the rows a step's gradient touches have their
    moments and values updated; the other rows' moments do not decay.

    PyTorch gives ``Embedding(sparse=True)`` sparse gradients listing the looked-up rows;
    dualgraph's gradients are dense, so the touched rows are those with a nonzero gradient
    (a looked-up row whose gradient is exactly zero is left alone, where PyTorch would
    decay its moments). Dense gradients are accepted for any parameter, read the same way.
    The step count is a float32 tensor in ``state["step"]`` (PyTorch keeps an int), so a
    compiled step does not retrace as it grows.

    >>> opt = SparseAdam(list(model.parameters()), lr=0.01)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False) -> None:
        betas = check_betas("SparseAdam", betas)
        check_nonnegative(lr=lr, eps=eps)
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        g, step = begin_update(g, group, state, lambda: {
            "exp_avg": zeros_state(p), "exp_avg_sq": zeros_state(p)})
        beta1, beta2 = group["betas"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        shape = tuple(g.shape)
        touched = g != 0
        if len(shape) > 1:
            rows = touched.reshape(shape[0], -1).any(1)
            touched = rows.reshape((shape[0],) + (1,) * (len(shape) - 1))
        # PyTorch's order: the moments move by (g - old) * (1 - beta); the update divides
        # the new first moment by sqrt(new second moment) + eps, then scales.
        m.add_(where(touched, (g - m) * (1 - beta1), 0.0))
        v.add_(where(touched, (g * g - v) * (1 - beta2), 0.0))
        step64 = step.astype(np.float64)
        step_size = as_dtype(group["lr"] * (1 - beta2 ** step64).sqrt() / (1 - beta1 ** step64),
                             p.dtype)
        p.add_(where(touched, m / (v.sqrt() + group["eps"]) * -step_size, 0.0))
