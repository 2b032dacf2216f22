"""Advanced indexing and the gather/scatter ops of PyTorch's surface.

Every op here is a composition of the primitives in `dualgraph.ops.gather`:

- ``index`` / ``index_put`` carry ``x[idx]`` and ``x[idx] = v`` with tensor indices,
  ``index_put``, ``index_select``, ``index_add``/``index_copy``/``index_fill``,
  ``scatter``/``scatter_add`` (whole-tensor indices made into per-dim index arrays),
  ``masked_select`` and ``embedding``;
- ``gather_axis`` carries ``gather`` and ``take_along_dim`` (as it does the values of
  ``max(dim)``/``min(dim)`` and of the sort family in `dualgraph.ops.reduce` and
  `dualgraph.ops.scan`); ``scatter_reduce``'s prod/amax/amin fold over a dense mask.

``x[idx]`` first applies the basic part of the index (ints, slices, None) as a view, as
PyTorch does, then ``index`` on that view. An ``api`` attribute names the public op that
made a node, only so that ``grad_fn.name()`` is PyTorch's (``GatherBackward0``). Ops whose
output shape depends on the data (``nonzero``, ``masked_select``, ``x[mask]`` with a
traced mask) run eagerly and raise `TraceError` in a traced function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._location import source_line, user_location
from ..errors import EagerOnlyError, ShapeError, TraceError
from ..modes import bind, current_mode, current_trace
from . import elementwise as E
from . import shape as S
from .broadcast import normalize_dim
from .gather import INDEX, INDEX_PUT, _check_bounds, gather_axis

_INT64 = np.dtype(np.int64)

# --------------------------------------------------------------------- index parsing


def _is_tensor(e: Any) -> bool:
    from .mixin import TensorOps

    return isinstance(e, TensorOps)


def _concrete(v: Any) -> Any:
    """An eager tensor's data (a NumPy array); a traced tensor stays symbolic."""
    if _is_tensor(v) and current_trace() is None:
        return np.asarray(v)
    return v


class _Adv:
    """An advanced entry of an index: int indices or a bool mask, concrete (a NumPy array)
    or symbolic (a tensor of the active trace)."""

    __slots__ = ("mask", "value")

    def __init__(self, value: Any, mask: bool) -> None:
        self.value = value
        self.mask = mask

    @property
    def ndim(self) -> int:
        return len(self.value.shape) if self.mask else 1


def _entry(e: Any, tracing: bool) -> Any:
    """One index entry as an int, slice, None, Ellipsis or `_Adv`."""
    if e is None or e is Ellipsis or isinstance(e, slice):
        return e
    if isinstance(e, (bool, np.bool_)):
        return _Adv(np.asarray(bool(e)), True)
    if isinstance(e, (int, np.integer)):
        return int(e)
    if _is_tensor(e):
        kind = np.dtype(e.dtype).kind
        if kind == "b":
            return _Adv(_mask_value(e, tracing), True)
        if kind not in "iu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if tracing:
            return _Adv(e, False)
        a = np.asarray(e)
        return int(a) if a.ndim == 0 else _Adv(a.astype(np.int64), False)
    a = np.asarray(e)
    if a.dtype == np.bool_:
        return _Adv(a, True)
    if a.dtype.kind in "iu":
        return _Adv(a.astype(np.int64), False)
    if a.size == 0:  # [] is an empty int index (NumPy would make it float64)
        return _Adv(a.astype(np.int64), False)
    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")


def _mask_value(m: Any, tracing: bool) -> Any:
    """A bool mask tensor's value when it can be read (an eager tensor, also while tracing:
    a compiled call then guards on it), else the traced tensor itself."""
    if not tracing:
        return np.asarray(m)
    try:
        a = np.array(m, copy=True)
    except TraceError:
        # A traced mask made from constants only (``eye(n, dtype=bool).roll(n // 2, 0)``)
        # is the same on every call: its value fixes the result's shape.
        folded = current_trace().constant_value(m)
        return m if folded is None else folded
    trace = current_trace()
    if trace is not None:
        trace.guard_value(lambda: (np.shape(m), np.asarray(m).tobytes()), (a.shape, a.tobytes()),
              "a boolean index mask changed", m)
    return a


