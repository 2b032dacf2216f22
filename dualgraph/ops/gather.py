"""The gather/scatter primitives: every op that reads or writes elements at given positions.

Each gather is paired with its transpose, a scatter into zeros (adding where positions
repeat), and each is the other's VJP, so gradients of any order stay in the family.

- ``index(x, idx, dims)``: ``idx`` is int64 of shape ``(k,) + B``, the k index arrays
  already broadcast to ``B``, applied at dims ``dims`` of ``x`` (the others taken whole).
  The result shape is PyTorch's (and NumPy's) rule: ``x.shape[:d0] + B + x.shape[d0+k:]``
  when ``dims`` are adjacent, else ``B`` followed by the other dims.
  ``index_put(x, v, idx, dims, accumulate)``: ``x`` with those elements replaced by ``v``
  (or, with ``accumulate``, increased by it: repeated indices add up), ``v`` broadcast to
  the indexed shape. It is the gradient of ``index`` and the value of ``x[idx] = v``.
- ``gather_axis(x, idx, axis)``: ``out[..., k, ...] = x[..., idx[..., k, ...], ...]`` along
  one axis, ``idx`` of ``x``'s shape except along it; ``scatter_add_axis`` is its
  transpose. Separate from ``index`` because the other dims are implied, not indexed: an
  ``index`` would need an index array per dim, each the size of the result.
- ``pool_gather(x, idx, source)``: ``out[..., o] = x[..., idx[..., o]]`` over the last two
  dims flattened, ``idx`` shared by every leading dim (nearest upsampling's index is one
  constant plane); ``pool_scatter`` is its transpose. Separate from ``gather_axis``, which
  needs ``idx`` of the operand's rank: a shared plane would have to be broadcast to every
  image, and ``source`` names PyTorch's node (``MaxPool2DWithIndicesBackward0``,
  ``UpsampleNearest2DBackward0``...).
- ``pad_index(x, pad, mode)``: reflect, replicate and circular padding, where every output
  element copies one input element at a position `pad_map` computes per dim;
  ``pad_index_backward`` is its transpose. Separate because the positions are a product
  of per-dim maps known from the attributes: no index array exists, eager or compiled.
- ``scatter(g, shape, index)``: zeros of ``shape`` with ``g`` at the basic index
  ``index`` (ints, slices, None), the transpose of the view ``getitem``
  (`dualgraph.ops.shape`); ``diag_scatter(g, shape, offset, dim1, dim2)``: zeros with ``g``
  on a diagonal, the transpose of the view ``diagonal`` (and ``diag_embed``). Their
  positions are strided, so they are written as slices, without indices.
- ``view_scatter(base, value, chain)``: ``base`` with the view ``chain`` of it replaced by
  ``value``, a write through a view. Unlike the scatters above it overwrites a base
  rather than filling zeros, and its positions are the view's (`dualgraph.ops.shape.
  view_index`).

The PyTorch surface built on them is in `dualgraph.ops.index` (``x[idx]``, ``gather``,
``scatter``, ``index_select``, ``embedding``...), `dualgraph.ops.pool` (max pooling,
interpolation, padding) and `dualgraph.ops.shape` (``x[i]``, ``diagonal``, ``diag_embed``).
An ``api`` (or ``source``, ``grad_fn``) attribute names the public op that made a node,
only so that ``grad_fn.name()`` is PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from . import lengths as L
from . import routines
from . import shape as S
from .broadcast import broadcasts_to
from .registry import OpDef, register

_INT64 = np.dtype(np.int64)

# ------------------------------------------------------------------ index / index_put


def indexed_shape(shape: tuple, dims: tuple, bshape: tuple) -> tuple:
    """Shape of ``x[idx]`` for ``x`` of ``shape`` indexed at ``dims`` by arrays of ``bshape``."""
    return L.gathered(shape, dims, bshape)


def _key(ndim: int, idx: np.ndarray, dims: tuple) -> tuple:
    key: list = [slice(None)] * ndim
    for j, d in enumerate(dims):
        key[d] = idx[j]
    return tuple(key)


def _check_index(name: str, xs: tuple, idx: Any, dims: tuple) -> tuple:
    ks = tuple(idx.shape)
    ok = (ks and ks[0] == len(dims) and dims and list(dims) == sorted(set(dims))
          and 0 <= dims[0] and dims[-1] < len(xs))
    if not ok or np.dtype(idx.dtype) != _INT64:
        raise ShapeError(f"{name}: indices must be int64 of shape (len(dims),) + batch for "
                         f"dims {dims} of a tensor of shape {xs}, got {idx.dtype} {ks}")
    return indexed_shape(xs, dims, ks[1:])


def _check_bounds(a: np.ndarray, size: int, dim: int) -> None:
    """PyTorch's IndexError for an index outside ``[-size, size)``."""
    if a.size == 0:
        return
    lo, hi = int(a.min()), int(a.max())
    bad = lo if lo < -size else hi if hi >= size else None
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


