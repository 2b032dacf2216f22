"""PyTorch's everyday math surface: primitives and compositions.

Primitives here are elementwise ops whose value (or gradient) no composition of existing
ops gives exactly: the inverse trigonometric and hyperbolic functions, ``erf``, ``log2``,
``log1p``, the rounding functions, ``fmod``/``remainder``/``floor_divide``, ``atan2`` and
the bitwise ops. Everything else (``rsqrt``, ``square``, ``lerp``, ``logaddexp``, ``var``,
``isclose``, the ``logical_*`` family, ...) is a composition at the end of this file and
needs no lowering. Rounding functions and ``sign`` have a zero gradient, as in PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..modes import bind
from . import elementwise as E
from . import reduce as R
from .broadcast import float_dtype, normalize_axis, result_dtype, shape_of
from .elementwise import _binary_infer, _float_infer, _floatify, _promoting, _same_infer
from .erf32 import erf_f32
from .registry import OpDef, Reduction, register

# ---------------------------------------------------------------------- kernels


def _erf_impl(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f":
        x = x.astype(float_dtype(x.dtype))
    if x.dtype.itemsize <= 4:
        # Float32 (and float16, through float32) as whole-array passes: a few ulp, and
        # several times faster than a correctly rounded scalar loop.
        return erf_f32(x.astype(np.float32, copy=False)).astype(x.dtype, copy=False)
    # scipy.special is imported lazily: it costs ~0.2 s and most programs never call erf.
    from scipy.special import erf

    return erf(x)


def _rounding(ufunc):
    """Integer inputs are already whole: PyTorch returns them unchanged, in their dtype."""

    def impl(x: np.ndarray) -> np.ndarray:
        return x.copy() if x.dtype.kind in "biu" else ufunc(x)

    impl.__name__ = ufunc.__name__
    return impl


def _integral_infer(name: str, unary: bool = False):
    """The shape/dtype rule of a bitwise op: integer or bool operands only (PyTorch)."""

    def check(*args: Any) -> None:
        for a in args:
            dtype = getattr(a, "dtype", None)
            if dtype is None:  # a Python literal
                if isinstance(a, float):
                    raise TypeError(f"{name}: not supported for float operands")
            elif np.dtype(dtype).kind not in "biu":
                raise TypeError(f"{name}: not supported for {dtype} tensors (integer or bool "
                                "tensors only)")

    if unary:
        def infer(x: Any) -> tuple:
            check(x)
            return _same_infer(x)
        return infer

    binary = _binary_infer(name)

    def infer(x: Any, y: Any) -> tuple:
        check(x, y)
        return binary(x, y)

    return infer


def _float_binary_infer(name: str):
    binary = _binary_infer(name)

    def infer(x: Any, y: Any) -> tuple:
        shape, dtype = binary(x, y)
        return shape, float_dtype(dtype)

    return infer


# --------------------------------------------------------------------- VJP rules


def _zero_vjp(ctx, g):
    # PyTorch's rule for step functions: the gradient is 0 everywhere (kinks included).
    zero = E.mul(g, 0.0)
    return tuple(zero if need else None for need in ctx.needs_input_grad)


def _tan_vjp(ctx, g):
    y = ctx.out
    return (E.mul(g, E.add(E.mul(y, y), 1.0)),)


def _asin_vjp(ctx, g):
    (x,) = ctx.args
    return (E.div(g, E.sqrt(E.sub(1.0, E.mul(x, x)))),)


def _acos_vjp(ctx, g):
    (x,) = ctx.args
    return (E.neg(E.div(g, E.sqrt(E.sub(1.0, E.mul(x, x))))),)


def _atan_vjp(ctx, g):
    (x,) = ctx.args
    return (E.div(g, E.add(E.mul(x, x), 1.0)),)


def _sinh_vjp(ctx, g):
    return (E.mul(g, cosh(ctx.args[0])),)


def _cosh_vjp(ctx, g):
    return (E.mul(g, sinh(ctx.args[0])),)


def _asinh_vjp(ctx, g):
    (x,) = ctx.args
    return (E.div(g, E.sqrt(E.add(E.mul(x, x), 1.0))),)


def _acosh_vjp(ctx, g):
    (x,) = ctx.args
    return (E.div(g, E.sqrt(E.sub(E.mul(x, x), 1.0))),)


def _atanh_vjp(ctx, g):
    (x,) = ctx.args
    return (E.div(g, E.sub(1.0, E.mul(x, x))),)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erf_vjp(ctx, g):
    (x,) = ctx.args
    return (E.mul(g, E.mul(E.exp(E.neg(E.mul(x, x))), _TWO_OVER_SQRT_PI)),)


def _log_base_vjp(base: float):
    ln = math.log(base)

    def vjp(ctx, g):
        return (E.div(g, E.mul(ctx.args[0], ln)),)

    return vjp


def _log1p_vjp(ctx, g):
    return (E.div(g, E.add(ctx.args[0], 1.0)),)


def _expm1_vjp(ctx, g):
    return (E.mul(g, E.add(ctx.out, 1.0)),)


def _copysign_vjp(ctx, g):
    # PyTorch: d/dx copysign(x, y) = copysign(x, y) / x, and 0 at x == 0; none to y.
    x, _ = ctx.args
    nx, ny = ctx.needs_input_grad
    gx = E.mul(g, E.where(E.eq(x, 0), 0.0, E.div(ctx.out, x))) if nx else None
    return gx, (E.mul(g, 0.0) if ny else None)


def _mod_vjp(rounding):
    """x - y * rounding(x / y): the x-gradient is g, the y-gradient -g * rounding(x / y)."""

    def vjp(ctx, g):
        x, y = ctx.args
        ny = ctx.needs_input_grad[1]
        return g, (E.neg(E.mul(g, rounding(E.div(x, y)))) if ny else None)

    return vjp


def _atan2_vjp(ctx, g):
    y, x = ctx.args
    ny, nx = ctx.needs_input_grad
    r = E.add(E.mul(x, x), E.mul(y, y))
    # At the origin the gradient is zero, as PyTorch makes it (1 / r taken as 0 there).
    zero = E.eq(r, 0.0)
    inv = E.where(zero, 0.0, E.div(1.0, E.where(zero, 1.0, r)))
    return ((E.mul(E.mul(g, x), inv) if ny else None),
            (E.neg(E.mul(E.mul(g, y), inv)) if nx else None))


# ---------------------------------------------------------------------- registry


def _unary(name: str, impl, vjp, torch_name: str, *, infer=_float_infer, saves=(0,),
           saves_out: bool = False) -> OpDef:
    return register(OpDef(name, impl, infer, vjp, torch_name, saves=saves, saves_out=saves_out,
                          elementwise=True))


TAN = _unary("tan", _floatify(np.tan), _tan_vjp, "TanBackward0", saves=(), saves_out=True)
ASIN = _unary("asin", _floatify(np.arcsin), _asin_vjp, "AsinBackward0")
ACOS = _unary("acos", _floatify(np.arccos), _acos_vjp, "AcosBackward0")
ATAN = _unary("atan", _floatify(np.arctan), _atan_vjp, "AtanBackward0")
SINH = _unary("sinh", _floatify(np.sinh), _sinh_vjp, "SinhBackward0")
COSH = _unary("cosh", _floatify(np.cosh), _cosh_vjp, "CoshBackward0")
ASINH = _unary("asinh", _floatify(np.arcsinh), _asinh_vjp, "AsinhBackward0")
ACOSH = _unary("acosh", _floatify(np.arccosh), _acosh_vjp, "AcoshBackward0")
ATANH = _unary("atanh", _floatify(np.arctanh), _atanh_vjp, "AtanhBackward0")
ERF = _unary("erf", _erf_impl, _erf_vjp, "ErfBackward0")
LOG2 = _unary("log2", _floatify(np.log2), _log_base_vjp(2.0), "Log2Backward0")
LOG10 = _unary("log10", _floatify(np.log10), _log_base_vjp(10.0), "Log10Backward0")
LOG1P = _unary("log1p", _floatify(np.log1p), _log1p_vjp, "Log1PBackward0")
EXPM1 = _unary("expm1", _floatify(np.expm1), _expm1_vjp, "Expm1Backward0", saves=(),
               saves_out=True)
def _sign_impl(x: np.ndarray) -> np.ndarray:
    """PyTorch's sign: 0 for nan (NumPy gives nan), +0.0 for either zero."""
    r = np.sign(x)
    if r.dtype.kind == "f":
        r = np.where(np.isnan(r), r.dtype.type(0), r)
    return r


