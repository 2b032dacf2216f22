"""Scans and sorting: cumulative ops, sort and its relatives, searching.

Primitives:

- ``cumsum``, ``cumprod``, ``logcumsumexp``: a scan along ``axis``; ``reverse=True`` scans
  from the end (the VJP of a forward scan is a reverse scan, so both directions are one op).
- ``argsort`` (always stable: PyTorch's ``stable=True`` order, NaN last ascending and first
  descending), ``argcummax``/``argcummin`` (the indices of ``cummax``/``cummin``),
  ``searchsorted``, ``histc``: integer results, not differentiable.

Every "values" result (``sort``, ``topk``, ``cummax``, ``kthvalue``, ``median``) is a
``gather_axis`` (`dualgraph.ops.gather`) of the input by the returned indices, so its
gradient goes to exactly those indices, as PyTorch's. The gather carries PyTorch's node
name of the op it serves (``grad_fn``), so ``sort(x).values.grad_fn`` is ``SortBackward0``.

Everything else (``sort``, ``topk``, ``kthvalue``, ``median``, ``nanmedian``, ``msort``,
``bucketize``, ``count_nonzero``) composes these.
"""

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
from .broadcast import normalize_axis, normalize_dim, shape_of
from .gather import _from_lines, _to_lines, gather_axis
from .registry import OpDef, register

# ------------------------------------------------------------------ result types
# PyTorch's torch.return_types: named tuples printing as ``sort(values=..., indices=...)``.


def _return_type(name: str) -> type:
    return namedtuple(name, ["values", "indices"])


sort_result = _return_type("sort")
topk_result = _return_type("topk")
kthvalue_result = _return_type("kthvalue")
median_result = _return_type("median")
nanmedian_result = _return_type("nanmedian")
cummax_result = _return_type("cummax")
cummin_result = _return_type("cummin")

# ----------------------------------------------------------------------- helpers


def _scan_dtype(dtype: Any) -> np.dtype:
    """PyTorch's rule for cumsum/cumprod: integer and bool inputs accumulate in int64."""
    dtype = np.dtype(dtype)
    return dtype if dtype.kind in "fc" else np.dtype(np.int64)


