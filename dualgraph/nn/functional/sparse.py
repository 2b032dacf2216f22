"""Embeddings and one-hot encoding (dualgraph/ops/index.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ops import elementwise as E
from ...ops import linalg as L
from ...ops import math as M
from ...ops import reduce as R
from ...ops import shape as S

__all__ = [
    "embedding", "embedding_bag", "one_hot",
]


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """int64 one-hot encoding, ``tensor.shape + (num_classes,)``; the default
    ``num_classes=-1`` (``max + 1``) depends on the data, so it runs eagerly only."""
    from ...ops.index import one_hot as _one_hot

    return _one_hot(tensor, num_classes)


def embedding(input: Any, weight: Any, padding_idx: int | None = None,  # noqa: A002
              max_norm: Any = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Any:
    """Rows of ``weight`` picked by int ``input``: ``weight[input]``. The gradient
    scatter-adds into the rows; row ``padding_idx`` gets none. With ``max_norm``, each
    looked-up row whose ``norm_type``-norm exceeds it is first scaled in place (under
    ``no_grad``) by ``max_norm / (norm + 1e-7)``, as PyTorch's ``embedding_renorm_``."""
    from ...eager.grad_mode import no_grad
    from ...ops.index import embedding as _embedding

    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq is not supported")
    if max_norm is not None:
        with no_grad():
            idx = S.reshape(input, (-1,))
            rows = _embedding(idx, weight)
            a = E.abs(rows)
            p = float(norm_type)
            norm = (R.amax(a, 1) if p == math.inf else R.sum(E.ne(a, 0.0), 1) if p == 0
                    else R.sum(a, 1) if p == 1 else E.sqrt(R.sum(E.mul(a, a), 1)) if p == 2
                    else E.pow(R.sum(E.pow(a, p), 1), 1.0 / p))
            scale = E.where(E.gt(norm, max_norm), E.div(max_norm, E.add(norm, 1e-7)), 1.0)
            weight[idx] = E.mul(rows, S.reshape(scale.astype(rows.dtype), (-1, 1)))
    return _embedding(input, weight, padding_idx)


def embedding_bag(input: Any, weight: Any, offsets: Any = None,  # noqa: A002
                  max_norm: float | None = None, norm_type: float = 2.0,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Any:
    """Sums, means or maxima of bags of embedding rows: a 2-D ``input`` (B, L) is B bags of
    L indices; a 1-D ``input`` with ``offsets`` (the start of each bag) is bags of any
    size. Empty bags give zeros; ``padding_idx`` entries are left out of their bag;
    ``per_sample_weights`` scale the rows (``mode='sum'`` only).
    ``F.embedding_bag(text, weight, offsets)``"""
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: max_norm and scale_grad_by_freq are not "
                                  "supported")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences.")
        n_bags, length = input.shape
        flat = S.reshape(input, (-1,))
        seg = np.repeat(np.arange(n_bags), length)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor but got None" if offsets is None
                             else f"offsets has to be a 1D Tensor, got {offsets.ndim}D")
        flat = input
        n_bags = offsets.shape[0] - (1 if include_last_offset else 0)
        # Bag of each index: how many offsets are at or before its position, minus one.
        pos = np.arange(input.shape[0])[:, None]
        seg = E.sub(R.sum(S.astype(E.ge(pos, S.reshape(offsets, (1, -1))[:, :n_bags]),
                                    np.int64), axis=1), 1)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    rows = embedding(flat, weight, padding_idx)  # (N, D); padding rows are zero
    member = E.eq(S.reshape(seg, (-1, 1)), np.arange(n_bags)[None, :])  # (N, bags)
    if padding_idx is not None:
        keep = E.ne(S.reshape(flat, (-1, 1)), padding_idx % weight.shape[0])
        member = M.logical_and(member, keep)
    if mode == "max":
        masked = E.where(S.reshape(member, member.shape + (1,)), S.reshape(
            rows, (rows.shape[0], 1, rows.shape[1])), -math.inf)
        best = R.amax(masked, 0) if rows.shape[0] else None
        empty = M.logical_not(R.any(member, 0)) if rows.shape[0] else None
        return E.where(S.reshape(empty, (-1, 1)), 0.0, best)
    weights = S.astype(member, weight.dtype)
    if per_sample_weights is not None:
        weights = E.mul(weights, S.reshape(per_sample_weights, (-1, 1)))
    total = L.matmul(S.transpose(weights), rows)  # (bags, D)
    if mode == "sum":
        return total
    count = R.sum(S.astype(member, weight.dtype), 0)
    return E.div(total, S.reshape(E.maximum(count, 1.0), (-1, 1)))

