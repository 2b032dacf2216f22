"""Shape ops: PyTorch's flatten/split/chunk/movedim/repeat/roll/tril/diag/meshgrid
family, `view(dtype)` and small products (`outer`, `kron`, `cross`, `diff`).

Most are compositions of the view primitives of `dualgraph.ops.shape` (``reshape``,
``transpose``, ``getitem``, ``broadcast_to``), so whatever PyTorch returns as a view is a
view here too: a write through it reaches the base, eager and traced. Four primitives are
new, each where a composition would be wrong or slow:

- ``diagonal`` (a view: a strided diagonal no reshape/slice chain can express for batched
  or transposed inputs) and ``diag_scatter`` (its VJP: zeros with a diagonal filled in,
  also ``diag_embed`` and 1-D ``diag``);
- ``flip``: a copy in PyTorch, which a negative-step slice (a view) would not be;
- ``view_dtype``: bit reinterpretation, not differentiable.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import as_dtype
from ..errors import ShapeError
from ..modes import bind
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .broadcast import _is_int, broadcast_shapes, normalize_axis, normalize_dim
from .registry import OpDef, register

# ------------------------------------------------------------------------- helpers


def _dims_arg(dims: tuple, name: str) -> tuple:
    """``f(x, 2, 3)`` and ``f(x, (2, 3))`` alike (PyTorch's varargs-or-sequence)."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(dims[0])
    for d in dims:
        if not _is_int(d):
            raise TypeError(f"{name}: expected ints, got {type(d).__name__} {d!r}")
    return tuple(dims)


def _select(x: Any, dim: int, entry: Any) -> Any:
    """``x`` indexed by ``entry`` (an int or a slice) along ``dim`` only: a view."""
    return S.getitem(x, (slice(None),) * dim + (entry,))


def _ints(values: Any, name: str) -> tuple:
    values = tuple(values)
    for v in values:
        if not _is_int(v):
            raise TypeError(f"{name}: expected ints, got {type(v).__name__} {v!r}")
    return tuple(int(v) for v in values)


# --------------------------------------------------------------- flatten / unflatten


def flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    """Merge dims ``start_dim..end_dim`` into one (a view when the layout allows).
    ``dg.flatten(x, 1)`` turns ``(N, C, H, W)`` into ``(N, C*H*W)``."""
    shape = tuple(x.shape)
    if not shape:
        return S.reshape(x, (1,))
    s = normalize_dim("flatten", start_dim, len(shape))
    e = normalize_dim("flatten", end_dim, len(shape))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x
    return S.reshape(x, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(x: Any, dim: int, sizes: Any) -> Any:
    """Split dim ``dim`` into ``sizes`` (one may be -1): ``x.unflatten(1, (2, -1))``."""
    shape = tuple(x.shape)
    d = normalize_dim("unflatten", dim, len(shape))
    sizes = _ints(sizes, "unflatten")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = shape[d] if shape else 1
    known = math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1:
        raise RuntimeError("unflatten: only one dimension can be inferred")
    if -1 in sizes:
        if known == 0 or n % known:
            raise ShapeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                             f"size of dim {dim} ({n}) in the input tensor")
        sizes = tuple(n // known if s == -1 else s for s in sizes)
    elif known != n:
        raise ShapeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                         f"size of dim {dim} ({n}) in the input tensor")
    return S.reshape(x, shape[:d] + sizes + shape[d + 1:])


# --------------------------------------------------------------- movedim / swapaxes


def movedim(x: Any, source: Any, destination: Any) -> Any:
    """Move dims ``source`` to positions ``destination`` (ints or sequences), the others
    keeping their order: ``dg.movedim(x, 0, -1)``. A view."""
    ndim = len(x.shape)
    src = (source,) if _is_int(source) else tuple(source)
    dst = (destination,) if _is_int(destination) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    src = tuple(normalize_dim("movedim", d, ndim) for d in src)
    dst = tuple(normalize_dim("movedim", d, ndim) for d in dst)
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(source)})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(destination)})")
    if ndim == 0:
        return x
    perm = [-1] * ndim
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(d for d in range(ndim) if d not in src)
    perm = tuple(p if p != -1 else next(rest) for p in perm)
    if perm == tuple(range(ndim)):
        return x
    return S.permute(x, perm)