SIGN = _unary("sign", _sign_impl, _zero_vjp, "SignBackward0", infer=_same_infer, saves=())
FLOOR = _unary("floor", _rounding(np.floor), _zero_vjp, "FloorBackward0", infer=_same_infer,
               saves=())
CEIL = _unary("ceil", _rounding(np.ceil), _zero_vjp, "CeilBackward0", infer=_same_infer,
              saves=())
# np.rint rounds half to even, as torch.round does (np.round is the same, but slower).
ROUND = _unary("round", _rounding(np.rint), _zero_vjp, "RoundBackward0", infer=_same_infer,
               saves=())
TRUNC = _unary("trunc", _rounding(np.trunc), _zero_vjp, "TruncBackward0", infer=_same_infer,
               saves=())

COPYSIGN = register(OpDef(
    "copysign", _promoting(np.copysign, floating=True), _float_binary_infer("copysign"),
    _copysign_vjp, "CopysignBackward0", saves=(0,), saves_out=True, elementwise=True,
))
FMOD = register(OpDef(
    "fmod", _promoting(np.fmod), _binary_infer("fmod"), _mod_vjp(lambda q: trunc(q)),
    "FmodBackward1", saves=(0, 1), elementwise=True,
))
# np.remainder has Python's (and PyTorch's) sign rule: the result takes the divisor's sign.
REMAINDER = register(OpDef(
    "remainder", _promoting(np.remainder), _binary_infer("remainder"),
    _mod_vjp(lambda q: floor(q)), "RemainderBackward1", saves=(0, 1), elementwise=True,
))
# np.floor_divide computes the quotient from fmod (exact), as PyTorch's floor division does;
# floor(x / y) would round the quotient first.
FLOOR_DIVIDE = register(OpDef(
    "floor_divide", _promoting(np.floor_divide), _binary_infer("floor_divide"), _zero_vjp,
    "DivBackward2", elementwise=True,
))
ATAN2 = register(OpDef(
    "atan2", _promoting(np.arctan2, floating=True), _float_binary_infer("atan2"), _atan2_vjp,
    "Atan2Backward0", saves=(0, 1), elementwise=True,
))


