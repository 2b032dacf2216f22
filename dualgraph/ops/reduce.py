"""Reductions: sum, mean, max, min, argmax, argmin, prod (primitives) and var, std,
logsumexp, any, all (compositions of them); ``max(dim)`` takes its values with a
``gather_axis`` at the arg index. Axis attributes are canonical (sorted, non-negative)."""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from .broadcast import float_dtype, normalize_axis, normalize_dim, shape_of
from .elementwise import (
    _MUL_IMPL,
    _truth,
    abs,  # noqa: A004 - the op; this module never needs the builtin
    add,
    div,
    eq,
    exp,
    gt,
    log,
    maximum,
    minimum,
    mul,
    ne,
    sqrt,
    sub,
    where,
)
from .gather import gather_axis
from .registry import OpDef, Reduction, register
from .shape import astype, broadcast_to, reshape


def _reduced_shape(shape: tuple, axis: tuple | None, keepdims: bool) -> tuple:
    if axis is None:
        return (1,) * len(shape) if keepdims else ()
    if keepdims:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def _sum_infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
    # PyTorch's rule: every bool and integer sum (uint8 too) is int64.
    dtype = x.dtype if x.dtype.kind in "fc" else np.dtype(np.int64)
    return _reduced_shape(tuple(x.shape), axis, keepdims), dtype


# PyTorch's names of the non-float dtypes, for its error messages.
_TORCH_NAME = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
               "int32": "Int", "int64": "Long"}


def _check_mean_dtype(dtype: np.dtype) -> None:
    if dtype.kind not in "fc":
        name = _TORCH_NAME.get(dtype.name, dtype.name)
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either "
                           f"a floating point or complex dtype. Got: {name}")


def _mean_infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
    _check_mean_dtype(x.dtype)  # PyTorch's rule: no silent int -> float mean
    return _reduced_shape(tuple(x.shape), axis, keepdims), float_dtype(x.dtype)


def _check_nonempty(name: str, shape: tuple, axis: tuple | None) -> None:
    reduced = range(len(shape)) if axis is None else axis
    if builtins.any(shape[i] == 0 for i in reduced):
        raise ShapeError(f"{name}: cannot take the {name} over an empty dimension of shape "
                         f"{shape}")


def _extremum_infer(name: str):
    def infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
        shape = tuple(x.shape)
        _check_nonempty(name, shape, axis)
        return _reduced_shape(shape, axis, keepdims), x.dtype

    return infer


def _arg_infer(name: str):
    def infer(x: Any, axis: int | None = None, keepdims: bool = False) -> tuple:
        shape = tuple(x.shape)
        axes = None if axis is None else (axis,)
        _check_nonempty(name, shape, axes)
        return _reduced_shape(shape, axes, keepdims), np.dtype(np.int64)

    return infer