# ---------------------------------------------------------------------------- index


def _index_impl(x: np.ndarray, idx: np.ndarray, dims: tuple, api: str = "") -> np.ndarray:
    out = x[_key(x.ndim, idx, dims)]
    # 0-d index arrays make NumPy index basically (a view): results never alias x.
    return out.copy() if idx.ndim == 1 else out


def _index_infer(x: Any, idx: Any, dims: tuple, api: str = "") -> tuple:
    return _check_index("index", tuple(x.shape), idx, dims), x.dtype


def _index_vjp(ctx, g):
    (_, idx) = ctx.args
    x = ctx.inputs[0]
    dims = ctx.attrs["dims"]
    # Scattered into zeros given by a literal and a shape: no zero array in the graph.
    gx = bind(INDEX_PUT, 0.0, g, idx, dims=dims, accumulate=True, shape=tuple(x.shape))
    return gx, None


_INDEX_NAMES = {"": "IndexBackward0", "gather": "GatherBackward0",
                "index_select": "IndexSelectBackward0", "embedding": "EmbeddingBackward0",
                "masked_select": "MaskedSelectBackward0"}
_PUT_NAMES = {"": "IndexPutBackward0", "scatter": "ScatterBackward0",
              "scatter_value": "ScatterBackward1", "scatter_add": "ScatterAddBackward0",
              "index_add": "IndexAddBackward0", "index_copy": "IndexCopyBackward0",
              "index_fill": "IndexFillBackward0"}


def _index_name(node: Any) -> str:
    return _INDEX_NAMES[node.attrs.get("api", "")]


# ------------------------------------------------------------------------ index_put


def _put_impl(x: Any, v: Any, idx: np.ndarray, dims: tuple, accumulate: bool = False,
              api: str = "", shape: tuple | None = None) -> np.ndarray:
    if shape is not None:  # x is a number filling a new array of v's dtype
        out = np.full(shape, x, np.asarray(v).dtype)
        if (accumulate and dims == (0,) and x == 0 and type(v) is np.ndarray
                and idx.shape[0] == 1 and idx.size and out.size):
            if _add_rows(out, v, idx[0]):
                return out
    else:
        out = np.array(x, copy=True, order="C")
    key = _key(out.ndim, idx, dims)
    if accumulate:
        np.add.at(out, key, v)  # repeated indices add up
    else:
        out[key] = v  # the last of repeated indices wins (NumPy's and PyTorch's CPU rule)
    return out


def _add_rows(out: np.ndarray, v: np.ndarray, rows: np.ndarray) -> bool:
    """``np.add.at(out, rows, v)`` along the first axis (an embedding's or a row gather's
    gradient), by rounds: the values sorted by row (stably), round ``k`` adds every row's
    ``k``-th value with one NumPy operation. Each row's values are added in their original
    order, one at a time, as `np.add.at` adds them, so the bits are the same; `np.add.at`
    takes one slow step per index. Returns False, doing nothing, when some row repeats so
    often that the rounds would cost more."""
    n = out.shape[0]
    _check_bounds(rows, n, 0)
    vals = np.broadcast_to(v, rows.shape + out.shape[1:]).reshape(rows.size, -1)
    rows = rows.reshape(-1)
    rows = np.where(rows < 0, rows + n, rows)
    fast = routines.for_size(vals.size)
    if (fast is not None and vals.dtype.kind == "f" and vals.dtype == out.dtype
            and vals.flags.c_contiguous):
        fast.add_rows(out.reshape(n, -1), vals, rows)
        return True
    order = np.argsort(rows, kind="stable")
    srt = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], srt[1:] != srt[:-1])))
    counts = np.diff(np.append(starts, srt.size))
    if counts.max() > 32:
        return False
    flat = out.reshape(n, -1)
    for k in range(int(counts.max())):
        live = counts > k
        at = starts[live] + k
        flat[srt[at]] += vals[order[at]]
    return True


