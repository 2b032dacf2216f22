"""The rest of PyTorch's function and ``Tensor`` method surface: small compositions
(``masked_scatter``, ``take``, ``put``, ``select``, ``sum_to_size``, ``ravel``, ``equal``,
``broadcast_tensors``, ``block_diag``, ``cartesian_prod``, ``tril_indices``, ``logspace``,
...) and `METHODS`, the table from which `ops/mixin.py` makes ``Tensor`` methods of
functions (``x.addmm(a, b)`` is ``addmm(x, a, b)``, ``x.addmm_(a, b)`` writes it back)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import default_float
from ..errors import ShapeError
from . import decomp as DC
from . import elementwise as E
from . import index as I
from . import math as M
from . import matrix as MX
from . import products as PR
from . import reduce as R
from . import scan as SC
from . import shape as S
from . import special as SP
from . import statistics as ST
from .broadcast import normalize_dim


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def masked_scatter(input: Any, mask: Any, source: Any) -> Any:  # noqa: A002
    """``input`` with the elements where ``mask`` (broadcast to its shape) is true replaced,
    in order, by the leading elements of ``source``. The gradient reaches both."""
    if np.dtype(mask.dtype) != np.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {np.dtype(mask.dtype)}")
    shape = tuple(input.shape)
    m = S.broadcast_to(mask, shape) if tuple(mask.shape) != shape else mask
    flat = S.reshape(m, (-1,))
    n_src = math.prod(source.shape)
    if n_src == 0:
        return input
    pos = E.sub(SC.cumsum(S.astype(flat, np.dtype(np.int64)), 0), 1)
    pos = M.clamp(pos, 0, n_src - 1)  # positions past the mask's count are never selected
    taken = S.reshape(I.getitem(S.reshape(source, (-1,)), pos), shape)
    return E.where(m, taken, input)


def take(input: Any, index: Any) -> Any:  # noqa: A002
    """The elements of ``input`` at the flat positions ``index`` (shape of ``index``)."""
    return I.getitem(S.reshape(input, (-1,)), index)


def put(input: Any, index: Any, source: Any, accumulate: bool = False) -> Any:  # noqa: A002
    """``input`` with the flat positions ``index`` set to (or increased by) ``source``."""
    flat = I.index_put(S.reshape(input, (-1,)), (S.reshape(index, (-1,)),),
                       S.reshape(source, (-1,)), accumulate)
    return S.reshape(flat, tuple(input.shape))


def select(input: Any, dim: int, index: int) -> Any:  # noqa: A002
    """The slice at ``index`` along ``dim`` (that dim removed): a view."""
    d = normalize_dim("select", dim, len(input.shape))
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{tuple(input.shape)} at dimension {dim}")
    return I.getitem(input, (slice(None),) * d + (int(index),))


def sum_to_size(input: Any, *size: Any) -> Any:  # noqa: A002
    """``input`` summed down to ``size`` (to which it must be expandable)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    shape = tuple(input.shape)
    lead = len(shape) - len(size)
    ok = lead >= 0 and all(s in (1, d) for s, d in zip(size, shape[lead:]))
    if not ok:
        raise RuntimeError(f"size {list(size)} is not expandable to size {list(shape)}")
    axes = tuple(range(lead)) + tuple(lead + i for i, (s, d) in
                                      enumerate(zip(size, shape[lead:])) if s == 1 and d != 1)
    out = R.sum(input, axes, keepdim=True) if axes else input
    return S.reshape(out, size) if tuple(out.shape) != size else out


def ravel(input: Any) -> Any:  # noqa: A002
    return S.reshape(input, (-1,))


def real(input: Any) -> Any:  # noqa: A002
    """``input`` itself: a real tensor is its own real part."""
    return input


def equal(input: Any, other: Any) -> bool:  # noqa: A002
    """Whether the two tensors have the same shape and elements (a Python bool)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(R.all(E.eq(input, other)))


def is_nonzero(input: Any) -> bool:  # noqa: A002
    """The truth of a one-element tensor."""
    n = math.prod(input.shape)
    if n != 1:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if n == 0
                           else "Boolean value of Tensor with more than one value is ambiguous")
    return bool(input)


def broadcast_shapes(*shapes: Any) -> tuple:
    """The shape the given shapes broadcast to."""
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"Shape mismatch: objects cannot be broadcast to a single shape: "
                         f"{shapes}") from None


def broadcast_tensors(*tensors: Any) -> tuple:
    """The tensors expanded to their common shape (views)."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(t if tuple(t.shape) == shape else S.broadcast_to(t, shape) for t in tensors)


