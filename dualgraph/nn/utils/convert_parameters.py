"""Parameters as one flat vector and back, as ``torch.nn.utils``."""

from __future__ import annotations

import math
from typing import Any

from ...eager.grad_mode import no_grad
from ...ops.shape import concatenate


def parameters_to_vector(parameters: Any) -> Any:
    """The parameters flattened and concatenated into one 1-D tensor (differentiable).

    >>> dg.nn.utils.parameters_to_vector(dg.nn.Linear(3, 2).parameters()).shape
    (8,)
    """
    return concatenate([p.reshape(-1) for p in parameters], 0)


def vector_to_parameters(vec: Any, parameters: Any) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (in place)."""
    if len(vec.shape) != 1:
        raise TypeError(f"expected a 1-D vector, got shape {tuple(vec.shape)}")
    params = list(parameters)
    n = sum(math.prod(p.shape) for p in params)
    if n != vec.shape[0]:
        raise RuntimeError(f"vector_to_parameters: the vector has {vec.shape[0]} elements, the "
                           f"parameters {n}")
    start = 0
    with no_grad():
        for p in params:
            k = math.prod(p.shape)
            p.copy_(vec[start:start + k].reshape(tuple(p.shape)))
            start += k
