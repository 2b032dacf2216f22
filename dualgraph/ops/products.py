"""PyTorch's product family as compositions of ``matmul``/``addmm``: ``addmm`` with
``beta``/``alpha``, ``baddbmm``, ``addbmm``, ``addmv``, ``addr``, ``mv``, ``dot``, ``vdot``,
``inner``, ``tensordot``, ``chain_matmul``/``multi_dot`` and the distances ``cdist`` and
``dist``. No new primitives: each records the ops it is made of (a plain ``addmm`` still
records PyTorch's ``AddmmBackward0``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ShapeError
from . import elementwise as E
from . import linalg as L
from . import reduce as R
from . import shape as S
from .broadcast import broadcasts_to
from .matrix import vector_norm


def _ndim(x: Any) -> int:
    return len(x.shape)


def _check_ndim(fn: str, x: Any, ndim: int, name: str) -> None:
    if not hasattr(x, "shape"):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    if _ndim(x) != ndim:
        raise ShapeError(f"{fn}: {name} must be a {ndim}-D tensor, got shape {tuple(x.shape)}")


def _scaled(x: Any, k: Any) -> Any:
    return x if isinstance(k, (int, float)) and k == 1 else E.mul(x, k)


def _add_scaled(fn: str, input: Any, prod: Any, beta: Any, alpha: Any) -> Any:  # noqa: A002
    """``beta * input + alpha * prod``; with ``beta == 0`` input is ignored (nan and inf in it
    do not propagate), as in PyTorch."""
    shape = tuple(prod.shape)
    ishape = tuple(getattr(input, "shape", ()))
    if not broadcasts_to(ishape, shape):
        raise ShapeError(f"{fn}: input of shape {ishape} does not broadcast to the product's "
                         f"shape {shape}")
    prod = _scaled(prod, alpha)
    if isinstance(beta, (int, float)) and beta == 0:
        return prod if ishape == shape else S.broadcast_to(prod, shape)
    return E.add(_scaled(input, beta), prod)


def addmm(input: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)`` for 2-D matrices (``torch.addmm``)."""
    _check_ndim("addmm", mat1, 2, "mat1")
    _check_ndim("addmm", mat2, 2, "mat2")
    if beta == 1 and alpha == 1 and hasattr(input, "shape"):
        return L.addmm(input, mat1, mat2)
    return _add_scaled("addmm", input, L.matmul(mat1, mat2), beta, alpha)


def _check_bmm(fn: str, b1: Any, b2: Any) -> None:
    _check_ndim(fn, b1, 3, "batch1")
    _check_ndim(fn, b2, 3, "batch2")
    if b1.shape[0] != b2.shape[0]:
        raise ShapeError(f"{fn}: batch1 and batch2 must have the same number of matrices, got "
                         f"{tuple(b1.shape)} and {tuple(b2.shape)}")


def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1,  # noqa: A002
            alpha: Any = 1) -> Any:
    """``beta * input + alpha * (batch1 @ batch2)``, batched over dim 0."""
    _check_bmm("baddbmm", batch1, batch2)
    return _add_scaled("baddbmm", input, L.matmul(batch1, batch2), beta, alpha)


def addbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1,  # noqa: A002
           alpha: Any = 1) -> Any:
    """``beta * input + alpha * sum_i(batch1[i] @ batch2[i])``: the batch is reduced."""
    _check_bmm("addbmm", batch1, batch2)
    return _add_scaled("addbmm", input, R.sum(L.matmul(batch1, batch2), 0), beta, alpha)


def mv(input: Any, vec: Any) -> Any:  # noqa: A002
    """Matrix-vector product of a 2-D and a 1-D tensor."""
    _check_ndim("mv", input, 2, "input")
    _check_ndim("mv", vec, 1, "vec")
    return L.matmul(input, vec)