def _put_infer(x: Any, v: Any, idx: Any, dims: tuple, accumulate: bool = False,
               api: str = "", shape: tuple | None = None) -> tuple:
    xs = tuple(x.shape) if shape is None else tuple(shape)
    target = _check_index("index_put", xs, idx, dims)
    vs = tuple(getattr(v, "shape", ()))
    if not broadcasts_to(vs, target):
        raise ShapeError(f"shape mismatch: value tensor of shape {list(vs)} cannot be "
                         f"broadcast to indexing result of shape {list(target)}")
    return xs, (x.dtype if shape is None else v.dtype)


def _put_vjp(ctx, g):
    (_, _, idx) = ctx.args
    nx, nv = ctx.needs_input_grad[:2]
    dims = ctx.attrs["dims"]
    gx = gv = None
    if nx:
        # Overwritten elements passed nothing on; accumulated ones pass g through.
        gx = g if ctx.attrs.get("accumulate") else bind(INDEX_PUT, g, 0.0, idx, dims=dims)
    if nv:
        gv = bind(INDEX, g, idx, dims=dims)  # the engine sums it back to v's shape
    return gx, gv, None


def _put_name(node: Any) -> str:
    return _PUT_NAMES[node.attrs.get("api", "")]


def _gathered_lengths(node: Any, dx: tuple, di: tuple) -> tuple:
    """The symbols of ``x[idx]``: the index's batch axes may be symbolic (the gathered rows
    follow), the table's indexed axes may not (its length bounds the indices)."""
    dims = tuple(node.attrs["dims"])
    if any(dx[a] is not None for a in dims):
        raise L.refuse(node, "indexes along a symbolic length")
    if di and di[0] is not None:
        raise L.refuse(node, "takes a symbolic number of index arrays")
    return L.gathered(dx, dims, di[1:])


def _index_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    (_, dx), (_, di) = ins[:2]
    return _gathered_lengths(node, dx, di)


def _put_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    """``x[idx] = v`` (a gather's gradient scatters into its table): the result has the
    table's shape; the index's batch axes and the value's matching axes may carry the
    same symbol."""
    of = {id(n): d for n, d in ins}
    x, v, idx = node.inputs[:3]
    fixed = (None,) * len(node.shape)
    dx = of.get(id(x), fixed)
    dims = tuple(node.attrs["dims"])
    target = _gathered_lengths(node, dx, of[id(idx)])
    shape = L.gathered(tuple(node.shape), dims, tuple(idx.shape)[1:])
    vs = tuple(getattr(v, "shape", ()))
    L.broadcast_dims(node, shape, [(vs, of.get(id(v), (None,) * len(vs))), (shape, target)])
    return dx


INDEX = register(OpDef(
    "index", _index_impl, _index_infer, _index_vjp, _index_name, saves=(1,),
    lengths=_index_lengths,
))
INDEX_PUT = register(OpDef(
    "index_put", _put_impl, _put_infer, _put_vjp, _put_name, saves=(2,),
    lengths=_put_lengths,
))


# -------------------------------------------------- gather and scatter-add along one axis
# gather_axis: out[..., k, ...] = x[..., idx[..., k, ...], ...]; idx has x's shape except
# along the axis (or, squeezed, lacks the axis: one index per line). scatter_add_axis is
# its transpose, and each is the other's VJP.


def _to_lines(a: np.ndarray, axis: int) -> np.ndarray:
    """``a`` as a C-contiguous (lines, length) array with ``axis`` last."""
    if a.ndim == 0:
        return a.reshape(1, 1)
    moved = np.moveaxis(a, axis, -1)
    # The line count spelled out: reshape(-1, 0) is ambiguous for an empty axis.
    return np.ascontiguousarray(moved).reshape(math.prod(moved.shape[:-1]), a.shape[axis])