def _as_tuple(index: Any) -> tuple:
    if type(index) is tuple:
        return index
    if type(index) is list and any(
        e is None or e is Ellipsis or isinstance(e, (list, tuple, slice, np.ndarray))
        or _is_tensor(e) for e in index
    ):
        return tuple(index)  # PyTorch still reads such a list as a tuple of indices
    return (index,)


def parse_index(x: Any, index: Any) -> tuple[tuple, list]:
    """Split ``index`` as PyTorch applies it: ``(basic, adv)``, where ``basic`` (ints,
    slices, None) gives a view of ``x`` and ``adv`` lists ``(dim of that view, entry)``.

    Concrete bool masks become their nonzero positions; concrete int indices are checked
    (IndexError) and made non-negative. A traced mask stays an `_Adv` with ``mask``."""
    shape = tuple(x.shape)
    tracing = current_trace() is not None
    entries = [_entry(e, tracing) for e in _as_tuple(index)]
    used = sum(e.ndim if isinstance(e, _Adv) else 1 for e in entries
               if e is not None and e is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    if sum(1 for e in entries if e is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in entries:
        k = entries.index(Ellipsis)
        entries[k:k + 1] = [slice(None)] * (len(shape) - used)
    basic: list = []
    adv: list = []
    src = view = 0
    for e in entries:
        if e is None:
            basic.append(None)
            view += 1
        elif isinstance(e, slice):
            basic.append(e)
            src += 1
            view += 1
        elif isinstance(e, int):
            basic.append(e)
            src += 1
        elif not e.mask:
            if isinstance(e.value, np.ndarray):
                _check_bounds(e.value, shape[src], src)
                e = _Adv(e.value % max(shape[src], 1), False)
            basic.append(slice(None))
            adv.append((view, e))
            src += 1
            view += 1
        else:
            m = e.value
            k = len(m.shape)
            if tuple(m.shape) != shape[src:src + k]:
                at = next((j for j in range(k) if m.shape[j] != shape[src + j]), 0)
                raise IndexError(f"The shape of the mask {list(m.shape)} at index {at} does "
                                 f"not match the shape of the indexed tensor {list(shape)} "
                                 f"at index {src + at}")
            if not isinstance(m, np.ndarray):
                basic.extend([slice(None)] * k)
                adv.append((view, e))
            elif k == 0:  # True adds a dim of 1, False a dim of 0
                basic.append(None)
                adv.append((view, _Adv(np.zeros(int(m), np.int64), False)))
                view += 1
            else:
                basic.extend([slice(None)] * k)
                adv.extend((view + j, _Adv(nz, False)) for j, nz in enumerate(np.nonzero(m)))
            src += k
            view += k
    return tuple(basic), adv


def _basic_view(x: Any, basic: tuple) -> Any:
    if all(isinstance(e, slice) and e == slice(None) for e in basic):
        return x
    return S.getitem(x, basic)


def _stack_indices(adv: list) -> tuple[Any, tuple]:
    """The advanced entries as one int64 ``(k,) + B`` index and their dims."""
    dims = tuple(d for d, _ in adv)
    values = [e.value for _, e in adv]
    shapes = [tuple(v.shape) for v in values]
    try:
        bshape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = ", ".join(str(list(s)) for s in shapes)
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {listed}") from None
    if all(isinstance(v, np.ndarray) for v in values):
        return np.stack([np.broadcast_to(v, bshape) for v in values]), dims
    parts = [v if _is_tensor(v) and v.dtype == _INT64 else S.astype(v, _INT64) for v in values]
    if len(parts) == 1:
        return S.reshape(parts[0], (1,) + bshape), dims
    return S.stack([S.broadcast_to(v, bshape) for v in parts]), dims


def _data_dependent(what: str, instead: str) -> TraceError:
    """An op whose result's shape depends on the values: `EagerOnlyError`, so that
    ``dg.compile`` runs the call eagerly with a warning (where ``torch.compile`` breaks
    the graph) and ``dg.trace`` and ``strict=True`` raise it."""
    loc = user_location()
    code = source_line(loc)
    where = f"{loc}: " if loc else ""
    shown = f"\n    {code}\n" if code else " "
    return EagerOnlyError(f"{where}{what} has a shape that depends on the data, which a "
                          f"static graph cannot capture.{shown}Use {instead} instead (a fixed "
                          "shape), or run this part eagerly.")


_MASK_INSTEAD = "x.masked_fill(mask, value) or dg.where(mask, x, y)"


def getitem(x: Any, index: Any) -> Any:
    """``x[index]`` with PyTorch's rules: ints, slices, None and ``...`` give a view; int
    tensors, arrays, lists and bool masks index (a copy, whose gradient scatter-adds)."""
    basic, adv = parse_index(x, index)
    y = _basic_view(x, basic)
    if not adv:
        return y
    if any(e.mask for _, e in adv):
        raise _data_dependent("indexing with a boolean mask tensor", _MASK_INSTEAD)
    idx, dims = _stack_indices(adv)
    return bind(INDEX, y, idx, dims=dims)


def _value(v: Any, dtype: np.dtype) -> Any:
    """The right-hand side of a write, as a literal or a tensor of ``dtype``."""
    if isinstance(v, (bool, int, float, np.number, np.bool_)):
        return v.item() if isinstance(v, np.generic) else v
    if not _is_tensor(v):
        v = np.asarray(v)
        if v.ndim == 0:
            return v.item()
        return v.astype(dtype)
    if v.dtype != dtype:
        v = S.astype(v, dtype)
    return v


def _strip_ones(v: Any) -> Any:
    """Leading size-1 dims of a written value dropped (PyTorch lets them exceed the target)."""
    shape = tuple(getattr(v, "shape", ()))
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return S.reshape(v, shape[k:]) if k else v


def setitem(x: Any, index: Any, value: Any) -> None:
    """``x[index] = value`` with advanced entries: an in-place ``index_put`` on ``x`` (or on
    the view its basic part makes), through the mode's in-place machinery."""
    basic, adv = parse_index(x, index)
    y = _basic_view(x, basic)
    if not adv:
        current_mode().inplace(y, None, value)
        return
    v = _strip_ones(_value(value, np.dtype(y.dtype)))
    masks = [(d, e) for d, e in adv if e.mask]
    if masks:
        if len(adv) != 1:
            raise _data_dependent("a boolean mask tensor beside other index tensors",
                                  _MASK_INSTEAD)
        new = _masked_write(y, masks[0][0], masks[0][1].value, v)
    else:
        idx, dims = _stack_indices(adv)
        new = bind(INDEX_PUT, y, v, idx, dims=dims)
    current_mode().assign(y, new)


def _masked_write(y: Any, d: int, m: Any, v: Any) -> Any:
    """``y[..., mask, ...] = v`` (traced mask) as a ``where``, of fixed shape. A value that
    spans the masked elements (``(n,) + trailing dims``, one row per True, in order) is
    spread over the mask's positions first: the k-th True element takes row k, found as
    the running count of Trues. The graph cannot check that the mask holds ``n`` Trues,
    as eager mode does."""
    from .scan import cumsum

    post = tuple(y.shape)[d + len(m.shape):]
    mb = S.reshape(m, tuple(m.shape) + (1,) * len(post))
    vs = tuple(getattr(v, "shape", ()))
    if len(vs) > len(post) + 1 or (len(vs) == len(post) + 1 and d):
        raise _data_dependent("writing a tensor through a boolean mask", _MASK_INSTEAD)
    if len(vs) == len(post) + 1:
        if vs[0] == 0:
            return y
        row = E.maximum(cumsum(S.reshape(m, (-1,)), 0) - 1, 0)
        spread = S.reshape(index_select(v, 0, row), tuple(m.shape) + vs[1:])
        return E.where(mb, spread, y)
    return E.where(mb, v, y)


# ------------------------------------------------------------------- index_put & co


def index_put(x: Any, indices: Any, values: Any, accumulate: bool = False) -> Any:
    """``torch.index_put``: ``x`` with ``x[indices]`` set to (or, with ``accumulate``,
    increased by) ``values``; ``indices`` is a tuple of index tensors."""
    # A 0-d index tensor is an advanced index here (``x[i]`` would read it as an int).
    indices = tuple(S.reshape(i, (1,)) if _is_tensor(i) and not i.shape
                    and np.dtype(i.dtype).kind in "iu" else i for i in indices)
    basic, adv = parse_index(x, indices)
    if not adv or basic.count(None) or any(e.mask for _, e in adv):
        raise IndexError("index_put: indices must be a tuple of integer or boolean tensors")
    v = values
    if _is_tensor(v) and v.dtype != x.dtype:
        raise RuntimeError("Index put requires the source and destination dtypes match, got "
                           f"{x.dtype} for the destination and {v.dtype} for the source.")
    idx, dims = _stack_indices(adv)
    return bind(INDEX_PUT, x, _strip_ones(_value(v, np.dtype(x.dtype))), idx, dims=dims,
                accumulate=bool(accumulate))


def index_put_(x: Any, indices: Any, values: Any, accumulate: bool = False) -> Any:
    """In-place `index_put` (``x.index_put_(indices, values)``)."""
    current_mode().assign(x, index_put(x, indices, values, accumulate))
    return x


# ----------------------------------------------------------- gather and scatter family


def _grid(index_shape: tuple, dim: int, index: Any) -> tuple[Any, tuple]:
    """Full indices for ``gather``/``scatter``: ``index`` along ``dim``, the position
    itself along every other dim (one index array per dim of ``x``)."""
    n = len(index_shape)
    values = []
    for d in range(n):
        if d == dim:
            values.append(_concrete(index))
        else:
            line = [1] * n
            line[d] = index_shape[d]
            values.append(np.arange(index_shape[d], dtype=np.int64).reshape(line))
    return _stack_indices([(d, _Adv(v, False)) for d, v in enumerate(values)])


def _int64_index(index: Any) -> Any:
    """An int32 index tensor as int64 (PyTorch takes both); anything else as it is, for
    `_check_index_tensor` to refuse."""
    if _is_tensor(index) and np.dtype(index.dtype) == np.int32:
        return S.astype(index, _INT64)
    return index


def _check_index_tensor(name: str, x: Any, dim: int, index: Any, src: Any = None) -> int:
    ndim = len(x.shape)
    dim = normalize_dim(name, dim, ndim)
    if not _is_tensor(index) and not isinstance(index, np.ndarray):
        raise TypeError(f"{name}(): index must be a Tensor, got {type(index).__name__}")
    if np.dtype(index.dtype) != _INT64:
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    if len(index.shape) != ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    for d in range(ndim):
        if d != dim and index.shape[d] > x.shape[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index.shape)} to be no larger than self "
                               f"{list(x.shape)} apart from dimension {dim}")
        if src is not None and index.shape[d] > src.shape[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index.shape)} to be no larger than src "
                               f"{list(src.shape)}")
    a = _concrete(index)
    if isinstance(a, np.ndarray) and a.size:
        # Unlike x[idx], gather and scatter take no negative index (PyTorch's rule).
        size = x.shape[dim]
        bad = int(a.min()) if a.min() < 0 else int(a.max()) if a.max() >= size else None
        if bad is not None:
            raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size "
                               f"{size}")
    return dim