def block_diag(*tensors: Any) -> Any:
    """The block-diagonal matrix of the given 0-, 1- or 2-D tensors."""
    mats = []
    for t in tensors:
        if len(t.shape) > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input has {len(t.shape)} dimensions")
        mats.append(S.reshape(t, (1, -1)) if len(t.shape) < 2 else t)
    if not mats:
        return S.stop_gradient(np.zeros((0, 0), np.float32))
    dtype = np.result_type(*(np.dtype(m.dtype) for m in mats))
    cols = sum(m.shape[1] for m in mats)
    rows, start = [], 0
    for m in mats:
        r, c = m.shape
        m = S.astype(m, dtype) if np.dtype(m.dtype) != dtype else m
        parts = []
        if start:
            parts.append(S.stop_gradient(np.zeros((r, start), dtype)))
        parts.append(m)
        if cols - start - c:
            parts.append(S.stop_gradient(np.zeros((r, cols - start - c), dtype)))
        rows.append(S.concatenate(parts, 1) if len(parts) > 1 else parts[0])
        start += c
    return S.concatenate(rows, 0)


def cartesian_prod(*tensors: Any) -> Any:
    """The Cartesian product of 1-D tensors, one row per combination (``itertools.product``
    order); a single tensor is returned as it is."""
    for t in tensors:
        if len(t.shape) != 1:
            raise RuntimeError("Expect a 1D vector, but got shape " + str(list(t.shape)))
    if len(tensors) == 1:
        return tensors[0]
    grids = S.meshgrid(*tensors, indexing="ij")
    return S.stack([S.reshape(g, (-1,)) for g in grids], 1)


def _tri_indices(fn: str, row: int, col: int, offset: int, dtype: Any, lower: bool) -> Any:
    from ..dtypes import as_dtype

    if row < 0 or col < 0:
        raise RuntimeError(f"{fn}: row and col must be non-negative, got {row} and {col}")
    mask = np.tri(row, col, offset, dtype=bool)
    r, c = np.nonzero(mask if lower else ~np.tri(row, col, offset - 1, dtype=bool))
    return S.stop_gradient(np.stack([r, c]).astype(as_dtype(dtype or np.int64)))


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None,
                 device: Any = None, layout: Any = None) -> Any:
    """The ``(2, n)`` row and column indices of the lower triangle of a ``row x col``
    matrix (diagonals up to ``offset``), row by row."""
    return _tri_indices("tril_indices", row, col, offset, dtype, True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None,
                 device: Any = None, layout: Any = None) -> Any:
    """The ``(2, n)`` indices of the upper triangle (diagonals from ``offset`` on)."""
    return _tri_indices("triu_indices", row, col, offset, dtype, False)


def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype: Any = None,
             device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Any:
    """``base ** linspace(start, end, steps)``, float32 by default."""
    from ..dtypes import as_dtype, check_device

    check_device(device, "logspace()")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    a = np.power(float(base), np.linspace(float(start), float(end), int(steps)))
    return S.stop_gradient(a.astype(as_dtype(dtype or default_float())))


def diagflat(input: Any, offset: int = 0) -> Any:  # noqa: A002
    """The flattened ``input`` on the ``offset`` diagonal of a square matrix."""
    return S.diag(S.reshape(input, (-1,)), offset)


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:  # noqa: N803
    """The Vandermonde matrix of the 1-D ``x``: columns ``x ** (N-1) ... x ** 0``."""
    n = x.shape[0] if N is None else int(N)
    powers = range(n) if increasing else range(n - 1, -1, -1)
    cols = [E.pow(x, p) if p else E.add(E.mul(x, 0), 1) for p in powers]
    return S.stack(cols, 1) if cols else S.stop_gradient(np.zeros((x.shape[0], 0),
                                                                  np.dtype(x.dtype)))


def _spacing(x: Any, dx: float | None, d: int, ndim: int) -> Any:
    """The sample spacing along dim ``d``: ``diff(x)`` (a 1-D ``x`` laid along ``d``) or
    the number ``dx``."""
    if x is None:
        return 1.0 if dx is None else dx
    if len(x.shape) == 1:
        shape = [1] * ndim
        shape[d] = x.shape[0] - 1
        return S.reshape(S.diff(x), tuple(shape))
    return S.diff(x, dim=d)


def _midpoints(fn: str, y: Any, dim: int) -> tuple:
    d = normalize_dim(fn, dim, len(y.shape))
    n = max(y.shape[d] - 1, 0)
    return E.mul(E.add(S.narrow(y, d, 0, n), S.narrow(y, d, 1, n)), 0.5), d