def _from_lines(lines: np.ndarray, shape: tuple, axis: int) -> np.ndarray:
    """The inverse of `_to_lines` for a result of ``shape``."""
    if not shape:
        return lines.reshape(())
    moved = tuple(d for i, d in enumerate(shape) if i != axis) + (shape[axis],)
    return np.ascontiguousarray(np.moveaxis(lines.reshape(moved), -1, axis))


def _squeezed(idx: Any, shape: tuple) -> bool:
    """One index per line with the axis dropped (``keepdim=False``): idx has one dim less."""
    return len(shape) > 0 and len(idx.shape) == len(shape) - 1


def _gather_axis_impl(x: np.ndarray, idx: np.ndarray, axis: int = 0,
                 grad_fn: str = "GatherBackward0") -> np.ndarray:
    if x.ndim == 0:
        return x.copy()
    if _squeezed(idx, x.shape):
        return np.take_along_axis(x, np.expand_dims(idx, axis), axis=axis).squeeze(axis)
    return np.take_along_axis(x, idx, axis=axis)


def _check_axis_index(name: str, shape: tuple, idx: Any, axis: int) -> None:
    ks = tuple(idx.shape)
    if _squeezed(idx, shape):
        ks = ks[:axis] + (1,) + ks[axis:]
    if (np.dtype(idx.dtype) != np.int64 or len(ks) != len(shape)
            or any(a != b for i, (a, b) in enumerate(zip(ks, shape)) if i != axis)):
        raise ShapeError(f"{name}: indices must be int64 of the shape {shape} except along "
                         f"axis {axis} (or without it), got {idx.dtype} {tuple(idx.shape)}")


def _gather_axis_infer(x: Any, idx: Any, axis: int = 0, grad_fn: str = "") -> tuple:
    _check_axis_index("gather_axis", tuple(x.shape), idx, axis)
    return tuple(idx.shape), np.dtype(x.dtype)


def _scatter_add_axis_impl(src: np.ndarray, idx: np.ndarray, axis: int = 0,
                      size: int = 1, squeezed: bool = False) -> np.ndarray:
    if squeezed:
        src, idx = np.expand_dims(src, axis), np.expand_dims(idx, axis)
    if src.ndim == 0:
        return src.copy()
    shape = src.shape[:axis] + (size,) + src.shape[axis + 1:]
    s, k = _to_lines(src, axis), _to_lines(idx, axis)
    out = np.zeros((s.shape[0], size), src.dtype)
    # Adds in line order, as the compiled loop does, so repeated indices sum identically.
    np.add.at(out, (np.arange(s.shape[0])[:, None], k), s)
    return _from_lines(out, shape, axis)


def _scatter_add_axis_infer(src: Any, idx: Any, axis: int = 0, size: int = 1,
                       squeezed: bool = False) -> tuple:
    shape = tuple(src.shape)
    if tuple(idx.shape) != shape or np.dtype(idx.dtype) != np.int64:
        raise ShapeError(f"scatter_add_axis: int64 indices of shape {shape} expected for "
                         f"values of shape {shape}, got {idx.dtype} {tuple(idx.shape)}")
    if squeezed:
        return shape[:axis] + (size,) + shape[axis:], np.dtype(src.dtype)
    if not shape:
        return (), np.dtype(src.dtype)
    return shape[:axis] + (size,) + shape[axis + 1:], np.dtype(src.dtype)


def _gather_axis_vjp(ctx, g):
    _, idx = ctx.args
    axis = ctx.attrs["axis"]
    shape = tuple(ctx.inputs[0].shape)
    size = shape[axis] if shape else 1
    squeezed = _squeezed(ctx.inputs[1], shape)
    return bind(SCATTER_ADD_AXIS, g, idx, axis=axis, size=size, squeezed=squeezed), None


def _scatter_add_axis_vjp(ctx, g):
    _, idx = ctx.args
    return gather_axis(g, idx, ctx.attrs["axis"]), None