moveaxis = movedim


def swapaxes(x: Any, axis0: int, axis1: int) -> Any:
    """Swap two dims (``transpose(x, axis0, axis1)``); a view."""
    return S.transpose(x, axis0, axis1)


swapdims = swapaxes


# ------------------------------------------------------- split / chunk / unbind / narrow


def narrow(x: Any, dim: int, start: Any, length: int) -> Any:
    """``length`` elements of dim ``dim`` from ``start`` (negative counts from the end); a
    view."""
    shape = tuple(x.shape)
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = normalize_dim("narrow", dim, len(shape))
    n = shape[d]
    start = int(start)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but "
                         f"got {start})")
    start = start % n if start < 0 else start
    if length < 0 or start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _select(x, d, slice(start, start + length))


def _pieces(x: Any, d: int, sizes: tuple) -> tuple:
    out, at = [], 0
    for s in sizes:
        out.append(_select(x, d, slice(at, at + s)))
        at += s
    return tuple(out)


def split(x: Any, split_size_or_sections: Any, dim: int = 0) -> tuple:
    """Views of ``x`` along ``dim``: pieces of ``split_size`` (the last may be smaller), or of
    the sizes in a list (which must add up to the dim): ``dg.split(x, [1, 3], dim=1)``."""
    shape = tuple(x.shape)
    if not shape:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = normalize_dim("split", dim, len(shape))
    n = shape[d]
    if _is_int(split_size_or_sections):
        size = int(split_size_or_sections)
        if size < 0 or (size == 0 and n != 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        if n == 0:
            return (x,)
        sizes = (size,) * (n // size) + ((n % size,) if n % size else ())
        return _pieces(x, d, sizes)
    sizes = _ints(split_size_or_sections, "split")
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {d}), but got split_sizes="
                           f"{list(sizes)}")
    return _pieces(x, d, sizes)


