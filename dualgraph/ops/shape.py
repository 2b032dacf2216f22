"""Shape ops: reshape, transpose and permute, broadcast_to, basic indexing, view chains,
concatenate and stack, astype, and PyTorch's flatten/split/chunk/
movedim/repeat/roll/flip/tril/diagonal/meshgrid family and ``view(dtype)``.

Attributes are canonical (resolved ``-1``, explicit axes, normalized indices) so that
equal programs give equal graphs. Most of PyTorch's family are compositions of the view
primitives (``reshape``, ``transpose``, ``getitem``, ``broadcast_to``), so whatever PyTorch
returns as a view is a view here too: a write through it reaches the base, eager and
traced. The other primitives are each where a composition would be wrong or slow:

- ``diagonal`` (a view: a strided diagonal no reshape/slice chain can express for batched
  or transposed inputs). Its VJP ``diag_scatter`` is in `dualgraph.ops.gather`, with
  ``getitem``'s (``scatter``) and a write through a view (``view_scatter``);
- ``flip``: a copy in PyTorch, which a negative-step slice (a view) would not be;
- ``view_dtype``: bit reinterpretation, not differentiable.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..dtypes import as_dtype
from ..errors import ShapeError
from ..modes import bind
from . import elementwise as E
from . import gather as G
from . import lengths as L
from .broadcast import (
    _is_int,
    normalize_axis,
    normalize_dim,
    promote_arrays,
    result_dtype,
)
from .layout import layout_of
from .registry import OpDef, register

# ----------------------------------------------------------------------------- reshape


def _reshape_infer(x: Any, shape: tuple) -> tuple:
    if int(np.prod(x.shape)) != int(np.prod(shape)):
        raise ShapeError(
            f"reshape: cannot reshape a tensor of shape {tuple(x.shape)} into shape {shape}"
        )
    return shape, x.dtype


def _resolve_shape(old: tuple, shape: tuple) -> tuple:
    for d in shape:
        # int(d) would take 2.5 as 2 and fail on 'a' with Python's own message.
        if not isinstance(d, (int, np.integer)) or isinstance(d, (bool, np.bool_)):
            raise TypeError(f"reshape: shape must be ints, got {type(d).__name__} {d!r} in "
                            f"{shape!r}")
    shape = tuple([int(d) for d in shape])
    if -1 not in shape:
        if math.prod(shape) != math.prod(old) or min(shape, default=0) < 0:
            raise ShapeError(f"reshape: cannot reshape a tensor of shape {old} into shape {shape}")
        return shape
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        size = int(np.prod(old))
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape a tensor of shape {old} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"reshape: invalid shape {shape}")
    return shape


def torch_named(out: Any, x: Any, name: str) -> Any:
    """``out``, its eager tape node named ``name``: PyTorch's name for the function that
    made ``out`` from ``x`` through a more general op (``squeeze`` is a reshape). ``out``
    that is ``x`` itself, untaped or traced keeps its node's name."""
    if out is not x:
        relabel = getattr(getattr(out, "grad_fn", None), "relabel", None)
        if relabel is not None:
            relabel(name)
    return out


def reshape(x: Any, *dims: Any, shape: Any = None) -> Any:
    """Reshape to ``shape`` (one dimension may be ``-1``); ``reshape(x, 2, 3)`` and
    ``reshape(x, shape=(2, 3))`` also work."""
    shape = _keyword_shape("reshape", "shape", dims, shape)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    elif len(shape) == 1 and isinstance(shape[0], str):
        raise TypeError(f"reshape: shape must be ints, got str {shape[0]!r}")
    shape = _resolve_shape(tuple(x.shape), shape)
    if shape == tuple(x.shape):
        return x
    return bind(RESHAPE, x, shape=shape)


def _keyword_shape(fn: str, keyword: str, dims: tuple, value: Any) -> tuple:
    """The shape given positionally (``dims``) or by the keyword torch names (``value``)."""
    if value is None:
        return dims
    if dims:
        raise TypeError(f"{fn}() got multiple values for argument '{keyword}'")
    return (value,)


