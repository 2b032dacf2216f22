"""Linear algebra beyond products: vector and matrix norms as compositions
(``torch.linalg.vector_norm``/``matrix_norm``/``norm``, ``torch.norm``, ``Tensor.renorm``);
the primitives ``inv`` and ``det`` and what is built on them (``slogdet``, ``logdet``,
``solve``, ``matrix_power``).

A norm's gradient at zero is zero, as PyTorch's is (``sqrt(sum(x**2))`` composed naively
would give ``0/0``): the sum is replaced by 1 where it is zero before the root, and the
root's value by 0 there, so no branch the gradient can see divides by zero. Norms built on
singular values (``ord=2``/``-2``/``'nuc'`` of a matrix) use `decomp.svdvals`."""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .broadcast import normalize_axis, normalize_dim
from .registry import OpDef, register


def _axes(x: Any, dim: Any) -> tuple | None:
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    return normalize_axis("norm", dims, len(x.shape)) if dims else None


def _check_float(fn: str, x: Any, dtype: Any) -> Any:
    if dtype is not None:
        x = S.astype(x, np.dtype(dtype))
    if np.dtype(x.dtype).kind != "f":
        raise RuntimeError(f"{fn}: Expected a floating point tensor as input. Got "
                           f"{np.dtype(x.dtype)}")
    return x


def _safe_root(s: Any, p: float) -> Any:
    """``s ** (1/p)`` for ``s >= 0`` with a zero gradient where ``s == 0``; a NaN ``s``
    gives NaN."""
    zero = E.eq(s, 0.0)
    safe = E.where(zero, 1.0, s)
    root = E.sqrt(safe) if p == 2 else E.pow(safe, 1.0 / p)
    return E.where(zero, 0.0, root)


def vector_norm(x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Any:
    """The ``ord``-norm of ``x`` over ``dim`` (all dims by default) as a vector:
    ``sum(|x|**ord)**(1/ord)``, the max/min of ``|x|`` for ``ord=±inf``, the count of
    nonzeros for ``ord=0``."""
    x = _check_float("linalg.vector_norm", x, dtype)
    axes = _axes(x, dim)
    if not isinstance(ord, (int, float, np.integer, np.floating)) or isinstance(ord, bool):
        raise TypeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    ord = float(ord)  # noqa: A001
    reduced = range(len(x.shape)) if axes is None else axes
    if any(x.shape[a] == 0 for a in reduced) and (ord < 0 or math.isinf(ord)):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on an empty "
                           "tensor because the operation does not have an identity")
    if ord == math.inf:
        return R.amax(E.abs(x), axes, keepdim)
    if ord == -math.inf:
        return R.amin(E.abs(x), axes, keepdim)
    if ord == 0:
        # The count of nonzeros, recorded as a function of x (zero gradient), as PyTorch's.
        return R.sum(E.where(E.ne(x, 0.0), 1.0, E.mul(x, 0.0)), axes, keepdim)
    if ord == 1:
        return R.sum(E.abs(x), axes, keepdim)
    if ord == 2:
        return _safe_root(R.sum(E.mul(x, x), axes, keepdim), 2)
    if ord < 0:
        return E.pow(R.sum(E.pow(E.abs(x), ord), axes, keepdim), 1.0 / ord)
    return _safe_root(R.sum(E.pow(E.abs(x), ord), axes, keepdim), ord)


def matrix_norm(A: Any, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,  # noqa: A002, N803
                dtype: Any = None) -> Any:
    """A matrix norm over the two dims ``dim``: ``'fro'`` or the max/min column sum
    (``ord=±1``) or row sum (``ord=±inf``) of ``|A|``."""
    A = _check_float("linalg.matrix_norm", A, dtype)  # noqa: N806
    if len(A.shape) < 2:
        raise ShapeError(f"linalg.matrix_norm: The input tensor A must have at least 2 "
                         f"dimensions, got shape {tuple(A.shape)}")
    r, c = (normalize_dim("linalg.matrix_norm", d, len(A.shape)) for d in dim)
    if r == c:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({r}, {c})")
    if ord == "fro":
        return vector_norm(A, 2, (r, c), keepdim)
    if ord in ("nuc", 2, -2):
        from .decomp import svdvals  # decomp builds on this module

        nd = len(A.shape)
        others = tuple(i for i in range(nd) if i not in (r, c))
        s = svdvals(S.permute(A, others + (r, c)))
        out = R.sum(s, -1) if ord == "nuc" else (R.amax if ord == 2 else R.amin)(s, -1)
        if keepdim:
            out = S.reshape(out, tuple(1 if i in (r, c) else A.shape[i] for i in range(nd)))
        return out
    if ord in (1, -1, math.inf, -math.inf):
        inner, outer = (r, c) if ord in (1, -1) else (c, r)
        sums = R.sum(E.abs(A), inner, True)
        pick = R.amax if ord > 0 else R.amin
        out = pick(sums, outer, True)
        if not keepdim:
            out = S.reshape(out, tuple(s for i, s in enumerate(out.shape) if i not in (r, c)))
        return out
    raise RuntimeError(f"linalg.matrix_norm: Order {ord!r} not supported.")


