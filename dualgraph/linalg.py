"""``torch.linalg``: norms, inverse, determinant, solve, the products, the decompositions
(``cholesky``, ``qr``, ``eigh``, ``svd``, ``lu``) and what is built on them (``solve_triangular``,
``pinv``, ``lstsq``, ``matrix_rank``), and ``matrix_exp``, under PyTorch's names, returning
PyTorch's named tuples (``U, S, Vh = dg.linalg.svd(A)``).

    >>> dg.linalg.vector_norm(dg.tensor([3.0, 4.0]))
    tensor(5.)
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .ops.decomp import (
    cholesky,
    cholesky_ex,
    eigh,
    eigvalsh,
    householder_product,
    lstsq,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    matrix_exp,
    matrix_rank,
    pinv,
    qr,
    solve_triangular,
    svd,
    svdvals,
)
from .ops.linalg import cross as _cross
from .ops.linalg import matmul
from .ops.matrix import (
    LinAlgError,
    det,
    inv,
    matrix_norm,
    matrix_power,
    norm,
    slogdet,
    solve,
    vector_norm,
)
from .ops.products import multi_dot
from .ops.scan import cumprod as _cumprod
from .ops.shape import diagonal as _diagonal
from .ops.shape import stack as _stack
from .ops.shape import stop_gradient


def cross(input: Any, other: Any, *, dim: int = -1) -> Any:  # noqa: A002
    """The cross product along ``dim`` (which must have size 3), broadcasting."""
    return _cross(input, other, dim)


def diagonal(A: Any, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:  # noqa: N803
    """The diagonals of the matrices in ``A`` (the last two dims by default)."""
    return _diagonal(A, offset, dim1, dim2)


def vecdot(x: Any, y: Any, *, dim: int = -1) -> Any:
    """The dot product of ``x`` and ``y`` along ``dim``, broadcasting."""
    return (x * y).sum(dim)


def inv_ex(A: Any, *, check_errors: bool = False) -> Any:  # noqa: N803
    """``(inverse, info)``: `inv` with an int32 ``info`` of zeros (a singular matrix
    raises `LinAlgError` either way)."""
    return inv_ex_result(inv(A), stop_gradient(np.zeros(tuple(A.shape[:-2]), np.int32)))


def solve_ex(A: Any, B: Any, *, left: bool = True, check_errors: bool = False) -> Any:  # noqa: N803
    """``(result, info)``: `solve` with an int32 ``info`` of zeros."""
    return solve_ex_result(solve(A, B, left=left),
                           stop_gradient(np.zeros(tuple(A.shape[:-2]), np.int32)))


def vander(x: Any, *, N: int | None = None) -> Any:  # noqa: N803
    """The Vandermonde matrix of ``x`` (a vector or a batch of them): column ``k`` is
    ``x ** k`` for ``k < N`` (``N`` defaults to ``x.shape[-1]``), ascending.

    >>> dg.linalg.vander(dg.tensor([1.0, 2.0]), N=3)
    tensor([[1., 1., 1.],
            [1., 2., 4.]])
    """
    if not x.shape:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else int(N)
    if n < 1:
        raise RuntimeError(f"N must be greater than 1, got {N}")
    cols = [x * 0 + 1] + [x] * (n - 1)
    return _cumprod(_stack(cols, -1), -1)


def cond(A: Any, p: Any = None) -> Any:  # noqa: N803
    """The condition number of ``A`` in the norm ``p``: the ratio of its largest to its
    smallest singular value for ``p`` None, 2 or -2 (-2: the inverse ratio), else
    ``matrix_norm(A, p) * matrix_norm(inv(A), p)`` (square, invertible ``A``)."""
    if len(A.shape) < 2:
        raise RuntimeError(f"linalg.cond: The input tensor A must have at least 2 dimensions, "
                           f"got shape {tuple(A.shape)}")
    if p is None or p in (2, -2):
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return small / big if p == -2 else big / small
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cond(ord={p!r}): A must be batches of square matrices, "
                           f"but they are {A.shape[-2]} by {A.shape[-1]} matrices")
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def tensorinv(A: Any, ind: int = 2) -> Any:  # noqa: N803
    """The inverse of ``A`` read as a matrix whose rows are its first ``ind`` dims: the
    result has shape ``A.shape[ind:] + A.shape[:ind]``."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    n = int(np.prod(rows))
    if n != int(np.prod(cols)):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) "
                           f"== prod(self.shape[:ind]), but got {int(np.prod(cols))} != {n}")
    return inv(A.reshape(n, n)).reshape(cols + rows)


def tensorsolve(A: Any, B: Any, dims: Any = None) -> Any:  # noqa: N803
    """The ``X`` with ``tensordot(A, X, X.ndim) == B``: ``A`` (after moving ``dims`` of ``A``
    to the end) read as a square matrix, its last dims after the first ``B.ndim`` the
    columns, solved for ``B`` flattened; ``X`` has shape ``A.shape[B.ndim:]``.

    >>> dg.linalg.tensorsolve(dg.eye(4).reshape(2, 2, 4), dg.ones(2, 2))
    tensor([1., 1., 1., 1.])
    """
    if dims is not None:
        nd = len(A.shape)
        moved = [d % nd for d in ((dims,) if isinstance(dims, int) else dims)]
        A = A.permute(*[d for d in range(nd) if d not in moved], *moved)  # noqa: N806
    cols = tuple(A.shape[len(B.shape):])
    n, rows = int(np.prod(cols)), int(np.prod(tuple(B.shape)))
    if n != rows:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:])"
                           f" == prod(self.shape[:other.ndim]), but got {n} != {rows}")
    return solve(A.reshape(n, n), B.reshape(n)).reshape(cols)


inv_ex_result = namedtuple("inv_ex", ["inverse", "info"])
solve_ex_result = namedtuple("solve_ex", ["result", "info"])

__all__ = [
    "LinAlgError", "cholesky", "cholesky_ex", "cross", "det", "diagonal", "eigh", "eigvalsh",
    "householder_product",
    "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul",
    "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank",
    "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular",
    "svd", "svdvals", "vecdot", "vector_norm", "cond", "tensorinv", "tensorsolve", "vander",
]