def _reshape_vjp(ctx, g):
    return (reshape(g, ctx.inputs[0].shape),)


def _reshape_vjp_arrays(ctx, args, out, g):
    shape = tuple(ctx.inputs[0].shape)
    return (g if g.shape == shape else np.reshape(g, shape=shape),)


# --------------------------------------------------------------------------- transpose


def _transpose_infer(x: Any, axes: tuple) -> tuple:
    shape = tuple(x.shape)
    if sorted(axes) != list(range(len(shape))):
        raise ShapeError(f"transpose: axes {axes} are not a permutation for shape {shape}")
    return tuple(shape[a] for a in axes), x.dtype


def permute(x: Any, *args: Any, dims: Any = None) -> Any:
    """Reorder the dimensions: output dim ``i`` is input dim ``dims[i]`` (``torch.permute``,
    ``np.transpose(x, axes)``); no dims reverses them (``x.T``). ``dg.permute(x, 2, 0, 1)``,
    ``dg.permute(x, dims=(2, 0, 1))``"""
    dims = _dims_kwarg(args, dims, "permute")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    ndim = len(x.shape)
    if not dims:
        axes = _REVERSED[ndim] if ndim < 8 else tuple(reversed(range(ndim)))
        return bind(TRANSPOSE, x, axes=axes)
    if len(dims) != ndim:
        raise ShapeError(f"permute: dims {tuple(dims)} do not match shape {tuple(x.shape)} "
                         f"(one dim per dimension of the tensor)")
    axes = tuple([normalize_dim("permute", d, ndim) for d in dims])
    if len(set(axes)) != ndim:
        raise ShapeError(f"permute: dims {tuple(dims)} repeat a dimension of shape "
                         f"{tuple(x.shape)}")
    return torch_named(bind(TRANSPOSE, x, axes=axes), x, "PermuteBackward0")


def transpose(x: Any, *dims: Any) -> Any:
    """Swap two dimensions, as PyTorch: ``dg.transpose(x, 0, 1)``; dims may be negative.

    Given anything other than two dims (a permutation tuple, or none) it permutes like
    `permute` / NumPy's ``transpose`` (none reverses, ``x.T``).
    """
    if len(dims) != 2 or not all(isinstance(d, (int, np.integer)) for d in dims):
        return permute(x, *dims)
    ndim = len(x.shape)
    d0 = normalize_dim("transpose", dims[0], ndim)
    d1 = normalize_dim("transpose", dims[1], ndim)
    if ndim == 0:
        return torch_named(bind(TRANSPOSE, x, axes=()), x, "TransposeBackward0")
    axes = list(range(ndim))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return torch_named(bind(TRANSPOSE, x, axes=tuple(axes)), x, "TransposeBackward0")


_REVERSED = [tuple(reversed(range(n))) for n in range(8)]


def _transpose_vjp(ctx, g):
    axes = ctx.attrs["axes"]
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a] = i
    return (bind(TRANSPOSE, g, axes=tuple(inverse)),)  # a valid permutation: no checks


def _transpose_vjp_arrays(ctx, args, out, g):
    axes = ctx.attrs["axes"]
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a] = i
    return (g.transpose(inverse),)


def _transpose_impl(x: Any, axes: tuple) -> Any:
    # The array method: np.transpose is a Python wrapper around it (a microsecond per view).
    return x.transpose(axes) if type(x) is np.ndarray else np.transpose(x, axes)


def _transpose_name(node: Any) -> str:
    return "TBackward0" if node.attrs["axes"] == (1, 0) else "PermuteBackward0"


# ------------------------------------------------------------------------ broadcast_to


def _broadcast_to_infer(x: Any, shape: tuple) -> tuple:
    xs = tuple(x.shape)
    ok = len(xs) <= len(shape) and all(
        a == b or a == 1 for a, b in zip(xs[::-1], shape[::-1])
    )
    if not ok:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {xs} to shape {shape}")
    return shape, x.dtype