def norm(A: Any, ord: Any = None, dim: Any = None, keepdim: bool = False, *,  # noqa: A002, N803
         dtype: Any = None) -> Any:
    """``torch.linalg.norm``: a vector norm over one dim (or all when both ``ord`` and
    ``dim`` are None), a matrix norm over two."""
    if dim is not None and not isinstance(dim, (int, np.integer)):
        dim = tuple(dim)
    if ord is None:
        if isinstance(dim, tuple) and len(dim) == 2:
            return matrix_norm(A, "fro", dim, keepdim, dtype=dtype)
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if dim is None:
        if len(A.shape) == 1:
            return vector_norm(A, ord, None, keepdim, dtype=dtype)
        if len(A.shape) == 2:
            return matrix_norm(A, ord, (0, 1), keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must "
                           f"be 1D or 2D. Got {len(A.shape)}D.")
    if isinstance(dim, tuple) and len(dim) == 2:
        return matrix_norm(A, ord, dim, keepdim, dtype=dtype)
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


def torch_norm(input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False,  # noqa: A002
               out: Any = None, dtype: Any = None) -> Any:
    """``torch.norm`` (and ``Tensor.norm``): ``'fro'`` and numbers give a vector norm over
    ``dim`` (all dims by default); ``'nuc'`` the nuclear norm of the matrices in the last
    two dims (or the two in ``dim``)."""
    if out is not None:
        raise TypeError("norm(): out= is not supported; assign the result instead")
    if p is None:
        p = 2
    if isinstance(p, str):
        if p == "nuc":
            return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim,
                               dtype=dtype)
        if p != "fro":
            raise RuntimeError(f"norm: unsupported p={p!r}; use 'fro', 'nuc' or a number")
        p = 2
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


def renorm(input: Any, p: float, dim: int, maxnorm: float) -> Any:  # noqa: A002
    """Each slice of ``input`` along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down
    to norm ``maxnorm`` (PyTorch's ``maxnorm / (norm + 1e-7)``)."""
    n = len(input.shape)
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = normalize_dim("renorm", dim, n)
    others = tuple(i for i in range(n) if i != d)
    norms = vector_norm(input, p, others, True)
    factor = E.where(E.gt(norms, maxnorm), E.div(maxnorm, E.add(norms, 1e-7)), 1.0)
    return E.mul(input, factor)


# ------------------------------------------------- inverse and determinant (primitives)
# Batched over leading dims. Their gradients: d(A^-1) = -A^-T g A^-T and
# d(det A) = g det(A) A^-T, which needs A invertible (a singular matrix's determinant has a
# gradient PyTorch finds through the SVD; here its backward raises LinAlgError).


class LinAlgError(RuntimeError):
    """A linear-algebra routine failed on its input (a singular matrix), as
    ``torch.linalg.LinAlgError``."""


def _square_infer(fn: str, A: Any) -> tuple:  # noqa: N803
    shape = tuple(A.shape)
    if len(shape) < 2:
        raise ShapeError(f"linalg.{fn}: The input tensor A must have at least 2 dimensions, "
                         f"got shape {shape}")
    if shape[-1] != shape[-2]:
        raise ShapeError(f"linalg.{fn}: A must be batches of square matrices, but they are "
                         f"{shape[-2]} by {shape[-1]} matrices (shape {shape})")
    dtype = np.dtype(A.dtype)
    if dtype.kind != "f":
        raise RuntimeError(f"linalg.{fn}: Expected a floating point tensor as input. Got "
                           f"{dtype}")
    return shape, dtype


