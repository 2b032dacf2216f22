"""``torch.linalg``: norms, inverse, determinant, solve and the products, under PyTorch's
names. Decompositions (``svd``, ``eigh``, ``qr``, ``cholesky``, ...) and the norms built on
singular values are not provided.

    >>> dg.linalg.vector_norm(dg.tensor([3.0, 4.0]))
    tensor(5.)
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

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
    "LinAlgError", "cross", "det", "diagonal", "inv", "inv_ex", "matmul", "matrix_norm",
    "matrix_power", "multi_dot", "norm", "slogdet", "solve", "solve_ex", "vecdot",
    "vector_norm",
]
