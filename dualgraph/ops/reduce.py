"""Reductions: sum, mean, max. Axis attributes are canonical (sorted, non-negative)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from .broadcast import float_dtype, normalize_axis
from .elementwise import div, eq, gt, mul, ne, where
from .registry import OpDef, Reduction, register
from .shape import astype, broadcast_to, reshape


def _reduced_shape(shape: tuple, axis: tuple | None, keepdims: bool) -> tuple:
    if axis is None:
        return (1,) * len(shape) if keepdims else ()
    if keepdims:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def _sum_infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
    dtype = x.dtype if x.dtype.kind in "fc" else np.sum(np.zeros(1, x.dtype)).dtype
    return _reduced_shape(tuple(x.shape), axis, keepdims), dtype


def _mean_infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
    return _reduced_shape(tuple(x.shape), axis, keepdims), float_dtype(x.dtype)


def _max_infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
    shape = tuple(x.shape)
    reduced = range(len(shape)) if axis is None else axis
    if not MAX.reduction.empty_ok and any(shape[i] == 0 for i in reduced):
        raise ShapeError(f"max: cannot take the max over an empty dimension of shape {shape}")
    return _reduced_shape(shape, axis, keepdims), x.dtype


def _zero(dtype: np.dtype) -> Any:
    return np.dtype(dtype).type(0)


def _lowest(dtype: np.dtype) -> Any:
    """The identity of ``maximum``: the smallest value of ``dtype`` (-inf for floats)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.False_
    if dtype.kind == "f":
        return dtype.type(-np.inf)
    return dtype.type(np.iinfo(dtype).min)


# ufunc.reduce directly: np.sum/np.mean/np.max add microseconds of Python dispatch per call.
def _sum_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    if x.dtype.kind in "biu":
        return np.sum(x, axis=axis, keepdims=keepdims)
    return np.add.reduce(x, axis=axis, keepdims=keepdims)


def _mean_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    if x.dtype.kind != "f":
        x = x.astype(float_dtype(x.dtype))
    n = x.size if axis is None else math.prod([x.shape[i] for i in axis])
    return np.true_divide(np.add.reduce(x, axis=axis, keepdims=keepdims), n or np.nan)


def _max_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    return np.maximum.reduce(x, axis=axis, keepdims=keepdims)


def _count(shape: tuple, axis: tuple | None) -> int:
    return math.prod(shape if axis is None else [shape[i] for i in axis])


def _keepdims_grad(ctx, g):
    """The incoming gradient reshaped so it broadcasts against the reduced input."""
    shape = ctx.inputs[0].shape
    axis = ctx.attrs["axis"]
    if ctx.attrs["keepdims"] or axis is None:
        return g
    return reshape(g, _reduced_shape(shape, axis, True))


def _sum_vjp(ctx, g):
    return (broadcast_to(_keepdims_grad(ctx, g), ctx.inputs[0].shape),)


def _mean_vjp(ctx, g):
    shape = ctx.inputs[0].shape
    n = _count(shape, ctx.attrs["axis"])
    return (broadcast_to(mul(_keepdims_grad(ctx, g), 1.0 / (n or 1)), shape),)


def _max_vjp(ctx, g):
    # Ties share the gradient evenly (PyTorch's amax / full max rule).
    (x,) = ctx.args
    shape = ctx.inputs[0].shape
    axis = ctx.attrs["axis"]
    out = ctx.out
    if not ctx.attrs["keepdims"] and axis is not None:
        out = reshape(out, _reduced_shape(shape, axis, True))
    # A NaN is the maximum of its slice (it propagates), so it takes the gradient, as in
    # PyTorch; every slice then has at least one winner and the share never divides by 0.
    mask = where(ne(x, x), 1.0, astype(eq(x, broadcast_to(out, shape)), g.dtype))
    count = sum(mask, axis=axis, keepdims=True)
    share = div(_keepdims_grad(ctx, g), count)
    return (where(gt(mask, 0.0), broadcast_to(share, shape), 0.0),)


def _reduce_name(full: str, partial: str):
    return lambda node: full if node.attrs["axis"] is None else partial


SUM = register(OpDef(
    "sum", _sum_impl, _sum_infer, _sum_vjp,
    _reduce_name("SumBackward0", "SumBackward1"),
    reduction=Reduction("add", _zero),
))
MEAN = register(OpDef(
    "mean", _mean_impl, _mean_infer, _mean_vjp,
    _reduce_name("MeanBackward0", "MeanBackward1"),
    reduction=Reduction("add", _zero, finalize="mean"),
))
MAX = register(OpDef(
    "max", _max_impl, _max_infer, _max_vjp,
    _reduce_name("MaxBackward1", "AmaxBackward0"),
    saves=(0,), saves_out=True, reduction=Reduction("maximum", _lowest, empty_ok=False),
))


def _reduce(op: OpDef, x: Any, axis: Any, keepdims: Any, dim: Any, keepdim: Any) -> Any:
    # NumPy's spellings (axis, keepdims) and PyTorch's (dim, keepdim) are aliases; passing
    # both of a pair is ambiguous.
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{op.name}: pass either axis= or its alias dim=, not both")
        axis = dim
    if keepdim is not None:
        if keepdims is not None:
            raise TypeError(f"{op.name}: pass either keepdims= or its alias keepdim=, not both")
        keepdims = keepdim
    if keepdims is None:
        keepdims = False
    elif not isinstance(keepdims, (bool, int, np.bool_, np.integer)):
        raise TypeError(f"{op.name}: keepdim must be a bool, got {type(keepdims).__name__} "
                        f"{keepdims!r}")
    return bind(op, x, axis=normalize_axis(op.name, axis, len(x.shape)), keepdims=bool(keepdims))


def sum(x: Any, axis: Any = None, keepdims: bool | None = None, *,  # noqa: A001
        dim: Any = None, keepdim: bool | None = None) -> Any:
    """Sum over ``axis`` (int, tuple or ``None`` for all); ``dim=``/``keepdim=`` are PyTorch's
    spellings. ``dg.sum(x, dim=1, keepdim=True)``"""
    return _reduce(SUM, x, axis, keepdims, dim, keepdim)


def mean(x: Any, axis: Any = None, keepdims: bool | None = None, *,
         dim: Any = None, keepdim: bool | None = None) -> Any:
    """Mean over ``axis`` (int, tuple or ``None`` for all); ``dim=``/``keepdim=`` are PyTorch's
    spellings. ``dg.mean(x, dim=0)``"""
    return _reduce(MEAN, x, axis, keepdims, dim, keepdim)


def max(x: Any, axis: Any = None, keepdims: bool | None = None, *,  # noqa: A001
        dim: Any = None, keepdim: bool | None = None) -> Any:
    """Max over ``axis``; the gradient flows to the max element (ties share it).

    Unlike ``torch.max(x, dim)`` this returns the values only (like ``torch.amax``).
    """
    return _reduce(MAX, x, axis, keepdims, dim, keepdim)
