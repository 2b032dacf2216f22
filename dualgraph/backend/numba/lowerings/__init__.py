"""How the Numba backend computes each op, keyed by op name (the registry knows no backend).

An op reaches generated code by one of three paths:

- **loop**: elementwise and loop-fusible ops (`OpDef.loop_fusible`) are a scalar expression
  inside a loop nest, built by the `SCALAR` table (`scalar_expr`); fused groups inline
  several of them.
- **reduce**: reductions are a loop that folds elements with the op's `Reduction` spec;
  the backend supports the combines in `COMBINE` and the finalizers in `FINALIZE`.
- **kernel**: every other op (shape ops, contractions, pools, losses) has a function
  registered with ``@lowers(name)`` that returns the `kir.Block` computing it.

Every path builds kernel IR; none writes source text (the printer does, last).

`NOT_LOWERABLE` names ops this backend declines on purpose. Compiling a graph with an op
that has no path raises `LoweringError` naming it; ``tests/compile/test_lowerings.py``
fails when a registered op has none, so a new op cannot silently lack one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....ir.graph import Node
from ....ops.broadcast import result_dtype
from ....ops.registry import OpDef
from ... import kir
from ..printer import dtype_name


class LoweringError(NotImplementedError):
    """An op has no Numba lowering."""


def missing(op: str, detail: str = "") -> LoweringError:
    """The error for an op without a lowering (``detail`` says which part is missing)."""
    return LoweringError(f"the Numba backend has no lowering for op {op!r}"
                         + (f" ({detail})" if detail else ""))


def ishape(n: Node) -> tuple:
    """The shape a value is stored with: 0-d values as ``(1,)``, which keeps loops uniform."""
    return tuple(n.shape) or (1,)


np_dtype = dtype_name


# ------------------------------------------------------------------------- loop ops
# A scalar expression per op: a builder of a `kir.Expr` from the operands' expressions and
# the node's dtype. Constants are of the node's dtype (a float64 literal would promote a
# float32 loop); math functions are `kir.Call`s by their NumPy name, and the printer picks
# the target's version for the dtype (`printer.MATH`: vectorizable float32 exp, tanh,
# sigmoid). Each must propagate nan like the op's NumPy kernel. `scalar_expr` applies a
# builder with the casting rules.
Builder = Callable[[list, np.dtype], kir.Expr]


def _k(value: Any, dtype: np.dtype) -> kir.Expr:
    """A constant of the node's dtype."""
    return kir.Const(float(value) if dtype.kind == "f" else int(value), dtype)


def _bin(op: str) -> Builder:
    return lambda a, t: kir.Bin(op, a[0], a[1])


def _call(fn: str) -> Builder:
    return lambda a, t: kir.Call(fn, tuple(a), t)


def _same(a: list, t: np.dtype) -> kir.Expr:
    """An identity (a cast, a broadcast): `scalar_expr` casts only where the dtype changes."""
    return a[0]


def _relu(a: list, t: np.dtype) -> kir.Expr:
    x, zero = a[0], _k(0, t)
    return kir.Select(kir.Un("not", kir.Bin("<=", x, zero)), x, zero)


def _pick(cmp: str) -> Builder:
    """maximum/minimum: the first operand where it wins or is nan (nan propagates)."""
    def build(a: list, t: np.dtype) -> kir.Expr:
        x, y = a[0], a[1]
        return kir.Select(kir.Bin("or", kir.Bin(cmp, x, y), kir.Bin("!=", x, x)), x, y)
    return build


def _sign(a: list, t: np.dtype) -> kir.Expr:
    # PyTorch's sign (the eager kernel): +0.0 for either zero (Numba's np.sign keeps -0.0)
    # and for nan.
    x, zero = a[0], _k(0, t)
    return kir.Select(kir.Bin(">", x, zero), _k(1, t),
                      kir.Select(kir.Bin("<", x, zero), _k(-1, t), zero))


def _fmod(a: list, t: np.dtype) -> kir.Expr:
    # Numba's integer np.fmod takes the divisor's sign (Python's %); on magnitudes the two
    # agree, and the dividend's sign is C's rule (exact for floats too, -0.0 included).
    x, y = a[0], a[1]
    mag = kir.Call("fmod", (kir.Call("abs", (x,), x.dtype), kir.Call("abs", (y,), y.dtype)), t)
    return kir.Bin("*", mag, kir.Call("sign", (x,), x.dtype))