GATHER_AXIS = register(OpDef(
    "gather_axis", _gather_axis_impl, _gather_axis_infer, _gather_axis_vjp,
    lambda node: node.attrs["grad_fn"], saves=(1,),
))
SCATTER_ADD_AXIS = register(OpDef(
    "scatter_add_axis", _scatter_add_axis_impl, _scatter_add_axis_infer, _scatter_add_axis_vjp,
    "ScatterAddBackward0", saves=(1,),
))


def gather_axis(x: Any, idx: Any, axis: int, grad_fn: str = "GatherBackward0") -> Any:
    """``out[..., k, ...] = x[..., idx[..., k, ...], ...]`` along ``axis``; its tape node is
    named ``grad_fn`` (PyTorch's name for the op whose values it gathers)."""
    return bind(GATHER_AXIS, x, idx, axis=axis, grad_fn=grad_fn)




# ------------------------------------------------------------- basic index and diagonal


def _scatter_impl(g: np.ndarray, shape: tuple, index: tuple) -> np.ndarray:
    out = np.zeros(shape, dtype=g.dtype)
    out[S.to_numpy_index(index)] = g
    return out


def _scatter_infer(g: Any, shape: tuple, index: tuple) -> tuple:
    return shape, g.dtype


def _scatter_vjp(ctx, g):
    return (bind(S.GETITEM, g, index=ctx.attrs["index"]),)


SCATTER = register(OpDef(
    "scatter", _scatter_impl, _scatter_infer, _scatter_vjp, "IndexPutBackward0",
))
def _diag_scatter_infer(g: Any, shape: tuple, offset: int, dim1: int, dim2: int) -> tuple:
    want = S._diagonal_shape(shape, offset, dim1, dim2)
    if tuple(g.shape) != want:
        raise ShapeError(f"diag_scatter: the diagonal of shape {shape} has shape {want}, got "
                         f"a value of shape {tuple(g.shape)}")
    return shape, g.dtype


def _diag_scatter_impl(g: np.ndarray, shape: tuple, offset: int, dim1: int,
                       dim2: int) -> np.ndarray:
    out = np.zeros(shape, g.dtype)
    S._diagonal_impl(out, offset, dim1, dim2)[...] = g
    return out


def _diag_scatter_vjp(ctx, g):
    a = ctx.attrs
    return (bind(S.DIAGONAL, g, offset=a["offset"], dim1=a["dim1"], dim2=a["dim2"]),)


DIAG_SCATTER = register(OpDef(
    "diag_scatter", _diag_scatter_impl, _diag_scatter_infer, _diag_scatter_vjp,
    "DiagEmbedBackward0",
))

# ------------------------------------------------------------------------- view_scatter


def _view_scatter_impl(base: np.ndarray, value: Any, chain: tuple) -> np.ndarray:
    out = np.array(base, copy=True, order="C")
    if not chain:
        out[...] = value
    else:
        out.reshape(-1)[S.view_index(base.shape, chain)] = value
    return out


def _view_scatter_infer(base: Any, value: Any, chain: tuple) -> tuple:
    shape = tuple(base.shape)
    view = S.view_index(shape, chain).shape if chain else shape
    vshape = tuple(getattr(value, "shape", ()))
    if vshape and tuple(np.broadcast_shapes(vshape, view)) != view:
        raise ShapeError(f"view_scatter: a value of shape {vshape} does not fit the view of "
                         f"shape {view}")
    return shape, base.dtype


def view_scatter(base: Any, value: Any, chain: tuple) -> Any:
    """``base`` with the view ``chain`` of it replaced by ``value`` (functional form of a
    write through a view: PyTorch's ``CopySlices``, JAX's ``.at[].set``)."""
    return bind(VIEW_SCATTER, base, value, chain=chain)


def _view_scatter_vjp(ctx, g):
    chain = ctx.attrs["chain"]
    need_base, need_value = ctx.needs_input_grad
    # The base's old values under the view were overwritten: no gradient reaches them.
    gb = bind(VIEW_SCATTER, g, 0.0, chain=chain) if need_base else None
    gv = S.replay_view(g, chain) if need_value else None
    return gb, gv