def _highest(dtype: np.dtype) -> Any:
    """The identity of ``minimum``: the largest value of ``dtype`` (inf for floats)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.True_
    if dtype.kind == "f":
        return dtype.type(np.inf)
    return dtype.type(np.iinfo(dtype).max)


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


# Row sums as a BLAS matrix-vector product with a ones vector: NumPy's add.reduce pays a
# loop setup per row, about 5x the GEMV's time on the 64- to 512-wide rows of softmax and
# layer norm. Bounds: below _GEMV_MIN elements the reduce's dispatch is cheaper; past
# _GEMV_MAX_ROW a row, BLAS's few running sums would round worse than pairwise summation.
_GEMV_MIN = 2048
_GEMV_MAX_ROW = 2048
_GEMV_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_ONES: dict = {}


def row_sums(x: np.ndarray, k: int = 1) -> np.ndarray:
    """``x`` summed over its last ``k`` axes, which are kept (size 1): for the row kernels
    (softmax, layer norm), a GEMV for C-ordered float32/float64 rows of moderate width,
    ``np.add.reduce`` otherwise."""
    shape = x.shape
    nd = len(shape)
    n = math.prod(shape[nd - k:]) if k > 1 else shape[-1] if nd else 1
    if (1 < n <= _GEMV_MAX_ROW and x.size >= _GEMV_MIN and x.dtype in _GEMV_DTYPES
            and x.flags.c_contiguous):
        ones = _ONES.get((n, x.dtype))
        if ones is None:
            ones = _ONES[(n, x.dtype)] = np.ones(n, x.dtype)
            ones.flags.writeable = False
        return np.matmul(x.reshape(-1, n), ones).reshape(shape[:nd - k] + (1,) * k)
    return np.add.reduce(x, axis=tuple(range(nd - k, nd)) if nd else None, keepdims=True)


# ufunc.reduce directly: np.sum/np.mean/np.max add microseconds of Python dispatch per call.
def _sum_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    if x.dtype.kind in "biu":
        return np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    return np.add.reduce(x, axis=axis, keepdims=keepdims)


def _mean_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    _check_mean_dtype(x.dtype)
    n = x.size if axis is None else math.prod([x.shape[i] for i in axis])
    return np.true_divide(np.add.reduce(x, axis=axis, keepdims=keepdims), n or np.nan)


def _max_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    return np.maximum.reduce(x, axis=axis, keepdims=keepdims)


def _min_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    return np.minimum.reduce(x, axis=axis, keepdims=keepdims)


# np.argmax/argmin return the first nan where there is one, as PyTorch does.
def _argmax_impl(x: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    return np.asarray(np.argmax(x, axis=axis, keepdims=keepdims), np.int64)


def _argmin_impl(x: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    return np.asarray(np.argmin(x, axis=axis, keepdims=keepdims), np.int64)


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


def _sum_vjp_arrays(ctx, args, out, g):
    shape = ctx.inputs[0].shape
    axis = ctx.attrs["axis"]
    if not ctx.attrs["keepdims"] and axis is not None:
        g = g.reshape(_reduced_shape(shape, axis, True))
    return (_broadcast_view(g, shape),)


def _broadcast_view(g: np.ndarray, shape: tuple) -> np.ndarray:
    """``np.broadcast_to(g, shape)`` (a read-only view of ``g``) for a C-ordered ``g`` of
    ``shape``'s rank or 0-d, made directly with its strides: np.broadcast_to builds an
    iterator to check them, which costs as much as the rest of a small backward node."""
    ndim = len(shape)
    if (type(g) is not np.ndarray or (g.ndim != ndim and g.ndim) or not g.flags.c_contiguous
            or not g.size or 0 in shape):
        return np.broadcast_to(g, shape)
    if g.ndim:
        gshape, gstrides = g.shape, g.strides
        strides = []
        for i in range(ndim):
            if gshape[i] == shape[i]:
                strides.append(gstrides[i])
            elif gshape[i] == 1:
                strides.append(0)
            else:
                return np.broadcast_to(g, shape)  # raises NumPy's error
    else:
        strides = (0,) * ndim
    view = np.ndarray(shape, g.dtype, buffer=g, strides=tuple(strides))
    view.flags.writeable = False
    return view


def _mean_vjp(ctx, g):
    shape = ctx.inputs[0].shape
    n = _count(shape, ctx.attrs["axis"])
    return (broadcast_to(mul(_keepdims_grad(ctx, g), 1.0 / (n or 1)), shape),)


def _mean_vjp_arrays(ctx, args, out, g):
    # `_mean_vjp` on arrays: the same multiply kernel, so the same bits.
    shape = ctx.inputs[0].shape
    axis = ctx.attrs["axis"]
    if not ctx.attrs["keepdims"] and axis is not None:
        g = g.reshape(_reduced_shape(shape, axis, True))
    g = _MUL_IMPL(g, 1.0 / (_count(shape, axis) or 1))
    if type(g) is not np.ndarray:  # a 0-d product is a NumPy scalar
        g = np.asarray(g)
    return (_broadcast_view(g, shape),)


def _extremum_vjp(ctx, g):
    # Ties share the gradient evenly (PyTorch's amax / full max rule).
    (x,) = ctx.args
    shape = ctx.inputs[0].shape
    axis = ctx.attrs["axis"]
    out = ctx.out
    if not ctx.attrs["keepdims"] and axis is not None:
        out = reshape(out, _reduced_shape(shape, axis, True))
    if axis is not None:
        # amax/amin (PyTorch's AmaxBackward0): the share of the elements equal to the
        # result, multiplied by the mask, as PyTorch computes it; a slice holding a NaN has
        # none equal, so 0 / 0 makes its whole gradient NaN there, as in PyTorch.
        mask = astype(eq(x, broadcast_to(out, shape)), g.dtype)
        count = sum(mask, axis=axis, keepdims=True)
        return (mul(broadcast_to(div(_keepdims_grad(ctx, g), count), shape), mask),)
    # The max of all elements (MaxBackward1): a NaN is the maximum (it propagates), so it
    # takes the gradient, as in PyTorch; there is then at least one winner and the share
    # never divides by 0.
    mask = where(ne(x, x), 1.0, astype(eq(x, broadcast_to(out, shape)), g.dtype))
    count = sum(mask, axis=axis, keepdims=True)
    share = div(_keepdims_grad(ctx, g), count)
    return (where(gt(mask, 0.0), broadcast_to(share, shape), 0.0),)


def _reduce_name(full: str, partial: str):
    return lambda node: full if node.attrs["axis"] is None else partial


SUM = register(OpDef(
    "sum", _sum_impl, _sum_infer, _sum_vjp,
    _reduce_name("SumBackward0", "SumBackward1"),
    reduction=Reduction("add", _zero), vjp_arrays=_sum_vjp_arrays,
))
MEAN = register(OpDef(
    "mean", _mean_impl, _mean_infer, _mean_vjp,
    _reduce_name("MeanBackward0", "MeanBackward1"),
    reduction=Reduction("add", _zero, finalize="mean"), vjp_arrays=_mean_vjp_arrays,
))
MAX = register(OpDef(
    "max", _max_impl, _extremum_infer("max"), _extremum_vjp,
    _reduce_name("MaxBackward1", "AmaxBackward0"),
    saves=(0,), saves_out=True, reduction=Reduction("maximum", _lowest, empty_ok=False),
))
MIN = register(OpDef(
    "min", _min_impl, _extremum_infer("min"), _extremum_vjp,
    _reduce_name("MinBackward1", "AminBackward0"),
    saves=(0,), saves_out=True, reduction=Reduction("minimum", _highest, empty_ok=False),
))
# Not differentiable (integer results). ``axis`` is one int or None (the flattened index).
ARGMAX = register(OpDef(
    "argmax", _argmax_impl, _arg_infer("argmax"), None, "ArgmaxBackward0",
    differentiable=False,
))
ARGMIN = register(OpDef(
    "argmin", _argmin_impl, _arg_infer("argmin"), None, "ArgminBackward0",
    differentiable=False,
))


def _reduce(op: OpDef, x: Any, axis: Any, keepdims: Any, dim: Any, keepdim: Any) -> Any:
    # NumPy's spellings (axis, keepdims) and PyTorch's (dim, keepdim) are aliases; passing
    # both of a pair is ambiguous.
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{op.name}: pass either axis= or its alias dim=, not both")
        axis = dim
    keep = _keep(op.name, keepdims, keepdim)
    return bind(op, x, axis=normalize_axis(op.name, axis, len(x.shape)), keepdims=keep)


def sum(x: Any, axis: Any = None, keepdims: bool | None = None, *,  # noqa: A001
        dim: Any = None, keepdim: bool | None = None, dtype: Any = None) -> Any:
    """Sum over ``axis`` (int, tuple or ``None`` for all); ``dim=``/``keepdim=`` are PyTorch's
    spellings; ``dtype=`` casts the input first. ``dg.sum(x, dim=1, keepdim=True)``"""
    return _reduce(SUM, _cast_input(x, dtype), axis, keepdims, dim, keepdim)


def mean(x: Any, axis: Any = None, keepdims: bool | None = None, *,
         dim: Any = None, keepdim: bool | None = None, dtype: Any = None) -> Any:
    """Mean over ``axis`` (int, tuple or ``None`` for all); ``dim=``/``keepdim=`` are PyTorch's
    spellings; ``dtype=`` casts the input first. ``dg.mean(x, dim=0)``"""
    return _reduce(MEAN, _cast_input(x, dtype), axis, keepdims, dim, keepdim)


def _cast_input(x: Any, dtype: Any) -> Any:
    """PyTorch's ``dtype=`` on a reduction: the input is cast before reducing."""
    if dtype is None or np.dtype(dtype) == x.dtype:
        return x
    return astype(x, dtype)