def addmv(input: Any, mat: Any, vec: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``."""
    return _add_scaled("addmv", input, mv(mat, vec), beta, alpha)


def addr(input: Any, vec1: Any, vec2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    _check_ndim("addr", vec1, 1, "vec1")
    _check_ndim("addr", vec2, 1, "vec2")
    prod = E.mul(S.reshape(vec1, (vec1.shape[0], 1)), S.reshape(vec2, (1, vec2.shape[0])))
    return _add_scaled("addr", input, prod, beta, alpha)


def dot(input: Any, tensor: Any) -> Any:  # noqa: A002
    """The inner product of two 1-D tensors of the same size and dtype (``torch.dot``)."""
    _check_ndim("dot", input, 1, "input")
    _check_ndim("dot", tensor, 1, "tensor")
    if input.shape[0] != tensor.shape[0]:
        raise ShapeError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] "
                         f"and src [{tensor.shape[0]}] to have the same number of elements, "
                         "but got different sizes")
    if np.dtype(input.dtype) != np.dtype(tensor.dtype):
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{np.dtype(input.dtype)} and {np.dtype(tensor.dtype)}")
    return L.matmul(input, tensor)


def vdot(input: Any, other: Any) -> Any:  # noqa: A002
    """`dot` with the first argument conjugated; for real tensors, `dot`."""
    return dot(input, other)


def inner(input: Any, other: Any) -> Any:  # noqa: A002
    """The sum product over the last dims (a scalar for 1-D operands; a 0-d operand scales)."""
    if _ndim(input) == 0 or _ndim(other) == 0:
        return E.mul(input, other)
    return tensordot(input, other, ([-1], [-1]))


def _dims_arg(dims: Any, na: int, nb: int) -> tuple[list, list]:
    if hasattr(dims, "tolist"):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        if dims < 0 or dims > min(na, nb):
            raise RuntimeError(f"tensordot expects dims >= 0 and at most the operands' ranks, "
                               f"but got dims={dims}")
        return list(range(na - dims, na)), list(range(dims))
    da, db = dims
    da = [da] if isinstance(da, (int, np.integer)) else list(da)
    db = [db] if isinstance(db, (int, np.integer)) else list(db)
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, got {da} and {db}")
    return [d % na if na else d for d in da], [d % nb if nb else d for d in db]


def tensordot(a: Any, b: Any, dims: Any = 2, out: Any = None) -> Any:
    """The sum product of ``a`` and ``b`` over ``dims``: an int ``n`` (the last ``n`` dims of
    ``a`` with the first ``n`` of ``b``) or two lists of dims. A permute, a reshape and one
    matrix product."""
    if out is not None:
        raise TypeError("tensordot(): out= is not supported; assign the result instead")
    na, nb = _ndim(a), _ndim(b)
    da, db = _dims_arg(dims, na, nb)
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"tensordot: contracted dimensions need to match, but first has "
                             f"size {a.shape[i]} in dim {i} and second has size {b.shape[j]} "
                             f"in dim {j} (shapes {tuple(a.shape)} and {tuple(b.shape)})")
    free_a = [i for i in range(na) if i not in da]
    free_b = [j for j in range(nb) if j not in db]
    k = math.prod(a.shape[i] for i in da)
    ma = S.reshape(S.permute(a, tuple(free_a + da)),
                   (math.prod(a.shape[i] for i in free_a), k))
    mb = S.reshape(S.permute(b, tuple(db + free_b)),
                   (k, math.prod(b.shape[j] for j in free_b)))
    out_shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b)
    return S.reshape(L.matmul(ma, mb), out_shape)


def multi_dot(tensors: Any) -> Any:
    """The product of a chain of matrices; the first and last may be 1-D
    (``torch.linalg.multi_dot``)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got 0")
    if len(tensors) == 1:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got 1")
    for i, t in enumerate(tensors):
        ok = _ndim(t) == 2 or (_ndim(t) == 1 and i in (0, len(tensors) - 1))
        if not ok:
            raise ShapeError(f"multi_dot(): tensor {i} must be 2-D (the first and last may be "
                             f"1-D), got shape {tuple(t.shape)}")
    out = tensors[0]
    for t in tensors[1:]:
        out = L.matmul(out, t)
    return out


def chain_matmul(*matrices: Any, out: Any = None) -> Any:
    """The product of 2-D matrices left to right (``torch.chain_matmul``)."""
    if out is not None:
        raise TypeError("chain_matmul(): out= is not supported; assign the result instead")
    if len(matrices) == 1:
        _check_ndim("chain_matmul", matrices[0], 2, "matrices[0]")
        return matrices[0]
    for i, m in enumerate(matrices):
        _check_ndim("chain_matmul", m, 2, f"matrices[{i}]")
    return multi_dot(matrices)


def cdist(x1: Any, x2: Any, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Any:
    """The ``p``-norm distance between each pair of rows of ``x1`` ``(..., P, M)`` and
    ``x2`` ``(..., R, M)``: shape ``(..., P, R)``. Computed from the differences (exact at
    zero distance, where the gradient is zero as in PyTorch)."""
    if _ndim(x1) < 2 or _ndim(x2) < 2:
        raise ShapeError(f"cdist only supports at least 2D tensors, X1 got: {_ndim(x1)}D, X2 "
                         f"got: {_ndim(x2)}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"X1 and X2 must have the same number of columns. X1: "
                         f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    diff = E.sub(S.reshape(x1, tuple(x1.shape[:-1]) + (1, x1.shape[-1])),
                 S.reshape(x2, tuple(x2.shape[:-2]) + (1,) + tuple(x2.shape[-2:])))
    return vector_norm(diff, p, -1)


def dist(input: Any, other: Any, p: float = 2) -> Any:  # noqa: A002
    """The ``p``-norm of ``input - other`` (broadcasting)."""
    return vector_norm(E.sub(input, other), p)