def chunk(x: Any, chunks: int, dim: int = 0) -> tuple:
    """At most ``chunks`` views of equal size ``ceil(n / chunks)`` along ``dim`` (the last may
    be smaller, and there may be fewer): PyTorch's rule."""
    if not _is_int(chunks) or chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    shape = tuple(x.shape)
    if not shape:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    n = shape[normalize_dim("chunk", dim, len(shape))]
    return split(x, max(-(-n // chunks), 1) if n else 0, dim)


def tensor_split(x: Any, indices_or_sections: Any, dim: int = 0) -> tuple:
    """NumPy's ``array_split``: ``sections`` pieces (the first ``n % sections`` one longer),
    or pieces cut at the given indices. Views."""
    shape = tuple(x.shape)
    if not shape:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = normalize_dim("tensor_split", dim, len(shape))
    n = shape[d]
    if _is_int(indices_or_sections):
        k = int(indices_or_sections)
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        q, r = divmod(n, k)
        return _pieces(x, d, tuple(q + 1 if i < r else q for i in range(k)))
    cuts = _ints(indices_or_sections, "tensor_split")
    out, prev = [], 0
    for c in cuts + (n,):
        c = min(max(c + n if c < 0 else c, 0), n)
        out.append(_select(x, d, slice(prev, max(c, prev))))
        prev = max(c, prev)
    return tuple(out)


def unbind(x: Any, dim: int = 0) -> tuple:
    """The slices ``x[..., i, ...]`` along ``dim``, as views."""
    shape = tuple(x.shape)
    if not shape:
        raise RuntimeError("Dimension specified as 0 but tensor has no dimensions")
    d = normalize_dim("unbind", dim, len(shape))
    return tuple(_select(x, d, i) for i in range(shape[d]))


# ----------------------------------------------------------------------- stacking


def atleast_1d(*tensors: Any) -> Any:
    """``x`` with at least one dim (a view); several tensors give a tuple."""
    return _atleast(tensors, 1)


def atleast_2d(*tensors: Any) -> Any:
    """``x`` with at least two dims (a 1-D ``(n,)`` becomes ``(1, n)``)."""
    return _atleast(tensors, 2)


def atleast_3d(*tensors: Any) -> Any:
    """``x`` with at least three dims (``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` ``(m, n, 1)``)."""
    return _atleast(tensors, 3)


def _atleast(tensors: tuple, k: int) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        return tuple(_atleast_one(t, k) for t in tensors[0])
    out = tuple(_atleast_one(t, k) for t in tensors)
    return out[0] if len(out) == 1 else out


def _atleast_one(x: Any, k: int) -> Any:
    shape = tuple(x.shape)
    if len(shape) >= k:
        return x
    if k == 1:
        new = (1,)
    elif k == 2:
        new = (1,) + shape if shape else (1, 1)
    else:
        new = {0: (1, 1, 1), 1: (1,) + shape + (1,), 2: shape + (1,)}[len(shape)]
    return S.reshape(x, new)


def hstack(tensors: Any) -> Any:
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    ts = _atleast(tuple(tensors), 1)
    return S.concatenate(ts, 0 if len(ts[0].shape) == 1 else 1)


def vstack(tensors: Any) -> Any:
    """Concatenate along dim 0, 1-D tensors as rows."""
    return S.concatenate(_atleast(tuple(tensors), 2), 0)


row_stack = vstack


def dstack(tensors: Any) -> Any:
    """Concatenate along dim 2 (depth), after `atleast_3d`."""
    return S.concatenate(_atleast(tuple(tensors), 3), 2)


def column_stack(tensors: Any) -> Any:
    """0-d and 1-D tensors as columns, then concatenate along dim 1."""
    ts = []
    for t in tensors:
        shape = tuple(t.shape)
        ts.append(S.reshape(t, (math.prod(shape), 1)) if len(shape) <= 1 else t)
    return S.concatenate(ts, 1)


# --------------------------------------------------------------- repeat / tile / roll


def repeat(x: Any, *sizes: Any) -> Any:
    """Tile ``x`` ``sizes[i]`` times along each dim (``Tensor.repeat``; more sizes than dims
    add leading dims): a broadcast of an interleaved reshape, then one reshape."""
    sizes = _ints(_dims_arg(sizes, "repeat"), "repeat")
    shape = tuple(x.shape)
    if len(sizes) < len(shape):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    if any(r < 0 for r in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(sizes)}")
    shape = (1,) * (len(sizes) - len(shape)) + shape
    out = tuple(r * s for r, s in zip(sizes, shape))
    if all(r == 1 for r in sizes):
        # PyTorch's repeat always copies; so does flipping no dims.
        return _clone(S.reshape(x, out))
    inter = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for r, s in zip(sizes, shape) for v in (r, s))
    return S.reshape(S.broadcast_to(S.reshape(x, inter), wide), out)


def tile(x: Any, dims: Any) -> Any:
    """``repeat`` with ``dims`` padded with leading ones to ``x``'s rank."""
    dims = _ints(dims if isinstance(dims, (tuple, list)) else (dims,), "tile")
    return repeat(x, (1,) * (len(x.shape) - len(dims)) + dims)


def repeat_interleave(x: Any, repeats: Any, dim: int | None = None, *,
                      output_size: int | None = None) -> Any:
    """Each element repeated ``repeats`` times along ``dim`` (flattened when ``None``).
    Integer ``repeats`` compile; a tensor of per-element counts is eager only (the output's
    size depends on its values)."""
    if dim is None:
        x = flatten(x)
        dim = 0
    shape = tuple(x.shape)
    if not shape:
        x, shape = S.reshape(x, (1,)), (1,)
    d = normalize_dim("repeat_interleave", dim, len(shape))
    if hasattr(repeats, "shape"):
        counts = np.asarray(repeats.numpy() if hasattr(repeats, "numpy") else repeats)
        if counts.ndim == 0 or counts.size == 1:
            repeats = int(counts.reshape(-1)[0])
        else:
            if counts.shape != (shape[d],):
                raise RuntimeError("repeats must have the same size as input along dim, but got "
                                   f"repeats.size(0) = {counts.size} and input.size({d}) = "
                                   f"{shape[d]}")
            if (counts < 0).any():
                raise RuntimeError("repeats can not be negative")
            parts = [_repeat_one(_select(x, d, slice(i, i + 1)), d, int(c))
                     for i, c in enumerate(counts) if c]
            if not parts:
                return _select(x, d, slice(0, 0))
            return parts[0] if len(parts) == 1 else S.concatenate(parts, d)
    if not _is_int(repeats) or repeats < 0:
        raise RuntimeError(f"repeats can not be negative, got {repeats!r}")
    return _repeat_one(x, d, int(repeats))


def _repeat_one(x: Any, d: int, r: int) -> Any:
    shape = tuple(x.shape)
    wide = shape[:d + 1] + (r,) + shape[d + 1:]
    inter = shape[:d + 1] + (1,) + shape[d + 1:]
    out = shape[:d] + (shape[d] * r,) + shape[d + 1:]
    return S.reshape(S.broadcast_to(S.reshape(x, inter), wide), out)


def roll(x: Any, shifts: Any, dims: Any = None) -> Any:
    """Rotate elements along ``dims`` by ``shifts`` (ints or tuples of equal length; no dims:
    the flattened tensor, shape kept): two slices joined, per dim."""
    shifts_t = (shifts,) if _is_int(shifts) else _ints(shifts, "roll")
    if dims is None:
        if len(shifts_t) != 1:
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: "
                               f"{len(shifts_t)}, dims:0")
        return S.reshape(roll(flatten(x), shifts_t[0], 0), tuple(x.shape))
    dims_t = (dims,) if _is_int(dims) else _ints(dims, "roll")
    if len(shifts_t) != len(dims_t):
        raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts_t)}, "
                           f"dims:{len(dims_t)}")
    out = x
    for s, dim in zip(shifts_t, dims_t):
        d = normalize_dim("roll", dim, len(x.shape))
        n = x.shape[d] if x.shape else 1
        s = s % n if n else 0
        if s:
            out = S.concatenate([_select(out, d, slice(n - s, n)),
                                 _select(out, d, slice(0, n - s))], d)
    return out


