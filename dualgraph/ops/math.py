"""PyTorch's elementwise math surface as compositions of the elementwise and reduction
primitives (``ops/elementwise.py``, ``ops/reduce.py``): none needs a lowering, and each
gradient is the composition's (PyTorch's formulas: ``xlogy`` is 0 where ``x == 0``,
``hypot``'s is ``x / hypot``).

- arithmetic: ``torch.add``/``sub``/``div``'s keyword forms, ``rsqrt``, ``square``,
  ``exp2``, ``frac``, ``lerp``, ``clamp``, ``logaddexp``;
- tests and logic: ``isnan``/``isclose``, the ``logical_*`` family;
- the rest of PyTorch's pointwise functions: ``addcmul``, ``addcdiv``, ``hypot``,
  ``nan_to_num``, ``signbit``, ``heaviside``, ``fmax``/``fmin``, ``float_power``,
  ``logaddexp2``, ``xlogy``, ``sinc``, ``deg2rad``/``rad2deg``, ``clamp_min``/``clamp_max``,
  ``isposinf``/``isneginf``/``isreal``, ``isin``, ``ldexp``, ``rsub``.
"""


from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from ..dtypes import default_float
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .broadcast import float_dtype, result_dtype

# ------------------------------------------------------------------ compositions


def is_one(alpha: Any) -> bool:
    """Whether an ``alpha=`` is the number 1 (a traced number argument never counts: its
    value is not known while tracing, and ``y * alpha`` computes the same)."""
    return type(alpha) in (int, float, bool) and alpha == 1


def exp2(x: Any) -> Any:
    """``2 ** x`` elementwise."""
    return E.pow(2.0, _floating(x))


def rsqrt(x: Any) -> Any:
    """``1 / sqrt(x)`` elementwise."""
    return E.div(1.0, E.sqrt(x))


def square(x: Any) -> Any:
    """``x * x`` elementwise (PyTorch's ``square`` is ``pow(x, 2)`` too)."""
    return E.pow(x, 2)


def reciprocal(x: Any) -> Any:
    """``1 / x`` elementwise (a float result)."""
    return E.div(1.0, x)


def frac(x: Any) -> Any:
    """The fractional part ``x - trunc(x)``, with the sign of ``x``."""
    return E.sub(x, E.trunc(x))


def _floating(x: Any) -> Any:
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.dtype(dtype).kind != "f":
        from .shape import astype

        return astype(x, float_dtype(np.dtype(dtype)))
    return x


def add(x: Any, y: Any, *, alpha: Any = 1) -> Any:
    """``x + alpha * y`` (PyTorch's ``torch.add``)."""
    return E.add(x, y if is_one(alpha) else E.mul(y, alpha))


def sub(x: Any, y: Any, *, alpha: Any = 1) -> Any:
    """``x - alpha * y`` (PyTorch's ``torch.sub``)."""
    return E.sub(x, y if is_one(alpha) else E.mul(y, alpha))


subtract = sub


def mul(x: Any, y: Any) -> Any:
    """``x * y`` (PyTorch's ``torch.mul``)."""
    return E.mul(x, y)


multiply = mul


def div(x: Any, y: Any, *, rounding_mode: str | None = None) -> Any:
    """``x / y``; ``rounding_mode="trunc"`` rounds the quotient toward zero, ``"floor"``
    down (PyTorch's ``torch.div``). Rounded quotients keep integer dtypes."""
    if rounding_mode is None:
        return E.div(x, y)
    if rounding_mode == "floor":
        return E.floor_divide(x, y)
    if rounding_mode == "trunc":
        if result_dtype(x, y).kind == "f":
            return E.trunc(E.div(x, y))
        # x - fmod(x, y) is an exact multiple of y, so its floor quotient is the truncated one.
        return E.floor_divide(E.sub(x, E.fmod(x, y)), y)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                     f"found {rounding_mode!r}")


divide = true_divide = div


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - PyTorch's name
    """``x ** y`` (PyTorch's ``torch.pow``)."""
    return E.pow(x, y)