def _inv_infer(A: Any) -> tuple:  # noqa: N803
    return _square_infer("inv", A)


def _det_infer(A: Any) -> tuple:  # noqa: N803
    shape, dtype = _square_infer("det", A)
    return shape[:-2], dtype


def _inv_impl(A: np.ndarray) -> np.ndarray:  # noqa: N803
    try:
        return np.linalg.inv(A)
    except np.linalg.LinAlgError:
        raise LinAlgError("linalg.inv: The input matrix is singular, so its inverse could not "
                          "be computed") from None


def _det_impl(A: np.ndarray) -> np.ndarray:  # noqa: N803
    return np.asarray(np.linalg.det(A), A.dtype)


def _mT(x: Any) -> Any:  # noqa: N802
    n = len(x.shape)
    return S.permute(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _inv_vjp(ctx, g):
    yt = _mT(ctx.out)
    from .linalg import matmul

    return (E.neg(matmul(matmul(yt, g), yt)),)


def _det_vjp(ctx, g):
    (A,) = ctx.args  # noqa: N806
    d = ctx.out
    shape = tuple(d.shape) + (1, 1)
    scale = E.mul(S.reshape(g, shape), S.reshape(d, shape))
    return (E.mul(scale, _mT(inv(A))),)


INV = register(OpDef("inv", _inv_impl, _inv_infer, _inv_vjp, "LinalgInvExBackward0",
                     saves_out=True))
DET = register(OpDef("det", _det_impl, _det_infer, _det_vjp, "LinalgDetBackward0",
                     saves=(0,), saves_out=True))


def inv(A: Any) -> Any:  # noqa: N803
    """The inverse of each square matrix in ``A`` (``torch.linalg.inv``); a singular one
    raises `LinAlgError`."""
    try:
        return bind(INV, A)
    except RuntimeError as e:
        # The eager engine wraps a kernel's error; a singular matrix keeps PyTorch's type.
        if isinstance(e.__cause__, LinAlgError):
            raise e.__cause__ from None
        raise


def det(A: Any) -> Any:  # noqa: N803
    """The determinant of each square matrix in ``A``."""
    return bind(DET, A)


def slogdet(A: Any) -> Any:  # noqa: N803
    """``(sign, logabsdet)`` of each square matrix, as a named tuple."""
    d = det(A)
    return slogdet_result(E.sign(d), E.log(E.abs(d)))


def logdet(A: Any) -> Any:  # noqa: N803
    """``log(det(A))``: NaN for a negative determinant, ``-inf`` for zero."""
    return E.log(det(A))


def solve(A: Any, B: Any, *, left: bool = True) -> Any:  # noqa: N803
    """The solution ``X`` of ``A X = B`` (``left=False``: ``X A = B``); ``B`` may be a
    vector or a batch of matrices. Computed as ``inv(A) @ B``."""
    from .linalg import matmul

    _square_infer("solve", A)
    ai = inv(A)
    if not left:
        return matmul(B, ai)
    vector = len(B.shape) == 1 or (len(B.shape) == len(A.shape) - 1
                                   and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector:
        return S.reshape(matmul(ai, S.reshape(B, tuple(B.shape) + (1,))), tuple(
            np.broadcast_shapes(tuple(A.shape[:-1]), tuple(B.shape))))
    if B.shape[-2] != A.shape[-1]:
        raise ShapeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                         f"AX = B ({tuple(A.shape[-2:])} and {tuple(B.shape[-2:])})")
    return matmul(ai, B)


def matrix_power(A: Any, n: int) -> Any:  # noqa: N803
    """``A`` multiplied by itself ``n`` times (the identity for 0, powers of the inverse
    for negative ``n``), by repeated squaring."""
    from .linalg import matmul

    shape = tuple(A.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(f"linalg.matrix_power: A must be batches of square matrices, got "
                         f"shape {shape}")
    if n == 0:
        # The identity, recorded as a function of A (with a zero gradient), as PyTorch's.
        eye = np.eye(A.shape[-1], dtype=np.dtype(A.dtype))
        return E.add(E.mul(A, 0), eye)
    base = inv(A) if n < 0 else A
    n = abs(n)
    out = None
    while n:
        if n & 1:
            out = base if out is None else matmul(out, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return out


slogdet_result = namedtuple("slogdet", ["sign", "logabsdet"])
