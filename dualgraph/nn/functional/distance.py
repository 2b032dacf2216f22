"""Distances and similarities between rows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ops import elementwise as E
from ...ops import reduce as R
from ...ops import shape as S
from ...ops.broadcast import axis_alias, broadcast_shapes

__all__ = [
    "cosine_similarity", "pairwise_distance", "pdist",
]


@axis_alias
def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """``x1 . x2 / sqrt(max(|x1|^2 |x2|^2, eps^2))`` along ``dim`` (PyTorch's formula), of
    the two broadcast against each other first (a size-1 ``dim`` counts as many times)."""
    shape = broadcast_shapes("cosine_similarity", tuple(x1.shape), tuple(x2.shape))
    x1 = x1 if tuple(x1.shape) == shape else S.broadcast_to(x1, shape)
    x2 = x2 if tuple(x2.shape) == shape else S.broadcast_to(x2, shape)
    w12 = R.sum(E.mul(x1, x2), dim)
    w = E.mul(R.sum(E.mul(x1, x1), dim), R.sum(E.mul(x2, x2), dim))
    return E.div(w12, E.sqrt(E.maximum(w, eps * eps)))


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Any:
    """``||x1 - x2 + eps||_p`` along the last dim."""
    d = E.add(E.sub(x1, x2), eps)
    dim = max(max(x1.ndim, x2.ndim) - 1, 0)
    if p == 2:
        return E.sqrt(R.sum(E.mul(d, d), dim, keepdims=keepdim))
    if p == 1:
        return R.sum(E.abs(d), dim, keepdims=keepdim)
    return E.pow(R.sum(E.pow(E.abs(d), p), dim, keepdims=keepdim), 1.0 / p)


# Distances between all pairs of rows.
def pdist(input: Any, p: float = 2.0) -> Any:  # noqa: A002
    """The ``p``-norm distances between the rows of (N, M) ``input``, pairs ``i < j`` in
    row-major order: ``N * (N - 1) / 2`` values. A zero distance has a zero gradient."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = np.triu_indices(input.shape[0], 1)
    d = E.abs(E.sub(input[i], input[j]))
    if p == 0:
        return R.sum(S.astype(E.ne(d, 0.0), input.dtype), 1)
    if p == math.inf:
        return R.amax(d, 1)
    if p == 1:
        return R.sum(d, 1)
    total = R.sum(E.mul(d, d) if p == 2 else E.pow(d, p), 1)
    nonzero = E.gt(total, 0.0)
    safe = E.where(nonzero, total, 1.0)
    return E.where(nonzero, E.sqrt(safe) if p == 2 else E.pow(safe, 1.0 / p), 0.0)