# ---------------------------------------------------------------------------- flip


def _flip_infer(x: Any, axes: tuple) -> tuple:
    return tuple(x.shape), x.dtype


def _flip_impl(x: np.ndarray, axes: tuple) -> np.ndarray:
    # A copy, as in PyTorch: flip is not a view there.
    return np.ascontiguousarray(np.flip(x, axes)) if axes else x.copy()


def _flip_vjp(ctx, g):
    return (bind(FLIP, g, axes=ctx.attrs["axes"]),)


def _flip_name(node: Any) -> str:
    return "FlipBackward0" if node.attrs["axes"] else "CloneBackward0"


def flip(x: Any, *dims: Any) -> Any:
    """Reverse the order of elements along ``dims`` (a copy): ``dg.flip(x, (0, 1))``."""
    dims = _dims_arg(dims, "flip")
    axes = normalize_axis("flip", dims, len(x.shape))
    return bind(FLIP, x, axes=axes)


def fliplr(x: Any) -> Any:
    """Flip dim 1 (needs at least 2 dims)."""
    if len(x.shape) < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(x, 1)


def flipud(x: Any) -> Any:
    """Flip dim 0 (needs at least 1 dim)."""
    if len(x.shape) < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(x, 0)


def rot90(x: Any, k: int = 1, dims: Any = (0, 1)) -> Any:
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first towards the
    second axis."""
    dims = _ints(dims, "rot90")
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    ndim = len(x.shape)
    if ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {ndim}")
    d0, d1 = (normalize_dim("rot90", d, ndim) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    k %= 4
    if k == 1:
        return S.transpose(flip(x, d1), d0, d1)
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return S.transpose(flip(x, d0), d0, d1)
    return _clone(x)


def _clone(x: Any) -> Any:
    """A copy of ``x`` (flipping no dims): where PyTorch returns a new tensor, not a view."""
    return bind(FLIP, x, axes=())


# ------------------------------------------------------------------- tril / triu


def _tri_mask(shape: tuple, k: int, lower: bool) -> np.ndarray:
    n, m = shape[-2], shape[-1]
    rows = np.arange(n)[:, None]
    cols = np.arange(m)[None, :]
    return (cols - rows <= k) if lower else (cols - rows >= k)


def _tri(x: Any, k: int, lower: bool, name: str) -> Any:
    shape = tuple(x.shape)
    if len(shape) < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    if not _is_int(k):
        raise TypeError(f"{name}: diagonal must be an int, got {k!r}")
    zero = False if x.dtype == np.bool_ else 0
    # A constant mask and a where: elementwise, so it fuses with its neighbours.
    return E.where(_tri_mask(shape, int(k), lower), x, zero)


def tril(x: Any, diagonal: int = 0) -> Any:
    """The lower triangle of the last two dims (elements with ``j - i <= diagonal``)."""
    return _tri(x, diagonal, True, "tril")


def triu(x: Any, diagonal: int = 0) -> Any:
    """The upper triangle of the last two dims (elements with ``j - i >= diagonal``)."""
    return _tri(x, diagonal, False, "triu")


# ------------------------------------------------------------------------ diagonal
# Attributes: offset (k > 0 above the main diagonal), dim1 != dim2 (non-negative). The
# diagonal becomes the last dim of the result, the other dims keeping their order.


def _diag_len(n: int, m: int, offset: int) -> int:
    return max(min(n + min(offset, 0), m - max(offset, 0)), 0)


def _diagonal_shape(shape: tuple, offset: int, dim1: int, dim2: int) -> tuple:
    rest = tuple(s for i, s in enumerate(shape) if i not in (dim1, dim2))
    return rest + (_diag_len(shape[dim1], shape[dim2], offset),)


def _diagonal_infer(x: Any, offset: int, dim1: int, dim2: int) -> tuple:
    return _diagonal_shape(tuple(x.shape), offset, dim1, dim2), x.dtype


def _diagonal_impl(x: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    out = np.diagonal(x, offset, dim1, dim2)
    if x.flags.writeable:
        # NumPy hands out diagonals read-only (a legacy guard); PyTorch's diagonal is a
        # writable view, and writes through it must reach the base.
        out = out.view()
        out.flags.writeable = True
    return out


def _diagonal_vjp(ctx, g):
    a = ctx.attrs
    return (bind(DIAG_SCATTER, g, shape=tuple(ctx.inputs[0].shape), offset=a["offset"],
                 dim1=a["dim1"], dim2=a["dim2"]),)


def _diag_scatter_infer(g: Any, shape: tuple, offset: int, dim1: int, dim2: int) -> tuple:
    want = _diagonal_shape(shape, offset, dim1, dim2)
    if tuple(g.shape) != want:
        raise ShapeError(f"diag_scatter: the diagonal of shape {shape} has shape {want}, got "
                         f"a value of shape {tuple(g.shape)}")
    return shape, g.dtype


def _diag_scatter_impl(g: np.ndarray, shape: tuple, offset: int, dim1: int,
                       dim2: int) -> np.ndarray:
    out = np.zeros(shape, g.dtype)
    _diagonal_impl(out, offset, dim1, dim2)[...] = g
    return out


def _diag_scatter_vjp(ctx, g):
    a = ctx.attrs
    return (bind(DIAGONAL, g, offset=a["offset"], dim1=a["dim1"], dim2=a["dim2"]),)


def diagonal(x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """The diagonal of the planes ``(dim1, dim2)``, as the last dim of a view:
    ``x.diagonal(1)`` is the first superdiagonal of a matrix."""
    ndim = len(x.shape)
    if ndim < 2:
        raise RuntimeError(f"diagonal: expected a tensor with at least 2 dims, got shape "
                           f"{tuple(x.shape)}")
    d1 = normalize_dim("diagonal", dim1, ndim)
    d2 = normalize_dim("diagonal", dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if not _is_int(offset):
        raise TypeError(f"diagonal: offset must be an int, got {offset!r}")
    return bind(DIAGONAL, x, offset=int(offset), dim1=d1, dim2=d2)


def diag_embed(x: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
    """The last dim of ``x`` put on the diagonal of new square dims ``(dim1, dim2)``, zeros
    elsewhere."""
    shape = tuple(x.shape)
    ndim = len(shape) + 1
    d1 = normalize_dim("diag_embed", dim1, ndim)
    d2 = normalize_dim("diag_embed", dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if not shape:
        x, shape = S.reshape(x, (1,)), (1,)
    m = shape[-1] + abs(int(offset))
    rest = iter(shape[:-1])
    out = tuple(m if i in (d1, d2) else next(rest) for i in range(ndim))
    return bind(DIAG_SCATTER, x, shape=out, offset=int(offset), dim1=d1, dim2=d2)


def diag(x: Any, diagonal: int = 0) -> Any:
    """A 1-D tensor to a square matrix with it on diagonal ``diagonal``, or a matrix's
    diagonal ``diagonal`` as a new 1-D tensor (a copy, as in PyTorch)."""
    ndim = len(x.shape)
    if ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if ndim == 2:
        return _clone(globals()["diagonal"](x, diagonal))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {ndim}D")


def trace(x: Any) -> Any:
    """The sum of a matrix's main diagonal."""
    if len(x.shape) != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {len(x.shape)}")
    return R.sum(diagonal(x))