def _flip(a: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return np.flip(a, axis) if reverse and a.ndim else a


def _same_shape_infer(dtype_of):
    def infer(x: Any, axis: int = 0, **attrs: Any) -> tuple:
        return tuple(x.shape), dtype_of(x.dtype)

    return infer


# ------------------------------------------------------------------------ scans


def _cumsum_impl(x: np.ndarray, axis: int = 0, reverse: bool = False) -> np.ndarray:
    dtype = _scan_dtype(x.dtype)
    if x.ndim == 0:
        return x.astype(dtype)
    out = np.cumsum(_flip(x, axis, reverse), axis=axis, dtype=dtype)
    return np.ascontiguousarray(_flip(out, axis, reverse))


def _cumprod_impl(x: np.ndarray, axis: int = 0) -> np.ndarray:
    dtype = _scan_dtype(x.dtype)
    if x.ndim == 0:
        return x.astype(dtype)
    return np.cumprod(x, axis=axis, dtype=dtype)


def _check_float(name: str, dtype: Any) -> None:
    if np.dtype(dtype).kind != "f":
        raise NotImplementedError(f"{name}: not implemented for {dtype} tensors (floating "
                                  "point only, as in PyTorch)")


def _logcumsumexp_impl(x: np.ndarray, axis: int = 0, reverse: bool = False) -> np.ndarray:
    _check_float("logcumsumexp", x.dtype)  # NumPy would return floats for integers
    if x.ndim == 0:
        return x.copy()
    # logaddexp is exact for -inf and never overflows: a running log-sum-exp, as PyTorch's.
    with np.errstate(invalid="ignore"):  # a NaN propagates quietly, as in PyTorch
        out = np.logaddexp.accumulate(_flip(x, axis, reverse), axis=axis)
    return np.ascontiguousarray(_flip(out, axis, reverse))


def _float_only(name: str):
    def infer(x: Any, axis: int = 0, reverse: bool = False) -> tuple:
        _check_float(name, x.dtype)
        return tuple(x.shape), np.dtype(x.dtype)

    return infer


def _cumsum_vjp(ctx, g):
    return (cumsum_along(g, ctx.attrs["axis"], not ctx.attrs["reverse"]),)


def _cumprod_vjp(ctx, g):
    # d out_k / d x_i = prod_{j <= k, j != i} x_j (i <= k). With z the first zero of a line:
    # before z, out / x is exact (the sum of g * out from i on, over x_i); at z it is the
    # scan of x with that one zero replaced by 1; after z every term holds x_z = 0. This is
    # PyTorch's result for one zero and for several.
    (x,) = ctx.args
    axis = ctx.attrs["axis"]
    out = ctx.out
    zero = E.eq(x, 0)
    seen = cumsum_along(zero, axis)  # zeros up to and including i
    before = E.eq(seen, 0)
    first = E.eq(E.where(zero, seen, 0), 1)
    head = E.div(cumsum_along(E.mul(g, out), axis, True), E.where(before, x, 1.0))
    at_zero = cumsum_along(E.mul(g, bind(CUMPROD, E.where(first, 1.0, x), axis=axis)), axis,
                           True)
    return (E.where(before, head, E.where(first, at_zero, 0.0)),)


def _logcumsumexp_vjp(ctx, g):
    # dx_i = sum_{k >= i} g_k exp(x_i - out_k), summed in log space for the positive and
    # the negative parts of g separately (PyTorch's method): no overflow for large inputs.
    (x,) = ctx.args
    axis, reverse = ctx.attrs["axis"], ctx.attrs["reverse"]
    out = ctx.out

    def part(mask, mag):
        logg = E.where(mask, E.log(E.where(mask, mag, 1.0)), -math.inf)
        return E.exp(E.add(x, bind(LOGCUMSUMEXP, E.sub(logg, out), axis=axis,
                                   reverse=not reverse)))

    return (E.sub(part(E.gt(g, 0), g), part(E.lt(g, 0), E.neg(g))),)


CUMSUM = register(OpDef(
    "cumsum", _cumsum_impl, _same_shape_infer(_scan_dtype), _cumsum_vjp, "CumsumBackward0",
))
CUMPROD = register(OpDef(
    "cumprod", _cumprod_impl, _same_shape_infer(_scan_dtype), _cumprod_vjp, "CumprodBackward0",
    saves=(0,), saves_out=True,
))
LOGCUMSUMEXP = register(OpDef(
    "logcumsumexp", _logcumsumexp_impl, _float_only("logcumsumexp"), _logcumsumexp_vjp,
    "LogcumsumexpBackward0", saves=(0,), saves_out=True,
))


def cumsum_along(x: Any, axis: int, reverse: bool = False) -> Any:
    """The cumulative sum along a canonical ``axis``, from the end when ``reverse``."""
    return bind(CUMSUM, x, axis=axis, reverse=bool(reverse))


# ------------------------------------------------------------- sorting and indices


def _argsort_impl(x: np.ndarray, axis: int = 0, descending: bool = False) -> np.ndarray:
    if x.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)
    # Stable descending: sort the reversed line ascending and read the result backwards, so
    # ties keep their order and NaN (last ascending) comes first, as in PyTorch.
    n = x.shape[axis]
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.ascontiguousarray((n - 1) - np.flip(order, axis)).astype(np.int64, copy=False)


def _argcum_impl(better):
    def impl(x: np.ndarray, axis: int = 0) -> np.ndarray:
        if x.ndim == 0:
            return np.zeros((), np.int64)
        t = _to_lines(x, axis)
        out = np.zeros(t.shape, np.int64)
        if t.shape[1]:
            best, at = t[:, 0].copy(), np.zeros(t.shape[0], np.int64)
            for j in range(t.shape[1]):
                v = t[:, j]
                # PyTorch: a tie moves the index to the later element; a NaN always takes
                # over (and stays: nothing compares better than NaN).
                take = better(v, best) | (v != v)
                best = np.where(take, v, best)
                at = np.where(take, j, at)
                out[:, j] = at
        return _from_lines(out, x.shape, axis)

    return impl