def _bitwise(name: str, ufunc, commutative: bool = True) -> OpDef:
    return register(OpDef(
        name, _promoting(ufunc), _integral_infer(name), None, "", elementwise=True,
        commutative=commutative, differentiable=False,
    ))


BITWISE_AND = _bitwise("bitwise_and", np.bitwise_and)
BITWISE_OR = _bitwise("bitwise_or", np.bitwise_or)
BITWISE_XOR = _bitwise("bitwise_xor", np.bitwise_xor)
LEFT_SHIFT = _bitwise("left_shift", np.left_shift, commutative=False)
RIGHT_SHIFT = _bitwise("right_shift", np.right_shift, commutative=False)
BITWISE_NOT = register(OpDef(
    "bitwise_not", np.invert, _integral_infer("bitwise_not", unary=True), None, "",
    elementwise=True, differentiable=False,
))


# prod is a `Reduction` folding by "mul" from 1 (in the output dtype, as NumPy's
# multiply.reduce); its gradient counts the zeros of each slice.


def _one(dtype: Any) -> Any:
    return np.dtype(dtype).type(1)


def _prod_out_shape(shape: tuple, axis: tuple | None, keepdims: bool) -> tuple:
    if axis is None:
        return (1,) * len(shape) if keepdims else ()
    if keepdims:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def _prod_infer(x: Any, axis: tuple | None = None, keepdims: bool = False) -> tuple:
    dtype = np.dtype(x.dtype)
    dtype = dtype if dtype.kind == "f" else np.dtype(np.int64)  # PyTorch: ints give int64
    return _prod_out_shape(tuple(x.shape), axis, keepdims), dtype


