"""How the Numba backend computes each op, keyed by op name (the registry knows no backend).

An op reaches generated code by one of three paths:

- **loop**: elementwise and loop-fusible ops (`OpDef.loop_fusible`) are a scalar expression
  inside a loop nest, from the `SCALAR` table; fused groups inline several of them.
- **reduce**: reductions are a loop that folds elements with the op's `Reduction` spec;
  the backend supports the combines in `COMBINE` and the finalizers in `FINALIZE`.
- **kernel**: every other op (shape ops, contractions) has a function registered with
  ``@lowers(name)`` that returns the source lines computing it.

`NOT_LOWERABLE` names ops this backend declines on purpose. Compiling a graph with an op
that has no path raises `LoweringError` naming it; ``tests/compile/test_lowerings.py``
fails when a registered op has none, so a new op cannot silently lack one.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....ir.graph import Node
from ....ops.registry import OpDef
from ... import kir
from ..printer import dtype_name, literal


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
# A scalar expression per op, formatted with the operands' scalar expressions ({0}, {1},
# ...), {zero}, {one}, {half} as constants of the node's dtype (a float64 literal would
# promote a float32 loop), and {exp}, {tanh}, {sigmoid}, {erf} as the math functions for that
# dtype (`MATH`). Each must propagate nan like the op's NumPy kernel. "{0}" alone marks an
# identity (a cast, a broadcast): the writer casts only where the dtype changes.
SCALAR: dict[str, str] = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "pow": "({0} ** {1})",
    "neg": "(-{0})",
    "exp": "{exp}({0})",
    "log": "np.log({0})",
    "tanh": "{tanh}({0})",
    "sigmoid": "{sigmoid}({0})",
    "relu": "({0} if not ({0} <= {zero}) else {zero})",
    "sqrt": "np.sqrt({0})",
    "abs": "abs({0})",
    "sin": "np.sin({0})",
    "cos": "np.cos({0})",
    "maximum": "({0} if ({0} >= {1} or {0} != {0}) else {1})",
    "minimum": "({0} if ({0} <= {1} or {0} != {0}) else {1})",
    "where": "({1} if {0} else {2})",
    "threshold_backward": "({0} if {1} > {2} else {zero})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "stop_gradient": "{0}",
    "broadcast_to": "{0}",
    "astype": "{0}",
    # --- math primitives (dualgraph/ops/math.py) ---
    "tan": "np.tan({0})",
    "asin": "np.arcsin({0})",
    "acos": "np.arccos({0})",
    "atan": "np.arctan({0})",
    "sinh": "np.sinh({0})",
    "cosh": "np.cosh({0})",
    "asinh": "np.arcsinh({0})",
    "acosh": "np.arccosh({0})",
    "atanh": "np.arctanh({0})",
    "erf": "{erf}({0})",
    "log2": "np.log2({0})",
    "log10": "np.log10({0})",
    "log1p": "np.log1p({0})",
    "expm1": "np.expm1({0})",
    # PyTorch's sign (the eager kernel): +0.0 for either zero (Numba's np.sign keeps -0.0)
    # and for nan.
    "sign": "({one} if {0} > {zero} else (-{one} if {0} < {zero} else {zero}))",
    "floor": "np.floor({0})",
    "ceil": "np.ceil({0})",
    "round": "np.rint({0})",
    "trunc": "np.trunc({0})",
    "copysign": "np.copysign({0}, {1})",
    # Numba's integer np.fmod takes the divisor's sign (Python's %); on magnitudes the two
    # agree, and the dividend's sign is C's rule (exact for floats too, -0.0 included).
    "fmod": "(np.fmod(abs({0}), abs({1})) * np.sign({0}))",
    "remainder": "np.remainder({0}, {1})",
    "floor_divide": "np.floor_divide({0}, {1})",
    "atan2": "np.arctan2({0}, {1})",
    "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})",
    "bitwise_xor": "({0} ^ {1})",
    "bitwise_not": "np.invert({0})",
    "left_shift": "({0} << {1})",
    "right_shift": "({0} >> {1})",
    # --- end of math primitives ---
}

def scalar_template(op: str) -> str:
    """The scalar expression template of loop op ``op``."""
    try:
        return SCALAR[op]
    except KeyError:
        raise missing(op, "no scalar expression for a loop") from None


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


def identity_literal(value: Any) -> str:
    """Source for a reduction's identity: an integral value is written as an int (the
    accumulator's constructor casts it), anything else by `printer.literal`."""
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return literal(value)


# --------------------------------------------------------------------- kernel ops
# Each returns the source lines computing `node` into variable `out` from `args` (its
# operands' variables, or literals' source).

LOWER: dict[str, Callable[[Node, list, str], list]] = {}


def lowers(*names: str) -> Callable:
    """Register a kernel-op lowering for the ops ``names``."""
    def register(fn: Callable) -> Callable:
        for name in names:
            if name in LOWER:
                raise ValueError(f"op {name!r} already has a Numba lowering")
            LOWER[name] = fn
        return fn

    return register


def kernel_lowering(op: str) -> Callable[[Node, list, str], list]:
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


class Arg(str):
    """An operand as a lowering receives it: its variable name (what a source-line lowering
    formats) carrying its kernel IR buffer (``.buf``: shape, dtype, layout, what an IR
    builder reads)."""

    buf: kir.Buffer

    def __new__(cls, buf: kir.Buffer) -> Arg:
        a = str.__new__(cls, buf.name)
        a.buf = buf
        return a


def _reshaped(block: kir.Block, buf: kir.Buffer, shape: tuple, name: str) -> kir.Buffer:
    view = kir.Buffer(name, shape, buf.dtype, kir.VIEW)
    block.add(kir.View(view, buf, "reshape"))
    return view


def _lines(node: Node, var: str, axis: int | None) -> tuple[str, int, int]:
    """Source for ``var`` as a C-contiguous (lines, length) array with ``axis`` last."""
    shape = tuple(node.shape)
    if axis is None or not shape:
        n = math.prod(shape)
        return f"np.ascontiguousarray({var}).reshape((1, {n}))", 1, n
    perm = tuple(d for d in range(len(shape)) if d != axis) + (axis,)
    n = shape[axis]
    m = math.prod(shape) // n if n else 0
    moved = var if perm == tuple(range(len(shape))) else f"np.transpose({var}, {perm})"
    return f"np.ascontiguousarray({moved}).reshape(({m}, {n}))", m, n


# The op families register their builders with `lowers` when imported.
for _family in ("conv", "index", "linalg", "norm", "pool", "random", "reduce", "scan", "shape"):
    importlib.import_module(f"{__name__}.{_family}")
from .linalg import SMALL_MATMUL, addmm_product, copy_loops, matmul_block  # noqa: E402, F401
