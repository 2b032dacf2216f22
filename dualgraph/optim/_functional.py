"""Update pieces several optimizers share, written with tensor ops (so a traced step sees
them) in PyTorch's order of operations."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops.elementwise import maximum


def lerp_(a: Any, end: Any, weight: Any) -> None:
    """``a.lerp_(end, weight)`` as PyTorch computes it: from the nearer end, so a weight of
    0 or 1 is exact."""
    if weight < 0.5:
        a.add_((end - a) * weight)
    else:
        a.copy_(end - (end - a) * (1 - weight))


def addcmul_(a: Any, x: Any, y: Any, value: Any = 1) -> None:
    """``a += value * x * y``."""
    a.add_(x * value * y if value != 1 else x * y)


def max_(a: Any, b: Any) -> None:
    a.copy_(maximum(a, b))


def as_dtype(x: Any, dtype: Any) -> Any:
    """A float64 schedule value (bias correction, step size) rounded to the parameter's
    dtype once, as PyTorch's Python-float scalars are when an op uses them."""
    return x.astype(dtype) if np.dtype(dtype) != np.float64 else x


def with_weight_decay(p: Any, g: Any, group: dict) -> Any:
    """``g + weight_decay * p`` when weight decay is on (a Python branch: guarded); with
    the group's ``decoupled_weight_decay`` on (AdamW's form), ``p`` shrinks by
    ``lr * weight_decay`` in place instead and ``g`` comes back unchanged."""
    wd = group["weight_decay"]
    if wd != 0:
        if group.get("decoupled_weight_decay", False):
            p.mul_(1 - group["lr"] * wd)
            return g
        return g + p * wd
    return g