def _view_scatter_name(node: Any) -> str:
    return "CopySlices" if node.attrs["chain"] else "CopyBackwards"


VIEW_SCATTER = register(OpDef(
    "view_scatter", _view_scatter_impl, _view_scatter_infer, _view_scatter_vjp,
    _view_scatter_name,
))

# ----------------------------------------------------------- pool_gather / pool_scatter


_GATHER_NAMES = {
    "max_pool2d": "MaxPool2DWithIndicesBackward0",
    "adaptive_max_pool2d": "AdaptiveMaxPool2DBackward0",
    "nearest": "UpsampleNearest2DBackward0",
    "linear": "UpsampleLinear1DBackward0",
    "bilinear": "UpsampleBilinear2DBackward0",
    "bicubic": "UpsampleBicubic2DBackward0",
    "trilinear": "UpsampleTrilinear3DBackward0",
    "nearest3d": "UpsampleNearest3DBackward0",
    "nearest-exact1d": "UpsampleNearestExact1DBackward0",
    "nearest-exact2d": "UpsampleNearestExact2DBackward0",
    "nearest-exact3d": "UpsampleNearestExact3DBackward0",
}


def _pool_gather_infer(x: Any, idx: Any, source: str) -> tuple:
    xs, ks = tuple(x.shape), tuple(idx.shape)
    if len(xs) < 2 or len(ks) < 2 or idx.dtype != np.int64 or (
            len(ks) > 2 and ks[:-2] != xs[:-2]):
        raise ShapeError(f"pool_gather: indices must be int64 of shape (..., OH, OW) with the "
                         f"leading dims of {xs} (or none), got {idx.dtype} {ks}")
    return xs[:-2] + ks[-2:], x.dtype


def _pool_gather_impl(x: np.ndarray, idx: np.ndarray, source: str) -> np.ndarray:
    n = math.prod(x.shape[-2:])
    flat = x.reshape(x.shape[:-2] + (n,))
    k = idx.reshape(idx.shape[:-2] + (math.prod(idx.shape[-2:]),))
    if k.ndim == 1:
        out = flat[..., k]
    else:
        # One gather from the whole array by flat positions (row * n + index): several
        # times faster than take_along_axis, which indexes by broadcast row numbers.
        rows = math.prod(k.shape[:-1])
        at = k.reshape(rows, k.shape[-1]) + np.arange(0, rows * n, n, dtype=np.int64)[:, None]
        out = np.take(flat.reshape(-1), at)
    return out.reshape(x.shape[:-2] + idx.shape[-2:])


def _pool_gather_vjp(ctx, g):
    (_, idx) = ctx.args
    size = tuple(ctx.inputs[0].shape[-2:])
    return pool_scatter(g, idx, size, ctx.attrs["source"]), None


def _pool_scatter_infer(g: Any, idx: Any, size: tuple, source: str) -> tuple:
    gs, ks = tuple(g.shape), tuple(idx.shape)
    if len(gs) < 2 or ks[-2:] != gs[-2:] or (len(ks) > 2 and ks != gs):
        raise ShapeError(f"pool_scatter: indices of shape {ks} do not fit values of shape {gs}")
    return gs[:-2] + tuple(size), g.dtype


def _pool_scatter_impl(g: np.ndarray, idx: np.ndarray, size: tuple, source: str) -> np.ndarray:
    lead = g.shape[:-2]
    b = math.prod(lead)
    n = size[0] * size[1]
    m = math.prod(g.shape[-2:])
    gf = g.reshape(b, m)
    k = np.broadcast_to(idx.reshape(math.prod(idx.shape[:-2]), m), gf.shape)
    # One unbuffered add over flat (row, index) positions, in the dtype and the order of
    # the compiled kernel's loop (row by row, values in order). NumPy >= 2's np.add.at
    # over a 1-D index measured faster than a float64 bincount and its cast back (0.3 ms
    # against 0.5 ms for LeNet's first pool, batch 64; 2-D indices were 4x slower).
    flat = (np.arange(b)[:, None] * n + k).ravel()
    out = np.zeros(b * n, g.dtype)
    np.add.at(out, flat, gf.ravel())
    return out.reshape(lead + tuple(size))


