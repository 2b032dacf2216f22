"""Statistics and counting as compositions: ``nansum``, ``nanmean``, ``aminmax``,
``quantile``/``nanquantile``, ``cov``, ``corrcoef``, and the eager-only ones whose result
shape depends on the data: ``mode``'s indices, ``bincount``, ``unique``,
``unique_consecutive`` (inside a compiled function each raises `EagerOnlyError`: the
call runs eagerly)."""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from ..dtypes import default_float
from ..errors import EagerOnlyError, ShapeError
from ..modes import current_trace
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .broadcast import normalize_dim
from .elementwise import ceil, floor
from .elementwise import round as round_
from .index import take_along_dim
from .scan import sort

aminmax_result = namedtuple("aminmax", ["min", "max"])
mode_result = namedtuple("mode", ["values", "indices"])


def _constant(a: np.ndarray) -> Any:
    """A NumPy result as a constant of the active mode."""
    return S.stop_gradient(a)


def _eager_only(what: str) -> None:
    if current_trace() is not None:
        # dg.compile runs the call eagerly, with a warning; dg.trace and strict=True raise.
        raise EagerOnlyError(f"{what} has a result whose shape or value depends on the "
                             "data, which a static graph cannot capture: run this part "
                             "eagerly")


def _keep(dim: Any, keepdim: bool) -> dict:
    return {"dim": dim, "keepdim": keepdim}


def nansum(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
           dtype: Any = None) -> Any:
    """`sum` treating NaN as zero."""
    x = input if dtype is None else S.astype(input, np.dtype(dtype))
    if np.dtype(x.dtype).kind == "f":
        x = E.where(E.ne(x, x), 0.0, x)
    return R.sum(x, **_keep(dim, keepdim))


def nanmean(input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
            dtype: Any = None) -> Any:
    """`mean` of the non-NaN elements (NaN where all are NaN)."""
    x = input if dtype is None else S.astype(input, np.dtype(dtype))
    if np.dtype(x.dtype).kind != "f":
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{np.dtype(x.dtype)}")
    count = R.sum(E.eq(x, x), **_keep(dim, keepdim))
    return E.div(nansum(x, dim, keepdim), S.astype(count, np.dtype(x.dtype)))


