"""Elementwise primitives. Each VJP is written with dualgraph ops, never NumPy."""

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
    return np.maximum(x, x.dtype.type(0))


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
    # c true -> -1 (all ones) for keep, 0 otherwise; c - 1 gives the opposite mask.
    if keep:
        np.subtract(0, c, dtype=bits, out=mask)
    else:
        np.subtract(c, 1, dtype=bits, out=mask)
    np.bitwise_and(mask, x.view(bits), out=mask)
    return out


def _where_impl(c: Any, x: Any, y: Any) -> np.ndarray:
    if _needs_promotion(x, y):
        x, y = promote_arrays(x, y)
    elif type(c) is np.ndarray and c.dtype == np.bool_ and c.flags.c_contiguous:
        # Selecting an array against a literal +0 of the same shape (C-ordered, so the
        # result's layout is np.where's): the bitwise select.
        if (type(x) is np.ndarray and x.shape == c.shape and x.dtype.kind == "f"
                and x.flags.c_contiguous and _is_plus_zero(y)):
            return _select_or_zero(c, x, True)
        if (type(y) is np.ndarray and y.shape == c.shape and y.dtype.kind == "f"
                and y.flags.c_contiguous and _is_plus_zero(x)):
            return _select_or_zero(c, y, False)
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
    """``grad`` where ``y > threshold``, else 0: the backward of ``relu`` (and of
    ``threshold``) as PyTorch computes it."""
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


# ------------------------------------------------------------------------------ VJP rules
# ctx.args holds the saved primal inputs; the engine sums gradients back to input shapes.


def _add_vjp(ctx, g):
    return g, g


def _sub_vjp(ctx, g):
    return g, (neg(g) if ctx.needs_input_grad[1] else None)


def _mul_vjp(ctx, g):
    x, y = ctx.args
    nx, ny = ctx.needs_input_grad
    return (mul(g, y) if nx else None), (mul(g, x) if ny else None)


def _mul_vjp_arrays(ctx, args, out, g):
    x, y = args
    nx, ny = ctx.needs_input_grad
    return (_MUL_IMPL(g, y) if nx else None), (_MUL_IMPL(g, x) if ny else None)


_MUL_IMPL = _promoting(np.multiply)


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
    # ``where(y > threshold, g, 0)``, bit for bit, in one op (`_where_impl`'s select).
    return _where_impl(np.greater(y, threshold), g, 0.0)


def _threshold_backward_vjp(ctx, gg):
    # Linear in the gradient; the output's gradient is zero (PyTorch's zeros_like): the
    # same op with an infinite threshold, which selects nothing (nan in gg included). It
    # compares gg with itself: y is saved only when the gradient's own gradient needs it.
    _, y, threshold = ctx.args
    ng, ny, _ = ctx.needs_input_grad
    return (threshold_backward(gg, y, threshold) if ng else None,
            threshold_backward(gg, gg, math.inf) if ny else None, None)


def _sqrt_vjp(ctx, g):
    return (div(mul(g, 0.5), ctx.out),)


def _abs_vjp(ctx, g):
    (x,) = ctx.args
    return (where(gt(x, 0), g, where(lt(x, 0), neg(g), 0.0)),)


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


# ------------------------------------------------------------------------------- registry


ADD = register(OpDef(
    "add", _promoting(np.add), _binary_infer("add"), _add_vjp, "AddBackward0",
    elementwise=True, commutative=True,
))
SUB = register(OpDef(
    "sub", _promoting(np.subtract), _binary_infer("sub"), _sub_vjp, "SubBackward0",
    elementwise=True,
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
POW = register(OpDef(
    "pow", _promoting(np.power), _pow_infer, _pow_vjp, "PowBackward0",
    saves=(0, 1), elementwise=True,
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
    saves=(0,), elementwise=True,
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