def _one_d(t: Any) -> Any:
    """A 0-d tensor as a 1-d one of one element (other values unchanged)."""
    return S.reshape(t, (1,)) if _is_tensor(t) and not t.shape else t


def _has_0d(*ts: Any) -> bool:
    """Whether any of ``ts`` is a 0-d tensor: gather and scatter then count it as 1-d of one
    element (PyTorch's rule), and the result keeps the 0-d shape it stands for."""
    return any(_is_tensor(t) and not t.shape for t in ts)


def gather(x: Any, dim: int, index: Any) -> Any:
    """``torch.gather``: ``out[i][j] = x[index[i][j]][j]`` along ``dim`` (shape of
    ``index``); the gradient scatter-adds back."""
    index = _int64_index(index)
    if _has_0d(x, index):
        return S.reshape(gather(_one_d(x), dim, _one_d(index)), tuple(index.shape))
    dim = _check_index_tensor("gather", x, dim, index)
    ks = tuple(index.shape)
    if any(n != x.shape[d] for d, n in enumerate(ks) if d != dim):
        # The index may be smaller than x outside dim: gather from that corner (a view).
        x = S.getitem(x, tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(ks)))
    return gather_axis(x, index, dim)


def take_along_dim(x: Any, indices: Any, dim: int | None = None) -> Any:
    """``torch.take_along_dim``: `gather` with ``x`` and ``indices`` broadcast against each
    other outside ``dim`` (``dim=None``: both flattened)."""
    if dim is None:
        return gather(S.reshape(x, -1), 0, S.reshape(indices, -1))
    ndim = len(x.shape)
    dim = normalize_dim("take_along_dim", dim, ndim)
    if len(indices.shape) != ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {ndim} dimensions for input, and "
                           f"{len(indices.shape)} dimensions for indices")
    xs, ks = list(x.shape), list(indices.shape)
    xo = [1 if d == dim else s for d, s in enumerate(xs)]
    ko = [1 if d == dim else s for d, s in enumerate(ks)]
    try:
        b = list(np.broadcast_shapes(tuple(xo), tuple(ko)))
    except ValueError:
        raise ShapeError(f"take_along_dim: shapes {tuple(xs)} and {tuple(ks)} cannot be "
                         f"broadcast outside dim {dim}") from None
    xb = S.broadcast_to(x, tuple(b[:dim] + [xs[dim]] + b[dim + 1:]))
    kb = S.broadcast_to(indices, tuple(b[:dim] + [ks[dim]] + b[dim + 1:]))
    return gather(xb, dim, kb)


