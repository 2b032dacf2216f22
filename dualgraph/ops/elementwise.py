"""Elementwise primitives: arithmetic, comparisons, ``where``, the activations' ops, and the
functions whose value (or gradient) no composition of those gives exactly: trigonometric and
hyperbolic functions and their inverses, ``erf``, ``log2``/``log10``/``log1p``/``expm1``,
``sign`` and the rounding functions (a zero gradient, as in PyTorch),
``fmod``/``remainder``/``floor_divide``, ``copysign``, ``atan2`` and the bitwise ops. Each
VJP is written with dualgraph ops, never NumPy. Compositions of these live in ``math.py``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..modes import bind
from .broadcast import (
    broadcast_shapes,
    cast_operands,
    float_dtype,
    promote_arrays,
    result_dtype,
    shape_of,
)
from .erf32 import erf_f32
from .registry import OpDef, register

# ---------------------------------------------------------------------------- infer rules


def _binary_infer(name: str):
    def infer(x: Any, y: Any) -> tuple:
        return broadcast_shapes(name, shape_of(x), shape_of(y)), result_dtype(x, y)

    return infer


def _pow_infer(x: Any, y: Any) -> tuple:
    shape, dtype = _binary_infer("pow")(x, y)
    # PyTorch's check, on a literal exponent only (a tensor exponent is not inspected):
    # raised here so eager, tracing and compiled code all stop at the same point.
    if (dtype.kind in "iu" and isinstance(y, int) and not isinstance(y, bool) and y < 0):
        raise RuntimeError("pow: Integers to negative integer powers are not allowed.")
    return shape, dtype


def _compare_infer(name: str):
    def infer(x: Any, y: Any) -> tuple:
        return broadcast_shapes(name, shape_of(x), shape_of(y)), np.dtype(np.bool_)

    return infer


def _same_infer(x: Any) -> tuple:
    return tuple(x.shape), x.dtype


def _float_infer(x: Any) -> tuple:
    return tuple(x.shape), float_dtype(x.dtype)


def _where_infer(c: Any, x: Any, y: Any) -> tuple:
    shape = broadcast_shapes("where", shape_of(c), shape_of(x), shape_of(y))
    return shape, result_dtype(x, y)


def _div_infer(x: Any, y: Any) -> tuple:
    return broadcast_shapes("div", shape_of(x), shape_of(y)), float_dtype(result_dtype(x, y))


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


def _floatify(ufunc):
    """Integer inputs to a float-valued ufunc become the default float dtype (PyTorch), not NumPy's f64/f16."""

    def impl(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind != "f":
            x = x.astype(float_dtype(x.dtype))
        return ufunc(x)

    return impl


def _sigmoid_impl(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f":
        x = x.astype(float_dtype(x.dtype))
    # expit is exact to the last bits on both tails (0.5 + 0.5 tanh(x/2) is 0 below -17);
    # imported here because scipy.special takes ~0.2 s to import.
    from scipy.special import expit

    return expit(x)


def _relu_impl(x: np.ndarray) -> np.ndarray:
    if x.size > _RELU_ZEROS_MIN and type(x) is np.ndarray and x.flags.c_contiguous:
        # Against an array of zeros NumPy runs its vector loop; against a scalar zero,
        # about 3x slower (float32, 16K elements: 2.3 against 6.8 us). The same
        # comparisons, so the same bits (NaN kept, -0.0 made +0.0), and the same layout.
        return np.maximum(x, _zeros(x.shape, x.dtype))
    return np.maximum(x, x.dtype.type(0))


_RELU_ZEROS_MIN = 1024  # elements: below, the zeros' lookup costs what it saves
_ZEROS: dict = {}


def _zeros(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """Read-only zeros of ``shape`` and ``dtype``, kept per both (every step of a training
    loop asks for the same). Large ones are the system's zero pages until written, which
    they never are: they cost address space, not memory."""
    key = (shape, dtype)
    z = _ZEROS.get(key)
    if z is None:
        if len(_ZEROS) > 64:
            _ZEROS.clear()
        z = np.zeros(shape, dtype)
        z.flags.writeable = False
        _ZEROS[key] = z
    return z


# The Python scalar types that never change an array's dtype, by array kind (NumPy 2 treats
# them as weak, as PyTorch does): the kernels' fast path, taken without `result_dtype`.
_WEAK_KINDS = {float: "f", int: "fiu", bool: "fiub"}


def _needs_promotion(x: Any, y: Any) -> bool:
    """Whether NumPy alone could give a dtype other than `result_dtype`'s for ``x, y``."""
    if type(x) is np.ndarray:
        if type(y) is np.ndarray:
            return x.dtype != y.dtype
        return x.dtype.kind not in _WEAK_KINDS.get(type(y), "")
    if type(y) is np.ndarray:
        return y.dtype.kind not in _WEAK_KINDS.get(type(x), "")
    return True


def _promoting(ufunc, floating: bool = False):
    """A binary ufunc as an op kernel with PyTorch's promotion (`result_dtype`; with
    ``floating``, integer results become float32, as ``/`` does). ``out=`` writes the
    result into an existing array (cast ``same_kind``): in-place updates use it to run
    the op's own kernel without a temporary (`impl_into`)."""

    def impl(x: Any, y: Any, out: np.ndarray | None = None) -> np.ndarray:
        # `_needs_promotion`, inlined for the array (op) array-or-scalar hot path. Without
        # promotion an operand is an array of the result's dtype.
        if type(x) is np.ndarray:
            kind = x.dtype.kind
            if type(y) is np.ndarray:
                promote = x.dtype != y.dtype
            else:
                promote = kind not in _WEAK_KINDS.get(type(y), "")
        else:
            promote = _needs_promotion(x, y)
            kind = "" if promote else y.dtype.kind
        if promote or (floating and kind != "f"):
            dtype = result_dtype(x, y)
            x, y = cast_operands(float_dtype(dtype) if floating else dtype, (x, y))
        return ufunc(x, y) if out is None else ufunc(x, y, out=out)

    impl.__name__ = ufunc.__name__
    impl.writes_out = True
    return impl


# Same-width integer dtypes, to select floats by their bits (`_select_or_zero`).
_BITS = {2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}


def _is_plus_zero(v: Any) -> bool:
    return (type(v) is float or type(v) is int) and v == 0 and math.copysign(1.0, v) > 0


_WHERE_MAX = 1024  # elements; measured crossover about 2000 float32


def _select_or_zero(c: np.ndarray, x: np.ndarray, keep: bool) -> np.ndarray:
    """``where(c, x, 0)`` (``keep``) or ``where(c, 0, x)``, bit for bit, as an AND of
    ``x``'s bits with an all-ones/all-zeros mask: two plain integer passes instead of
    ``np.where``'s scalar-broadcast select, about 2x faster. This is ReLU's (and ``where``'s
    own) backward, so every eager training step runs it. +0.0 is all zero bits, and a NaN
    or -0.0 in ``x`` is kept or dropped exactly as ``np.where`` would."""
    if x.size <= _WHERE_MAX:
        # On a small array the four calls below cost more than np.where's slower loop.
        return np.where(c, x, 0.0) if keep else np.where(c, 0.0, x)
    bits = _BITS[x.dtype.itemsize]
    out = np.empty(x.shape, x.dtype)  # owns its memory, as np.where's result does
    mask = out.view(bits)
    # c true -> -1 (all ones) for keep, 0 otherwise; c - 1 gives the opposite mask. A
    # condition that broadcasts (attention's causal mask) gets its mask at its own size,
    # so the one full-size pass is the AND.
    small = c.size < x.size
    cm = np.empty(c.shape, bits) if small else mask
    if keep:
        np.subtract(0, c, dtype=bits, out=cm)
    else:
        np.subtract(c, 1, dtype=bits, out=cm)
    np.bitwise_and(cm, x.view(bits), out=mask)
    return out


def _fill_where(c: np.ndarray, x: np.ndarray, fill: Any, keep: bool) -> np.ndarray:
    """``where(c, x, fill)`` (``keep``) or ``where(c, fill, x)`` for a condition that
    broadcasts to ``x`` and a scalar ``fill`` exact in ``x``'s dtype: a fill, then a copy
    of ``x`` under the (short, broadcast) condition, about 1.4x np.where on a causal
    attention mask. Selection only, so the same bits."""
    out = np.empty(x.shape, x.dtype)
    out.fill(fill)
    np.copyto(out, x, where=c if keep else ~c)
    return out


def _broadcasts_to(c: np.ndarray, x: Any) -> bool:
    """``c`` broadcasts to ``x``, a C-ordered float array, by leading dimensions only
    (``x``'s shape is then the result's)."""
    return (type(x) is np.ndarray and x.dtype.kind == "f" and x.flags.c_contiguous
            and c.ndim <= x.ndim and x.shape[x.ndim - c.ndim:] == c.shape)


def _exact_scalar(v: Any, dtype: np.dtype) -> bool:
    """``v`` a Python number that ``dtype`` holds exactly (so filling with it is what
    np.where's weak-scalar cast gives)."""
    if type(v) is not float and type(v) is not int:
        return False
    try:
        with np.errstate(over="ignore"):
            return bool(dtype.type(v) == v)
    except OverflowError:  # an int past the float range
        return False


def _where_impl(c: Any, x: Any, y: Any) -> np.ndarray:
    if _needs_promotion(x, y):
        x, y = promote_arrays(x, y)
    elif type(c) is np.ndarray and c.dtype == np.bool_ and c.flags.c_contiguous:
        # Selecting an array against a literal +0 of the same shape (C-ordered, so the
        # result's layout is np.where's): the bitwise select.
        # The array may be the larger operand when the condition broadcasts to it.
        if _broadcasts_to(c, x):
            if _is_plus_zero(y):
                return _select_or_zero(c, x, True)
            if _WHERE_MAX < x.size and c.size < x.size and _exact_scalar(y, x.dtype):
                return _fill_where(c, x, y, True)
        if _broadcasts_to(c, y):
            if _is_plus_zero(x):
                return _select_or_zero(c, y, False)
            if _WHERE_MAX < y.size and c.size < y.size and _exact_scalar(x, y.dtype):
                return _fill_where(c, y, x, False)
    if type(c) is np.ndarray and c.dtype == np.bool_ and c.ndim:
        # A condition that broadcasts (one flag per row: "this row is all masked") is
        # usually uniform; then the result is one operand broadcast, a plain copy, where
        # np.where would step through the short broadcast rows.
        shape = np.broadcast_shapes(c.shape, np.shape(x), np.shape(y))
        if c.size < math.prod(shape):
            pick = x if c.all() else y if not c.any() else None
            if pick is not None:
                # np.where's result dtype, from one element of each operand.
                one = [a.reshape(-1)[:1] if type(a) is np.ndarray else a for a in (x, y)]
                out = np.empty(shape, np.where(True, *one).dtype)
                np.copyto(out, pick)
                return out
    return np.where(c, x, y)


def impl_into(op: OpDef, out: np.ndarray, x: Any, y: Any) -> None:
    """Run ``op``'s kernel on ``x, y`` with the result written into ``out`` (a ``same_kind``
    cast; NumPy's ``TypeError`` when the result's dtype can't be cast to ``out``'s): the
    eager mode's in-place update outside autograd. Kernels that take ``out=`` (the binary
    ufunc ops) need no temporary."""
    if getattr(op.impl, "writes_out", False):
        op.impl(x, y, out=out)
    else:
        np.copyto(out, op.impl(x, y), casting="same_kind")


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


def _sign_impl(x: np.ndarray) -> np.ndarray:
    """PyTorch's sign: 0 for nan (NumPy gives nan), +0.0 for either zero."""
    r = np.sign(x)
    if r.dtype.kind == "f":
        r = np.where(np.isnan(r), r.dtype.type(0), r)
    return r


# --------------------------------------------------------------------- functional wrappers


def add(x: Any, y: Any) -> Any:
    return bind(ADD, x, y)


def sub(x: Any, y: Any) -> Any:
    return bind(SUB, x, y)


def mul(x: Any, y: Any) -> Any:
    return bind(MUL, x, y)


def div(x: Any, y: Any) -> Any:
    return bind(DIV, x, y)


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - NumPy's and PyTorch's name
    return bind(POW, x, y)


def neg(x: Any) -> Any:
    return bind(NEG, x)


def exp(x: Any) -> Any:
    """``e ** x`` elementwise. ``dg.exp(dg.tensor(0.0))`` is ``tensor(1.)``."""
    return bind(EXP, x)


def log(x: Any) -> Any:
    """Natural logarithm elementwise."""
    return bind(LOG, x)


def tanh(x: Any) -> Any:
    """Hyperbolic tangent elementwise."""
    return bind(TANH, x)


def sigmoid(x: Any) -> Any:
    """Logistic sigmoid ``1 / (1 + exp(-x))`` elementwise, stable for large ``|x|``."""
    return bind(SIGMOID, x)


def relu(x: Any) -> Any:
    """``max(x, 0)`` elementwise; its gradient at 0 is 0, as in PyTorch."""
    return bind(RELU, x)


def threshold_backward(grad: Any, y: Any, threshold: float) -> Any:
    """0 where ``y <= threshold``, else ``grad``: the backward of ``relu`` (and of
    ``threshold``) as PyTorch computes it, so a NaN ``y`` passes the gradient."""
    return bind(THRESHOLD_BACKWARD, grad, y, threshold)


def sqrt(x: Any) -> Any:
    """Square root elementwise."""
    return bind(SQRT, x)


def abs(x: Any) -> Any:  # noqa: A001 - NumPy's and PyTorch's name
    """Absolute value elementwise; its gradient at 0 is 0, as in PyTorch."""
    return bind(ABS, x)


def sin(x: Any) -> Any:
    """Sine elementwise."""
    return bind(SIN, x)


def cos(x: Any) -> Any:
    """Cosine elementwise."""
    return bind(COS, x)


def maximum(x: Any, y: Any) -> Any:
    """Elementwise maximum; on ties the gradient is split evenly, as in PyTorch."""
    return bind(MAXIMUM, x, y)


def minimum(x: Any, y: Any) -> Any:
    """Elementwise minimum; on ties the gradient is split evenly, as in PyTorch."""
    return bind(MINIMUM, x, y)


def where(cond: Any, x: Any, y: Any) -> Any:
    """``x`` where ``cond`` is true, else ``y`` (broadcasting); no gradient flows to ``cond``."""
    dtype = getattr(cond, "dtype", None)
    if dtype is not None and dtype != np.bool_:
        # PyTorch's rule: a float mask is usually a bug (0.5 would select like 1.0).
        raise TypeError(f"where: the condition must be a bool tensor (a comparison such as "
                        f"x > 0), got dtype {dtype}; use cond.astype(dg.bool) if you mean it")
    # A NumPy scalar is a Python number here, as in PyTorch (it keeps the tensor's dtype).
    x, y = (v.item() if isinstance(v, (np.integer, np.floating, np.bool_)) else v
            for v in (x, y))
    return bind(WHERE, cond, x, y)


def lt(x: Any, y: Any) -> Any:
    return bind(LT, x, y)


def le(x: Any, y: Any) -> Any:
    return bind(LE, x, y)


def gt(x: Any, y: Any) -> Any:
    return bind(GT, x, y)


def ge(x: Any, y: Any) -> Any:
    return bind(GE, x, y)


def eq(x: Any, y: Any) -> Any:
    return bind(EQ, x, y)


def ne(x: Any, y: Any) -> Any:
    return bind(NE, x, y)


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


def round(x: Any, *, decimals: int = 0) -> Any:  # noqa: A001 - PyTorch's name
    """Round to the nearest integer (or, with ``decimals``, multiple of ``10**-decimals``),
    halves to even as PyTorch (gradient 0)."""
    if decimals == 0:
        return bind(ROUND, x)
    k = 10.0 ** decimals
    return div(bind(ROUND, mul(x, k)), k)


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


def gcd(x: Any, y: Any) -> Any:
    """The greatest common divisor of integer tensors, elementwise (never negative;
    ``gcd(0, 0) == 0``)."""
    return bind(GCD, x, y)


def lcm(x: Any, y: Any) -> Any:
    """The least common multiple of integer tensors, elementwise (never negative; 0 when
    either is 0)."""
    return bind(LCM, x, y)


def nextafter(x: Any, y: Any) -> Any:
    """The next float after ``x`` toward ``y``, elementwise (``x`` where they are equal)."""
    return bind(NEXTAFTER, x, y)


def _truth(x: Any) -> Any:
    dtype = getattr(x, "dtype", None)
    return x if dtype is not None and np.dtype(dtype) == np.bool_ else ne(x, 0)


# ------------------------------------------------------------------------------ VJP rules
# ctx.args holds the saved primal inputs; the engine sums gradients back to input shapes.


def _add_vjp(ctx, g):
    return g, g


def _sub_vjp(ctx, g):
    return g, (neg(g) if ctx.needs_input_grad[1] else None)


def _sub_vjp_arrays(ctx, args, out, g):
    return g, (np.negative(g) if ctx.needs_input_grad[1] else None)


def _mul_vjp(ctx, g):
    x, y = ctx.args
    nx, ny = ctx.needs_input_grad
    return (mul(g, y) if nx else None), (mul(g, x) if ny else None)


def _mul_vjp_arrays(ctx, args, out, g):
    x, y = args
    nx, ny = ctx.needs_input_grad
    return (_MUL_IMPL(g, y) if nx else None), (_MUL_IMPL(g, x) if ny else None)


_MUL_IMPL = _promoting(np.multiply)
_POW_IMPL = _promoting(np.power)


def _div_vjp(ctx, g):
    # The quotient is recomputed rather than saved (PyTorch's rule: a division by a
    # constant saves no output, so `y = x / 2; y += 1` can still backward).
    x, y = ctx.args
    gx = div(g, y)
    return gx, (neg(mul(gx, div(x, y))) if ctx.needs_input_grad[1] else None)


def _pow_vjp(ctx, g):
    x, y = ctx.args
    if isinstance(y, (int, float)):
        # Literal exponents keep the backward graph short for the common x**2.
        if y == 0:
            return mul(g, 0.0), None
        if y == 2:
            return mul(g, mul(x, 2.0)), None
        return mul(g, mul(pow(x, y - 1), y)), None
    nx, ny = ctx.needs_input_grad
    # Where y == 0 the x-gradient is 0 (PyTorch), also at x == 0 where y * x ** (y - 1)
    # would be 0 * inf = nan.
    gx = mul(g, where(eq(y, 0), 0.0, mul(y, pow(x, sub(y, 1))))) if nx else None
    if not ny:
        return gx, None
    out = pow(x, y)  # recomputed, not saved: only a tensor exponent needs it
    # d/dy x**y = x**y log x; where x == 0 and y >= 0 PyTorch takes the limit 0 instead of
    # nan; for y < 0 the formula's -inf stands (x**y is inf there, so -x**y is that -inf).
    if isinstance(x, (int, float)):  # a literal base: log x is a number
        if x == 0:
            return gx, mul(g, where(ge(y, 0), 0.0, neg(out)))
        return gx, mul(g, mul(out, math.log(x) if x > 0 else math.nan))
    limit = where(ge(y, 0), 0.0, neg(out))
    gy = mul(g, where(eq(x, 0), limit, mul(out, log(x))))
    return gx, gy


def _pow_vjp_arrays(ctx, args, out, g):
    """`_pow_vjp`'s literal-exponent forms on arrays (the kernels its ops run; each
    product made an array, as an op's result is); ``None`` for a tensor exponent."""
    x, y = args
    if not isinstance(y, (int, float)) or type(x) is not np.ndarray:
        return None
    if y == 0:
        return np.asarray(_MUL_IMPL(g, 0.0)), None
    if y == 2:
        return np.asarray(_MUL_IMPL(g, np.asarray(_MUL_IMPL(x, 2.0)))), None
    d = np.asarray(_MUL_IMPL(np.asarray(_POW_IMPL(x, y - 1)), y))
    return np.asarray(_MUL_IMPL(g, d)), None


def _neg_vjp(ctx, g):
    return (neg(g),)


def _exp_vjp(ctx, g):
    return (mul(g, ctx.out),)


def _log_vjp(ctx, g):
    return (div(g, ctx.args[0]),)


def _tanh_vjp(ctx, g):
    y = ctx.out
    return (mul(g, sub(1.0, mul(y, y))),)


def _sigmoid_vjp(ctx, g):
    y = ctx.out
    return (mul(g, mul(y, sub(1.0, y))),)


def _relu_vjp(ctx, g):
    return (threshold_backward(g, ctx.out, 0.0),)


def _relu_vjp_arrays(ctx, args, out, g):
    return (_threshold_backward_impl(g, out, 0.0),)


def _threshold_backward_infer(g: Any, y: Any, threshold: Any) -> tuple:
    shape = broadcast_shapes("threshold_backward", shape_of(g), shape_of(y))
    return shape, result_dtype(g, 0.0)


def _threshold_backward_impl(g: Any, y: np.ndarray, threshold: Any) -> np.ndarray:
    # ``where(y <= threshold, 0, g)``, bit for bit, in one op (`_where_impl`'s select): a
    # NaN in y compares false, so it passes g, as PyTorch's kernel does.
    c = np.less_equal(y, threshold)
    if (type(g) is np.ndarray and g.dtype.kind == "f" and c.shape == g.shape
            and g.flags.c_contiguous and c.flags.c_contiguous):
        # ReLU's backward in a training step: the select `_where_impl` would choose for
        # these operands, without its checks.
        return _select_or_zero(c, g, False)
    return _where_impl(c, 0.0, g)


def zeros_of(g: Any) -> Any:
    """Zeros of ``g``'s shape and dtype, recorded as a function of ``g`` (PyTorch's
    ``zeros_like(grad)`` in a backward): 0 where ``g`` is inf or NaN too, which
    ``g * 0`` is not."""
    return threshold_backward(g, 0.0, math.inf)


def _threshold_backward_vjp(ctx, gg):
    # Linear in the gradient; the output's gradient is zero (PyTorch's zeros_like).
    _, y, threshold = ctx.args
    ng, ny, _ = ctx.needs_input_grad
    return (threshold_backward(gg, y, threshold) if ng else None,
            zeros_of(gg) if ny else None, None)


def _sqrt_vjp(ctx, g):
    return (div(mul(g, 0.5), ctx.out),)


def _abs_vjp(ctx, g):
    # PyTorch's ``g * sgn(x)``: 0 at nan and at 0, unless g is inf or nan there
    # (``sqrt(abs(x))`` at 0 gives nan, as in PyTorch).
    (x,) = ctx.args
    return (mul(g, sign(x)),)


def _sin_vjp(ctx, g):
    return (mul(g, cos(ctx.args[0])),)


def _cos_vjp(ctx, g):
    return (neg(mul(g, sin(ctx.args[0]))),)


def _minmax_vjp(pick):
    # PyTorch's rule: an input gets nothing only where the other one is picked strictly,
    # half on a tie, and all of it otherwise, so where the result is NaN (x or y is NaN,
    # and no comparison holds) both inputs get the full gradient.
    def vjp(ctx, g):
        x, y = ctx.args
        half = mul(g, 0.5)
        tie = eq(x, y)
        gx = where(pick(y, x), 0.0, where(tie, half, g))
        gy = where(pick(x, y), 0.0, where(tie, half, g))
        return gx, gy

    return vjp


def _where_vjp(ctx, g):
    c = ctx.args[0]
    _, nx, ny = ctx.needs_input_grad
    return None, (where(c, g, 0.0) if nx else None), (where(c, 0.0, g) if ny else None)


def _where_vjp_arrays(ctx, args, out, g):
    c = args[0]
    if type(c) is not np.ndarray or c.dtype != np.bool_:
        return None
    _, nx, ny = ctx.needs_input_grad
    return (None, (_where_impl(c, g, 0.0) if nx else None),
            (_where_impl(c, 0.0, g) if ny else None))


def _zero_vjp(ctx, g):
    # PyTorch's rule for step functions: the gradient is 0 everywhere (kinks included),
    # also where g is inf or NaN.
    zero = zeros_of(g)
    return tuple(zero if need else None for need in ctx.needs_input_grad)


def _tan_vjp(ctx, g):
    y = ctx.out
    return (mul(g, add(mul(y, y), 1.0)),)


def _asin_vjp(ctx, g):
    (x,) = ctx.args
    return (div(g, sqrt(sub(1.0, mul(x, x)))),)


def _acos_vjp(ctx, g):
    (x,) = ctx.args
    return (neg(div(g, sqrt(sub(1.0, mul(x, x))))),)


def _atan_vjp(ctx, g):
    (x,) = ctx.args
    return (div(g, add(mul(x, x), 1.0)),)


def _sinh_vjp(ctx, g):
    return (mul(g, cosh(ctx.args[0])),)


def _cosh_vjp(ctx, g):
    return (mul(g, sinh(ctx.args[0])),)


def _asinh_vjp(ctx, g):
    (x,) = ctx.args
    return (div(g, sqrt(add(mul(x, x), 1.0))),)


def _acosh_vjp(ctx, g):
    (x,) = ctx.args
    return (div(g, sqrt(sub(mul(x, x), 1.0))),)


def _atanh_vjp(ctx, g):
    (x,) = ctx.args
    return (div(g, sub(1.0, mul(x, x))),)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erf_vjp(ctx, g):
    (x,) = ctx.args
    return (mul(g, mul(exp(neg(mul(x, x))), _TWO_OVER_SQRT_PI)),)


def _log_base_vjp(base: float):
    ln = math.log(base)

    def vjp(ctx, g):
        return (div(g, mul(ctx.args[0], ln)),)

    return vjp


def _log1p_vjp(ctx, g):
    return (div(g, add(ctx.args[0], 1.0)),)


def _expm1_vjp(ctx, g):
    return (mul(g, add(ctx.out, 1.0)),)


def _copysign_vjp(ctx, g):
    # PyTorch: d/dx copysign(x, y) = copysign(x, y) / x, and 0 at x == 0; none to y.
    x, _ = ctx.args
    nx, ny = ctx.needs_input_grad
    gx = mul(g, where(eq(x, 0), 0.0, div(ctx.out, x))) if nx else None
    return gx, (mul(g, 0.0) if ny else None)


def _mod_vjp(rounding):
    """x - y * rounding(x / y): the x-gradient is g, the y-gradient -g * rounding(x / y)."""

    def vjp(ctx, g):
        x, y = ctx.args
        ny = ctx.needs_input_grad[1]
        return g, (neg(mul(g, rounding(div(x, y)))) if ny else None)

    return vjp


def _atan2_vjp(ctx, g):
    y, x = ctx.args
    ny, nx = ctx.needs_input_grad
    r = add(mul(x, x), mul(y, y))
    # At the origin the gradient is zero, as PyTorch makes it (1 / r taken as 0 there).
    zero = eq(r, 0.0)
    inv = where(zero, 0.0, div(1.0, where(zero, 1.0, r)))
    return ((mul(mul(g, x), inv) if ny else None),
            (neg(mul(mul(g, y), inv)) if nx else None))


# ------------------------------------------------------------------------------- registry


ADD = register(OpDef(
    "add", _promoting(np.add), _binary_infer("add"), _add_vjp, "AddBackward0",
    elementwise=True, commutative=True, sums=True,
))
SUB = register(OpDef(
    "sub", _promoting(np.subtract), _binary_infer("sub"), _sub_vjp, "SubBackward0",
    elementwise=True, vjp_arrays=_sub_vjp_arrays,
))
MUL = register(OpDef(
    "mul", _MUL_IMPL, _binary_infer("mul"), _mul_vjp, "MulBackward0",
    saves=(0, 1), saves_for=(1, 0), elementwise=True, commutative=True,
    vjp_arrays=_mul_vjp_arrays,
))
DIV = register(OpDef(
    "div", _promoting(np.true_divide, floating=True), _div_infer, _div_vjp, "DivBackward0",
    saves=(0, 1), saves_for=(1, None), elementwise=True,
))
def _power(x: Any, y: Any, out: np.ndarray | None = None) -> np.ndarray:
    """``np.power`` with PyTorch's integer powers: NumPy refuses a negative integer
    exponent in an array; PyTorch gives the truncated ``1 / x ** -y`` (1 for a base of 1,
    +-1 by parity for -1, else 0), as the compiled kernels do."""
    try:
        return np.power(x, y) if out is None else np.power(x, y, out=out)
    except ValueError:
        x, y = np.asarray(x), np.asarray(y)
        neg = y < 0
        r = np.power(x, np.where(neg, 0, y).astype(y.dtype))
        odd = (y % 2) != 0
        small = ((x == 1) | ((x == -1) & ~odd)).astype(r.dtype) - \
            ((x == -1) & odd).astype(r.dtype)
        r = np.where(neg, small, r)
        if out is None:
            return r
        np.copyto(out, r, casting="same_kind")
        return out


POW = register(OpDef(
    "pow", _promoting(_power), _pow_infer, _pow_vjp, "PowBackward0",
    saves=(0, 1), elementwise=True, vjp_arrays=_pow_vjp_arrays,
))
NEG = register(OpDef(
    "neg", np.negative, _same_infer, _neg_vjp, "NegBackward0",
    elementwise=True,
))
EXP = register(OpDef(
    "exp", _floatify(np.exp), _float_infer, _exp_vjp, "ExpBackward0",
    saves_out=True, elementwise=True,
))
LOG = register(OpDef(
    "log", _floatify(np.log), _float_infer, _log_vjp, "LogBackward0",
    saves=(0,), elementwise=True,
))
TANH = register(OpDef(
    "tanh", _floatify(np.tanh), _float_infer, _tanh_vjp, "TanhBackward0",
    saves_out=True, elementwise=True,
))
SIGMOID = register(OpDef(
    "sigmoid", _sigmoid_impl, _float_infer, _sigmoid_vjp, "SigmoidBackward0",
    saves_out=True, elementwise=True,
))
RELU = register(OpDef(
    "relu", _relu_impl, _same_infer, _relu_vjp, "ReluBackward0",
    saves_out=True, elementwise=True, vjp_arrays=_relu_vjp_arrays,
))
SQRT = register(OpDef(
    "sqrt", _floatify(np.sqrt), _float_infer, _sqrt_vjp, "SqrtBackward0",
    saves_out=True, elementwise=True,
))
ABS = register(OpDef(
    "abs", np.abs, _same_infer, _abs_vjp, "AbsBackward0",
    saves=(0,), elementwise=True,
))
SIN = register(OpDef(
    "sin", _floatify(np.sin), _float_infer, _sin_vjp, "SinBackward0",
    saves=(0,), elementwise=True,
))
COS = register(OpDef(
    "cos", _floatify(np.cos), _float_infer, _cos_vjp, "CosBackward0",
    saves=(0,), elementwise=True,
))
MAXIMUM = register(OpDef(
    "maximum", _promoting(np.maximum), _binary_infer("maximum"), _minmax_vjp(gt), "MaximumBackward0",
    saves=(0, 1), elementwise=True, commutative=True,
))
MINIMUM = register(OpDef(
    "minimum", _promoting(np.minimum), _binary_infer("minimum"), _minmax_vjp(lt), "MinimumBackward0",
    saves=(0, 1), elementwise=True, commutative=True,
))
WHERE = register(OpDef(
    "where", _where_impl, _where_infer, _where_vjp, "WhereBackward0",
    saves=(0,), elementwise=True, vjp_arrays=_where_vjp_arrays,
))
# ReLU's backward as one op (PyTorch's threshold_backward): the gradient where the saved
# output exceeds the threshold, else zero; one select instead of a comparison and a where.
THRESHOLD_BACKWARD = register(OpDef(
    "threshold_backward", _threshold_backward_impl, _threshold_backward_infer,
    _threshold_backward_vjp, "ThresholdBackwardBackward0", saves=(1,), saves_for=(0,),
    elementwise=True,
))


def _compare(name: str, ufunc, commutative: bool = False) -> OpDef:
    return register(OpDef(
        name, ufunc, _compare_infer(name), None, "",
        elementwise=True, commutative=commutative, differentiable=False,
    ))


LT = _compare("lt", np.less)
LE = _compare("le", np.less_equal)
GT = _compare("gt", np.greater)
GE = _compare("ge", np.greater_equal)
EQ = _compare("eq", np.equal, commutative=True)
NE = _compare("ne", np.not_equal, commutative=True)


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
GCD = _bitwise("gcd", np.gcd)
LCM = _bitwise("lcm", np.lcm)
BITWISE_NOT = register(OpDef(
    "bitwise_not", np.invert, _integral_infer("bitwise_not", unary=True), None, "",
    elementwise=True, differentiable=False,
))


def _nextafter_infer(x: Any, y: Any) -> tuple:
    shape, dtype = _binary_infer("nextafter")(x, y)
    if dtype.kind != "f":
        raise RuntimeError(f'"nextafter_cpu" not implemented for {dtype}: nextafter takes '
                           "float tensors")
    return shape, dtype


def _nextafter_vjp(ctx, g):
    # PyTorch's rule: the step is treated as locally constant, so the gradient passes to
    # ``x`` wherever a step is taken (not where x == y) and ``y`` gets zeros.
    x, y = ctx.args
    gx = where(ne(x, y), g, 0.0) if ctx.needs_input_grad[0] else None
    return gx, mul(g, 0.0) if ctx.needs_input_grad[1] else None


NEXTAFTER = register(OpDef(
    "nextafter", _promoting(np.nextafter), _nextafter_infer, _nextafter_vjp,
    "NextafterBackward0", saves=(0, 1), saves_for=(0, 0), elementwise=True,
))