def _floor_divide(a: list, t: np.dtype) -> kir.Expr:
    # NumPy's float floor division, step for step (Numba's gives 0, not -1, for -3 // inf):
    # the quotient of a - fmod(a, b), one less where the remainder's sign is not b's, then
    # rounded to the nearest integer; a zero quotient keeps a / b's sign.
    if t.kind != "f":
        return kir.Call("floor_divide", (a[0], a[1]), t)
    x, y = a[0], a[1]
    zero = _k(0, t)
    mod = kir.Call("fmod", (x, y), t)
    div = kir.Bin("/", kir.Bin("-", x, mod), y)
    flip = kir.Bin("and", kir.Bin("!=", mod, zero),
                   kir.Bin("!=", kir.Bin("<", y, zero), kir.Bin("<", mod, zero)))
    div = kir.Select(flip, kir.Bin("-", div, _k(1, t)), div)
    low = kir.Call("floor", (div,), t)
    near = kir.Select(kir.Bin(">", kir.Bin("-", div, low), _k(0.5, t)),
                      kir.Bin("+", low, _k(1, t)), low)
    quot = kir.Select(kir.Bin("!=", div, zero), near,
                      kir.Call("copysign", (zero, kir.Bin("/", x, y)), t))
    return kir.Select(kir.Bin("==", y, zero), kir.Bin("/", x, y), quot)


SCALAR: dict[str, Builder] = {
    "add": _bin("+"),
    "sub": _bin("-"),
    "mul": _bin("*"),
    "div": _bin("/"),
    "pow": _bin("**"),
    "neg": lambda a, t: kir.Un("-", a[0]),
    "exp": _call("exp"),
    "log": _call("log"),
    "tanh": _call("tanh"),
    "sigmoid": _call("sigmoid"),
    "relu": _relu,
    "sqrt": _call("sqrt"),
    "abs": _call("abs"),
    "sin": _call("sin"),
    "cos": _call("cos"),
    "maximum": _pick(">="),
    "minimum": _pick("<="),
    "where": lambda a, t: kir.Select(a[0], a[1], a[2]),
    # A NaN y compares false and passes the gradient, as PyTorch's kernel does.
    "threshold_backward": lambda a, t: kir.Select(kir.Bin("<=", a[1], a[2]), _k(0, t), a[0]),
    "lt": _bin("<"),
    "le": _bin("<="),
    "gt": _bin(">"),
    "ge": _bin(">="),
    "eq": _bin("=="),
    "ne": _bin("!="),
    "stop_gradient": _same,
    "broadcast_to": _same,
    "astype": _same,
    # --- math primitives (dualgraph/ops/math.py) ---
    "tan": _call("tan"),
    "asin": _call("arcsin"),
    "acos": _call("arccos"),
    "atan": _call("arctan"),
    "sinh": _call("sinh"),
    "cosh": _call("cosh"),
    "asinh": _call("arcsinh"),
    "acosh": _call("arccosh"),
    "atanh": _call("arctanh"),
    "erf": _call("erf"),
    "log2": _call("log2"),
    "log10": _call("log10"),
    "log1p": _call("log1p"),
    "expm1": _call("expm1"),
    "sign": _sign,
    "floor": _call("floor"),
    "ceil": _call("ceil"),
    "round": _call("rint"),
    "trunc": _call("trunc"),
    "copysign": _call("copysign"),
    "fmod": _fmod,
    "remainder": _call("remainder"),
    "floor_divide": _floor_divide,
    "atan2": _call("arctan2"),
    "bitwise_and": _bin("&"),
    "bitwise_or": _bin("|"),
    "bitwise_xor": _bin("^"),
    "bitwise_not": _call("invert"),
    "left_shift": _bin("<<"),
    "right_shift": _bin(">>"),
    "gcd": _call("gcd"),
    "lcm": _call("lcm"),
    "nextafter": _call("nextafter"),
    # --- end of math primitives ---
    # --- special functions (dualgraph/ops/special.py); scalar float64 functions ---
    "lgamma": _call("lgamma"),
    "erfc": _call("erfc"),
    "erfinv": _call("erfinv"),
    "polygamma": _call("polygamma"),
    "bessel_i": _call("bessel_i"),
    "reduce_precision": _call("reduce_precision"),
}
# Ops whose Numba result may have another dtype than operands of the node's dtype (an
# integer power may widen): always cast.
WIDENING = frozenset({"pow", "lgamma", "erfc", "erfinv", "polygamma", "bessel_i",
                      "reduce_precision"})


def scalar_builder(op: str) -> Builder:
    """The scalar expression builder of loop op ``op``."""
    try:
        return SCALAR[op]
    except KeyError:
        raise missing(op, "no scalar expression for a loop") from None