# ----------------------------------------------------------------------- meshgrid


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-D (or 0-d) tensors, as broadcast views: with ``"ij"`` the
    first tensor runs along dim 0, with ``"xy"`` (Cartesian) along dim 1."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                         f"received: {indexing}")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if len(t.shape) > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {tuple(t.shape)}")
    sizes = [math.prod(t.shape) for t in tensors]
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0  # tensor i lies along dim order[i]
    full = [0] * len(tensors)
    for i, d in enumerate(order):
        full[d] = sizes[i]
    full = tuple(full)
    out = []
    for i, t in enumerate(tensors):
        shape = tuple(sizes[i] if j == order[i] else 1 for j in range(len(tensors)))
        out.append(S.broadcast_to(S.reshape(t, shape), full))
    return tuple(out)


# ------------------------------------------------------------------- view(dtype)


def _view_dtype_infer(x: Any, dtype: np.dtype) -> tuple:
    return _view_dtype_shape(tuple(x.shape), x.dtype, dtype), dtype


def _view_dtype_shape(shape: tuple, old: np.dtype, new: np.dtype) -> tuple:
    a, b = np.dtype(old).itemsize, np.dtype(new).itemsize
    if a == b:
        return shape
    if not shape:
        raise RuntimeError(f"self.dim() cannot be 0 to view {old} as {new} (different element "
                           f"sizes)")
    last = shape[-1] * a
    if last % b:
        raise RuntimeError(f"self.size(-1) must be divisible by {b // math.gcd(a, b)} to view "
                           f"{old} as {new} (different element sizes), but got {shape[-1]}")
    return shape[:-1] + (last // b,)


def _view_dtype_impl(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    # A copy of the bits (dualgraph's one difference from PyTorch, which shares storage).
    if x.dtype.itemsize != np.dtype(dtype).itemsize:
        _check_view_strides(x, x.dtype, dtype)
    shape = _view_dtype_shape(x.shape, x.dtype, dtype)
    return np.ascontiguousarray(x).reshape(-1).view(dtype).reshape(shape).copy()


def view_dtype(x: Any, dtype: Any) -> Any:
    """``x``'s bits read as ``dtype`` (``Tensor.view(dtype)``): a different element size
    rescales the last dim, which must be contiguous. Not differentiable."""
    dtype = as_dtype(dtype)
    if dtype == x.dtype:
        return x
    shape = tuple(x.shape)
    if np.dtype(dtype).itemsize != x.dtype.itemsize:
        _view_dtype_shape(shape, x.dtype, dtype)  # the size errors first, as PyTorch
    return bind(VIEW_DTYPE, x, dtype=dtype)


# ------------------------------------------------------------- small products etc.


def _check_view_strides(data: Any, old: np.dtype, new: np.dtype) -> None:
    """PyTorch's layout rules for a view with another element size, checked by the kernel
    on the array it gets (so eagerly: traced values have no strides, and dualgraph copies
    the bits anyway)."""
    if not data.ndim:
        return
    size = data.itemsize
    if data.shape[-1] > 1 and data.strides[-1] != size:
        raise RuntimeError(f"self.stride(-1) must be 1 to view {old} as {new} (different "
                           f"element sizes), but got {data.strides[-1] // size}")
    ratio = max(np.dtype(new).itemsize // size, 1)
    for d in range(data.ndim - 1):
        stride = data.strides[d] // size
        if data.shape[d] > 1 and stride % ratio:
            raise RuntimeError(f"self.stride({d}) must be divisible by {ratio} to view {old} "
                               f"as {new} (different element sizes), but got {stride}")


def outer(a: Any, b: Any) -> Any:
    """The outer product of two 1-D tensors: ``a[i] * b[j]``."""
    if len(a.shape) != 1 or len(b.shape) != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got shapes {tuple(a.shape)} and "
                           f"{tuple(b.shape)}")
    return E.mul(S.reshape(a, (a.shape[0], 1)), b)


ger = outer


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product: blocks ``a[i, j] * b``; the ranks are padded to the larger."""
    n = max(len(a.shape), len(b.shape))
    sa = (1,) * (n - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (n - len(b.shape)) + tuple(b.shape)
    ia = tuple(v for s in sa for v in (s, 1))
    ib = tuple(v for s in sb for v in (1, s))
    prod = E.mul(S.reshape(a, ia), S.reshape(b, ib))
    return S.reshape(prod, tuple(x * y for x, y in zip(sa, sb)))


def cross(a: Any, b: Any, dim: int | None = None) -> Any:
    """The 3-vector cross product along ``dim`` (default: the first dim of size 3), with
    broadcasting between inputs of the same rank."""
    if len(a.shape) != len(b.shape):
        raise ShapeError(f"linalg.cross: inputs must have the same number of dimensions, got "
                         f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
    shape = broadcast_shapes("cross", tuple(a.shape), tuple(b.shape))
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    d = normalize_dim("cross", dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
    a = S.broadcast_to(a, shape) if tuple(a.shape) != shape else a
    b = S.broadcast_to(b, shape) if tuple(b.shape) != shape else b
    a0, a1, a2 = (_select(a, d, i) for i in range(3))
    b0, b1, b2 = (_select(b, d, i) for i in range(3))
    return S.stack([E.sub(E.mul(a1, b2), E.mul(a2, b1)), E.sub(E.mul(a2, b0), E.mul(a0, b2)),
                    E.sub(E.mul(a0, b1), E.mul(a1, b0))], d)


def diff(x: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th forward difference along ``dim`` (``x[i + 1] - x[i]``; bools: ``!=``),
    after joining ``prepend`` and ``append``."""
    ndim = len(x.shape)
    if ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = normalize_dim("diff", dim, ndim)
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = S.concatenate(parts, d)
    for _ in range(n):
        m = x.shape[d]
        hi, lo = _select(x, d, slice(1, m)), _select(x, d, slice(0, max(m - 1, 0)))
        x = E.ne(hi, lo) if x.dtype == np.bool_ else E.sub(hi, lo)
    return x


# ------------------------------------------------------------------------ registry

DIAGONAL = register(OpDef(
    "diagonal", _diagonal_impl, _diagonal_infer, _diagonal_vjp, "DiagonalBackward0", view=True,
))
DIAG_SCATTER = register(OpDef(
    "diag_scatter", _diag_scatter_impl, _diag_scatter_infer, _diag_scatter_vjp,
    "DiagEmbedBackward0",
))
FLIP = register(OpDef("flip", _flip_impl, _flip_infer, _flip_vjp, _flip_name))
VIEW_DTYPE = register(OpDef(
    "view_dtype", _view_dtype_impl, _view_dtype_infer, None, "", differentiable=False,
))
