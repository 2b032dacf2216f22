"""``torch.linalg``: norms, inverse, determinant, solve, the products, the decompositions
(``cholesky``, ``qr``, ``eigh``, ``svd``) and what is built on them (``solve_triangular``,
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
    lstsq,
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
from .ops.shape import diagonal as _diagonal
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


inv_ex_result = namedtuple("inv_ex", ["inverse", "info"])
solve_ex_result = namedtuple("solve_ex", ["result", "info"])

__all__ = [
    "LinAlgError", "cholesky", "cholesky_ex", "cross", "det", "diagonal", "eigh", "eigvalsh",
    "inv", "inv_ex", "lstsq", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank",
    "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular",
    "svd", "svdvals", "vecdot", "vector_norm",
]