def broadcast_to(x: Any, shape: tuple) -> Any:
    """Broadcast to ``shape`` (PyTorch's ``expand``)."""
    shape = tuple(int(d) for d in shape)
    return bind(BROADCAST_TO, x, shape=shape)


def _broadcast_to_vjp(ctx, g):
    return (g,)  # the engine sums g back to the input's shape


# ---------------------------------------------------------------------------- indexing
# An index is a tuple of entries: an int (non-negative), None (new axis) or a
# (start, stop, step) triple from slice.indices(), with Ellipsis expanded.


def normalize_index(index: Any, shape: tuple) -> tuple:
    if not isinstance(index, tuple):
        index = (index,)
    for e in index:
        if not (
            e is None or e is Ellipsis or isinstance(e, slice)
            or (isinstance(e, (int, np.integer)) and not isinstance(e, bool))
        ):
            raise TypeError(
                f"only basic indexing (ints, slices, None, ...) is supported, got {e!r}"
            )
    n_real = sum(1 for e in index if e is not None and e is not Ellipsis)
    if sum(1 for e in index if e is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > len(shape):
        raise IndexError(f"too many indices for a tensor of shape {shape}: {len(index)} given")
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (len(shape) - n_real) + index[k + 1:]
    out = []
    dim = 0
    for e in index:
        if e is None:
            out.append(None)
            continue
        size = shape[dim]
        if isinstance(e, slice):
            start, stop, step = e.indices(size)
            out.append((start, None if step < 0 and stop < 0 else stop, step))
        else:
            i = int(e)
            if not -size <= i < size:
                raise IndexError(
                    f"index {i} is out of bounds for dimension {dim} with size {size}"
                )
            out.append(i % size)
        dim += 1
    return tuple(out)


def to_numpy_index(index: tuple) -> tuple:
    return tuple(slice(*e) if isinstance(e, tuple) else e for e in index)


def _getitem_impl(x: np.ndarray, index: tuple) -> np.ndarray:
    # The trailing ellipsis makes an all-int index give a 0-d view, not a NumPy scalar
    # copy: x[1] aliases x as every other basic index does.
    return x[to_numpy_index(index) + (Ellipsis,)]


def _getitem_infer(x: Any, index: tuple) -> tuple:
    return np.empty(tuple(x.shape), dtype=np.bool_)[to_numpy_index(index)].shape, x.dtype


def getitem(x: Any, index: Any) -> Any:
    """Basic indexing ``x[index]``; the gradient scatters back into zeros."""
    return bind(GETITEM, x, index=normalize_index(index, tuple(x.shape)))


def _getitem_vjp(ctx, g):
    return (bind(G.SCATTER, g, shape=tuple(ctx.inputs[0].shape), index=ctx.attrs["index"]),)


def _getitem_name(node: Any) -> str:
    kinds = {type(e) for e in node.attrs["index"]}
    if kinds == {int}:
        return "SelectBackward0"
    if kinds <= {tuple}:
        return "SliceBackward0"
    return "IndexBackward0"


# ------------------------------------------------------------------------ view_scatter
# A view is its base seen through a chain of view ops. The chain is kept as a hashable
# tuple of ``(op name, sorted attrs)`` steps (a node attribute: equal writes give equal
# graphs), replayed from the base to regenerate the view (`replay_view`).


def view_step(op: Any, attrs: dict) -> tuple:
    """One step of a view chain: ``op`` applied with ``attrs``."""
    items = tuple(attrs.items())
    # Sorted so equal steps compare equal; one attribute (most views) is sorted already.
    return (op.name, items if len(items) < 2 else tuple(sorted(items)))


def replay_view(x: Any, chain: tuple) -> Any:
    """``x`` seen through the view ``chain`` (recorded ops, so gradients flow)."""
    from .registry import OPS

    for name, attrs in chain:
        x = bind(OPS[name], x, **dict(attrs))
    return x


@functools.lru_cache(maxsize=256)
def view_index(shape: tuple, chain: tuple) -> np.ndarray:
    """For each element of the view, its flat index in a C-ordered base of ``shape``.

    Indices rather than memory: a reshape that NumPy would copy still maps exactly."""
    from .registry import OPS

    idx = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    for name, attrs in chain:
        idx = OPS[name].impl(idx, **dict(attrs))
    idx = np.ascontiguousarray(idx)
    idx.flags.writeable = False
    return idx


# ---------------------------------------------------------------------- concat / stack


def _concat_infer(*xs: Any, axis: int) -> tuple:
    shapes = [tuple(x.shape) for x in xs]
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis
        ):
            raise ShapeError(
                f"concatenate: shapes {first} and {s} differ outside axis {axis}"
            )
    out = list(first)
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out), result_dtype(*xs)