# PyTorch's torch.return_types.max/min: named tuples called "max" and "min", so they print
# as ``max(values=..., indices=...)``; attribute access or tuple unpacking.
class max_result(NamedTuple):  # noqa: N801
    values: Any
    indices: Any


class min_result(NamedTuple):  # noqa: N801
    values: Any
    indices: Any


max_result.__name__ = max_result.__qualname__ = "max"
min_result.__name__ = min_result.__qualname__ = "min"


def _keep(name: str, keepdims: Any, keepdim: Any) -> bool:
    if keepdim is not None:
        if keepdims is not None:
            raise TypeError(f"{name}: pass either keepdims= or its alias keepdim=, not both")
        keepdims = keepdim
    if keepdims is None:
        return False
    if not isinstance(keepdims, (bool, int, np.bool_, np.integer)):
        raise TypeError(f"{name}: keepdim must be a bool, got {type(keepdims).__name__} "
                        f"{keepdims!r}")
    return bool(keepdims)


def _arg(op: OpDef, x: Any, dim: Any, keepdim: Any) -> Any:
    if dim is None:
        return bind(op, x, axis=None, keepdims=_keep(op.name, None, keepdim))
    d = normalize_dim(op.name, dim, len(x.shape))
    if not x.shape:  # a 0-d tensor: index 0 (PyTorch accepts dim 0 and -1)
        return bind(op, x, axis=None, keepdims=False)
    return bind(op, x, axis=d, keepdims=_keep(op.name, None, keepdim))