def trapezoid(y: Any, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Any:
    """The trapezoid rule along ``dim``, with sample points ``x`` or spacing ``dx``."""
    avg, d = _midpoints("trapezoid", y, dim)
    return R.sum(E.mul(avg, _spacing(x, dx, d, len(y.shape))), d)


def cumulative_trapezoid(y: Any, x: Any = None, *, dx: float | None = None,
                         dim: int = -1) -> Any:
    """The running trapezoid rule along ``dim``."""
    avg, d = _midpoints("cumulative_trapezoid", y, dim)
    return SC.cumsum(E.mul(avg, _spacing(x, dx, d, len(y.shape))), d)


def _coordinate_steps(h: Any, d: int, ndim: int, n: int) -> tuple:
    """The steps before and after each interior point and at both ends along dim ``d``:
    numbers for a uniform spacing, tensors shaped to broadcast along ``d`` for coordinates."""
    if not _is_tensor(h):
        h = float(h)
        return h, h, (h, h), (h, h)
    if len(h.shape) != 1 or h.shape[0] != n:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and "
                           f"of size {n} along dim {d}, got a spacing tensor of shape "
                           f"{tuple(h.shape)}")
    steps = S.reshape(E.sub(h[1:], h[:-1]), (n - 1,) + (1,) * (ndim - 1 - d))
    return steps[:-1], steps[1:], (steps[0], steps[1] if n > 2 else steps[0]), \
        (steps[-2] if n > 2 else steps[-1], steps[-1])


def gradient(input: Any, *, spacing: Any = 1, dim: Any = None,  # noqa: A002
             edge_order: int = 1) -> tuple:
    """The derivative of ``input`` estimated by central differences along each dim in
    ``dim`` (all by default), one-sided of order ``edge_order`` at the ends. ``spacing`` is
    one number, one number per dim, or one tensor of coordinates per dim.

    >>> dg.gradient(dg.tensor([1.0, 2.0, 4.0, 7.0]))
    (tensor([1.0000, 1.5000, 2.5000, 3.0000]),)
    """
    ndim = len(input.shape)
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got "
                           f"{edge_order}")
    dims = (tuple(range(ndim)) if dim is None
            else tuple(dim) if isinstance(dim, (list, tuple)) else (dim,))
    dims = tuple(normalize_dim("gradient", d, ndim) for d in dims)
    if spacing is None:
        spacing = 1
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                               f"a list of length {len(dims)}, but got a list of length "
                               f"{len(spacing)}")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    x = input if np.issubdtype(np.dtype(input.dtype), np.inexact) else S.astype(
        input, default_float())
    out = []
    for d, h in zip(dims, spacings):
        n = input.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
        dx1, dx2, (h0, h1), (hm, hn) = _coordinate_steps(h, d, ndim, n)

        def at(start: int, length: int, d: int = d) -> Any:
            return S.narrow(x, d, start, length)

        parts = []
        if edge_order == 1:
            parts.append((at(1, 1) - at(0, 1)) / h0)
        else:
            parts.append(at(0, 1) * (-(2 * h0 + h1) / (h0 * (h0 + h1)))
                         + at(1, 1) * ((h0 + h1) / (h0 * h1)) + at(2, 1) * (-h0 / (h1 * (h0 + h1))))
        if n > 2:
            parts.append(at(0, n - 2) * (-dx2 / (dx1 * (dx1 + dx2)))
                         + at(1, n - 2) * ((dx2 - dx1) / (dx1 * dx2))
                         + at(2, n - 2) * (dx1 / (dx2 * (dx1 + dx2))))
        if edge_order == 1:
            parts.append((at(n - 1, 1) - at(n - 2, 1)) / hn)
        else:
            parts.append(at(n - 3, 1) * (hn / (hm * (hm + hn)))
                         + at(n - 2, 1) * (-(hn + hm) / (hm * hn))
                         + at(n - 1, 1) * ((2 * hn + hm) / (hn * (hm + hn))))
        out.append(S.concatenate(parts, d))
    return tuple(out)