def _prod_impl(x: np.ndarray, axis: tuple | None = None, keepdims: bool = False) -> np.ndarray:
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.int64)
    return np.asarray(np.multiply.reduce(x, axis=axis, keepdims=keepdims, dtype=dtype))


def _prod_vjp(ctx, g):
    # PyTorch's rule: out / x where the slice has no zero; at the one zero of a slice the
    # product of the others; 0 everywhere in a slice with two or more zeros.
    from .shape import broadcast_to, reshape

    (x,) = ctx.args
    axis, keepdims = ctx.attrs["axis"], ctx.attrs["keepdims"]
    shape = tuple(ctx.inputs[0].shape)
    kept = _prod_out_shape(shape, axis, True)
    out, g = ctx.out, g
    if not keepdims:
        out, g = reshape(out, kept), reshape(g, kept)
    zero = E.eq(x, 0)
    zeros = R.sum(zero, axis, keepdims=True)
    safe = E.where(zero, 1.0, x)  # no 0 / 0 in the branch `where` discards
    others = prod(safe, axis, keepdim=True)
    at_zero = E.where(E.eq(zeros, 1), others, 0.0)
    local = E.where(E.eq(zeros, 0), E.div(broadcast_to(out, shape), safe),
                    E.where(zero, at_zero, 0.0))
    return (E.mul(local, g),)


PROD = register(OpDef(
    "prod", _prod_impl, _prod_infer, _prod_vjp,
    lambda node: "ProdBackward0" if node.attrs["axis"] is None else "ProdBackward1",
    saves=(0,), saves_out=True, reduction=Reduction("mul", _one),
))


# ------------------------------------------------------------- functional forms


def tan(x: Any) -> Any:
    """Tangent elementwise."""
    return bind(TAN, x)


def asin(x: Any) -> Any:
    """Inverse sine elementwise (nan outside [-1, 1])."""
    return bind(ASIN, x)


def acos(x: Any) -> Any:
    """Inverse cosine elementwise (nan outside [-1, 1])."""
    return bind(ACOS, x)


def atan(x: Any) -> Any:
    """Inverse tangent elementwise."""
    return bind(ATAN, x)


def sinh(x: Any) -> Any:
    """Hyperbolic sine elementwise."""
    return bind(SINH, x)


def cosh(x: Any) -> Any:
    """Hyperbolic cosine elementwise."""
    return bind(COSH, x)


def asinh(x: Any) -> Any:
    """Inverse hyperbolic sine elementwise."""
    return bind(ASINH, x)


def acosh(x: Any) -> Any:
    """Inverse hyperbolic cosine elementwise (nan below 1)."""
    return bind(ACOSH, x)


def atanh(x: Any) -> Any:
    """Inverse hyperbolic tangent elementwise (nan outside [-1, 1])."""
    return bind(ATANH, x)


def erf(x: Any) -> Any:
    """The error function elementwise. ``dg.erf(dg.tensor(0.0))`` is ``tensor(0.)``."""
    return bind(ERF, x)


def log2(x: Any) -> Any:
    """Base-2 logarithm elementwise."""
    return bind(LOG2, x)


def log10(x: Any) -> Any:
    """Base-10 logarithm elementwise."""
    return bind(LOG10, x)


def log1p(x: Any) -> Any:
    """``log(1 + x)``, accurate for small ``x``."""
    return bind(LOG1P, x)


def expm1(x: Any) -> Any:
    """``exp(x) - 1``, accurate for small ``x``."""
    return bind(EXPM1, x)


