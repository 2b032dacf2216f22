"""Compositions of primitives that tensors and tracers both expose (no new primitives)."""

from __future__ import annotations

from typing import Any

from . import elementwise as E
from . import reduce as R


def _axis(axis: Any, dim: Any, name: str) -> Any:
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{name}: pass either axis= or its alias dim=, not both")
        return dim
    if axis is None:
        raise TypeError(f"{name}: missing the axis (dim=) to normalize over")
    return axis


def log_softmax(x: Any, axis: Any = None, *, dim: Any = None) -> Any:
    """``x - logsumexp(x)`` along ``axis``, shifted by the max so large logits stay finite.

    The shift is not detached: its gradient cancels exactly in the math, and keeping it in
    the graph makes the eager tape and the traced graph the same ops.
    """
    axis = _axis(axis, dim, "log_softmax")
    m = R.amax(x, axis, keepdims=True)
    shifted = E.sub(x, m)
    return E.sub(shifted, E.log(R.sum(E.exp(shifted), axis, keepdims=True)))


def softmax(x: Any, axis: Any = None, *, dim: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``axis``, shifted by the max so it never overflows."""
    axis = _axis(axis, dim, "softmax")
    e = E.exp(E.sub(x, R.amax(x, axis, keepdims=True)))
    return E.div(e, R.sum(e, axis, keepdims=True))