def _src_part(src: Any, shape: tuple) -> Any:
    """The leading ``shape`` block of ``src`` (scatter reads only that much of it)."""
    if tuple(src.shape) == shape:
        return src
    return S.getitem(src, tuple(slice(0, n) for n in shape))


def _scatter(name: str, x: Any, dim: int, index: Any, src: Any, accumulate: bool) -> Any:
    literal = not _is_tensor(src) and np.ndim(src) == 0
    index = _int64_index(index)
    if _has_0d(x, index, src):
        out = _scatter(name, _one_d(x), dim, _one_d(index), _one_d(src), accumulate)
        return S.reshape(out, tuple(x.shape))
    dim = _check_index_tensor(name, x, dim, index, None if literal else src)
    idx, dims = _grid(tuple(index.shape), dim, index)
    if literal:
        v, api = (src.item() if isinstance(src, np.generic) else src), "scatter_value"
    else:
        if src.dtype != x.dtype:
            raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
        v, api = _src_part(src, tuple(index.shape)), name
    return bind(INDEX_PUT, x, v, idx, dims=dims, accumulate=accumulate, api=api)


def scatter(x: Any, dim: int, index: Any, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> Any:
    """``torch.scatter``: ``x`` with ``out[index[i][j]][j] = src[i][j]`` along ``dim``;
    ``src`` may be a number (or pass ``value=``). ``reduce="add"`` adds and
    ``reduce="multiply"`` multiplies into ``x`` instead (repeated indices combine)."""
    if src is None:
        src = value
    if reduce is None:
        return _scatter("scatter", x, dim, index, src, False)
    if reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if not _is_tensor(src):
        src = S.broadcast_to(np.full((), src, np.dtype(x.dtype)), tuple(index.shape))
    if reduce == "add":
        return _scatter("scatter", x, dim, index, src, True)
    return scatter_reduce(x, dim, index, src, "prod")


def scatter_add(x: Any, dim: int, index: Any, src: Any) -> Any:
    """``torch.scatter_add``: like `scatter`, but repeated indices add up into ``x``."""
    return _scatter("scatter_add", x, dim, index, src, True)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(x: Any, dim: int, index: Any, src: Any, reduce: str, *,
                   include_self: bool = True) -> Any:
    """``torch.scatter_reduce``: "sum" and "mean" are compositions of `scatter_add`;
    "prod", "amax" and "amin" of a dense membership mask (`_scatter_fold`)."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    if not x.shape:  # a scalar is reduced as the one-element vector it views
        x1, index1, src1 = [S.reshape(a, (1,)) if _is_tensor(a) and not a.shape else a
                            for a in (x, index, src)]
        return S.reshape(scatter_reduce(x1, 0, index1, src1, reduce,
                                        include_self=include_self), ())
    if reduce not in ("sum", "mean"):
        return _scatter_fold(x, dim, index, src, reduce, include_self)
    base = x if include_self else scatter(x, dim, index, 0.0 if x.dtype.kind == "f" else 0)
    total = scatter_add(base, dim, index, src)
    if reduce == "sum":
        return total
    ones = S.broadcast_to(np.ones((), x.dtype), tuple(index.shape))
    start = 1.0 if include_self else 0.0
    count = scatter_add(S.broadcast_to(np.full((), start, x.dtype), tuple(x.shape)), dim,
                        index, ones)
    count = E.where(E.eq(count, 0.0), 1.0, count)
    out = total / count
    if x.dtype.kind != "f":
        out = S.astype(out, x.dtype)
    return out


def _scatter_fold(x: Any, dim: int, index: Any, src: Any, reduce: str,
                  include_self: bool) -> Any:
    """prod/amax/amin scatter as one reduction per target over a dense mask: element
    ``(.., t, j)`` says whether source ``j`` (along ``dim``) lands on target ``t``. The
    target's own value, when included, is one more element of the same reduction, so
    ties split the gradient evenly among every tied element, self included (PyTorch's
    rule), and `prod`'s gradient is the zero-aware one. Memory is targets x sources per
    line: fine for the sizes scatter_reduce is used at, not for huge scatters."""
    from . import reduce as R
    from .shape import movedim

    nd = len(x.shape)
    dim = normalize_dim("scatter_reduce", dim, max(nd, 1))
    if len(index.shape) != nd or len(src.shape) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as self "
                           "and src tensors")
    ishape = tuple(index.shape)
    for k in range(nd):
        if ishape[k] > src.shape[k] or (k != dim and ishape[k] > x.shape[k]):
            raise RuntimeError(f"Expected index {list(ishape)} to be smaller than self "
                               f"{list(x.shape)} apart from dimension {dim} and to be smaller "
                               f"than src {list(src.shape)}")
    region = tuple(x.shape[k] if k == dim else ishape[k] for k in range(nd))
    whole = region == tuple(x.shape)
    xr = x if whole else x[tuple(slice(0, n) for n in region)]
    sr = src[tuple(slice(0, n) for n in ishape)] if ishape != tuple(src.shape) else src
    idx = index if index.dtype == _INT64 else S.astype(index, _INT64)
    t = x.shape[dim]
    # (..., T, J): targets before sources, both last.
    idx_m = S.reshape(movedim(idx, dim, -1), tuple(np.delete(ishape, dim)) + (1, ishape[dim]))
    targets = np.arange(t, dtype=np.int64).reshape(t, 1)
    mask = E.eq(idx_m, targets)
    src_m = S.reshape(movedim(sr, dim, -1), tuple(np.delete(ishape, dim)) + (1, ishape[dim]))
    if reduce == "prod":
        fill = np.ones((), x.dtype)
    elif x.dtype.kind == "f":
        fill = np.array(-np.inf if reduce == "amax" else np.inf, x.dtype)
    else:
        info = np.iinfo(x.dtype)
        fill = np.array(info.min if reduce == "amax" else info.max, x.dtype)
    vals = E.where(mask, src_m, fill)
    self_m = S.reshape(movedim(xr, dim, -1), tuple(np.delete(region, dim)) + (t, 1))
    fold = R.prod if reduce == "prod" else R.amax if reduce == "amax" else R.amin
    if include_self:
        vals = S.concatenate([self_m, vals], -1)
    elif reduce != "prod":
        # PyTorch counts a target's own value among the ties even when it is excluded
        # (its share of the gradient is then dropped): a detached copy of it joins the
        # fold where it equals the sources' extremum, which changes no value.
        extreme = fold(vals, -1, True)
        vals = S.concatenate([E.where(E.eq(self_m, extreme), self_m.detach(), fill), vals], -1)
    folded = fold(vals, -1)
    if not include_self:  # targets nothing lands on keep their value
        hit = R.any(mask, -1)
        folded = E.where(hit, folded, S.reshape(self_m, tuple(folded.shape)))
    out = movedim(folded, -1, dim)
    if whole:
        return out
    full = x.clone()
    full[tuple(slice(0, n) for n in region)] = out
    return full


def _dim_index(name: str, x: Any, dim: int, index: Any) -> tuple[int, Any]:
    ndim = len(x.shape)
    dim = normalize_dim(name, dim, max(ndim, 1))
    if len(index.shape) > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    if np.dtype(index.dtype).kind not in "iu":
        raise IndexError(f"{name}(): Expected dtype int32/int64 for index")
    index = _concrete(index)
    size = x.shape[dim] if x.shape else 1
    if isinstance(index, np.ndarray):
        index = index.reshape(1, -1).astype(np.int64)
        if index.size and (index.min() < -size or index.max() >= size):
            raise IndexError("index out of range in self")
        return dim, index % max(size, 1)
    index = S.reshape(index, (1, -1))
    return dim, index if index.dtype == _INT64 else S.astype(index, _INT64)


def index_select(x: Any, dim: int, index: Any) -> Any:
    """``torch.index_select``: the slices ``index`` (a vector) of ``x`` along ``dim``."""
    dim, idx = _dim_index("index_select", x, dim, index)
    if not x.shape:  # a scalar stays one, as in PyTorch
        n = int(np.prod(tuple(idx.shape)))
        if n != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                               f"{n} value(s)")
        return S.reshape(bind(INDEX, S.reshape(x, (1,)), idx, dims=(0,),
                              api="index_select"), ())
    return bind(INDEX, x, idx, dims=(dim,), api="index_select")


def _index_write(name: str, x: Any, dim: int, index: Any, source: Any, accumulate: bool,
                 api: str) -> Any:
    dim, idx = _dim_index(name, x, dim, index)
    if _is_tensor(source) and source.dtype != x.dtype:
        raise RuntimeError(f"{name}_(): self ({x.dtype}) and source ({source.dtype}) must "
                           "have the same scalar type")
    v = _value(source, np.dtype(x.dtype))
    if not x.shape:  # a scalar is written as the one-element vector it views
        if _is_tensor(v) and not v.shape:
            v = S.reshape(v, (1,))
        return S.reshape(bind(INDEX_PUT, S.reshape(x, (1,)), v, idx, dims=(0,),
                              accumulate=accumulate, api=api), ())
    return bind(INDEX_PUT, x, v, idx, dims=(dim,), accumulate=accumulate, api=api)


def index_add(x: Any, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
    """``torch.index_add``: ``source``'s slices (times ``alpha``) added to ``x``'s slices
    ``index`` along ``dim`` (repeated indices add up)."""
    if alpha != 1:
        source = source * alpha
    return _index_write("index_add", x, dim, index, source, True, "index_add")


def index_copy(x: Any, dim: int, index: Any, source: Any) -> Any:
    """``torch.index_copy``: ``x`` with slices ``index`` along ``dim`` replaced by
    ``source``'s."""
    return _index_write("index_copy", x, dim, index, source, False, "index_copy")


def index_fill(x: Any, dim: int, index: Any, value: Any) -> Any:
    """``torch.index_fill``: ``x`` with slices ``index`` along ``dim`` set to ``value``."""
    if _is_tensor(value) and value.shape:
        raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {len(value.shape)} dimension(s).")
    return _index_write("index_fill", x, dim, index, value, False, "index_fill")


def masked_fill(x: Any, mask: Any, value: Any) -> Any:
    """``torch.masked_fill``: ``value`` where ``mask`` is true, ``x`` elsewhere."""
    if np.dtype(mask.dtype) != np.bool_:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with "
                           f"dtype {np.dtype(mask.dtype)}")
    if _is_tensor(value) and value.shape:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but "
                           f"got tensor with {len(value.shape)} dimension(s).")
    out = E.where(mask, _value(value, np.dtype(x.dtype)), x)
    return out if out.dtype == x.dtype else S.astype(out, x.dtype)


