"""Algebraic simplification: a table of small named rules, each exact.

Every rule in `RULES` keeps the program's values bit for bit on every input, signed zeros,
inf and nan included; `FINITE_MATH_RULES` (opt-in) may change them for inf, nan or -0.0.
Identities that are not exact in floating point are listed at the end with the reason
they are not applied.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from ..ops.registry import OPS
from ._util import rebuild
from .constant_fold import MAX_GROWTH_BYTES


def _is(x: Any, value: float) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == value


def _negative_zero(x: Any) -> bool:
    return isinstance(x, float) and x == 0 and math.copysign(1.0, x) < 0


def _same_type(x: Any, n: Node) -> bool:
    """``x`` can stand for ``n``: same shape and dtype (no broadcast, no promotion)."""
    return isinstance(x, Node) and tuple(x.shape) == tuple(n.shape) and x.dtype == n.dtype


def _binary_identity(name: str, op: str, value: float, sides: tuple[int, ...],
                     exact: Callable[[Any, Node], bool] = lambda lit, n: True):
    """``x op value -> x`` for a literal ``value`` on one of ``sides``, when ``exact`` holds
    for that literal and node (the identity's IEEE condition)."""
    def rule(n: Node) -> Any:
        if n.op != op:
            return None
        for side in sides:
            other, lit = n.inputs[1 - side], n.inputs[side]
            if _is(lit, value) and _same_type(other, n) and exact(lit, n):
                return other
        return None

    rule.__name__ = rule.__qualname__ = name
    return rule


def _int_or_negative_zero(lit: Any, n: Node) -> bool:
    return n.dtype.kind in "iub" or _negative_zero(lit)


def _not_negative_zero(lit: Any, n: Node) -> bool:
    return not _negative_zero(lit)


# x + (-0.0) -> x: exact for every float (x + -0.0 is x, -0.0 and nan included); x + 0 -> x
# exact for integers. Not x + 0.0 on floats: -0.0 + 0.0 is +0.0 (fast math only, below).
fold_add_zero = _binary_identity("fold_add_zero", "add", 0, (0, 1), _int_or_negative_zero)
# x + 0.0 -> x: drops the sign of a -0.0 input; finite_math (like LLVM's nsz) only.
fold_add_pos_zero = _binary_identity("fold_add_pos_zero", "add", 0, (0, 1))
# x - 0 -> x: exact (-0.0 - 0.0 is -0.0; inf, nan kept). Not x - (-0.0), which is x + 0.0.
fold_sub_zero = _binary_identity("fold_sub_zero", "sub", 0, (1,), _not_negative_zero)
# x * 1 -> x: exact for every float, signed zeros, inf and nan included (1 * x too).
fold_mul_one = _binary_identity("fold_mul_one", "mul", 1, (0, 1))
# x / 1 -> x: exact, signed zeros, inf and nan included (not 1 / x).
fold_div_one = _binary_identity("fold_div_one", "div", 1, (1,))
# x ** 1 -> x: exact (pow(x, 1) is x for every x, nan and -0.0 included).
fold_pow_one = _binary_identity("fold_pow_one", "pow", 1, (1,))


def cancel_neg_neg(n: Node) -> Any:
    """-(-x) -> x: exact, negation only flips the sign bit (nan, inf, -0.0 included)."""
    if n.op == "neg" and isinstance(n.inputs[0], Node) and n.inputs[0].op == "neg":
        return n.inputs[0].inputs[0]
    return None


def fold_pow_two(n: Node) -> Any:
    """x ** 2 -> x * x (floats): exact, NumPy computes float x**2 as x*x (so -0.0, inf and
    nan give the same bits), and cheaper."""
    if n.op == "pow" and _is(n.inputs[1], 2) and _same_type(n.inputs[0], n) and (
            n.dtype.kind == "f"):
        x = n.inputs[0]
        return Node("mul", (x, x), {}, n.shape, n.dtype, n.loc, n.uid)
    return None


def fold_identity_view(n: Node) -> Any:
    """reshape/broadcast_to to the same shape, astype to the same dtype, transpose by the
    identity permutation -> x: exact, they copy nothing and change no bit."""
    x = n.inputs[0] if n.inputs else None
    if not _same_type(x, n):
        return None
    if n.op in ("reshape", "broadcast_to", "astype"):
        return x
    if n.op == "transpose" and n.attrs["axes"] == tuple(range(len(n.shape))):
        return x
    return None


def cancel_transpose_transpose(n: Node) -> Any:
    """transpose(transpose(x, p), q) -> transpose(x, p[q]) (or x when that is the identity):
    exact, data movement only."""
    if n.op != "transpose" or not isinstance(n.inputs[0], Node) or n.inputs[0].op != "transpose":
        return None
    inner = n.inputs[0]
    p, q = inner.attrs["axes"], n.attrs["axes"]
    axes = tuple(p[i] for i in q)
    x = inner.inputs[0]
    if axes == tuple(range(len(axes))):
        return x
    return Node("transpose", (x,), {"axes": axes}, n.shape, n.dtype, n.loc, n.uid)


def fold_reshape_reshape(n: Node) -> Any:
    """reshape(reshape(x)) -> reshape(x): exact, data movement; only the final shape
    matters."""
    if n.op == "reshape" and isinstance(n.inputs[0], Node) and n.inputs[0].op == "reshape":
        x = n.inputs[0].inputs[0]
        if tuple(x.shape) == tuple(n.shape):
            return x
        return Node("reshape", (x,), {"shape": n.attrs["shape"]}, n.shape, n.dtype, n.loc,
                    n.uid)
    return None


def fold_reshape_keepdims(uses: dict[int, int]) -> Callable[[Node], Any]:
    """reshape(reduce(x, axis, keepdims=True)) -> reduce(x, axis, keepdims=False) when the
    reshape only drops the kept unit dims and the reshape is the reduction's one use: exact,
    data movement. (Autodiff makes this pattern for every broadcast operand's gradient,
    and each left in place is a reshape and a copy loop in the generated code.)"""
    def rule(n: Node) -> Any:
        if n.op != "reshape" or not isinstance(n.inputs[0], Node):
            return None
        red = n.inputs[0]
        op = OPS.get(red.op)
        if (op is None or op.reduction is None or not red.attrs.get("keepdims")
                or uses.get(red.uid, 0) != 1 or not isinstance(red.inputs[0], Node)):
            return None
        src = red.inputs[0]
        axis = red.attrs.get("axis")
        axes = range(len(src.shape)) if axis is None else axis
        dropped = tuple(d for i, d in enumerate(src.shape) if i not in axes)
        if tuple(n.shape) != dropped or red.dtype != n.dtype:
            return None
        attrs = dict(red.attrs, keepdims=False)
        return Node(red.op, red.inputs, attrs, n.shape, n.dtype, red.loc, n.uid)

    rule.__name__ = rule.__qualname__ = "fold_reshape_keepdims"
    return rule


def _slab(n: Any) -> tuple | None:
    """(axis, start, stop) of a ``scatter`` of a node into zeros that fills one slab
    (a contiguous step-1 range along one axis, everything along the others), else None."""
    if not isinstance(n, Node) or n.op != "scatter" or not isinstance(n.inputs[0], Node):
        return None
    index, shape = n.attrs["index"], tuple(n.attrs["shape"])
    if len(index) != len(shape) or not all(isinstance(e, tuple) for e in index):
        return None
    cut = [(d, e) for d, e in enumerate(index) if e != (0, shape[d], 1)]
    if len(cut) != 1 or cut[0][1][2] != 1 or cut[0][1][1] is None:
        return None
    d, (start, stop, _) = cut[0]
    return (d, start, stop) if 0 <= start < stop <= shape[d] else None


def fold_add_scatters(n: Node) -> Any:
    """scatter(a, slab I) + scatter(b, slab J), I and J adjacent along one axis ->
    scatter(concatenate([a + 0.0, b + 0.0]), I and J): exact. Each element of the sum is
    one operand's element plus the other's +0.0, which the ``+ 0.0`` keeps (-0.0 becomes
    +0.0 as in the sum); outside I and J both give +0.0. Where the slabs tile the axis,
    the scatter is the concatenation itself. (The gradient of ``split`` is such a sum:
    each piece's gradient scattered into zeros the size of the whole.)"""
    if n.op != "add" or len(n.inputs) != 2:
        return None
    x, y = n.inputs
    sx, sy = _slab(x), _slab(y)
    if (sx is None or sy is None or sx[0] != sy[0] or x.dtype != n.dtype
            or y.dtype != n.dtype or tuple(x.shape) != tuple(n.shape)
            or tuple(y.shape) != tuple(n.shape) or n.dtype.kind != "f"):
        return None
    if sy[2] == sx[1]:
        x, y, sx, sy = y, x, sy, sx
    if sx[2] != sy[1]:
        return None
    axis, start, stop = sx[0], sx[1], sy[2]
    parts: list[Node] = []
    for s in (x, y):
        a = s.inputs[0]
        if a.op == "concatenate" and a.attrs["axis"] == axis and all(
                isinstance(p, Node) and p.op == "add" and _is(p.inputs[1], 0.0)
                and not _negative_zero(p.inputs[1]) for p in a.inputs):
            # An earlier join of this sum: (p + 0.0) + 0.0 is p + 0.0, one join.
            parts.extend(a.inputs)
        else:
            parts.append(Node("add", (a, 0.0), {}, a.shape, a.dtype, a.loc))
    shape = tuple(n.shape)
    joined = tuple(d if k != axis else stop - start for k, d in enumerate(shape))
    cat = Node("concatenate", tuple(parts), {"axis": axis}, joined, n.dtype, n.loc,
               None if joined != shape else n.uid)
    if joined == shape:
        return cat
    index = tuple((0, d, 1) if k != axis else (start, stop, 1) for k, d in enumerate(shape))
    return Node("scatter", (cat,), {"shape": shape, "index": index}, shape, n.dtype, n.loc,
                n.uid)


def fold_mul_zero(n: Node) -> Any:
    """x * 0 -> 0 (finite math only: inf * 0 and nan * 0 are nan, -1 * 0 is -0.0)."""
    if n.op != "mul":
        return None
    for side in (0, 1):
        other = n.inputs[1 - side]
        if _is(n.inputs[side], 0) and isinstance(other, Node):
            return Node("const", (), {"value": np.zeros(n.shape, n.dtype)}, n.shape, n.dtype,
                        n.loc, n.uid)
    return None


def _splat(x: Any) -> Any:
    """The Python number every element of ``x`` holds, when ``x`` is a constant of one
    repeated finite value (a ``const``, or a ``broadcast_to`` of one); else None."""
    if not isinstance(x, Node):
        return None
    if x.op == "broadcast_to" and isinstance(x.inputs[0], Node):
        x = x.inputs[0]
    if x.op != "const":
        return None
    v = x.attrs["value"]
    if v.size == 0 or v.dtype.kind not in "fiu":
        return None
    first = v.reshape(-1)[0]
    if v.dtype.kind == "f" and not np.isfinite(first):
        return None
    # Equal values and equal sign bits: a mix of 0.0 and -0.0 is not one value.
    if not (v == first).all() or (v.dtype.kind == "f" and (
            np.signbit(v) != np.signbit(first)).any()):
        return None
    return first


def _literal(value: Any, dtype: np.dtype) -> Any:
    """``value`` (a NumPy scalar) as a Python literal for an op computing in ``dtype``. In
    its own dtype, the shortest decimal that names it (0.1, not 0.10000000149011612 for a
    float32), so the IR stays readable: the op converts the literal back to exactly these
    bits. Promoted (a float32 constant in a float64 op), its exact value."""
    if value.dtype.kind == "f" and value.dtype == dtype:
        short = float(str(value))
        if value.dtype.type(short) == value:
            return short
    return value.item()


def _types_as(n: Node, inputs: tuple) -> bool:
    """Whether ``n``'s op on ``inputs`` has ``n``'s shape and dtype (no broadcast or
    promotion changed)."""
    try:
        shape, dtype = OPS[n.op].infer(*inputs, **n.attrs)
    except (TypeError, ValueError):
        return False
    return tuple(shape) == tuple(n.shape) and np.dtype(dtype) == n.dtype


def fold_splat_literal(n: Node) -> Any:
    """An elementwise op's operand that is one repeated constant value -> that value as a
    literal, when the op's type stays the same: exact (every element reads the same number,
    and a literal converts to the op's dtype exactly, the type check rules out any other
    promotion or broadcast). Autodiff of a scalar loss makes these (the seed one broadcast
    by `sum`'s VJP); as literals they feed `fold_mul_one` and cost no memory reads."""
    op = OPS.get(n.op)
    if op is None or not op.elementwise:
        return None
    ins = tuple(_literal(_splat(i), n.dtype) if _splat(i) is not None else i
                for i in n.inputs)
    if all(a is b for a, b in zip(ins, n.inputs)) or not _types_as(n, ins):
        return None
    return Node(n.op, ins, n.attrs, n.shape, n.dtype, n.loc, n.uid)


def fold_splat(n: Node) -> Any:
    """An elementwise op whose every operand is one repeated constant value -> the constant
    result (the registry's kernel on one element, repeated): exact, the same arithmetic on
    each element. Only up to `MAX_GROWTH_BYTES`, as `constant_fold`; its users then take it
    as a literal (`fold_splat_literal`)."""
    op = OPS.get(n.op)
    if op is None or not op.elementwise or not any(isinstance(i, Node) for i in n.inputs):
        return None
    values = [(_splat(i), i) if isinstance(i, Node) else (i, i) for i in n.inputs]
    if any(v is None for v, _ in values):
        return None
    if int(np.prod(n.shape, dtype=np.int64)) * n.dtype.itemsize > MAX_GROWTH_BYTES:
        return None
    args = [np.asarray(v) if isinstance(i, Node) else v for v, i in values]
    with np.errstate(all="ignore"):  # as eager mode runs the kernel
        one = np.asarray(op.impl(*args, **n.attrs))
    if one.shape != () or one.dtype != n.dtype:
        return None
    return Node("const", (), {"value": np.full(n.shape, one, n.dtype)}, n.shape, n.dtype,
                n.loc, n.uid)


RULES: list[Callable[[Node], Any]] = [
    fold_add_zero, fold_sub_zero, fold_mul_one, fold_div_one, fold_pow_one, fold_pow_two,
    cancel_neg_neg, fold_identity_view, cancel_transpose_transpose, fold_reshape_reshape,
    fold_splat, fold_splat_literal, fold_add_scatters,
]
# Applied only with finite_math=True (fast-math semantics: no inf, no nan, the sign of a
# zero does not matter): they are wrong for inf, nan or -0.0.
FINITE_MATH_RULES: list[Callable[[Node], Any]] = [fold_add_pos_zero, fold_mul_zero]
# Not applied at all, because they are not exact in floating point:
#   exp(log x) -> x   rounding (and x < 0 gives nan, x = 0 gives 0 only by luck of exp(-inf))
#   log(exp x) -> x   exp overflows to inf for x > 88 (float32), and rounding
#   x - x -> 0        inf - inf is nan (finite_math would allow it; not needed so far)
#   x / x -> 1        0/0 and inf/inf are nan
#   x * 0 -> 0        see fold_mul_zero (finite_math only)
#   0 - x -> -x       0.0 - 0.0 is +0.0 but -(0.0) is -0.0
#   x + x -> 2 * x    exact, but not cheaper


def simplify(graph: Graph, finite_math: bool = False) -> Graph:
    """Apply the rules until none fires; each application is noted by rule name."""
    uses: dict[int, int] = {}
    for n in graph.nodes:
        for i in n.inputs:
            if isinstance(i, Node):
                uses[i.uid] = uses.get(i.uid, 0) + 1
    for o in graph.outputs:
        uses[o.uid] = uses.get(o.uid, 0) + 1
    rules = RULES + [fold_reshape_keepdims(uses)] + (FINITE_MATH_RULES if finite_math else [])
    notes: list[str] = []

    def visit(n: Node, mapping: dict) -> Node:
        for _ in range(8):  # a rewrite may enable another on the same node
            for rule in rules:
                r = rule(n)
                if r is not None:
                    notes.append(f"{rule.__name__}: {n.op} {n.type_str}")
                    n = r
                    break
            else:
                break
        return n

    return rebuild(graph, visit, notes)