def sign(x: Any) -> Any:
    """-1, 0 or 1 by the sign of each element (gradient 0)."""
    return bind(SIGN, x)


def floor(x: Any) -> Any:
    """Round down elementwise (gradient 0); integer tensors come back unchanged."""
    return bind(FLOOR, x)


def ceil(x: Any) -> Any:
    """Round up elementwise (gradient 0)."""
    return bind(CEIL, x)


def round(x: Any) -> Any:  # noqa: A001 - PyTorch's name
    """Round to the nearest integer, halves to even as PyTorch (gradient 0)."""
    return bind(ROUND, x)


def trunc(x: Any) -> Any:
    """Round toward zero elementwise (gradient 0)."""
    return bind(TRUNC, x)


fix = trunc


def copysign(x: Any, y: Any) -> Any:
    """``|x|`` with the sign of ``y`` (a float result, as PyTorch)."""
    return bind(COPYSIGN, x, y)


def fmod(x: Any, y: Any) -> Any:
    """C's remainder: ``x - y * trunc(x / y)``, the sign of the dividend."""
    return bind(FMOD, x, y)


def remainder(x: Any, y: Any) -> Any:
    """Python's ``%``: ``x - y * floor(x / y)``, the sign of the divisor."""
    return bind(REMAINDER, x, y)


def floor_divide(x: Any, y: Any) -> Any:
    """Python's ``//``: the quotient rounded down (gradient 0)."""
    return bind(FLOOR_DIVIDE, x, y)


def atan2(y: Any, x: Any) -> Any:
    """The angle of the point ``(x, y)``, elementwise: ``dg.atan2(y, x)``."""
    return bind(ATAN2, y, x)


arctan2 = atan2


def bitwise_and(x: Any, y: Any) -> Any:
    """``x & y`` on integer or bool tensors."""
    return bind(BITWISE_AND, x, y)


def bitwise_or(x: Any, y: Any) -> Any:
    """``x | y`` on integer or bool tensors."""
    return bind(BITWISE_OR, x, y)


def bitwise_xor(x: Any, y: Any) -> Any:
    """``x ^ y`` on integer or bool tensors."""
    return bind(BITWISE_XOR, x, y)


def bitwise_not(x: Any) -> Any:
    """``~x`` on integer or bool tensors (logical not for bool)."""
    return bind(BITWISE_NOT, x)


def bitwise_left_shift(x: Any, y: Any) -> Any:
    """``x << y`` on integer tensors."""
    return bind(LEFT_SHIFT, x, y)