# ------------------------------------------------------------ data-dependent shapes


def _constant(a: np.ndarray) -> Any:
    """A NumPy result as a tensor of the (eager) active mode."""
    return bind(S.STOP_GRADIENT, a)


def nonzero(x: Any, *, as_tuple: bool = False) -> Any:
    """``torch.nonzero``: the indices of the nonzero elements, ``(n, ndim)`` int64, or one
    vector per dim with ``as_tuple=True``. Eager only (the count depends on the data)."""
    if current_trace() is not None:
        raise _data_dependent("nonzero", "a mask with dg.where(cond, x, y) or masked_fill")
    a = np.asarray(x)
    if as_tuple:
        if a.ndim == 0:
            return (_constant(np.zeros(int(a != 0), np.int64)),)
        return tuple(_constant(np.asarray(n, np.int64)) for n in np.nonzero(a))
    return _constant(np.argwhere(a).astype(np.int64))


def argwhere(x: Any) -> Any:
    """``torch.argwhere``: `nonzero` as an ``(n, ndim)`` tensor."""
    return nonzero(x)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """``dg.where(cond, x, y)`` (elementwise choice), or ``dg.where(cond)``: the nonzero
    indices as a tuple (``nonzero(cond, as_tuple=True)``; eager only)."""
    if x is None and y is None:
        return nonzero(condition, as_tuple=True)
    if x is None or y is None:
        raise TypeError("where() takes a condition alone, or a condition, x and y")
    return E.where(condition, x, y)