def _values_indices(arg: OpDef, result: type, x: Any, dim: Any, keepdim: bool) -> Any:
    d = normalize_dim(arg.name[3:], dim, len(x.shape))
    if not x.shape:
        idx = bind(arg, x, axis=None, keepdims=False)
        return result(x, idx)
    idx = bind(arg, x, axis=d, keepdims=True)
    values = gather_axis(x, idx, d)
    if not keepdim:
        shape = tuple(n for i, n in enumerate(x.shape) if i != d)
        values, idx = reshape(values, shape), reshape(idx, shape)
    return result(values, idx)


def _extremum(op: OpDef, arg: OpDef, result: type, x: Any, dim: Any, keepdim: Any,
              axis: Any, keepdims: Any) -> Any:
    if dim is None and axis is not None and not isinstance(axis, (tuple, list)):
        dim, axis = axis, None  # PyTorch reads axis= as dim=: values and indices
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{op.name}: pass either dim (PyTorch: values and indices) or "
                            "axis= (NumPy: values), not both")
        if not isinstance(dim, (tuple, list)):
            # PyTorch's max(dim): a named tuple whose values' gradient goes to the index
            # returned (the first occurrence), not shared among ties.
            return _values_indices(arg, result, x, dim, _keep(op.name, keepdims, keepdim))
        axis = dim
    return _reduce(op, x, axis, keepdims, None, keepdim)


