"""The arithmetic weight and spectral normalisation share, old style (forward pre-hooks)
and as parametrizations: norms over every dim but one, and the matrix view of a weight."""

from __future__ import annotations

from typing import Any

from ...ops import elementwise as E
from ...ops import reduce as R


def norm_except_dim(v: Any, dim: int) -> Any:
    """The 2-norm of ``v`` over every dim except ``dim``, kept as size-1 dims (shape
    ``(1, .., v.shape[dim], .., 1)``); ``dim == -1`` is the norm of the whole tensor (0-d),
    as ``torch.norm_except_dim``."""
    if dim == -1:
        return E.sqrt(R.sum(E.mul(v, v)))
    others = tuple(d for d in range(v.ndim) if d != dim % v.ndim)
    return E.sqrt(R.sum(E.mul(v, v), others, keepdims=True))


def weight_norm(v: Any, g: Any, dim: int) -> Any:
    """``v * (g / norm_except_dim(v, dim))``: the direction of ``v``, the magnitude ``g``."""
    return E.mul(v, E.div(g, norm_except_dim(v, dim)))


def as_matrix(weight: Any, dim: int) -> Any:
    """``weight`` as a matrix whose rows run along ``dim``: ``(shape[dim], -1)``."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)


def check_dim(dim: int, ndim: int) -> int:
    if dim >= ndim or dim < -ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                         f"{ndim - 1}] but got {dim})")
    return dim % ndim


def transposed_conv(module: Any) -> bool:
    """A transposed convolution keeps output channels on dim 1 of its weight."""
    return type(module).__name__.startswith("ConvTranspose") or any(
        c.__name__.startswith("ConvTranspose") for c in type(module).__mro__)
