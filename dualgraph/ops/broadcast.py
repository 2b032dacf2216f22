"""Shape and dtype helpers shared by the infer rules, and `sum_to_shape`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import default_float
from ..errors import ShapeError
from ..ir.graph import Literal
from ..modes import bind
from .registry import OPS


def is_literal(x: Any) -> bool:
    return isinstance(x, Literal)


def shape_of(x: Any) -> tuple:
    return () if isinstance(x, Literal) else tuple(x.shape)


# PyTorch's type categories: a higher category always wins, whatever the sizes.
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}
# The dtype a Python scalar of a higher category than every tensor gives (PyTorch's
# defaults: ``int_tensor * 2.5`` is the default float dtype, ``bool_tensor + 1`` int64).
_SCALAR_DEFAULT = (np.dtype(np.bool_), np.dtype(np.int64))


def _scalar_category(v: Any) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        # Checked here, in the promotion rule, so eager and traced code stop at one point.
        check_python_int(v)
        return 1
    return 2


_INT_MIN, _UINT_END = -(2 ** 63), 2 ** 64


def check_python_int(v: int) -> None:
    """PyTorch converts a Python int operand through 64 bits (signed or unsigned), whatever
    the tensor's dtype, and raises OverflowError beyond them."""
    if not _INT_MIN <= v < _UINT_END:
        digits = str(v)
        shown = digits if len(digits) <= 24 else f"{digits[:12]}...({len(digits)} digits)"
        raise OverflowError(f"the Python int {shown} is outside the 64-bit range: int too "
                            "big to convert")


def result_dtype(*args: Any) -> np.dtype:
    """The dtype of an elementwise op on ``args`` (tensors, avals, arrays or Python
    scalars), by PyTorch's promotion rule; the one rule every mode and kernel uses.

    Three tiers, each consulted only when it has a higher category (bool < integer <
    float) than the tiers before it:

    - Tensors with dimensions: the operands of the highest category decide, promoted among
      themselves (``i64 * f32`` is ``f32``, ``f32 + f64`` is ``f64``, ``i8 + u8`` is ``i16``);
      a lower-category tensor never widens them.
    - 0-d tensors: like scalars, they never widen a dimensioned tensor of their category or
      a higher one (``f32 * f64_0d`` is ``f32``); of a higher category, their own dtypes
      decide (``i64 * f64_0d`` is ``f64``). With no dimensioned tensor they are the first tier.
    - Python scalars: a scalar never widens a tensor of its category or a higher one
      (``f32 * 2.0`` is ``f32``, ``i32 + 1`` is ``i32``); of a higher category it gives that
      category's default dtype (``i64 * 2.5`` is ``f32``, ``bool + 1`` is ``i64``), as do
      scalars alone.
    """
    arrays = [a for a in args if not isinstance(a, Literal)]
    dtypes = [a.dtype for a in arrays]
    try:
        cats = [_CATEGORY[d.kind] for d in dtypes]
    except KeyError:  # complex, datetime...: NumPy's own rule, as before
        return np.result_type(*dtypes, *[a for a in args if isinstance(a, Literal)])
    scalar_top = max([_scalar_category(a) for a in args if isinstance(a, Literal)],
                     default=-1)
    if scalar_top > max(cats, default=-1):
        return _SCALAR_DEFAULT[scalar_top] if scalar_top < 2 else default_float()
    first = dtypes[0]
    if all(d == first for d in dtypes):
        return first
    dims = [i for i, a in enumerate(arrays) if len(a.shape)]
    zero = [i for i, a in enumerate(arrays) if not len(a.shape)]
    tier = dims or zero
    if dims and zero and max(cats[i] for i in zero) > max(cats[i] for i in dims):
        tier = zero
    top = max(cats[i] for i in tier)
    return np.result_type(*[dtypes[i] for i in tier if cats[i] == top])


def promote_arrays(*xs: Any) -> tuple:
    """Kernel operands cast to their `result_dtype` (see `cast_operands`)."""
    return cast_operands(result_dtype(*xs), xs)


def cast_operands(dtype: np.dtype, xs: tuple) -> tuple:
    """``xs`` ready for a NumPy kernel computing in ``dtype``: arrays converted, Python
    scalars left for NumPy 2 to treat as weak (so they take the arrays' dtype); with no
    array at all the first scalar becomes a 0-d array of ``dtype``."""
    out = list(xs)
    arrays = False
    for i, x in enumerate(xs):
        if not isinstance(x, Literal):
            arrays = True
            if x.dtype != dtype:
                out[i] = np.asarray(x).astype(dtype)
    if not arrays and out:
        out[0] = np.asarray(out[0], dtype)
    return tuple(out)


def float_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a float-valued op (``exp``, ``mean``, ``/``) gives for an input dtype:
    integers and bools give PyTorch's default float dtype (float32 unless
    ``dg.set_default_dtype`` says otherwise; NumPy would say f64)."""
    return dtype if dtype.kind == "f" else default_float()


def broadcast_shapes(name: str, *shapes: tuple) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        shown = " and ".join(str(tuple(s)) for s in shapes)
        raise ShapeError(f"{name}: shapes {shown} cannot be broadcast together") from None


def broadcasts_to(src: tuple, shape: tuple) -> bool:
    """Whether a value of shape ``src`` broadcasts to exactly ``shape`` (a write into a
    tensor of that shape: the target's shape may not grow)."""
    try:
        return tuple(np.broadcast_shapes(tuple(src), tuple(shape))) == tuple(shape)
    except ValueError:
        return False


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


def axis_alias(fn: Any) -> Any:
    """``fn`` also taking ``axis=`` as the alias of its ``dim`` parameter, as PyTorch's
    argument parser does everywhere (``x.var(axis=1)``, ``dg.cumsum(x, axis=0)``)."""
    import functools

    name = getattr(fn, "__name__", "function")

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if "axis" in kwargs:
            if "dim" in kwargs:
                raise TypeError(f"{name}() got both dim and its alias axis")
            kwargs["dim"] = kwargs.pop("axis")
        return fn(*args, **kwargs)

    return call


def add_axis_aliases(namespace: dict) -> None:
    """Wrap, in place, every public function defined in ``namespace`` (a module's globals
    or a class's dict) that has a ``dim`` parameter and no ``axis`` one with `axis_alias`."""
    import inspect

    home = namespace.get("__name__") or namespace.get("__module__")
    for key, fn in list(namespace.items()):
        if (key.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != home
                or hasattr(fn, "__wrapped__")):
            continue
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if "dim" in params and "axis" not in params:
            namespace[key] = axis_alias(fn)