def max(x: Any, dim: Any = None, keepdim: bool | None = None, *,  # noqa: A001
        axis: Any = None, keepdims: bool | None = None) -> Any:
    """The max of all elements; with one int ``dim`` (positional or ``dim=``), PyTorch's
    named tuple ``(values, indices)`` (``v, i = dg.max(x, 1)``; ``keepdim=`` keeps the dim),
    whose gradient goes to the index returned; ``axis=1`` is ``dim=1``, as in PyTorch. A
    tuple ``axis`` or ``dim`` gives the values only, as ``torch.amax``, ties sharing the
    gradient. ``dg.max(a, b)`` with a tensor ``b`` is `maximum`, as in PyTorch."""
    if _is_other(dim):
        return maximum(x, dim)
    return _extremum(MAX, ARGMAX, max_result, x, dim, keepdim, axis, keepdims)


def min(x: Any, dim: Any = None, keepdim: bool | None = None, *,  # noqa: A001
        axis: Any = None, keepdims: bool | None = None) -> Any:
    """The min, or ``(values, indices)`` for one int ``dim``, as `max`.
    ``dg.min(x, dim=0).indices``; ``dg.min(a, b)`` with a tensor ``b`` is `minimum` (PPO's
    clipped objective ``torch.min(surr1, surr2)``)."""
    if _is_other(dim):
        return minimum(x, dim)
    return _extremum(MIN, ARGMIN, min_result, x, dim, keepdim, axis, keepdims)


def _is_other(dim: Any) -> bool:
    """Whether max/min's second argument is a tensor (PyTorch's ``max(input, other)``)."""
    return hasattr(dim, "shape") and hasattr(dim, "dtype") and not isinstance(dim, np.generic)


def amax(x: Any, axis: Any = None, keepdims: bool | None = None, *,
         dim: Any = None, keepdim: bool | None = None) -> Any:
    """Max values over ``axis`` (int or tuple; None: all), ties sharing the gradient, a
    slice holding a NaN giving NaN gradients (``torch.amax``)."""
    return _reduce(MAX, x, _all_axes(x, axis, dim), keepdims, dim, keepdim)


def amin(x: Any, axis: Any = None, keepdims: bool | None = None, *,
         dim: Any = None, keepdim: bool | None = None) -> Any:
    """Min values over ``axis`` (int or tuple; None: all), as `amax` (``torch.amin``)."""
    return _reduce(MIN, x, _all_axes(x, axis, dim), keepdims, dim, keepdim)


def _all_axes(x: Any, axis: Any, dim: Any) -> Any:
    """amax/amin's ``axis``: every axis named when neither it nor ``dim`` is given, so the
    op is PyTorch's amax (its gradient rule), not the max of all elements."""
    if axis is None and dim is None and len(x.shape):
        return tuple(range(len(x.shape)))
    return axis


def argmax(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Index of the max (the first one; a nan counts as the max) along ``dim``, or in the
    flattened tensor for ``dim=None``; int64. ``dg.argmax(x, dim=1)``"""
    return _arg(ARGMAX, x, dim, keepdim)


def argmin(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Index of the min (the first one; a nan counts as the min) along ``dim``, as `argmax`."""
    return _arg(ARGMIN, x, dim, keepdim)


# prod is a `Reduction` folding by "mul" from 1 (in the output dtype, as NumPy's
# multiply.reduce); its gradient counts the zeros of each slice.


def _one(dtype: Any) -> Any:
    return np.dtype(dtype).type(1)


def _prod_infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
    dtype = np.dtype(x.dtype)
    dtype = dtype if dtype.kind == "f" else np.dtype(np.int64)  # PyTorch: ints give int64
    return _reduced_shape(tuple(x.shape), axis, keepdims), dtype


def _prod_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.int64)
    return np.asarray(np.multiply.reduce(x, axis=axis, keepdims=keepdims, dtype=dtype))