def aminmax(input: Any, *, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """``(min, max)`` of all elements, or along ``dim``, as a named tuple."""
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise TypeError(f"aminmax(): dim must be an int, got {dim!r}")
    return aminmax_result(R.amin(input, **_keep(dim, keepdim)),
                          R.amax(input, **_keep(dim, keepdim)))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(fn: str, input: Any, q: Any, dim: Any, keepdim: bool,  # noqa: A002
              interpolation: str, ignore_nan: bool) -> Any:
    dtype = np.dtype(input.dtype)
    if dtype.kind != "f":
        raise RuntimeError(f"{fn}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{fn}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest. Got {interpolation}")
    scalar_q = not hasattr(q, "shape") or len(q.shape) == 0  # a 0-d q adds no dim either
    qs = np.atleast_1d(np.asarray(q, np.float64))
    if qs.ndim > 1:
        raise RuntimeError(f"{fn}() q must be a scalar or 1D tensor")
    if np.any((qs < 0) | (qs > 1)):
        raise RuntimeError(f"{fn}() q values must be in the range [0, 1]")
    x = input
    if dim is None:
        x = S.reshape(x, (-1,))
        d = 0
    else:
        d = normalize_dim(fn, dim, len(x.shape))
        if not x.shape:
            x = S.reshape(x, (1,))
    n = x.shape[d]
    if n == 0:
        raise RuntimeError(f"{fn}() input tensor must be non-empty")
    values = sort(x, d).values  # NaN sorts last
    nan = E.ne(x, x)
    count = R.sum(E.eq(x, x), d, True) if ignore_nan else None
    # A tensor q that requires grad gets PyTorch's gradient: the linear weight between the
    # two ranks is q (n - 1) minus the lower rank, differentiable in q.
    q_rows = (S.reshape(q, (-1,)) if getattr(q, "requires_grad", False)
              and interpolation == "linear" else None)
    outs = []
    for k, qv in enumerate(qs):
        qk = float(qv) if q_rows is None else S.getitem(q_rows, k)
        if ignore_nan:
            last = S.astype(E.sub(count, 1), np.dtype(np.float64))
            last = E.maximum(last, 0.0)
            pos = E.mul(last, qk)
        else:
            pos = float(qv) * (n - 1)
        weight = None
        if q_rows is not None and not ignore_nan:
            weight = S.astype(E.sub(E.mul(qk, float(n - 1)), float(np.floor(pos))), dtype)
        outs.append(_interpolate(values, pos, d, interpolation, dtype, ignore_nan, weight))
    out = S.stack(outs, 0)
    if ignore_nan:
        allnan = E.eq(count, 0)
        out = E.where(allnan, float("nan"), out)
    else:
        anynan = R.sum(nan, d, True)
        out = E.where(E.gt(anynan, 0), float("nan"), out)
    if not keepdim:
        out = S.reshape(out, tuple(s for i, s in enumerate(out.shape) if i != d + 1))
    elif dim is None:
        out = S.reshape(out, (len(qs),) + (1,) * len(input.shape))
    if not input.shape:  # a 0-d input keeps no dim, keepdim or not
        out = S.reshape(out, (len(qs),))
    return S.reshape(out, tuple(out.shape[1:])) if scalar_q else out


def _interpolate(values: Any, pos: Any, d: int, how: str, dtype: np.dtype,
                 per_line: bool, weight: Any = None) -> Any:
    """The value at fractional rank ``pos`` (a number, or a keepdim tensor per line) of the
    sorted ``values`` along ``d``, keeping ``d`` as size 1; ``weight``, a tensor equal to
    the fraction of ``pos``, carries a gradient to ``q``."""
    if not per_line:
        lo, hi = int(np.floor(pos)), int(np.ceil(pos))
        a = S.getitem(values, (slice(None),) * d + (slice(lo, lo + 1),))
        b = S.getitem(values, (slice(None),) * d + (slice(hi, hi + 1),))
        frac = pos - lo
        if weight is not None and how == "linear":
            return E.add(a, E.mul(E.sub(b, a), weight))
        if how == "lower":
            return a
        if how == "higher":
            return b
        if how == "nearest":
            return b if np.round(pos) == hi else a
        if how == "midpoint":
            return E.add(a, E.mul(E.sub(b, a), 0.5))
        return E.add(a, E.mul(E.sub(b, a), frac)) if frac else a
    lo, hi = floor(pos), ceil(pos)
    a = take_along_dim(values, S.astype(lo, np.dtype(np.int64)), d)
    b = take_along_dim(values, S.astype(hi, np.dtype(np.int64)), d)
    if how == "lower":
        return a
    if how == "higher":
        return b
    if how == "nearest":
        return E.where(E.eq(round_(pos), hi), b, a)
    w = 0.5 if how == "midpoint" else S.astype(E.sub(pos, lo), dtype)
    return E.add(a, E.mul(E.sub(b, a), w))


def quantile(input: Any, q: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear", out: Any = None) -> Any:
    """The ``q``-quantiles (a number or a 1-D tensor in [0, 1]) of all elements or along
    ``dim``, interpolating between ranks as ``interpolation`` says. With a tensor ``q`` the
    quantiles form a new leading dim. NaN in a line gives NaN."""
    if out is not None:
        raise TypeError("quantile(): out= is not supported; assign the result instead")
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Any, q: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear", out: Any = None) -> Any:
    """`quantile` ignoring NaN (NaN only where a line is all NaN)."""
    if out is not None:
        raise TypeError("nanquantile(): out= is not supported; assign the result instead")
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def _observation_weights(name: str, w: Any, n: int, integral: bool) -> Any:
    """``fweights``/``aweights`` checked as PyTorch checks them (their sign only where the
    values are known: eagerly)."""
    shape = tuple(w.shape)
    if len(shape) > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                           f"{name} with {len(shape)} dimensions")
    numel = int(np.prod(shape))
    if numel != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                           f"observations in the input but got {numel} != {n}")
    kind = np.dtype(w.dtype).kind
    if integral and kind not in "iu":
        raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights "
                           f"with {np.dtype(w.dtype)} dtype")
    if not integral and kind != "f":
        raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got "
                           f"aweights with {np.dtype(w.dtype)} dtype")
    if current_trace() is None and bool((np.asarray(w) < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")
    return S.reshape(w, (n,))


def cov(input: Any, *, correction: int = 1, fweights: Any = None,  # noqa: A002
        aweights: Any = None) -> Any:
    """The covariance matrix of the variables in the rows of ``input`` (observations in
    the columns); a 1-D input is one variable. ``fweights`` (integer repeat counts) and
    ``aweights`` (floating importance weights) weight the observations, as NumPy's and
    PyTorch's ``cov`` do."""
    x = input if len(input.shape) == 2 else S.reshape(input, (1, -1))
    if len(input.shape) > 2:
        raise ShapeError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {len(input.shape)} dimensions")
    if np.dtype(x.dtype).kind != "f":
        x = S.astype(x, default_float())
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = _observation_weights("fweights", fweights, n, True)
    if aweights is not None:
        a = _observation_weights("aweights", aweights, n, False)
        w = a if w is None else E.mul(w, a)
    if w is None:
        centred = E.sub(x, R.mean(x, 1, True))
        c = E.div(centred @ S.transpose(centred, 0, 1), float(max(n - correction, 0)))
    else:
        if np.dtype(w.dtype) != np.dtype(x.dtype):
            w = S.astype(w, np.dtype(x.dtype))
        w_sum = R.sum(w)
        avg = E.div(R.sum(E.mul(x, w), 1, True), w_sum)
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = E.sub(w_sum, float(correction))
        else:
            a = S.astype(S.reshape(aweights, (n,)), np.dtype(x.dtype))
            norm = E.sub(w_sum, E.div(E.mul(R.sum(E.mul(w, a)), float(correction)), w_sum))
        norm = E.maximum(norm, 0.0)  # PyTorch's clamp: a non-positive count divides by 0
        centred = E.sub(x, avg)
        c = E.div(E.mul(centred, w) @ S.transpose(centred, 0, 1), norm)
    return S.reshape(c, ()) if x.shape[0] == 1 else c


def corrcoef(input: Any) -> Any:  # noqa: A002
    """Pearson's correlation coefficients of the rows of ``input``, clipped to [-1, 1]."""
    c = cov(input)
    if not c.shape:
        return E.div(c, c)
    d = E.sqrt(S.diagonal(c))
    r = E.div(E.div(c, S.reshape(d, (-1, 1))), S.reshape(d, (1, -1)))
    return E.maximum(E.minimum(r, 1.0), -1.0)


# ------------------------------------------------------ eager only (data-dependent)


def mode(input: Any, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """The most frequent value along ``dim`` (the smallest among ties) and the index of its
    last occurrence, as ``(values, indices)``; the gradient reaches that element. Eager
    only: which element is picked depends on the data."""
    _eager_only("mode")
    a = np.asarray(input)
    d = normalize_dim("mode", dim, a.ndim)
    line = np.moveaxis(a.reshape(1) if a.ndim == 0 else a, d, -1)
    flat = line.reshape(-1, line.shape[-1])
    if flat.shape[-1] == 0:
        raise IndexError("mode(): Expected reduction dim to have non-zero size")
    idx = np.empty(flat.shape[0], np.int64)
    for r, row in enumerate(flat):
        vals, counts = np.unique(row, return_counts=True)
        best = vals[np.argmax(counts)]  # np.unique sorts: the first max is the smallest
        idx[r] = np.flatnonzero(row == best)[-1]
    idx = idx.reshape(line.shape[:-1])
    x = input if a.ndim else S.reshape(input, (1,))
    indices = _constant(np.expand_dims(idx, d) if a.ndim else idx.reshape(1))
    values = take_along_dim(x, indices, d)
    if not keepdim or not a.ndim:
        shape = idx.shape if a.ndim else ()
        values = S.reshape(values, shape)
        indices = S.reshape(indices, shape)
    return mode_result(values, indices)


def bincount(input: Any, weights: Any = None, minlength: int = 0) -> Any:  # noqa: A002
    """The count of each value of a 1-D non-negative int tensor (summing ``weights`` when
    given), of length ``max(input) + 1`` or ``minlength``. Eager only."""
    _eager_only("bincount")
    a = np.asarray(input)
    if a.ndim != 1 or a.dtype.kind not in "iub":
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got a "
                           f"{a.ndim}-d {a.dtype} tensor")
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return _constant(np.bincount(a, minlength=minlength).astype(np.int64))
    w = np.asarray(weights)
    if w.shape != a.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = np.bincount(a, w.astype(np.float64), minlength=minlength)
    return _constant(out.astype(w.dtype if w.dtype.kind == "f" else np.float64))


histogram_result = namedtuple("histogram", ["hist", "bin_edges"])


def _bin_edges(a: np.ndarray, bins: Any, range_: Any) -> np.ndarray:
    """The edges PyTorch's ``histogram`` uses: ``bins`` itself when it is a tensor, else
    ``bins + 1`` evenly spaced edges over ``range`` (the data's range by default, widened
    by 0.5 on each side when it is a single point), in the input's dtype."""
    if not isinstance(bins, (int, np.integer)):
        edges = np.asarray(bins)
        if edges.ndim != 1 or edges.size < 2:
            raise RuntimeError("torch.histogram(): bins tensor should have one dimension and "
                               f"at least 2 elements, but got shape {tuple(edges.shape)}")
        return edges.astype(a.dtype)
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins}")
    if range_ is not None:
        lo, hi = float(range_[0]), float(range_[1])
    elif a.size:
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = 0.0, 1.0  # PyTorch's bins for no data
    if lo > hi:
        raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {lo:g} "
                           f"max {hi:g}")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histogram(): range of [{lo:g}, {hi:g}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    # PyTorch's linspace, in the input's dtype: the first half counted up from ``lo``, the
    # second down from ``hi``. Which bin a value on an edge lands in depends on the last bit.
    n = int(bins) + 1
    t = a.dtype.type
    step = (t(hi) - t(lo)) / t(n - 1)
    i = np.arange(n)
    return np.where(i < n // 2, t(lo) + i.astype(a.dtype) * step,
                    t(hi) - (n - 1 - i).astype(a.dtype) * step).astype(a.dtype)


def histogram(input: Any, bins: Any = 100, *, range: Any = None,  # noqa: A002
              weight: Any = None, density: bool = False) -> Any:
    """``(hist, bin_edges)``: the count (or summed ``weight``) of the elements of ``input``
    in each bin, as PyTorch's ``histogram``. ``bins`` is a bin count (equal bins over
    ``range``, the data's range by default) or a 1-D tensor of edges. A bin holds values
    from its left edge up to, not including, its right edge; the last includes both.
    ``density=True`` divides by the total and the bin widths. Not differentiable; eager
    only.

    >>> dg.histogram(dg.tensor([1.0, 2.0, 1.0]), bins=2).hist
    tensor([2., 1.])
    """
    _eager_only("histogram")
    a = np.asarray(input)
    if a.dtype.kind != "f":
        raise NotImplementedError(f"torch.histogram: not implemented for {a.dtype} input; "
                                  "it takes a floating point tensor")
    edges = _bin_edges(a, bins, range)
    flat = a.reshape(-1)
    w = None
    if weight is not None:
        w = np.asarray(weight)
        if w.shape != a.shape:
            raise RuntimeError(f"torch.histogram(): weight should have the same shape as "
                               f"input, but got {tuple(w.shape)} and {tuple(a.shape)}")
        w = w.reshape(-1)
    inside = (flat >= edges[0]) & (flat <= edges[-1])
    nbins = edges.size - 1
    where = np.searchsorted(edges, flat[inside], side="right") - 1
    where = np.minimum(where, nbins - 1)  # the last bin is closed on the right
    counts = np.bincount(where, None if w is None else w[inside].astype(np.float64),
                         minlength=nbins)
    hist = counts.astype(np.float64)
    if density:
        hist = hist / (hist.sum() * np.diff(edges.astype(np.float64)))
    return histogram_result(_constant(hist.astype(a.dtype)), _constant(edges))


def unique(input: Any, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct values of ``input`` (or distinct slices along ``dim``), sorted, with the
    inverse indices and counts on request. Eager only."""
    _eager_only("unique")
    a = np.asarray(input)
    if dim is None:
        vals, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
        inv = inv.reshape(a.shape)
    else:
        d = normalize_dim("unique", dim, a.ndim)
        vals, inv, counts = np.unique(a, return_inverse=True, return_counts=True, axis=d)
        inv = inv.reshape(-1)
    out = [_constant(vals)]
    if return_inverse:
        out.append(_constant(inv.astype(np.int64)))
    if return_counts:
        out.append(_constant(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(input: Any, return_inverse: bool = False,  # noqa: A002
                       return_counts: bool = False, dim: int | None = None) -> Any:
    """``input`` with each run of equal consecutive values (or slices along ``dim``) kept
    once, with the inverse indices and run lengths on request. Eager only."""
    _eager_only("unique_consecutive")
    a = np.asarray(input)
    if dim is None:
        flat = a.reshape(-1)
        change = np.concatenate(([True], flat[1:] != flat[:-1])) if flat.size else \
            np.zeros(0, bool)
        vals = flat[change]
        inv_shape = a.shape
    else:
        d = normalize_dim("unique_consecutive", dim, a.ndim)
        moved = np.moveaxis(a, d, 0)
        if moved.shape[0] and 0 in moved.shape[1:]:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so "
                               "unique cannot be applied")
        rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
        change = np.concatenate(([True], np.any(rows[1:] != rows[:-1], axis=1))) \
            if rows.shape[0] else np.zeros(0, bool)
        vals = np.moveaxis(moved[change], 0, d)
        inv_shape = (moved.shape[0],)
    starts = np.flatnonzero(change)
    inv = (np.cumsum(change) - 1).reshape(inv_shape)
    counts = np.diff(np.append(starts, change.size))
    out = [_constant(np.ascontiguousarray(vals))]
    if return_inverse:
        out.append(_constant(inv.astype(np.int64)))
    if return_counts:
        out.append(_constant(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)