def scalar_expr(node: Node, operands: list) -> kir.Expr:
    """Loop op ``node`` at one index, given its operands there (an expression for each
    value input; literal inputs are passed as they are and typed here).

    A literal takes the node's dtype; a comparison's (bool) result says nothing about its
    operands, so there it takes their common dtype (``i64 < 2.5`` compares with 2.5, not
    with int64(2.5) == 2). The result must have the node's dtype, as the NumPy kernel's
    has; the cast is left out where Numba's typing already gives that dtype (operands of
    the node's dtype, typed literals, no op in `WIDENING`): every cast is a call Numba
    has to type, and compile time is a product cost."""
    dtype = np.dtype(node.dtype)
    ref = np.dtype(result_dtype(*node.inputs)) if dtype == np.bool_ else dtype
    args = [x if isinstance(x, kir.Expr) else
            kir.Const(bool(x), ref) if ref == np.bool_ else _k(x, ref) if ref.kind in "iuf"
            else kir.const(x, ref) for x in operands]
    build = scalar_builder(node.op)
    e = build(args, dtype)
    same = all(x.dtype == dtype for x in operands if isinstance(x, kir.Expr))
    if build is _same:
        return e if same else kir.Cast(e, dtype)
    if dtype != np.bool_ and (not same or node.op in WIDENING or dtype.kind != "f"):
        return kir.Cast(e, dtype)
    return e


# ----------------------------------------------------------------------- reductions


@dataclass(frozen=True)
class Combine:
    """How the backend folds one element into a partial result for a `Reduction` combine.

    ``widen``: partial results are kept in float64 / int64 (long float32 sums stay
    accurate); otherwise in the output dtype. ``better``: the comparison that makes the new
    element replace the partial result (``None``: the element is folded in by ``update``,
    the arithmetic operator of an in-place update: ``+`` or ``*``).
    """

    widen: bool
    better: str | None = None
    update: str = "+"

    def accumulator(self, out: np.dtype) -> np.dtype:
        if not self.widen:
            return out
        return np.dtype(np.float64) if out.kind == "f" else np.dtype(np.int64)


COMBINE: dict[str, Combine] = {
    "add": Combine(widen=True),
    # A product in the output dtype, as NumPy's multiply.reduce (no pairwise widening).
    "mul": Combine(widen=False, update="*"),
    "maximum": Combine(widen=False, better=">"),
    "minimum": Combine(widen=False, better="<"),
}
# `Reduction.finalize` values the writer applies (None: the total as it is).
FINALIZE = frozenset({None, "mean"})


def combine_of(op: OpDef) -> Combine:
    """The backend's combine for reduction ``op``; raises if it has none."""
    spec = op.reduction
    if spec.combine not in COMBINE:
        raise missing(op.name, f"no combine {spec.combine!r}")
    if spec.finalize not in FINALIZE:
        raise missing(op.name, f"no finalize {spec.finalize!r}")
    return COMBINE[spec.combine]


# --------------------------------------------------------------------- kernel ops
# Each returns the `kir.Block` computing `node` into a buffer named `out` (the block's
# `result`) from `args`: its operands as `Arg`s, literal inputs as `kir.Const`s.

LOWER: dict[str, Callable[[Node, list, str], kir.Block]] = {}


def lowers(*names: str) -> Callable:
    """Register a kernel-op lowering for the ops ``names``."""
    def register(fn: Callable) -> Callable:
        for name in names:
            if name in LOWER:
                raise ValueError(f"op {name!r} already has a Numba lowering")
            LOWER[name] = fn
        return fn

    return register


def kernel_lowering(op: str) -> Callable[[Node, list, str], kir.Block]:
    try:
        return LOWER[op]
    except KeyError:
        raise missing(op) from None


# Ops this backend declines on purpose (name -> why); compiling one raises LoweringError.
NOT_LOWERABLE: dict[str, str] = {}


def path(op: OpDef) -> str | None:
    """The path ``op`` takes into generated code ("loop", "reduce", "kernel"), or None."""
    if op.name in NOT_LOWERABLE:
        return None
    if op.reduction is not None:
        spec = op.reduction
        ok = spec.combine in COMBINE and spec.finalize in FINALIZE
        return "reduce" if ok else None
    if op.loop_fusible:
        return "loop" if op.name in SCALAR else None
    return "kernel" if op.name in LOWER else None


@dataclass(frozen=True)
class Arg:
    """A value operand as a lowering receives it: the kernel IR buffer holding it
    (``.buf``: name, shape, dtype, layout). A literal operand arrives as a `kir.Const`."""

    buf: kir.Buffer


def _reshaped(block: kir.Block, buf: kir.Buffer, shape: tuple, name: str) -> kir.Buffer:
    view = kir.Buffer(name, shape, buf.dtype, kir.VIEW)
    block.add(kir.View(view, buf, "reshape"))
    return view


# The op families register their builders with `lowers` when imported.
for _family in ("activation", "batch_norm", "conv", "decomp", "index", "linalg", "matrix",
                "norm", "pool", "random", "recurrent", "reduce", "scan", "shape"):
    importlib.import_module(f"{__name__}.{_family}")
from .linalg import addmm_product, matmul_block  # noqa: E402, F401  (codegen builds addmm groups)