def _prod_vjp(ctx, g):
    # PyTorch's rule: out / x where the slice has no zero; at the one zero of a slice the
    # product of the others; 0 everywhere in a slice with two or more zeros.
    (x,) = ctx.args
    axis, keepdims = ctx.attrs["axis"], ctx.attrs["keepdims"]
    shape = tuple(ctx.inputs[0].shape)
    kept = _reduced_shape(shape, axis, True)
    out, g = ctx.out, g
    if not keepdims:
        out, g = reshape(out, kept), reshape(g, kept)
    zero = eq(x, 0)
    zeros = sum(zero, axis, keepdims=True)
    safe = where(zero, 1.0, x)  # no 0 / 0 in the branch `where` discards
    others = prod(safe, axis, keepdim=True)
    at_zero = where(eq(zeros, 1), others, 0.0)
    local = where(eq(zeros, 0), div(broadcast_to(out, shape), safe),
                  where(zero, at_zero, 0.0))
    return (mul(local, g),)


PROD = register(OpDef(
    "prod", _prod_impl, _prod_infer, _prod_vjp,
    lambda node: "ProdBackward0" if node.attrs["axis"] is None else "ProdBackward1",
    saves=(0,), saves_out=True, reduction=Reduction("mul", _one),
))


def _dims(x: Any, dim: Any) -> tuple | None:
    return normalize_axis("reduce", dim, len(shape_of(x)))


def var(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: Any = None) -> Any:
    """Variance over ``dim``, divided by ``N - correction`` (1 by default; ``unbiased=False``
    means 0), two-pass as PyTorch. ``dg.var(x, dim=1, correction=0)``"""
    if isinstance(dim, bool):
        dim, unbiased = None, dim  # torch.var(x, False): the old (input, unbiased) form
    if unbiased is not None and correction is not None:
        raise TypeError("var: pass either unbiased= or correction=, not both")
    corr = correction if correction is not None else (0 if unbiased is False else 1)
    axis = _dims(x, dim)
    shape = shape_of(x)
    n = math.prod(shape if axis is None else [shape[i] for i in axis])
    dev = sub(x, mean(x, axis, keepdims=True))
    total = sum(mul(dev, dev), axis, keepdims=keepdim)
    # n <= correction gives inf or nan, as PyTorch (with a warning there).
    denom = n - corr
    return div(total, denom) if denom > 0 else mul(total, math.inf if denom < 0 else math.nan)


def std(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: Any = None) -> Any:
    """Standard deviation: ``sqrt(var(...))`` with `var`'s arguments."""
    return sqrt(var(x, dim, unbiased, keepdim, correction=correction))


def var_mean(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(var, mean)`` over ``dim``."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    v = var(x, dim, unbiased, keepdim, correction=correction)
    return v, mean(x, _dims(x, dim), keepdims=keepdim)


def std_mean(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(std, mean)`` over ``dim``."""
    v, m = var_mean(x, dim, unbiased, keepdim, correction=correction)
    return sqrt(v), m


def logsumexp(x: Any, dim: Any, keepdim: bool = False) -> Any:
    """``log(sum(exp(x)))`` over ``dim``, shifted by the max so it never overflows; the
    shift's gradient cancels (a max of -inf is replaced by 0, so empty-mass rows give -inf)."""
    axis = _dims(x, dim)
    m = max(x, axis, keepdims=True)
    m = where(eq(abs(m), math.inf), 0.0, m)  # isinf(m)
    out = add(log(sum(exp(sub(x, m)), axis, keepdims=True)), m)
    if keepdim:
        return out
    return reshape(out, _reduced_shape(shape_of(x), axis, False))


def any(x: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """Whether any element (over ``dim``) is nonzero: a bool tensor."""
    return gt(sum(_truth(x), _dims(x, dim), keepdims=keepdim), 0)


def all(x: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """Whether every element (over ``dim``) is nonzero: a bool tensor."""
    return eq(sum(eq(x, 0), _dims(x, dim), keepdims=keepdim), 0)


def prod(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    """The product over ``dim`` (all elements by default); integer inputs give int64.
    ``dg.prod(x, 1)``"""
    if dtype is not None:
        x = astype(x, dtype)
    return bind(PROD, x, axis=_dims(x, dim), keepdims=bool(keepdim))