def lerp(start: Any, end: Any, weight: Any) -> Any:
    """``start + weight * (end - start)``, evaluated from the nearer end as PyTorch does
    (exact at ``weight == 1``)."""
    diff = E.sub(end, start)
    w = weight
    near_start = E.lt(E.abs(w), 0.5) if not isinstance(w, (int, float)) else abs(w) < 0.5
    if isinstance(near_start, bool):
        return (E.add(start, E.mul(diff, w)) if near_start
                else E.sub(end, E.mul(diff, 1.0 - w)))
    return E.where(near_start, E.add(start, E.mul(diff, w)), E.sub(end, E.mul(diff, E.sub(1.0, w))))


def clamp(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A001, A002
    """``input`` limited to ``[min, max]`` (``torch.clamp``): ``dg.clamp(x, 0.0, 1.0)``.
    Bounds may be numbers or tensors; see `Tensor.clamp` for the gradient at a bound."""
    method = getattr(type(input), "clamp", None)  # a tensor or a tracer (ops/mixin.py)
    if method is None:
        raise TypeError(f"clamp(): argument 'input' must be a tensor, not {type(input).__name__}")
    return method(input, min, max)


clip = clamp


def logaddexp(x: Any, y: Any) -> Any:
    """``log(exp(x) + exp(y))`` without overflow: ``max + log1p(exp(-|x - y|))``.

    Equal inputs take ``x - y`` as 0, so two equal infinities give that infinity
    (``inf - inf`` would be NaN)."""
    m = E.maximum(x, y)
    tie = E.eq(x, y)
    d = E.sub(E.where(tie, 0.0, x), E.where(tie, 0.0, y))
    return E.add(m, E.log1p(E.exp(E.neg(E.abs(d)))))


# ------------------------------------------------------------------ tests, logic


def isnan(x: Any) -> Any:
    """Where ``x`` is nan (a bool tensor)."""
    return E.ne(x, x)


def isinf(x: Any) -> Any:
    """Where ``x`` is +inf or -inf."""
    return E.eq(E.abs(x), math.inf)


def isfinite(x: Any) -> Any:
    """Where ``x`` is neither inf nor nan (nan < inf is false)."""
    return E.lt(E.abs(x), math.inf)


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Any:
    """``|a - b| <= atol + rtol * |b|`` elementwise; infinities are close only to themselves
    (PyTorch). Non-finite pairs are replaced by 0 before subtracting, so ``inf - inf`` is
    never computed (it would warn)."""
    finite = E.bitwise_and(isfinite(a), isfinite(b))
    a0, b0 = E.where(finite, a, 0.0), E.where(finite, b, 0.0)
    close = E.le(E.abs(E.sub(a0, b0)), E.add(E.mul(E.abs(b0), rtol), atol))
    out = E.bitwise_or(E.eq(a, b), E.bitwise_and(finite, close))
    if equal_nan:
        out = E.bitwise_or(out, E.bitwise_and(isnan(a), isnan(b)))
    return out


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether `isclose` holds everywhere (a Python bool)."""
    return bool(R.all(isclose(a, b, rtol, atol, equal_nan)).item())


def logical_and(x: Any, y: Any) -> Any:
    """Elementwise ``x and y`` of the truth values (nonzero is true)."""
    return E.bitwise_and(E._truth(x), E._truth(y))


def logical_or(x: Any, y: Any) -> Any:
    """Elementwise ``x or y`` of the truth values."""
    return E.bitwise_or(E._truth(x), E._truth(y))


def logical_xor(x: Any, y: Any) -> Any:
    """Elementwise ``x xor y`` of the truth values."""
    return E.bitwise_xor(E._truth(x), E._truth(y))


def logical_not(x: Any) -> Any:
    """Elementwise ``not x`` (zero is false)."""
    return E.eq(x, 0)


# ------------------------------------------------------------ more pointwise functions


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
    """`maximum` that ignores NaN (NaN only where both are); on a tie ``input`` takes the
    whole gradient, as in PyTorch."""
    return E.where(E.ne(other, other), input, E.where(E.ge(input, other), input, other))


def fmin(input: Any, other: Any) -> Any:  # noqa: A002
    """`minimum` that ignores NaN (NaN only where both are), as `fmax`."""
    return E.where(E.ne(other, other), input, E.where(E.le(input, other), input, other))


def float_power(input: Any, exponent: Any) -> Any:  # noqa: A002
    """``input ** exponent`` in float64."""
    f64 = np.dtype(np.float64)
    a = S.astype(input, f64) if hasattr(input, "shape") else float(input)
    b = S.astype(exponent, f64) if hasattr(exponent, "shape") else float(exponent)
    return E.pow(a, b)


def logaddexp2(input: Any, other: Any) -> Any:  # noqa: A002
    """``log2(2**input + 2**other)`` without overflow."""
    ln2 = math.log(2.0)
    return E.div(logaddexp(E.mul(input, ln2), E.mul(other, ln2)), ln2)


def xlogy(input: Any, other: Any) -> Any:  # noqa: A002
    """``input * log(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)."""
    return _times_log(input, other, "xlogy", E.log, np.log)


def xlog1py(input: Any, other: Any) -> Any:  # noqa: A002
    """``input * log1p(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)."""
    return _times_log(input, other, "xlog1py", E.log1p, np.log1p)


def _times_log(input: Any, other: Any, name: str, log: Any, np_log: Any) -> Any:  # noqa: A002
    """``input * log(other)`` for `xlogy` and `xlog1py` (``log``: the op, ``np_log``: the
    same function of a Python number)."""
    if not hasattr(input, "shape") and not hasattr(other, "shape"):
        raise TypeError(f"{name}(): at least one argument must be a tensor")
    if not hasattr(other, "shape"):
        other = float(other)
    prod = E.mul(input, _log_of(other, log, np_log))
    zero = E.eq(input, 0)
    if hasattr(other, "shape"):
        zero = logical_and(zero, E.eq(other, other))
    elif math.isnan(other):
        return prod
    return E.where(zero, 0.0, prod)


def _log_of(other: Any, log: Any, np_log: Any) -> Any:
    """``log(other)``; a Python number's is a constant ``np_log`` gives (the ops take
    tensors)."""
    if hasattr(other, "shape"):
        return log(other)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np_log(np.float64(other)))


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
    return clamp(input, min=min)


def clamp_max(input: Any, max: Any) -> Any:  # noqa: A002
    return clamp(input, max=max)


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
    return logical_not(found) if invert else found


def ldexp(input: Any, other: Any) -> Any:  # noqa: A002
    """``input * 2**other``."""
    if not hasattr(input, "shape"):
        raise TypeError(f"ldexp(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    x = input if _is_float(input) else S.astype(input, default_float())
    return E.mul(x, E.pow(2.0, other))


# PyTorch's torch.return_types.frexp.
frexp_result = namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input: Any) -> tuple[Any, Any]:  # noqa: A002
    """``(mantissa, exponent)`` with ``input == mantissa * 2**exponent``, ``|mantissa|`` in
    ``[0.5, 1)`` and an int32 exponent; zeros, infinities and nan keep their value with
    exponent 0. The mantissa's gradient is ``2**-exponent``.

    >>> dg.frexp(dg.tensor([8.0, -3.5])).exponent
    tensor([4, 2], dtype=dg.int32)
    """
    if not _is_float(input):
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    a = E.abs(S.stop_gradient(input))
    # nan fails both comparisons, so it is left alone with zeros and infinities.
    regular = logical_and(E.gt(a, 0.0), E.lt(a, math.inf))
    e = E.add(E.floor(E.log2(E.where(regular, a, 1.0))), 1.0)
    # The scale 2**-e in two halves: a float32 subnormal needs 2**149, past float32's range.
    half = E.floor(E.mul(e, -0.5))
    m = E.mul(E.mul(input, E.pow(2.0, half)), E.pow(2.0, E.sub(E.neg(e), half)))
    # log2 may round across a power of two: one halving or doubling puts |m| in [0.5, 1).
    am = E.abs(S.stop_gradient(m))
    high, low = E.ge(am, 1.0), logical_and(E.lt(am, 0.5), regular)
    m = E.where(high, E.mul(m, 0.5), E.where(low, E.mul(m, 2.0), m))
    e = E.add(e, E.sub(S.astype(high, e.dtype), S.astype(low, e.dtype)))
    mantissa = E.where(regular, m, input)
    exponent = S.astype(E.where(regular, e, 0.0), np.int32)
    return frexp_result(mantissa, exponent)


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Any:  # noqa: A002
    """``other - alpha * input``."""
    return E.sub(other, input if is_one(alpha) else E.mul(input, alpha))