def _pool_scatter_vjp(ctx, g):
    (_, idx) = ctx.args
    return pool_gather(g, idx, ctx.attrs["source"]), None


def _backward_name(forward: str) -> str:
    return forward[:-1] + "Backward0"  # PyTorch's double-backward node names


def pool_gather(x: Any, idx: Any, source: str) -> Any:
    """``x`` at the flat plane indices ``idx`` (``source`` names the PyTorch node)."""
    return bind(POOL_GATHER, x, idx, source=source)


def pool_scatter(g: Any, idx: Any, size: tuple, source: str) -> Any:
    """The transpose of `pool_gather`: ``g`` added into zeros of plane ``size`` at ``idx``."""
    return bind(POOL_SCATTER, g, idx, size=tuple(size), source=source)


POOL_GATHER = register(OpDef(
    "pool_gather", _pool_gather_impl, _pool_gather_infer, _pool_gather_vjp,
    lambda node: _GATHER_NAMES[node.attrs["source"]], saves=(1,),
))
POOL_SCATTER = register(OpDef(
    "pool_scatter", _pool_scatter_impl, _pool_scatter_infer, _pool_scatter_vjp,
    lambda node: _backward_name(_GATHER_NAMES[node.attrs["source"]]), saves=(1,),
))

# ---------------------------------------------------------------------------- pad_index


def pad_map(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """The input position each output position of a padded dimension of size ``n`` copies
    (negative pads crop)."""
    i = np.arange(-before, n + after)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        # PyTorch crops first, then wraps around what is left.
        lo, hi = max(-before, 0), n - max(-after, 0)
        return lo + (i - lo) % (hi - lo)
    j = np.abs(i)  # reflect: mirror at both ends without repeating the edge
    return np.where(j >= n, 2 * (n - 1) - j, j)


def _pad_index_infer(x: Any, pad: tuple, mode: str) -> tuple:
    shape = tuple(x.shape)
    lead = len(shape) - len(pad)
    out = shape[:lead] + tuple(n + b + a for n, (b, a) in zip(shape[lead:], pad))
    return out, x.dtype


def _pad_index_impl(x: np.ndarray, pad: tuple, mode: str) -> np.ndarray:
    lead = x.ndim - len(pad)
    for d, (b, a) in enumerate(pad):
        x = np.take(x, pad_map(x.shape[lead + d], b, a, mode), axis=lead + d)
    return x


def _pad_index_backward_infer(g: Any, pad: tuple, mode: str, size: tuple) -> tuple:
    return tuple(g.shape[:len(g.shape) - len(size)]) + tuple(size), g.dtype


def _pad_index_backward_impl(g: np.ndarray, pad: tuple, mode: str, size: tuple) -> np.ndarray:
    lead = g.ndim - len(pad)
    for d, (b, a) in enumerate(pad):
        m = pad_map(size[d], b, a, mode)
        moved = np.moveaxis(g, lead + d, 0)
        out = np.zeros((size[d],) + moved.shape[1:], g.dtype)
        np.add.at(out, m, moved)
        g = np.moveaxis(out, 0, lead + d)
    return np.ascontiguousarray(g)


def _pad_index_vjp(ctx, g):
    size = tuple(ctx.inputs[0].shape[len(ctx.inputs[0].shape) - len(ctx.attrs["pad"]):])
    return (bind(PAD_INDEX_BACKWARD, g, size=size, **ctx.attrs),)


def _pad_index_backward_vjp(ctx, g):
    return (bind(PAD_INDEX, g, pad=ctx.attrs["pad"], mode=ctx.attrs["mode"]),)


def _pad_index_name(node: Any) -> str:
    k = len(node.attrs["pad"])
    mode = node.attrs["mode"]
    if mode == "circular":
        return "CopySlices"
    return f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{k}DBackward0"


PAD_INDEX = register(OpDef(
    "pad_index", _pad_index_impl, _pad_index_infer, _pad_index_vjp, _pad_index_name,
))
PAD_INDEX_BACKWARD = register(OpDef(
    "pad_index_backward", _pad_index_backward_impl, _pad_index_backward_infer,
    _pad_index_backward_vjp, lambda node: _backward_name(_pad_index_name(node)),
))