def _window(fn: str, make: Any) -> Any:
    def window(window_length: int, periodic: bool = True, *, dtype: Any = None,
               device: Any = None, layout: Any = None, requires_grad: bool = False,
               **kwargs: Any) -> Any:
        from ..dtypes import as_dtype, check_device

        check_device(device, f"{fn}()")
        if window_length < 0:
            raise RuntimeError(f"{fn} requires non-negative window_length, got "
                               f"window_length={window_length}")
        n = window_length + 1 if periodic and window_length > 1 else window_length
        w = make(n, **kwargs)[:window_length] if n else np.zeros(0)
        return S.stop_gradient(np.asarray(w).astype(as_dtype(dtype or default_float())))

    window.__name__ = fn
    window.__doc__ = (f"The {fn.split('_')[0]} window of ``window_length`` points; "
                      "``periodic=True`` (PyTorch's default) drops the last point of the "
                      "symmetric window one longer.")
    return window


hann_window = _window("hann_window", lambda n: np.hanning(n) if n > 1 else np.ones(n))
hamming_window = _window("hamming_window", lambda n, alpha=0.54, beta=0.46: (
    alpha - beta * np.cos(2 * np.pi * np.arange(n) / (n - 1)) if n > 1 else np.ones(n)))
blackman_window = _window("blackman_window", lambda n: np.blackman(n) if n > 1 else np.ones(n))
bartlett_window = _window("bartlett_window", lambda n: np.bartlett(n) if n > 1 else np.ones(n))
kaiser_window = _window("kaiser_window", lambda n, beta=12.0: np.kaiser(n, beta) if n > 1
                        else np.ones(n))


def unravel_index(indices: Any, shape: Any) -> tuple:
    """The coordinates of flat ``indices`` in an array of ``shape``, one tensor per dim."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not hasattr(indices, "shape"):
        indices = S.stop_gradient(np.asarray(indices, np.int64))
    if np.dtype(indices.dtype).kind not in "iu":
        raise TypeError("unravel_index: expected 'indices' to be an integer tensor")
    out, rest = [], indices
    for size in reversed(shape):
        out.append(E.remainder(rest, size))
        rest = E.floor_divide(rest, size)
    return tuple(reversed(out))


def combinations(input: Any, r: int = 2, with_replacement: bool = False) -> Any:  # noqa: A002
    """The ``r``-element combinations of the 1-D ``input``'s elements, one per row, in
    ``itertools`` order."""
    import itertools

    if len(input.shape) != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    n = input.shape[0]
    make = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    idx = np.asarray(list(make(range(n), r)) if r > 0 else [], np.int64).reshape(-1, max(r, 1))
    if idx.shape[0] == 0:  # PyTorch's empty result is (0, r), or (0,) for r = 0
        empty = I.getitem(input, S.stop_gradient(np.zeros(0, np.int64)))
        return S.reshape(empty, (0, r)) if r > 0 else empty
    return I.getitem(input, S.stop_gradient(idx))


def fill_diagonal(input: Any, fill_value: Any, wrap: bool = False) -> Any:  # noqa: A002
    """``input`` (at least 2-D, all dims equal beyond 2-D) with its main diagonal set to
    ``fill_value``; ``wrap`` continues below a tall matrix every ``cols + 1`` rows."""
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    if len(shape) == 2:
        rows, cols = shape
        n = min(rows, cols)
        r = list(range(n))
        c = list(range(n))
        if wrap and rows > cols:
            start = cols + 1
            while start < rows:
                extra = min(cols, rows - start)
                r += list(range(start, start + extra))
                c += list(range(extra))
                start += cols + 1
        idx = (S.stop_gradient(np.asarray(r, np.int64)), S.stop_gradient(np.asarray(c, np.int64)))
    else:
        d = np.arange(shape[0], dtype=np.int64)
        idx = tuple(S.stop_gradient(d) for _ in shape)
    values = S.stop_gradient(np.asarray(fill_value, np.dtype(input.dtype)))
    return I.index_put(input, idx, values)


def _const_index(a: np.ndarray) -> Any:
    return S.stop_gradient(np.asarray(a, np.int64))


def _check_scatter_src(fn: str, src: Any, expected: tuple, what: str) -> None:
    if tuple(src.shape) != tuple(expected):
        raise RuntimeError(f"{fn}: expected src to have a size equal to the {what} of self. "
                           f"src size = {list(src.shape)}, {what} size = {list(expected)}")


def slice_scatter(input: Any, src: Any, dim: int = 0, start: Any = None,  # noqa: A002
                  end: Any = None, step: int = 1) -> Any:
    """``input`` with ``input[..., start:end:step, ...]`` (along ``dim``) replaced by ``src``:
    a new tensor; the gradient reaches both.

    >>> dg.slice_scatter(dg.zeros(4), dg.ones(2), start=2).tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    d = normalize_dim("slice_scatter", dim, max(len(input.shape), 1))
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    pos = np.arange(input.shape[d])[slice(start, end, step)]
    expected = tuple(input.shape[:d]) + (len(pos),) + tuple(input.shape[d + 1:])
    _check_scatter_src("slice_scatter", src, expected, "slice")
    return I.index_copy(input, d, _const_index(pos), src)


