"""Shape primitives: reshape, transpose, broadcast_to, basic indexing, concatenate, stack,
and astype. Attributes are canonical (resolved ``-1``, explicit axes, normalized indices)
so that equal programs give equal graphs.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..dtypes import as_dtype
from ..errors import ShapeError
from ..modes import bind
from .broadcast import normalize_axis, normalize_dim, promote_arrays, result_dtype
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


def reshape(x: Any, *shape: Any) -> Any:
    """Reshape to ``shape`` (one dimension may be ``-1``); ``reshape(x, 2, 3)`` also works."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    elif len(shape) == 1 and isinstance(shape[0], str):
        raise TypeError(f"reshape: shape must be ints, got str {shape[0]!r}")
    shape = _resolve_shape(tuple(x.shape), shape)
    if shape == tuple(x.shape):
        return x
    return bind(RESHAPE, x, shape=shape)


def _reshape_vjp(ctx, g):
    return (reshape(g, ctx.inputs[0].shape),)


# --------------------------------------------------------------------------- transpose


def _transpose_infer(x: Any, axes: tuple) -> tuple:
    shape = tuple(x.shape)
    if sorted(axes) != list(range(len(shape))):
        raise ShapeError(f"transpose: axes {axes} are not a permutation for shape {shape}")
    return tuple(shape[a] for a in axes), x.dtype


def permute(x: Any, *dims: Any) -> Any:
    """Reorder the dimensions: output dim ``i`` is input dim ``dims[i]`` (``torch.permute``,
    ``np.transpose(x, axes)``); no dims reverses them (``x.T``). ``dg.permute(x, 2, 0, 1)``"""
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
    return bind(TRANSPOSE, x, axes=axes)


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
        return bind(TRANSPOSE, x, axes=())
    axes = list(range(ndim))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return bind(TRANSPOSE, x, axes=tuple(axes))


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
    return (bind(SCATTER, g, shape=tuple(ctx.inputs[0].shape), index=ctx.attrs["index"]),)


def _getitem_name(node: Any) -> str:
    kinds = {type(e) for e in node.attrs["index"]}
    if kinds == {int}:
        return "SelectBackward0"
    if kinds <= {tuple}:
        return "SliceBackward0"
    return "IndexBackward0"


def _scatter_impl(g: np.ndarray, shape: tuple, index: tuple) -> np.ndarray:
    out = np.zeros(shape, dtype=g.dtype)
    out[to_numpy_index(index)] = g
    return out


def _scatter_infer(g: Any, shape: tuple, index: tuple) -> tuple:
    return shape, g.dtype


def _scatter_vjp(ctx, g):
    return (bind(GETITEM, g, index=ctx.attrs["index"]),)


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


def _view_scatter_impl(base: np.ndarray, value: Any, chain: tuple) -> np.ndarray:
    out = np.array(base, copy=True, order="C")
    if not chain:
        out[...] = value
    else:
        out.reshape(-1)[view_index(base.shape, chain)] = value
    return out


def _view_scatter_infer(base: Any, value: Any, chain: tuple) -> tuple:
    shape = tuple(base.shape)
    view = view_index(shape, chain).shape if chain else shape
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
    gv = replay_view(g, chain) if need_value else None
    return gb, gv


def _view_scatter_name(node: Any) -> str:
    return "CopySlices" if node.attrs["chain"] else "CopyBackwards"


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


STOP_GRADIENT = register(OpDef(
    "stop_gradient", lambda x: x, _stop_gradient_infer, None, "", elementwise=True,
    differentiable=False,
))
RESHAPE = register(OpDef(
    "reshape", np.reshape, _reshape_infer, _reshape_vjp, "ViewBackward0", view=True,
))
TRANSPOSE = register(OpDef(
    "transpose", _transpose_impl, _transpose_infer, _transpose_vjp, _transpose_name, view=True,
    vjp_arrays=_transpose_vjp_arrays,
))
BROADCAST_TO = register(OpDef(
    "broadcast_to", np.broadcast_to, _broadcast_to_infer, _broadcast_to_vjp,
    "ExpandBackward0", view=True, fusible=True,
))
GETITEM = register(OpDef(
    "getitem", _getitem_impl, _getitem_infer, _getitem_vjp, _getitem_name, view=True,
))
SCATTER = register(OpDef(
    "scatter", _scatter_impl, _scatter_infer, _scatter_vjp, "IndexPutBackward0",
))
VIEW_SCATTER = register(OpDef(
    "view_scatter", _view_scatter_impl, _view_scatter_infer, _view_scatter_vjp,
    _view_scatter_name,
))
CONCATENATE = register(OpDef(
    "concatenate", _concat_impl, _concat_infer, _concat_vjp, "CatBackward0",
))
STACK = register(OpDef(
    "stack", _stack_impl, _stack_infer, _stack_vjp, "StackBackward0",
))
ASTYPE = register(OpDef(
    "astype", _astype_impl, _astype_infer, _astype_vjp, "ToCopyBackward0",
    elementwise=True,
))
