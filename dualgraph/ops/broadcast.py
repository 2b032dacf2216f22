"""Shape and dtype helpers shared by the infer rules, and `sum_to_shape`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ShapeError
from ..ir.graph import Literal
from ..modes import bind
from .registry import OPS


def is_literal(x: Any) -> bool:
    return isinstance(x, Literal)


def shape_of(x: Any) -> tuple:
    return () if isinstance(x, Literal) else tuple(x.shape)


def result_dtype(*args: Any) -> np.dtype:
    """NumPy 2 promotion (Python scalars are weak: ``f32 * 2.0`` stays ``f32``) with
    PyTorch's category rule on top: an integer or bool tensor never raises a float
    tensor's precision (``i64 * f32`` is ``f32``, where NumPy says ``f64``)."""
    dtypes = [a.dtype for a in args if not isinstance(a, Literal)]
    floats = [d for d in dtypes if d.kind == "f"]
    if floats and len(floats) != len(dtypes):
        return np.result_type(*floats, *[a for a in args if isinstance(a, Literal)])
    return np.result_type(*[a if isinstance(a, Literal) else a.dtype for a in args])


def promote_arrays(*xs: Any) -> tuple:
    """The eager side of `result_dtype`'s category rule: integer and bool arrays beside a
    float array are cast to the float result first (NumPy would widen to float64)."""
    arrays = [x for x in xs if isinstance(x, np.ndarray)]
    kinds = {a.dtype.kind for a in arrays}
    if "f" not in kinds or len(kinds) == 1:
        return xs
    target = result_dtype(*arrays)
    return tuple(x.astype(target) if isinstance(x, np.ndarray) and x.dtype.kind != "f" else x
                 for x in xs)


def float_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a float-valued op (``exp``, ``mean``, ``/``) gives for an input dtype:
    integers and bools give float32, PyTorch's default float dtype (NumPy would say f64)."""
    return dtype if dtype.kind == "f" else np.dtype(np.float32)


def broadcast_shapes(name: str, *shapes: tuple) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        shown = " and ".join(str(tuple(s)) for s in shapes)
        raise ShapeError(f"{name}: shapes {shown} cannot be broadcast together") from None


def _is_int(d: Any) -> bool:
    return isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_))


def normalize_dim(name: str, dim: Any, ndim: int) -> int:
    """``dim`` as a non-negative index into ``ndim`` dimensions, PyTorch's way: negative dims
    count from the end, a 0-d tensor takes 0 and -1, and anything else raises `IndexError`
    (never taken modulo the rank)."""
    if not _is_int(dim):
        raise TypeError(f"{name}: dim must be an int, got {type(dim).__name__} {dim!r}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{name}: Dimension out of range (expected to be in range of "
                         f"[{-n}, {n - 1}], but got {dim})")
    return int(dim) % n


def normalize_axis(name: str, axis: Any, ndim: int) -> tuple | None:
    """``None`` or a sorted tuple of non-negative axes; raises naming the bad axis."""
    if axis is None:
        return None
    if _is_int(axis):
        axes = (axis,)
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        raise TypeError(f"{name}: axis/dim must be an int or a tuple of ints, got "
                        f"{type(axis).__name__} {axis!r}")
    out = []
    for a in axes:
        if not _is_int(a):
            raise TypeError(f"{name}: axis/dim must be an int or a tuple of ints, got {axis!r}")
        out.append(normalize_dim(name, a, ndim))
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated axis in {axis!r}")
    if ndim == 0:
        # PyTorch accepts dim 0 or -1 on a 0-d tensor (as if it had one dimension of size
        # 1); reducing over it reduces nothing, which NumPy spells axis=().
        return ()
    return tuple(sorted(out))


def sum_to_shape(g: Any, shape: tuple) -> Any:
    """Sum a broadcast gradient back to ``shape`` using dualgraph ops (any mode)."""
    gshape = tuple(g.shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        [lead + i for i, d in enumerate(shape) if d == 1 and gshape[lead + i] != 1]
    )
    if axes:
        g = bind(OPS["sum"], g, axis=axes, keepdims=True)
    if tuple(g.shape) != shape:
        g = bind(OPS["reshape"], g, shape=shape)
    return g


def fit_grad(g: Any, shape: tuple, dtype: Any) -> Any:
    """A VJP's gradient made to match its input: summed back over broadcast dimensions and
    cast to the input's dtype. The eager engine and graph autodiff both call this, so no
    rule has to."""
    if tuple(g.shape) != tuple(shape):
        g = sum_to_shape(g, tuple(shape))
    if g.dtype != dtype:
        g = bind(OPS["astype"], g, dtype=dtype)
    return g