def masked_select(x: Any, mask: Any) -> Any:
    """``torch.masked_select``: the elements of ``x`` (broadcast with ``mask``) where
    ``mask`` is true, as a vector; the gradient scatters back. Eager only."""
    if np.dtype(mask.dtype) != np.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got "
                           f"{np.dtype(mask.dtype)}")
    if current_trace() is not None:
        raise _data_dependent("masked_select", _MASK_INSTEAD)
    shape = tuple(np.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    xb = x if tuple(x.shape) == shape else S.broadcast_to(x, shape)
    m = np.broadcast_to(np.asarray(mask), shape)
    if not shape:
        xb, m = S.reshape(xb, (1,)), m.reshape(1)
    idx = np.stack(np.nonzero(m)).astype(np.int64)
    return bind(INDEX, xb, idx, dims=tuple(range(max(len(shape), 1))), api="masked_select")


# ------------------------------------------------------------ one_hot and embedding


def one_hot(x: Any, num_classes: int = -1) -> Any:
    """``F.one_hot``: int64 ``x.shape + (num_classes,)``, 1 at each class. With the default
    ``num_classes=-1`` the count is ``x.max() + 1``: eager only."""
    if np.dtype(x.dtype) != _INT64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    concrete = current_trace() is None
    if num_classes == -1:
        if not concrete:
            raise _data_dependent("one_hot without num_classes",
                                  "F.one_hot(x, num_classes) with a fixed count")
        a = np.asarray(x)
        if a.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(a.max()) + 1
    if concrete:
        a = np.asarray(x)
        if a.size and a.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if a.size and a.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    classes = np.arange(num_classes, dtype=np.int64)
    hot = E.eq(S.reshape(x, tuple(x.shape) + (1,)), classes)
    return S.astype(hot, _INT64)


def embedding(input: Any, weight: Any, padding_idx: int | None = None) -> Any:  # noqa: A002
    """``F.embedding``: rows of ``weight`` picked by the int64 ``input``; the gradient
    scatter-adds into those rows, none into row ``padding_idx``."""
    if np.dtype(input.dtype).kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {np.dtype(input.dtype)}"
                           " instead")
    if len(weight.shape) != 2:
        raise RuntimeError("'weight' must be 2-D")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    idx = input if input.dtype == _INT64 else S.astype(input, _INT64)
    if current_trace() is None:
        a = np.asarray(idx)
        if a.size and (a.min() < 0 or a.max() >= n):
            raise IndexError("index out of range in self")
    out = bind(INDEX, weight, S.reshape(idx, (1,) + tuple(idx.shape)), dims=(0,),
               api="embedding")
    if padding_idx is None:
        return out
    # Rows looked up at padding_idx pass no gradient: their values, but detached.
    pad = S.reshape(E.eq(idx, padding_idx), tuple(idx.shape) + (1,))
    return E.where(pad, S.stop_gradient(out), out)