def _concat_impl(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(promote_arrays(*xs), axis=axis)


def _concat_vjp(ctx, g):
    axis = ctx.attrs["axis"]
    grads = []
    offset = 0
    for inp in ctx.inputs:
        n = inp.shape[axis]
        index = tuple((0, d, 1) for d in g.shape[:axis]) + ((offset, offset + n, 1),)
        grads.append(bind(GETITEM, g, index=index))
        offset += n
    return tuple(grads)


def concatenate(tensors: Any, axis: int = 0, *, dim: int | None = None) -> Any:
    """Join tensors along an existing axis (``torch.cat``)."""
    tensors = tuple(tensors)
    if not tensors:
        raise ValueError("concatenate: needs at least one tensor")
    axis = dim if dim is not None else axis
    kept = tuple(t for t in tensors if tuple(t.shape) != (0,))
    if kept and len(kept) < len(tensors):
        # torch skips 1-D empty tensors beside tensors of any rank (programs grow a result
        # from torch.empty(0) by repeated cat); they still take part in type promotion
        dtype = result_dtype(*tensors)
        tensors = tuple(t if t.dtype == dtype else bind(ASTYPE, t, dtype=dtype) for t in kept)
    ndim = len(tensors[0].shape)
    if ndim == 0:
        raise ShapeError("concatenate: zero-dimensional tensors cannot be concatenated")
    (axis,) = normalize_axis("concatenate", axis, ndim)
    return bind(CONCATENATE, *tensors, axis=axis)


def _stack_infer(*xs: Any, axis: int) -> tuple:
    first = tuple(xs[0].shape)
    for x in xs[1:]:
        if tuple(x.shape) != first:
            raise ShapeError(f"stack: shapes {first} and {tuple(x.shape)} differ")
    return first[:axis] + (len(xs),) + first[axis:], result_dtype(*xs)


def _stack_impl(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.stack(promote_arrays(*xs), axis=axis)


def _stack_vjp(ctx, g):
    axis = ctx.attrs["axis"]
    lead = tuple((0, d, 1) for d in g.shape[:axis])
    return tuple(bind(GETITEM, g, index=lead + (i,)) for i in range(len(ctx.inputs)))


def stack(tensors: Any, axis: int = 0, *, dim: int | None = None) -> Any:
    """Join same-shape tensors along a new axis (``torch.stack``)."""
    tensors = tuple(tensors)
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    axis = dim if dim is not None else axis
    for i, t in enumerate(tensors):
        if not hasattr(t, "shape") or isinstance(t, np.generic):
            raise TypeError(f"stack(): argument 'tensors' must be a sequence of tensors, but "
                            f"element {i} is {type(t).__name__}")
    ndim = len(tensors[0].shape) + 1
    return bind(STACK, *tensors, axis=normalize_dim("stack", axis, ndim))


# ------------------------------------------------------------------------------ astype


def _astype_infer(x: Any, dtype: np.dtype) -> tuple:
    return tuple(x.shape), dtype


def _astype_impl(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return x.astype(dtype)


def _astype_vjp(ctx, g):
    return (g,)  # the engine casts g back to the input's dtype


def astype(x: Any, dtype: Any) -> Any:
    """Convert to ``dtype`` (PyTorch's ``.to(dtype)``); gradients are cast back. A cast of
    a floating tensor to an integer or bool dtype cuts the tape, as in PyTorch: integer
    tensors never require grad, so no gradient may flow back through the cast."""
    dtype = as_dtype(dtype)
    if dtype.kind in "biu" and getattr(x, "dtype", np.dtype(np.int64)).kind in "fc":
        x = bind(STOP_GRADIENT, x)
    return bind(ASTYPE, x, dtype=dtype)


def _stop_gradient_infer(x: Any) -> tuple:
    return tuple(x.shape), x.dtype


def stop_gradient(x: Any) -> Any:
    """The value of ``x`` with no gradient flowing back (what ``detach()`` means in a traced
    function; eager ``detach()`` needs no op, since the tape simply does not record it)."""
    return bind(STOP_GRADIENT, x)


# ------------------------------------------------------------------------- helpers


def _dims_kwarg(args: tuple, dims: Any, name: str) -> tuple:
    """The dims given positionally (``f(x, 0, 1)``, ``f(x, (0, 1))``) or as ``dims=``."""
    if dims is None:
        return args
    if args:
        raise TypeError(f"{name}() got multiple values for argument 'dims'")
    return (dims,)


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
    return getitem(x, (slice(None),) * dim + (entry,))


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
        return reshape(x, (1,))
    s = normalize_dim("flatten", start_dim, len(shape))
    e = normalize_dim("flatten", end_dim, len(shape))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x
    return reshape(x, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


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
    return reshape(x, shape[:d] + sizes + shape[d + 1:])


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
    return permute(x, perm)


moveaxis = movedim


def swapaxes(x: Any, axis0: int, axis1: int) -> Any:
    """Swap two dims (``transpose(x, axis0, axis1)``); a view."""
    return transpose(x, axis0, axis1)


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
    if hasattr(indices_or_sections, "shape") and hasattr(indices_or_sections, "tolist"):
        # PyTorch's tensor form: a 0-d tensor is a number of sections, a 1-D one the cuts.
        if len(indices_or_sections.shape) > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {len(indices_or_sections.shape)} dims")
        return tensor_split(x, indices_or_sections.tolist(), dim)
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
    return reshape(x, new)


def hstack(tensors: Any) -> Any:
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    ts = _atleast(tuple(tensors), 1)
    return concatenate(ts, 0 if len(ts[0].shape) == 1 else 1)


def vstack(tensors: Any) -> Any:
    """Concatenate along dim 0, 1-D tensors as rows."""
    return concatenate(_atleast(tuple(tensors), 2), 0)


row_stack = vstack


def dstack(tensors: Any) -> Any:
    """Concatenate along dim 2 (depth), after `atleast_3d`."""
    return concatenate(_atleast(tuple(tensors), 3), 2)


def column_stack(tensors: Any) -> Any:
    """0-d and 1-D tensors as columns, then concatenate along dim 1."""
    ts = []
    for t in tensors:
        shape = tuple(t.shape)
        ts.append(reshape(t, (math.prod(shape), 1)) if len(shape) <= 1 else t)
    return concatenate(ts, 1)


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
        return _clone(reshape(x, out))
    inter = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for r, s in zip(sizes, shape) for v in (r, s))
    y = reshape(broadcast_to(reshape(x, inter), wide), out)
    # PyTorch's repeat gives a fresh contiguous tensor; where the last reshape can be a
    # view of the broadcast (a repeat along a new leading dim), it keeps zero strides that
    # a later `view` would refuse, so copy it then.
    return y if layout_of(y) is None else _clone(y)


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
        x, shape = reshape(x, (1,)), (1,)
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
            return parts[0] if len(parts) == 1 else concatenate(parts, d)
    if not _is_int(repeats) or repeats < 0:
        raise RuntimeError(f"repeats can not be negative, got {repeats!r}")
    return _repeat_one(x, d, int(repeats))


def _repeat_one(x: Any, d: int, r: int) -> Any:
    shape = tuple(x.shape)
    wide = shape[:d + 1] + (r,) + shape[d + 1:]
    inter = shape[:d + 1] + (1,) + shape[d + 1:]
    out = shape[:d] + (shape[d] * r,) + shape[d + 1:]
    return reshape(broadcast_to(reshape(x, inter), wide), out)


def roll(x: Any, shifts: Any, dims: Any = None) -> Any:
    """Rotate elements along ``dims`` by ``shifts`` (ints or tuples of equal length; no dims:
    the flattened tensor, shape kept): two slices joined, per dim."""
    shifts_t = (shifts,) if _is_int(shifts) else _ints(shifts, "roll")
    if dims is None:
        if len(shifts_t) != 1:
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: "
                               f"{len(shifts_t)}, dims:0")
        return reshape(roll(flatten(x), shifts_t[0], 0), tuple(x.shape))
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
            out = concatenate([_select(out, d, slice(n - s, n)),
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


def flip(x: Any, *args: Any, dims: Any = None) -> Any:
    """Reverse the order of elements along ``dims`` (a copy): ``dg.flip(x, (0, 1))``,
    ``dg.flip(x, dims=[1])``."""
    dims = _dims_arg(_dims_kwarg(args, dims, "flip"), "flip")
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
        return transpose(flip(x, d1), d0, d1)
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return transpose(flip(x, d0), d0, d1)
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
    return (bind(G.DIAG_SCATTER, g, shape=tuple(ctx.inputs[0].shape), offset=a["offset"],
                 dim1=a["dim1"], dim2=a["dim2"]),)


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
        x, shape = reshape(x, (1,)), (1,)
    m = shape[-1] + abs(int(offset))
    rest = iter(shape[:-1])
    out = tuple(m if i in (d1, d2) else next(rest) for i in range(ndim))
    return bind(G.DIAG_SCATTER, x, shape=out, offset=int(offset), dim1=d1, dim2=d2)


def diag(x: Any, diagonal: int = 0) -> Any:
    """A 1-D tensor to a square matrix with it on diagonal ``diagonal``, or a matrix's
    diagonal ``diagonal`` as a new 1-D tensor (a copy, as in PyTorch)."""
    ndim = len(x.shape)
    if ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if ndim == 2:
        return _clone(globals()["diagonal"](x, diagonal))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {ndim}D")


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
        out.append(broadcast_to(reshape(t, shape), full))
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


# --------------------------------------------------------------------------- diff


def diff(x: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th forward difference along ``dim`` (``x[i + 1] - x[i]``; bools: ``!=``),
    after joining ``prepend`` and ``append``."""
    ndim = len(x.shape)
    if ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = normalize_dim("diff", dim, ndim)
    if n == 0:  # PyTorch returns the input itself, without prepend and append
        return x
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concatenate(parts, d)
    for _ in range(n):
        m = x.shape[d]
        hi, lo = _select(x, d, slice(1, m)), _select(x, d, slice(0, max(m - 1, 0)))
        x = E.ne(hi, lo) if x.dtype == np.bool_ else E.sub(hi, lo)
    return x


# ------------------------------------------------------------------------ symbolic lengths


def _concat_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    """Concatenation along a fixed axis, each operand with the same symbols elsewhere."""
    axis = node.attrs["axis"] % len(node.shape)
    first = ins[0][1]
    for _, d in ins:
        if d[axis] is not None:
            raise L.refuse(node, "concatenates along a symbolic length")
        if d != first:
            raise L.refuse(node, "concatenates operands whose symbolic lengths differ")
    return first


def _transpose_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    (_, d), = ins
    return tuple(d[a] for a in node.attrs["axes"])


def _reshape_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    """A reshape that only adds or drops axes of length 1 keeps each symbolic axis whole;
    any other mixes it with its neighbours (its target shape holds the length)."""
    (x, d), = ins
    kept = [(n, s) for n, s in zip(x.shape, d) if n != 1 or s is not None]
    out: list = []
    k = 0
    for n in node.shape:
        if k < len(kept) and n == kept[k][0] and (n != 1 or kept[k][1] is not None):
            out.append(kept[k][1])
            k += 1
        elif n == 1:
            out.append(None)
        else:
            raise L.refuse(node, "reshapes a symbolic length together with other axes")
    if k != len(kept):
        raise L.refuse(node, "reshapes a symbolic length together with other axes")
    return tuple(out)


def _getitem_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    """Basic indexing that leaves the symbolic axes alone (they come after the indexed
    ones); an index or slice of a symbolic axis holds its length."""
    (_, d), = ins
    out: list = []
    k = 0
    for e in node.attrs["index"]:
        if e is None:
            out.append(None)
            continue
        if d[k] is not None:
            raise L.refuse(node, "indexes or slices a symbolic length")
        if not isinstance(e, int):
            out.append(None)
        k += 1
    return tuple(out) + tuple(d[k:])


def _broadcast_to_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    """An axis the input has keeps its symbol; one the broadcast adds or stretches from 1
    carries the symbol its length follows between two traces (a reduction's gradient
    spreads back over the reduced input's shape), else it is fixed."""
    (x, d), = ins
    out: list = []
    lead = len(node.shape) - len(x.shape)
    for k, n in enumerate(node.shape):
        j = k - lead
        if j >= 0 and d[j] is not None:
            if x.shape[j] != n:
                raise L.refuse(node, "broadcasts a symbolic length against a fixed length")
            out.append(d[j])
        else:
            out.append(follows[k])
    return tuple(out)


# ------------------------------------------------------------------------ registry

STOP_GRADIENT = register(OpDef(
    "stop_gradient", lambda x: x, _stop_gradient_infer, None, "", elementwise=True,
    differentiable=False,
))
RESHAPE = register(OpDef(
    "reshape", np.reshape, _reshape_infer, _reshape_vjp, "ViewBackward0", view=True,
    view_may_copy=True, vjp_arrays=_reshape_vjp_arrays,
    lengths=_reshape_lengths,
))
TRANSPOSE = register(OpDef(
    "transpose", _transpose_impl, _transpose_infer, _transpose_vjp, _transpose_name, view=True,
    vjp_arrays=_transpose_vjp_arrays,
    lengths=_transpose_lengths,
))
BROADCAST_TO = register(OpDef(
    "broadcast_to", np.broadcast_to, _broadcast_to_infer, _broadcast_to_vjp,
    "ExpandBackward0", view=True, fusible=True,
    lengths=_broadcast_to_lengths,
))
GETITEM = register(OpDef(
    "getitem", _getitem_impl, _getitem_infer, _getitem_vjp, _getitem_name, view=True,
    lengths=_getitem_lengths,
))
CONCATENATE = register(OpDef(
    "concatenate", _concat_impl, _concat_infer, _concat_vjp, "CatBackward0",
    lengths=_concat_lengths,
))
STACK = register(OpDef(
    "stack", _stack_impl, _stack_infer, _stack_vjp, "StackBackward0",
))
ASTYPE = register(OpDef(
    "astype", _astype_impl, _astype_infer, _astype_vjp, "ToCopyBackward0",
    elementwise=True,
))
DIAGONAL = register(OpDef(
    "diagonal", _diagonal_impl, _diagonal_infer, _diagonal_vjp, "DiagonalBackward0", view=True,
))
FLIP = register(OpDef("flip", _flip_impl, _flip_infer, _flip_vjp, _flip_name))
VIEW_DTYPE = register(OpDef(
    "view_dtype", _view_dtype_impl, _view_dtype_infer, None, "", differentiable=False,
))
