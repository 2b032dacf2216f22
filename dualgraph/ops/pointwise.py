"""PyTorch's remaining elementwise functions, as compositions of primitives (no lowering
of their own): ``addcmul``, ``addcdiv``, ``hypot``, ``nan_to_num``, ``signbit``,
``heaviside``, ``fmax``/``fmin``, ``float_power``, ``logaddexp2``, ``xlogy``, ``sinc``,
``deg2rad``/``rad2deg``, ``clamp_min``/``clamp_max``, ``isposinf``/``isneginf``/``isreal``,
``isin``, ``ldexp``, ``rsub``. Their gradients are those of the composition, which are
PyTorch's formulas (``xlogy`` is 0 where ``x == 0``, ``hypot``'s is ``x / hypot``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import default_float
from . import elementwise as E
from . import math as M
from . import reduce as R
from . import shape as S
from .broadcast import result_dtype


def _is_float(x: Any) -> bool:
    return hasattr(x, "dtype") and np.dtype(x.dtype).kind == "f"


def addcmul(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    prod = E.mul(tensor1, tensor2)
    return E.add(input, prod if value == 1 else E.mul(prod, value))


def addcdiv(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:  # noqa: A002
    """``input + value * tensor1 / tensor2`` (integer division is refused, as in PyTorch)."""
    if not _is_float(tensor1) and not _is_float(tensor2):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a "
                           "future release addcdiv will perform a true division of tensor1 "
                           "and tensor2. Use floor_divide or true_divide instead.")
    q = E.div(tensor1, tensor2)
    return E.add(input, q if value == 1 else E.mul(q, value))


def hypot(input: Any, other: Any) -> Any:  # noqa: A002
    """``sqrt(input**2 + other**2)`` elementwise."""
    return E.sqrt(E.add(E.mul(input, input), E.mul(other, other)))


def nan_to_num(input: Any, nan: float = 0.0, posinf: float | None = None,  # noqa: A002
               neginf: float | None = None) -> Any:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and
    the dtype's largest and lowest finite values). Integer tensors are returned as they
    are. The gradient passes where the element was finite."""
    if not _is_float(input):
        return input
    info = np.finfo(np.dtype(input.dtype))
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    x = E.where(E.ne(input, input), float(nan), input)
    x = E.where(E.eq(x, math.inf), hi, x)
    return E.where(E.eq(x, -math.inf), lo, x)


def signbit(input: Any) -> Any:  # noqa: A002
    """Whether the sign bit is set (true for -0.0 and negative NaN), a bool tensor."""
    if not _is_float(input):
        return E.lt(input, 0)
    # copysign carries the sign bit onto 1.0 exactly (-0.0 included).
    return E.lt(E.copysign(S.stop_gradient(E.add(E.mul(input, 0.0), 1.0)),
                           S.stop_gradient(input)), 0.0)


def heaviside(input: Any, values: Any) -> Any:  # noqa: A002
    """0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``."""
    dtype = result_dtype(input, values)
    if np.dtype(getattr(input, "dtype", dtype)) != np.dtype(getattr(values, "dtype", dtype)):
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different "
                           f"dtypes: {np.dtype(input.dtype)} and {np.dtype(values.dtype)}")
    step = S.astype(E.gt(input, 0), np.dtype(dtype))
    return S.stop_gradient(E.where(E.eq(input, 0), values, step))


def fmax(input: Any, other: Any) -> Any:  # noqa: A002
    """`maximum` that ignores NaN (NaN only where both are)."""
    a = E.where(E.ne(input, input), other, input)
    b = E.where(E.ne(other, other), input, other)
    return E.maximum(a, b)


def fmin(input: Any, other: Any) -> Any:  # noqa: A002
    """`minimum` that ignores NaN (NaN only where both are)."""
    a = E.where(E.ne(input, input), other, input)
    b = E.where(E.ne(other, other), input, other)
    return E.minimum(a, b)