def _index_infer(x: Any, axis: int = 0, **attrs: Any) -> tuple:
    return tuple(x.shape), np.dtype(np.int64)


ARGSORT = register(OpDef(
    "argsort", _argsort_impl, _index_infer, None, "", differentiable=False,
))
ARGCUMMAX = register(OpDef(
    "argcummax", _argcum_impl(np.greater_equal), _index_infer, None, "", differentiable=False,
))
ARGCUMMIN = register(OpDef(
    "argcummin", _argcum_impl(np.less_equal), _index_infer, None, "", differentiable=False,
))



# ----------------------------------------------------------------- searching


def _searchsorted_impl(seq: np.ndarray, values: np.ndarray, right: bool = False) -> np.ndarray:
    side = "right" if right else "left"
    if seq.ndim == 1:
        return np.asarray(np.searchsorted(seq, values, side=side), np.int64)
    # explicit sizes: -1 is ambiguous when a dim is 0
    s = seq.reshape(math.prod(seq.shape[:-1]), seq.shape[-1])
    v = values.reshape(s.shape[0], values.shape[-1])
    out = np.empty(v.shape, np.int64)
    for i in range(s.shape[0]):
        out[i] = np.searchsorted(s[i], v[i], side=side)
    return out.reshape(values.shape)


def _searchsorted_infer(seq: Any, values: Any, right: bool = False) -> tuple:
    ss, vs = tuple(seq.shape), tuple(values.shape)
    if not ss or (len(ss) > 1 and (len(vs) != len(ss) or vs[:-1] != ss[:-1])):
        raise ShapeError("searchsorted(): boundaries tensor should be 1 dimension or the first "
                         "N-1 dimensions of boundaries tensor and input value tensor must "
                         f"match, but we got boundaries tensor {list(ss)} and input value "
                         f"tensor {list(vs)}")
    return vs, np.dtype(np.int64)


SEARCHSORTED = register(OpDef(
    "searchsorted", _searchsorted_impl, _searchsorted_infer, None, "", differentiable=False,
))


