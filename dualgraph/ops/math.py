"""PyTorch's everyday math surface as compositions of the elementwise and reduction
primitives (``ops/elementwise.py``, ``ops/reduce.py``): ``rsqrt``, ``square``, ``exp2``,
``frac``, ``torch.add``/``sub``/``div``'s keyword forms, ``lerp``, ``clamp``, ``logaddexp``,
the ``isnan``/``isclose`` tests and the ``logical_*`` family. None needs a lowering; each
gradient is the composition's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import elementwise as E
from . import reduce as R
from .broadcast import float_dtype, result_dtype

# ------------------------------------------------------------------ compositions


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
    return E.add(x, y if alpha == 1 else E.mul(y, alpha))


def sub(x: Any, y: Any, *, alpha: Any = 1) -> Any:
    """``x - alpha * y`` (PyTorch's ``torch.sub``)."""
    return E.sub(x, y if alpha == 1 else E.mul(y, alpha))


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
