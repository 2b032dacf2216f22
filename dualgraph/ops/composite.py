"""Compositions of primitives that tensors and tracers both expose (no new primitives).

``softmax`` and ``log_softmax`` are primitives now (`dualgraph.ops.nnops`); these names stay
for the callers that import them from here, with the ``axis=``-first signature."""

from __future__ import annotations

from typing import Any

from . import nnops


def log_softmax(x: Any, axis: Any = None, *, dim: Any = None, dtype: Any = None) -> Any:
    """``x - logsumexp(x)`` along ``axis`` (alias ``dim``): `nnops.log_softmax`."""
    return nnops.log_softmax(x, dim, dtype, axis=axis)


def softmax(x: Any, axis: Any = None, *, dim: Any = None, dtype: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``axis`` (alias ``dim``): `nnops.softmax`."""
    return nnops.softmax(x, dim, dtype, axis=axis)