def float_power(input: Any, exponent: Any) -> Any:  # noqa: A002
    """``input ** exponent`` in float64."""
    f64 = np.dtype(np.float64)
    a = S.astype(input, f64) if hasattr(input, "shape") else float(input)
    b = S.astype(exponent, f64) if hasattr(exponent, "shape") else float(exponent)
    return E.pow(a, b)


def logaddexp2(input: Any, other: Any) -> Any:  # noqa: A002
    """``log2(2**input + 2**other)`` without overflow."""
    ln2 = math.log(2.0)
    return E.div(M.logaddexp(E.mul(input, ln2), E.mul(other, ln2)), ln2)


def xlogy(input: Any, other: Any) -> Any:  # noqa: A002
    """``input * log(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)."""
    if not hasattr(input, "shape") and not hasattr(other, "shape"):
        raise TypeError("xlogy(): at least one argument must be a tensor")
    if not hasattr(other, "shape"):
        other = float(other)
    prod = E.mul(input, E.log(other))
    zero = E.eq(input, 0)
    if hasattr(other, "shape"):
        zero = M.logical_and(zero, E.eq(other, other))
    elif math.isnan(other):
        return prod
    return E.where(zero, 0.0, prod)


def xlog1py(input: Any, other: Any) -> Any:  # noqa: A002
    """``input * log1p(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)."""
    prod = E.mul(input, E.log1p(other))
    zero = E.eq(input, 0)
    if hasattr(other, "shape"):
        zero = M.logical_and(zero, E.eq(other, other))
    return E.where(zero, 0.0, prod)


def sinc(input: Any) -> Any:  # noqa: A002
    """The normalized sinc, ``sin(pi x) / (pi x)``, 1 at 0."""
    x = input if _is_float(input) else S.astype(input, default_float())
    zero = E.eq(x, 0.0)
    px = E.mul(E.where(zero, 1.0, x), math.pi)
    return E.where(zero, 1.0, E.div(E.sin(px), px))


def deg2rad(input: Any) -> Any:  # noqa: A002
    return E.mul(input, math.pi / 180.0)


def rad2deg(input: Any) -> Any:  # noqa: A002
    return E.mul(input, 180.0 / math.pi)


def clamp_min(input: Any, min: Any) -> Any:  # noqa: A002
    return M.clamp(input, min=min)


def clamp_max(input: Any, max: Any) -> Any:  # noqa: A002
    return M.clamp(input, max=max)


def isposinf(input: Any) -> Any:  # noqa: A002
    return E.eq(input, math.inf) if _is_float(input) else E.ne(input, input)


def isneginf(input: Any) -> Any:  # noqa: A002
    return E.eq(input, -math.inf) if _is_float(input) else E.ne(input, input)


def isreal(input: Any) -> Any:  # noqa: A002
    """True everywhere: real tensors have no imaginary part."""
    return E.eq(E.mul(S.stop_gradient(input), 0), 0)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Any:
    """Whether each element of ``elements`` occurs in ``test_elements``."""
    if not hasattr(test_elements, "shape"):
        test_elements = np.asarray(test_elements)
    if not hasattr(elements, "shape"):
        elements = np.asarray(elements)
    tests = S.reshape(S.stop_gradient(test_elements), (-1,))
    flat = S.stop_gradient(elements)
    eq = E.eq(S.reshape(flat, tuple(flat.shape) + (1,)), tests)
    found = R.amax(S.astype(eq, np.dtype(np.int8)), -1) if tests.shape[0] else \
        E.ne(flat, flat) if np.dtype(flat.dtype).kind == "f" else E.lt(flat, flat)
    found = E.gt(found, 0) if tests.shape[0] else found
    return M.logical_not(found) if invert else found


def ldexp(input: Any, other: Any) -> Any:  # noqa: A002
    """``input * 2**other``."""
    x = input if _is_float(input) else S.astype(input, default_float())
    return E.mul(x, E.pow(2.0, other))


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Any:  # noqa: A002
    """``other - alpha * input``."""
    return E.sub(other, input if alpha == 1 else E.mul(input, alpha))