def bitwise_right_shift(x: Any, y: Any) -> Any:
    """``x >> y`` on integer tensors (arithmetic: the sign is kept)."""
    return bind(RIGHT_SHIFT, x, y)


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
    return E.sub(x, trunc(x))


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
        return floor_divide(x, y)
    if rounding_mode == "trunc":
        if result_dtype(x, y).kind == "f":
            return trunc(E.div(x, y))
        # x - fmod(x, y) is an exact multiple of y, so its floor quotient is the truncated one.
        return floor_divide(E.sub(x, fmod(x, y)), y)
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
    return E.add(m, log1p(E.exp(E.neg(E.abs(d)))))


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
    finite = bitwise_and(isfinite(a), isfinite(b))
    a0, b0 = E.where(finite, a, 0.0), E.where(finite, b, 0.0)
    close = E.le(E.abs(E.sub(a0, b0)), E.add(E.mul(E.abs(b0), rtol), atol))
    out = bitwise_or(E.eq(a, b), bitwise_and(finite, close))
    if equal_nan:
        out = bitwise_or(out, bitwise_and(isnan(a), isnan(b)))
    return out


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether `isclose` holds everywhere (a Python bool)."""
    return bool(all(isclose(a, b, rtol, atol, equal_nan)).item())


def _truth(x: Any) -> Any:
    dtype = getattr(x, "dtype", None)
    return x if dtype is not None and np.dtype(dtype) == np.bool_ else E.ne(x, 0)


def logical_and(x: Any, y: Any) -> Any:
    """Elementwise ``x and y`` of the truth values (nonzero is true)."""
    return bitwise_and(_truth(x), _truth(y))


def logical_or(x: Any, y: Any) -> Any:
    """Elementwise ``x or y`` of the truth values."""
    return bitwise_or(_truth(x), _truth(y))


def logical_xor(x: Any, y: Any) -> Any:
    """Elementwise ``x xor y`` of the truth values."""
    return bitwise_xor(_truth(x), _truth(y))


def logical_not(x: Any) -> Any:
    """Elementwise ``not x`` (zero is false)."""
    return E.eq(x, 0)


# ------------------------------------------------------------------- reductions


def _dims(x: Any, dim: Any) -> tuple | None:
    return normalize_axis("reduce", dim, len(shape_of(x)))


def var(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: Any = None) -> Any:
    """Variance over ``dim``, divided by ``N - correction`` (1 by default; ``unbiased=False``
    means 0), two-pass as PyTorch. ``dg.var(x, dim=1, correction=0)``"""
    if isinstance(dim, bool):
        dim, unbiased = None, dim  # torch.var(x, False): the old (input, unbiased) form
    if unbiased is not None and correction is not None:
        raise TypeError("var: pass either unbiased= or correction=, not both")
    corr = correction if correction is not None else (0 if unbiased is False else 1)
    axis = _dims(x, dim)
    shape = shape_of(x)
    n = math.prod(shape if axis is None else [shape[i] for i in axis])
    dev = E.sub(x, R.mean(x, axis, keepdims=True))
    total = R.sum(E.mul(dev, dev), axis, keepdims=keepdim)
    # n <= correction gives inf or nan, as PyTorch (with a warning there).
    denom = n - corr
    return E.div(total, denom) if denom > 0 else E.mul(total, math.inf if denom < 0 else math.nan)


def std(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: Any = None) -> Any:
    """Standard deviation: ``sqrt(var(...))`` with `var`'s arguments."""
    return E.sqrt(var(x, dim, unbiased, keepdim, correction=correction))


def var_mean(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(var, mean)`` over ``dim``."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    v = var(x, dim, unbiased, keepdim, correction=correction)
    return v, R.mean(x, _dims(x, dim), keepdims=keepdim)


def std_mean(x: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(std, mean)`` over ``dim``."""
    v, m = var_mean(x, dim, unbiased, keepdim, correction=correction)
    return E.sqrt(v), m


def logsumexp(x: Any, dim: Any, keepdim: bool = False) -> Any:
    """``log(sum(exp(x)))`` over ``dim``, shifted by the max so it never overflows; the
    shift's gradient cancels (a max of -inf is replaced by 0, so empty-mass rows give -inf)."""
    axis = _dims(x, dim)
    m = R.max(x, axis, keepdims=True)
    m = E.where(isinf(m), 0.0, m)
    out = E.add(E.log(R.sum(E.exp(E.sub(x, m)), axis, keepdims=True)), m)
    if keepdim:
        return out
    from .shape import reshape

    shape = shape_of(x)
    keep = () if axis is None else tuple(d for i, d in enumerate(shape) if i not in axis)
    return reshape(out, keep)


def any(x: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """Whether any element (over ``dim``) is nonzero: a bool tensor."""
    return E.gt(R.sum(_truth(x), _dims(x, dim), keepdims=keepdim), 0)


def all(x: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """Whether every element (over ``dim``) is nonzero: a bool tensor."""
    return E.eq(R.sum(E.eq(x, 0), _dims(x, dim), keepdims=keepdim), 0)


def prod(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    """The product over ``dim`` (all elements by default); integer inputs give int64.
    ``dg.prod(x, 1)``"""
    if dtype is not None:
        from .shape import astype

        x = astype(x, dtype)
    return bind(PROD, x, axis=_dims(x, dim), keepdims=bool(keepdim))