def select_scatter(input: Any, src: Any, dim: int, index: int) -> Any:  # noqa: A002
    """``input`` with the slice ``index`` along ``dim`` replaced by ``src`` (a new tensor).

    >>> dg.select_scatter(dg.zeros(2, 2), dg.ones(2), 0, 1).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    d = normalize_dim("select_scatter", dim, len(input.shape))
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select_scatter(): index {index} out of range for tensor of size "
                         f"{tuple(input.shape)} at dimension {dim}")
    _check_scatter_src("select_scatter", src, tuple(input.shape[:d] + input.shape[d + 1:]),
                       "selected slice")
    return I.index_copy(input, d, _const_index([index % size]), src.unsqueeze(d))


def diagonal_scatter(input: Any, src: Any, offset: int = 0, dim1: int = 0,  # noqa: A002
                     dim2: int = 1) -> Any:
    """``input`` with its diagonal (as `diagonal` with the same arguments gives it)
    replaced by ``src`` (a new tensor).

    >>> dg.diagonal_scatter(dg.zeros(2, 2), dg.ones(2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    nd = len(input.shape)
    d1 = normalize_dim("diagonal_scatter", dim1, nd)
    d2 = normalize_dim("diagonal_scatter", dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    _check_scatter_src("diagonal_scatter", src, tuple(S.diagonal(input, offset, d1, d2).shape),
                       "diagonal")
    rows, cols = input.shape[d1], input.shape[d2]
    k = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    r = np.arange(k) + max(-offset, 0)
    c = np.arange(k) + max(offset, 0)
    moved = S.movedim(input, (d1, d2), (0, 1))
    out = I.index_put(moved, (_const_index(r), _const_index(c)), S.movedim(src, -1, 0))
    return S.movedim(out, (0, 1), (d1, d2))


def as_strided_scatter(input: Any, src: Any, size: Any, stride: Any,  # noqa: A002
                       storage_offset: Any = None) -> Any:
    """``input`` with the elements `as_strided` with the same arguments views replaced by
    ``src`` (a new tensor; ``input`` is read as contiguous)."""
    size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
    _check_scatter_src("as_strided_scatter", src, size, "view")
    n = math.prod(input.shape)
    offset = int(storage_offset or 0)
    last = offset + sum((s - 1) * st for s, st in zip(size, stride)) if 0 not in size else 0
    if min(size + stride, default=0) < 0 or last >= max(n, 1) and 0 not in size:
        raise RuntimeError(f"as_strided_scatter: size {list(size)}, stride {list(stride)} and "
                           f"storage offset {offset} reach outside the {n} elements of input")
    flat = np.arange(max(n, 1), dtype=np.int64)[offset:]
    pos = np.lib.stride_tricks.as_strided(flat, size, tuple(st * 8 for st in stride))
    return put(input, _const_index(pos.copy()), src)


_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def index_reduce(input: Any, dim: int, index: Any, source: Any, reduce: str, *,  # noqa: A002
                 include_self: bool = True) -> Any:
    """``input`` with ``source``'s slices reduced (``"prod"``, ``"mean"``, ``"amax"``,
    ``"amin"``) into the slices ``index`` (a vector) along ``dim``; with
    ``include_self=False`` the slices written to start from ``source`` alone."""
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    nd = len(input.shape)
    d = normalize_dim("index_reduce", dim, max(nd, 1))
    if len(index.shape) > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if len(source.shape) != nd or (nd and source.shape[d] != math.prod(index.shape)):
        raise RuntimeError(f"index_reduce_(): source {list(source.shape)} must have the "
                           f"dimensions of self {list(input.shape)} and the index's length "
                           f"along dim {dim}")
    if not nd:
        return I.scatter_reduce(input, 0, index, source, reduce, include_self=include_self)
    lead = [1] * nd
    lead[d] = -1
    full = S.broadcast_to(S.reshape(index, tuple(lead)), tuple(source.shape))
    return I.scatter_reduce(input, d, full, source, reduce, include_self=include_self)


def prelu(input: Any, weight: Any) -> Any:  # noqa: A002
    """``x`` where positive, else ``weight * x``; a weight of ``C`` values applies per
    channel (dim 1). ``F.prelu(x, w)``"""
    w = weight
    if w.ndim > 1:
        raise RuntimeError(f"prelu: weight must be 0-D or 1-D, got shape {tuple(w.shape)}")
    if w.ndim == 0:
        pass  # one slope, broadcast as it is
    elif w.shape[0] != 1:
        if input.ndim < 2 or input.shape[1] != w.shape[0]:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {w.shape[0]} and channel size = "
                               f"{input.shape[1] if input.ndim >= 2 else 1}.")
        w = S.reshape(w, (w.shape[0],) + (1,) * (input.ndim - 2))
    else:  # one slope: a 0-d input stays 0-d
        w = S.reshape(w, ())
    return E.where(E.gt(input, 0), input, E.mul(w, input))


def hardshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0 (a NaN stays NaN, with no gradient)."""
    return E.where(E.gt(E.abs(input), lambd), input,
                   E.where(E.eq(input, input), 0.0, S.stop_gradient(input)))


def _split_by(fn: str, dim: int, min_dim: int) -> Any:
    def split(input: Any, indices_or_sections: Any) -> tuple:  # noqa: A002
        if len(input.shape) < min_dim:
            raise RuntimeError(f"torch.{fn} requires a tensor with at least {min_dim} "
                               f"dimension, but got a tensor with {len(input.shape)} dimensions!")
        d = 0 if fn == "hsplit" and len(input.shape) == 1 else dim
        if isinstance(indices_or_sections, (int, np.integer)) and \
                input.shape[d] % indices_or_sections:
            raise RuntimeError(f"torch.{fn} attempted to split along dimension {d}, but the "
                               f"size of the dimension {input.shape[d]} is not divisible by "
                               f"the split_size {indices_or_sections}!")
        return S.tensor_split(input, indices_or_sections, d)
    split.__name__ = fn
    split.__doc__ = f"`tensor_split` along dim {dim} (sections must divide it evenly)."
    return split


hsplit = _split_by("hsplit", 1, 1)
vsplit = _split_by("vsplit", 0, 2)
dsplit = _split_by("dsplit", 2, 3)


def split_with_sizes(input: Any, split_sizes: Any, dim: int = 0) -> tuple:  # noqa: A002
    return S.split(input, list(split_sizes), dim)


# ------------------------------------------------------------------ the _copy family
# PyTorch's ``<view>_copy`` functions: the view's values in a tensor of their own, sharing
# no memory with ``input`` (the spellings functionalized and exported programs use).


def _copy_of(view: Any, name: str) -> Any:
    def copy(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        out = view(input, *args, **kwargs)
        if isinstance(out, (list, tuple)):
            return tuple(o.clone() for o in out)
        return out.clone()

    copy.__name__ = copy.__qualname__ = name
    copy.__doc__ = (f"``{name[:-5]}`` of ``input`` as a new tensor that shares no memory "
                    f"with it.\n\n    >>> dg.{name}(x, ...)")
    return copy


def _expand(input: Any, size: Any, *, implicit: bool = False) -> Any:  # noqa: A002
    return input.expand(*size) if isinstance(size, (list, tuple)) else input.expand(size)


def _slice(input: Any, dim: int = 0, start: Any = None, end: Any = None,  # noqa: A002
           step: int = 1) -> Any:
    d = normalize_dim("slice_copy", dim, len(input.shape))
    return input[(slice(None),) * d + (slice(start, end, step),)]


def _view_as_real(input: Any) -> Any:  # noqa: A002
    from .complex import view_as_real

    return view_as_real(input)


def _view_as_complex(input: Any) -> Any:  # noqa: A002
    from .complex import view_as_complex

    return view_as_complex(input)


# Each view written out as its method call, so tools/optable.py reads the ops it runs.
_VIEWS: dict[str, Any] = {
    "alias": lambda x: x,
    "as_strided": lambda x, *a, **k: x.as_strided(*a, **k),
    "detach": lambda x: x.detach(),
    "diagonal": lambda x, *a, **k: x.diagonal(*a, **k),
    "expand": _expand,
    "narrow": lambda x, *a, **k: x.narrow(*a, **k),
    "permute": lambda x, *a, **k: x.permute(*a, **k),
    "select": lambda x, *a, **k: x.select(*a, **k),
    "slice": _slice,
    "split": lambda x, *a, **k: x.split(*a, **k),
    "split_with_sizes": split_with_sizes,
    "squeeze": lambda x, *a, **k: x.squeeze(*a, **k),
    "t": lambda x: x.t(),
    "transpose": lambda x, *a, **k: x.transpose(*a, **k),
    "unbind": lambda x, *a, **k: x.unbind(*a, **k),
    "unfold": lambda x, *a, **k: x.unfold(*a, **k),
    "unsqueeze": lambda x, *a, **k: x.unsqueeze(*a, **k),
    "view": lambda x, *a, **k: x.view(*a, **k),
    "view_as_complex": _view_as_complex,
    "view_as_real": _view_as_real,
}
COPIES: dict[str, Any] = {f"{n}_copy": _copy_of(v, f"{n}_copy") for n, v in _VIEWS.items()}


# ---------------------------------------------------------------- Tensor methods
# name -> function whose first argument is the tensor. `ops/mixin.py` installs each as a
# method (unless the class defines it), and ``name_`` as its in-place form where PyTorch
# has one (the names in `INPLACE`).
METHODS: dict[str, Any] = {
    "narrow_copy": COPIES["narrow_copy"],
    "addbmm": PR.addbmm, "addcdiv": M.addcdiv, "addcmul": M.addcmul, "addmm": PR.addmm,
    "addmv": PR.addmv, "addr": PR.addr, "baddbmm": PR.baddbmm, "dot": PR.dot,
    "inner": PR.inner, "mv": PR.mv, "vdot": PR.vdot,
    "hypot": M.hypot, "nan_to_num": M.nan_to_num, "signbit": M.signbit,
    "heaviside": M.heaviside, "fmax": M.fmax, "fmin": M.fmin, "float_power": M.float_power,
    "logaddexp2": M.logaddexp2, "xlogy": M.xlogy, "sinc": M.sinc, "deg2rad": M.deg2rad,
    "rad2deg": M.rad2deg, "clamp_min": M.clamp_min, "clamp_max": M.clamp_max,
    "isposinf": M.isposinf, "isneginf": M.isneginf, "isreal": M.isreal, "ldexp": M.ldexp,
    "lgamma": SP.lgamma, "digamma": SP.digamma, "erfc": SP.erfc, "erfinv": SP.erfinv,
    "i0": SP.i0, "logit": SP.logit, "mvlgamma": SP.multigammaln,
    "polygamma": lambda x, n: SP.polygamma(n, x),
    "det": MX.det, "logdet": MX.logdet, "slogdet": MX.slogdet, "inverse": MX.inv,
    "matrix_power": MX.matrix_power, "norm": MX.torch_norm, "renorm": MX.renorm,
    "dist": PR.dist,
    "cholesky": DC.torch_cholesky, "cholesky_solve": DC.cholesky_solve,
    "cholesky_inverse": DC.cholesky_inverse, "svd": DC.torch_svd, "qr": DC.torch_qr,
    "triangular_solve": DC.triangular_solve, "pinverse": DC.pinverse,
    "matrix_exp": DC.matrix_exp, "lu": DC.torch_lu,
    "lu_solve": DC.torch_lu_solve,
    "nansum": ST.nansum, "nanmean": ST.nanmean, "aminmax": ST.aminmax, "quantile": ST.quantile,
    "nanquantile": ST.nanquantile, "mode": ST.mode, "bincount": ST.bincount,
    "histogram": ST.histogram,
    "unique": ST.unique, "unique_consecutive": ST.unique_consecutive,
    "masked_scatter": masked_scatter, "take": take, "put": put, "select": select,
    "sum_to_size": sum_to_size, "ravel": ravel, "equal": equal, "is_nonzero": is_nonzero,
    "diagflat": diagflat, "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit,
    "split_with_sizes": split_with_sizes, "cov": ST.cov, "corrcoef": ST.corrcoef,
    "slice_scatter": slice_scatter, "select_scatter": select_scatter,
    "diagonal_scatter": diagonal_scatter, "as_strided_scatter": as_strided_scatter,
    "index_reduce": index_reduce, "prelu": prelu, "hardshrink": hardshrink,
    # in-place forms of existing methods (below, in INPLACE)
    "eq": E.eq, "ne": E.ne, "lt": E.lt, "le": E.le, "gt": E.gt, "ge": E.ge,
    "logical_and": M.logical_and, "logical_or": M.logical_or, "logical_xor": M.logical_xor,
    "logical_not": M.logical_not, "bitwise_and": E.bitwise_and, "bitwise_or": E.bitwise_or,
    "bitwise_xor": E.bitwise_xor, "bitwise_not": E.bitwise_not, "pow": M.pow,
    "remainder": E.remainder, "fmod": E.fmod, "copysign": E.copysign, "atan2": E.atan2,
    "floor_divide": E.floor_divide,
    # PyTorch's alternative names of existing methods
    "absolute": E.abs, "arccos": E.acos, "arcsin": E.asin, "arctan": E.atan,
    "arccosh": E.acosh, "arcsinh": E.asinh, "arctanh": E.atanh, "arctan2": E.atan2,
    "fix": E.trunc, "negative": E.neg, "positive": lambda x: x, "sgn": E.sign,
    "multiply": M.mul, "divide": M.div, "true_divide": M.div, "subtract": M.sub,
    "greater": E.gt, "greater_equal": E.ge, "less": E.lt, "less_equal": E.le,
    "not_equal": E.ne, "maximum": E.maximum, "minimum": E.minimum,
    "where": lambda x, condition, y: I.where(condition, x, y),
    "fill_diagonal": fill_diagonal,
}
# The in-place forms ``name_`` PyTorch has (each computes, then writes back with copy_).
INPLACE = (
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "pow",
    "remainder", "fmod", "copysign", "atan2", "floor_divide", "fill_diagonal",
    "addbmm", "addcdiv", "addcmul", "addmm", "addmv", "addr", "baddbmm", "hypot",
    "nan_to_num", "heaviside", "float_power", "xlogy", "sinc", "deg2rad", "rad2deg",
    "clamp_min", "clamp_max", "ldexp", "lgamma", "digamma", "erfc", "erfinv", "i0", "logit",
    "mvlgamma", "polygamma", "renorm", "masked_scatter", "put", "absolute", "arccos", "arcsin",
    "arctan", "arccosh", "arcsinh", "arctanh", "arctan2", "fix", "negative", "sgn", "multiply",
    "divide", "true_divide", "subtract", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "index_reduce",
)


def function_of_method(name: str) -> Any:
    """``dg.<name>(input, ...)``: the tensor method ``name`` as a function (``torch.t``,
    ``torch.squeeze``, ``torch.clone``, ...)."""
    def function(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        method = getattr(type(input), name, None)
        if method is None:
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not "
                            f"{type(input).__name__}")
        return method(input, *args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``input.{name}(...)`` (see the tensor method)."
    return function


# The tensor methods PyTorch also has as functions of the same signature.
FUNCTION_METHODS = (
    "clone", "detach", "detach_", "numel", "permute", "squeeze", "unsqueeze", "t", "eq", "ne",
    "ge", "gt", "le", "lt", "neg", "is_same_size", "broadcast_to", "fill_", "zero_",
    "index_put_", "clamp_", "clip_", "masked_scatter", "relu_", "sigmoid_", "tanh_", "exp_",
    "log_", "sqrt_", "abs_", "sin_", "cos_", "neg_", "abs_", "ceil_", "floor_", "round_",
    "trunc_", "frac_", "rsqrt_", "square_", "reciprocal_", "erf_", "exp2_", "expm1_",
    "log10_", "log1p_", "log2_", "sinh_", "cosh_", "tan_", "asin_", "acos_", "atan_",
    "asinh_", "acosh_", "atanh_", "sign", "get_device", "swapaxes", "conj", "resolve_conj",
    "resolve_neg", "is_conj", "is_neg", "is_inference", "adjoint", "cov", "corrcoef",
    "nanmean", "nansum", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
    "arctanh_", "deg2rad_", "erfc_", "fix_", "gcd_", "lcm_", "ldexp_", "logit_", "nan_to_num_",
    "negative_", "rad2deg_", "sinc_", "xlogy_", "resize_as_",
)


class _AcceptInputKeyword:
    """Wraps a function whose first parameter is not named ``input`` (``x``, ``a``, ...)
    so that PyTorch's keyword spellings ``input=`` (and ``other=`` for the second) work."""

    FIRST = frozenset({"x", "a", "y", "self", "start"})

    def applies(self, fn: Any) -> bool:
        import types

        if getattr(fn, "accepts_input_keyword", False):  # `with_out` handles them already
            return False
        code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
        return (isinstance(fn, types.FunctionType) and code is not None
                and code.co_argcount > 0 and code.co_varnames[0] in self.FIRST)

    def __call__(self, fn: Any) -> Any:
        import functools

        from .composite import tensor_keywords

        inner = getattr(fn, "__wrapped__", fn)
        names = inner.__code__.co_varnames[:inner.__code__.co_argcount]
        second = names[1] if len(names) > 1 else None

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                args = tensor_keywords(args, kwargs, second)
            return fn(*args, **kwargs)

        wrapper.accepts_input_keyword = True
        return wrapper


accept_input_keyword = _AcceptInputKeyword()
