"""PyTorch's remaining constructors (issue 12, item 8): ``*_like``, ``empty``, ``eye``,
``linspace``. Built on the eager constructors; inside a traced function their results are
constants of the graph, as ``dg.zeros`` is."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import as_dtype
from .tensor import Tensor, full, ones, tensor, zeros


def _like_dtype(x: Any, dtype: Any) -> np.dtype:
    return as_dtype(dtype) if dtype is not None else np.dtype(x.dtype)


def zeros_like(x: Any, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``x``'s shape and (by default) dtype."""
    return zeros(tuple(x.shape), dtype=_like_dtype(x, dtype), requires_grad=requires_grad)


def ones_like(x: Any, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones of ``x``'s shape and (by default) dtype."""
    return ones(tuple(x.shape), dtype=_like_dtype(x, dtype), requires_grad=requires_grad)


def full_like(x: Any, fill_value: Any, *, dtype: Any = None,
              requires_grad: bool = False) -> Tensor:
    """``fill_value`` in ``x``'s shape and (by default) dtype."""
    return full(tuple(x.shape), fill_value, dtype=_like_dtype(x, dtype),
                requires_grad=requires_grad)


def empty(*shape: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor in PyTorch; zeros here, so results never depend on garbage."""
    return zeros(*shape, dtype=dtype, requires_grad=requires_grad)


def empty_like(x: Any, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """`empty` in ``x``'s shape and (by default) dtype."""
    return zeros_like(x, dtype=dtype, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None,
        requires_grad: bool = False) -> Tensor:
    """The ``n x m`` identity matrix (``m`` defaults to ``n``), float32 by default."""
    a = np.eye(n, n if m is None else m, dtype=as_dtype(dtype or np.float32))
    return tensor(a, requires_grad=requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, float32 by default.

    Computed in float64 then cast, so float32 values are the correctly rounded ones."""
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps!r}")
    a = np.linspace(start, end, int(steps)).astype(as_dtype(dtype or np.float32))
    return tensor(a, requires_grad=requires_grad)