def _histc_impl(x: np.ndarray, bins: int = 100, lo: float = 0.0, hi: float = 0.0) -> np.ndarray:
    _histc_infer(x, bins, lo, hi)  # NumPy would count integers, PyTorch refuses them
    flat = x.ravel()
    if lo == hi and flat.size:
        finite = flat[np.isfinite(flat)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (lo, hi)
    if lo == hi:  # PyTorch widens an empty range by one on each side
        lo, hi = lo - 1, hi + 1
    # The last bin is closed on the right; values outside [lo, hi] and NaN are skipped.
    inside = flat[(flat >= lo) & (flat <= hi)].astype(np.float64)
    where = np.minimum(((inside - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
    return np.bincount(where, minlength=bins).astype(x.dtype)


def _histc_infer(x: Any, bins: int = 100, lo: float = 0.0, hi: float = 0.0) -> tuple:
    _check_float("histc", x.dtype)
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, but got {bins}")
    if lo > hi:
        raise RuntimeError(f"histc: max must be larger than min, got min={lo} max={hi}")
    return (bins,), np.dtype(x.dtype)


HISTC = register(OpDef(
    "histc", _histc_impl, _histc_infer, None, "", differentiable=False,
))

# ------------------------------------------------------------- public functions


def _dim(name: str, x: Any, dim: Any) -> int:
    return normalize_dim(name, dim, len(shape_of(x)))


def _cast(x: Any, dtype: Any) -> Any:
    """PyTorch's ``dtype=``: the input is cast before the scan."""
    from ..dtypes import as_dtype

    if dtype is None:
        return x
    dtype = as_dtype(dtype)
    return x if dtype == x.dtype else S.astype(x, dtype)


def cumsum(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    """Cumulative sum along ``dim``; integer and bool inputs give int64 (PyTorch).
    ``dg.cumsum(x, 1)``"""
    x = _cast(input, dtype)
    return cumsum_along(x, _dim("cumsum", x, dim))


def cumprod(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    """Cumulative product along ``dim``; its gradient is exact with zeros in the input.
    ``dg.cumprod(x, 0)``"""
    x = _cast(input, dtype)
    return bind(CUMPROD, x, axis=_dim("cumprod", x, dim))


def logcumsumexp(input: Any, dim: int) -> Any:  # noqa: A002
    """``log(cumsum(exp(x)))`` along ``dim``, as a running log-add-exp (finite for large
    inputs). ``dg.logcumsumexp(x, -1)``"""
    return bind(LOGCUMSUMEXP, input, axis=_dim("logcumsumexp", input, dim), reverse=False)


def _cumext(op: OpDef, result: type, torch_name: str, x: Any, dim: int) -> Any:
    d = _dim(op.name[3:], x, dim)
    idx = bind(op, x, axis=d)
    return result(gather_axis(x, idx, d, torch_name), idx)


def cummax(input: Any, dim: int) -> Any:  # noqa: A002
    """Running max along ``dim``: ``(values, indices)``; a tie takes the later index and a
    NaN propagates (PyTorch). ``v, i = dg.cummax(x, 0)``"""
    return _cumext(ARGCUMMAX, cummax_result, "CummaxBackward0", input, dim)


def cummin(input: Any, dim: int) -> Any:  # noqa: A002
    """Running min along ``dim``: ``(values, indices)``, as `cummax`."""
    return _cumext(ARGCUMMIN, cummin_result, "CumminBackward0", input, dim)


def argsort(input: Any, dim: int = -1, descending: bool = False, *,  # noqa: A002
            stable: bool = False) -> Any:
    """Indices that sort ``dim``; always stable (ties keep their order, NaN sorts as the
    largest value), so ``stable=False`` gives one of the orders PyTorch may return."""
    return bind(ARGSORT, input, axis=_dim("argsort", input, dim), descending=bool(descending))


def sort(input: Any, dim: int = -1, descending: bool = False, *,  # noqa: A002
         stable: bool = False) -> Any:
    """``(values, indices)`` sorted along ``dim`` (stable; NaN last ascending, first
    descending). ``v, i = dg.sort(x, descending=True)``"""
    d = _dim("sort", input, dim)
    idx = bind(ARGSORT, input, axis=d, descending=bool(descending))
    return sort_result(gather_axis(input, idx, d, "SortBackward0"), idx)


def msort(input: Any) -> Any:  # noqa: A002
    """The values sorted along dim 0."""
    return sort(input, 0).values


def _slice_along(x: Any, d: int, start: int, stop: int) -> Any:
    if not shape_of(x):
        return x
    return S.getitem(x, (slice(None),) * d + (slice(start, stop),))


def _drop(x: Any, d: int, keepdim: bool) -> Any:
    shape = shape_of(x)
    if keepdim or not shape:
        return x
    return S.reshape(x, shape[:d] + shape[d + 1:])


def topk(input: Any, k: int, dim: Any = None, largest: bool = True,  # noqa: A002
         sorted: bool = True) -> Any:  # noqa: A002
    """The ``k`` largest (``largest=False``: smallest) along ``dim`` (last by default):
    ``(values, indices)``, always in sorted order. A NaN counts as the largest value."""
    d = _dim("topk", input, -1 if dim is None else dim)
    shape = shape_of(input)
    n = shape[d] if shape else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: selected index k out of range (k={k}, dimension {d} has "
                           f"size {n})")
    order = bind(ARGSORT, input, axis=d, descending=bool(largest))
    idx = _slice_along(order, d, 0, k)
    return topk_result(gather_axis(input, idx, d, "TopkBackward0"), idx)


def kthvalue(input: Any, k: int, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """The ``k``-th smallest value along ``dim`` (last by default) and its index:
    ``(values, indices)``. Among equal values the index is the stable sort's (PyTorch's
    choice among ties is unspecified)."""
    d = _dim("kthvalue", input, -1 if dim is None else dim)
    shape = shape_of(input)
    n = shape[d] if shape else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d} "
                           f"(k={k}, size {n})")
    idx = _slice_along(bind(ARGSORT, input, axis=d, descending=False), d, k - 1, k)
    idx = _drop(idx, d, keepdim)
    return kthvalue_result(gather_axis(input, idx, d, "KthvalueBackward0"), idx)


def _median(name: str, result: type, torch_name: str, x: Any, dim: Any, keepdim: bool,
            skip_nan: bool) -> Any:
    flat = dim is None
    if flat:
        x = S.reshape(x, -1)
        dim, keepdim = 0, False
    d = _dim(name, x, dim)
    shape = shape_of(x)
    n = shape[d] if shape else 1
    if n == 0:
        if flat:  # PyTorch: the median of no elements is NaN
            return E.mul(R.sum(x), math.nan)
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    order = bind(ARGSORT, x, axis=d, descending=False)
    if np.dtype(x.dtype).kind != "f":
        idx = _slice_along(order, d, (n - 1) // 2, (n - 1) // 2 + 1)
    else:
        # NaNs sort last, in index order. median: a line with a NaN gives its first NaN;
        # nanmedian: the lower median of the other values (the first NaN if all are NaN).
        nans = R.sum(E.ne(x, x), d if shape else None, keepdims=True)
        valid = E.sub(n, nans)
        if skip_nan:
            pos = E.where(E.gt(valid, 0), (valid - 1) // 2, 0)
        else:
            pos = E.where(E.gt(nans, 0), valid, (n - 1) // 2)
        idx = gather_axis(order, pos, d) if shape else S.reshape(pos, ())
    idx = _drop(idx, d, keepdim or not shape)
    values = gather_axis(x, idx, d, torch_name)
    return values if flat else result(values, idx)


def median(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """The lower median: of all elements (a tensor), or along ``dim`` as ``(values,
    indices)``. A NaN in the line makes it NaN (PyTorch); `nanmedian` skips them."""
    torch_name = "MedianBackward0" if dim is None else "MedianBackward1"
    return _median("median", median_result, torch_name, input, dim, keepdim, False)


def nanmedian(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """`median` ignoring NaN (NaN only where a line is all NaN)."""
    torch_name = "NanmedianBackward0" if dim is None else "NanmedianBackward1"
    return _median("nanmedian", nanmedian_result, torch_name, input, dim, keepdim, True)


def searchsorted(sorted_sequence: Any, values: Any, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None, sorter: Any = None) -> Any:
    """Insertion indices of ``values`` into the innermost dim of ``sorted_sequence`` (1-D,
    or with the same leading dims as ``values``); ``right=True`` or ``side="right"`` puts
    equal values after their matches. Not differentiable."""
    from ..dtypes import as_dtype

    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites")
        right = side == "right"
    if sorter is not None:
        sorted_sequence = gather_axis(sorted_sequence, sorter,
                                      len(shape_of(sorted_sequence)) - 1)
    if not hasattr(values, "shape"):
        values = np.asarray(values, np.dtype(sorted_sequence.dtype))
    out = bind(SEARCHSORTED, sorted_sequence, values, right=bool(right))
    return S.astype(out, as_dtype(np.int32)) if out_int32 else out


def bucketize(input: Any, boundaries: Any, *, out_int32: bool = False,  # noqa: A002
              right: bool = False) -> Any:
    """The bucket of each element among the 1-D ``boundaries``: ``boundaries[i-1] < x <=
    boundaries[i]`` (``right=True``: ``boundaries[i-1] <= x < boundaries[i]``)."""
    if len(shape_of(boundaries)) != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{len(shape_of(boundaries))})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def count_nonzero(input: Any, dim: Any = None) -> Any:  # noqa: A002
    """The number of nonzero elements (over ``dim``: an int or a tuple), int64."""
    axis = normalize_axis("count_nonzero", dim, len(shape_of(input)))
    return R.sum(E.ne(input, 0), axis)


def histc(input: Any, bins: int = 100, min: float = 0, max: float = 0) -> Any:  # noqa: A002
    """A histogram of ``bins`` equal bins over ``[min, max]`` (the data's range when both
    are 0); elements outside it are ignored. Not differentiable."""
    return bind(HISTC, input, bins=int(bins), lo=float(min), hi=float(max))
