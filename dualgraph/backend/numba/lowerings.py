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

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.graph import Node
from ...ops.registry import OpDef
from ...ops.shape import to_numpy_index


class LoweringError(NotImplementedError):
    """An op has no Numba lowering."""


def missing(op: str, detail: str = "") -> LoweringError:
    """The error for an op without a lowering (``detail`` says which part is missing)."""
    return LoweringError(f"the Numba backend has no lowering for op {op!r}"
                         + (f" ({detail})" if detail else ""))


def ishape(n: Node) -> tuple:
    """The shape a value is stored with: 0-d values as ``(1,)``, which keeps loops uniform."""
    return tuple(n.shape) or (1,)


def np_dtype(dtype: np.dtype) -> str:
    return "np.bool_" if dtype == np.bool_ else f"np.{np.dtype(dtype).name}"


# ------------------------------------------------------------------------- loop ops
# A scalar expression per op, formatted with the operands' scalar expressions ({0}, {1},
# ...), {zero}, {one}, {half} as constants of the node's dtype (a float64 literal would
# promote a float32 loop), and {exp}, {tanh}, {sigmoid} as the math functions for that
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
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "stop_gradient": "{0}",
    "broadcast_to": "{0}",
    "astype": "{0}",
    # --- issue 12 math primitives (dualgraph/ops/math.py) ---
    "tan": "np.tan({0})",
    "asin": "np.arcsin({0})",
    "acos": "np.arccos({0})",
    "atan": "np.arctan({0})",
    "sinh": "np.sinh({0})",
    "cosh": "np.cosh({0})",
    "asinh": "np.arcsinh({0})",
    "acosh": "np.arccosh({0})",
    "atanh": "np.arctanh({0})",
    "erf": "math.erf({0})",
    "log2": "np.log2({0})",
    "log10": "np.log10({0})",
    "log1p": "np.log1p({0})",
    "expm1": "np.expm1({0})",
    "sign": "np.sign({0})",
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
    # --- end issue 12 math primitives ---
}

# The math functions the templates name: float32 gets dualgraph's vectorizable versions
# (see kernels.py), everything else NumPy's (scalar libm calls).
MATH = {
    True: {"exp": "dgk.exp_f32", "tanh": "dgk.tanh_f32", "sigmoid": "dgk.sigmoid_f32"},
    False: {"exp": "np.exp", "tanh": "np.tanh", "sigmoid": "dgk.sigmoid_f64"},
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
    element replace the partial result (``None``: the partial result is added to).
    """

    widen: bool
    better: str | None = None

    def accumulator(self, out: np.dtype) -> np.dtype:
        if not self.widen:
            return out
        return np.dtype(np.float64) if out.kind == "f" else np.dtype(np.int64)


COMBINE: dict[str, Combine] = {
    "add": Combine(widen=True),
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


def literal(value: Any) -> str:
    """Source for a reduction's identity: an integral value is written as an int (the
    accumulator's constructor casts it), infinities as ``np.inf``."""
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "np.inf" if value > 0 else "-np.inf"
        if value.is_integer():
            return str(int(value))
        return "np.nan" if value != value else repr(value)
    return repr(value)


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


# ----------------------------------------------------------------------- shape ops


@lowers("reshape")
def _reshape(node: Node, args: list, out: str) -> list:
    return [f"{out} = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]


@lowers("transpose")
def _transpose(node: Node, args: list, out: str) -> list:
    axes = node.attrs["axes"]
    if len(node.shape) < 2:
        return [f"{out} = {args[0]}"]
    if axes == tuple(reversed(range(len(axes)))):
        # .T keeps Numba's layout exact (C becomes F): np.dot then calls BLAS directly
        # instead of copying an 'A'-layout operand.
        return [f"{out} = {args[0]}.T"]
    return [f"{out} = np.transpose({args[0]}, {axes})"]


def _index_code(index: tuple) -> str:
    parts = []
    for e in index:
        if e is None:
            continue
        if isinstance(e, tuple):
            start, stop, step = e
            parts.append(f"{start}:{'' if stop is None else stop}:{step}")
        else:
            parts.append(str(e))
    return ", ".join(parts)


def _one_element(index: tuple, source: Any) -> bool:
    """An index of one int per dimension (plus new axes) selects a single element, which
    Numba returns as a scalar, not an array."""
    ints = sum(1 for e in index if isinstance(e, int))
    return ints == len(source.shape) and all(isinstance(e, int) or e is None for e in index)


@lowers("getitem")
def _getitem(node: Node, args: list, out: str) -> list:
    index = node.attrs["index"]
    code = _index_code(index)
    if not code:
        return [f"{out} = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]
    if _one_element(index, node.inputs[0]):
        return [f"{out} = np.full({ishape(node)}, {args[0]}[{code}], "
                f"{np_dtype(node.dtype)})"]
    return [f"{out} = np.ascontiguousarray({args[0]}[{code}]).reshape({ishape(node)})"]


@lowers("scatter")
def _scatter(node: Node, args: list, out: str) -> list:
    index, shape = node.attrs["index"], node.attrs["shape"]
    code = _index_code(index)
    lines = [f"{out} = np.zeros({ishape(node)}, {np_dtype(node.dtype)})"]
    if not code:
        return lines + [f"{out}[:] = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]
    if _one_element(index, node):
        return lines + [f"{out}[{code}] = {args[0]}.ravel()[0]"]
    target = np.zeros(shape, np.bool_)[to_numpy_index(tuple(e for e in index if e is not None))]
    return lines + [f"{out}[{code}] = np.ascontiguousarray({args[0]}).reshape({target.shape})"]


@lowers("view_scatter")
def _view_scatter(node: Node, args: list, out: str) -> list:
    """Copy the base, then write the value through the view's flat index map: the map is
    the view chain replayed (by the view ops' own lowerings) on ``arange(base.size)``, so
    any chain of slices, transposes and reshapes writes exactly where eager would."""
    from ...ops.registry import OPS

    base, value = node.inputs
    n = math.prod(node.shape)
    int64 = np.dtype(np.int64)
    lines = [f"{out} = np.empty({ishape(node)}, {np_dtype(node.dtype)})",
             f"{out}_f = {out}.reshape({n})",
             f"{out}_f[:] = np.ascontiguousarray({args[0]}).reshape({n})"]
    cur = Node("input", (), {}, tuple(node.shape), int64)
    var = f"{out}_i0"
    lines.append(f"{var} = np.arange({n}).reshape({ishape(node)})")
    for k, (name, attrs) in enumerate(node.attrs["chain"]):
        attrs = dict(attrs)
        shape = tuple(OPS[name].infer(cur, **attrs)[0])
        step = Node(name, (cur,), attrs, shape, int64)
        nxt = f"{out}_i{k + 1}"
        if name == "broadcast_to":
            lines.append(f"{nxt} = np.ascontiguousarray(np.broadcast_to({var}, {ishape(step)}))")
        else:
            lines += kernel_lowering(name)(step, [var], nxt)
        cur, var = step, nxt
    m = math.prod(cur.shape)
    lines.append(f"{out}_k = np.ascontiguousarray({var}).reshape({m})")
    if isinstance(value, Node):
        if math.prod(value.shape) != m:
            raise missing("view_scatter", "a value that is broadcast to the view")
        src = f"{out}_v[_j]"
        lines.append(f"{out}_v = np.ascontiguousarray({args[1]}).reshape({m})")
    else:
        src = args[1]
    lines += [f"for _j in range({m}):",
              f"    {out}_f[{out}_k[_j]] = {src}"]
    return lines


def _same_dtype(node: Node, args: list) -> list:
    """Operands cast to the node's dtype (an int beside a float tensor: `result_dtype`)."""
    return [a if i.dtype == node.dtype else f"{a}.astype(np.{node.dtype.name})"
            for i, a in zip(node.inputs, args)]


@lowers("concatenate")
def _concatenate(node: Node, args: list, out: str) -> list:
    args = _same_dtype(node, args)
    return [f"{out} = np.concatenate(({', '.join(args)},), {node.attrs['axis']})"]


@lowers("stack")
def _stack(node: Node, args: list, out: str) -> list:
    args = _same_dtype(node, args)
    if not node.inputs[0].shape:  # 0-d values are stored as (1,): join them flat
        return [f"{out} = np.concatenate(({', '.join(args)},), 0)"]
    return [f"{out} = np.ascontiguousarray(np.stack(({', '.join(args)},), "
            f"{node.attrs['axis']})).reshape({ishape(node)})"]


# --------------------------------------------------------------------- contractions

# Below this many multiply-adds a plain loop beats a BLAS call (whose fixed cost is ~1 us).
SMALL_MATMUL = 4096


def _loop_matmul(out: str, x: str, y: str, m: int, k: int, n: int, dtype: np.dtype) -> list:
    return [
        f"{out} = np.zeros(({m}, {n}), np.{dtype.name})",
        f"for _i in range({m}):",
        f"    for _p in range({k}):",
        f"        _x = {x}[_i, _p]",
        f"        for _j in range({n}):",
        f"            {out}[_i, _j] += _x * {y}[_p, _j]",
    ]


def _cast(var: str, node_dtype: np.dtype, x: Node) -> str:
    return var if x.dtype == node_dtype else f"{var}.astype(np.{node_dtype.name})"


@lowers("matmul")
def _matmul(node: Node, args: list, out: str) -> list:
    a, b = node.inputs
    x, y = _cast(args[0], node.dtype, a), _cast(args[1], node.dtype, b)
    ra, rb = len(a.shape), len(b.shape)
    if ra == rb == 2 and math.prod(a.shape) * b.shape[1] <= SMALL_MATMUL:
        return _loop_matmul(out, x, y, a.shape[0], a.shape[1], b.shape[1], node.dtype)
    if ra <= 2 and rb <= 2:
        if ra == rb == 1:  # np.dot of vectors is a scalar; values are stored as (1,)
            return [f"{out} = np.full((1,), np.dot({x}, {y}), np.{node.dtype.name})"]
        if ra == rb == 2:  # the backend's GEMM (NumPy's BLAS where it can find it)
            m, n = a.shape[0], b.shape[1]
            return [f"{out} = dgb.gemm({x}, {y}, np.empty(({m}, {n}), "
                    f"np.{node.dtype.name}), 0.0)"]
        return [f"{out} = np.dot({x}, {y})"]
    # Batched: one BLAS call per batch element, operands broadcast over the batch dims.
    sa = (1,) + tuple(a.shape) if ra == 1 else tuple(a.shape)
    sb = tuple(b.shape) + (1,) if rb == 1 else tuple(b.shape)
    batch = tuple(node.shape[: len(node.shape) - (ra > 1) - (rb > 1)])
    m, n = sa[-2], sb[-1]
    lines = [
        f"_a = np.ascontiguousarray({x}).reshape({sa})",
        f"_b = np.ascontiguousarray({y}).reshape({sb})",
        f"{out}3 = np.empty({batch + (m, n)}, np.{node.dtype.name})",
        f"for _k in np.ndindex({batch}):",
    ]
    ia = _batch_index(sa[:-2], batch)
    ib = _batch_index(sb[:-2], batch)
    opa = f"_a[{ia}]" if ia else "_a"
    opb = f"_b[{ib}]" if ib else "_b"
    lines.append(f"    {out}3[_k] = np.dot({opa}, {opb})")
    lines.append(f"{out} = {out}3.reshape({ishape(node)})")
    return lines


def _batch_index(shape: tuple, batch: tuple) -> str:
    """Index expression into an operand's batch dims (broadcast ones read index 0); empty
    for an operand without batch dims, which is used whole (Numba cannot index ``x[...]``)."""
    lead = len(batch) - len(shape)
    parts = [("0" if d == 1 and batch[lead + j] != 1 else f"_k[{lead + j}]")
             for j, d in enumerate(shape)]
    return ", ".join(parts + [":", ":"]) if parts else ""


@lowers("addmm")
def _addmm(node: Node, args: list, out: str) -> list:
    bias, a, b = node.inputs
    x, y = _cast(args[1], node.dtype, a), _cast(args[2], node.dtype, b)
    prod = Node("matmul", (a, b), {}, tuple(node.shape), node.dtype)
    return _matmul(prod, [x, y], out) + [f"{out} = {out} + {_cast(args[0], node.dtype, bias)}"]


# ------------------------------------------------------------------------ random ops
# The counter-based generator of `dualgraph.ops.random`, written out as loops: the same
# uint64 arithmetic as its NumPy kernel, so compiled code and the reference interpreter
# draw the same numbers from the same key (randn up to the last bit of libm's log/cos).
# Every constant is a typed uint64: Numba would turn uint64 mixed with int64 into float64.


def _u64(v: int) -> str:
    return f"np.uint64({v})"


def _mix(z: str, indent: str = "") -> list:
    """SplitMix64's output function applied to ``{z}`` in place."""
    from ...ops.random import MIX1, MIX2

    return [f"{indent}{z} = ({z} ^ ({z} >> {_u64(30)})) * {_u64(MIX1)}",
            f"{indent}{z} = ({z} ^ ({z} >> {_u64(27)})) * {_u64(MIX2)}",
            f"{indent}{z} = {z} ^ ({z} >> {_u64(31)})"]


def _random_base(node: Node, key: str, out: str) -> list:
    """Lines setting ``{out}_b``: the mixed (key, stream) every counter is added to."""
    from ...ops.random import GAMMA

    b = f"{out}_b"
    stream = node.attrs["stream"]
    # The key is stored as int64; its bits, read as uint64, are the generator's key.
    return [f"{b} = np.uint64({key}[0]) + np.uint64({stream}) * {_u64(GAMMA)}"] + _mix(b)


def _words_at(out: str, counter: str, v: str, indent: str) -> list:
    """Lines setting ``{v}`` to the 64-bit word of ``counter`` (from ``{out}_b``)."""
    from ...ops.random import GAMMA

    return ([f"{indent}{v} = {out}_b + np.uint64({counter} + 1) * {_u64(GAMMA)}"]
            + _mix(v, indent))


def _draw_loop(node: Node, key: str, out: str, body: list) -> list:
    """A loop over the flat output filling ``{out}[{out}_i]`` with ``body``'s lines."""
    n = math.prod(node.shape)
    return (_random_base(node, key, out)
            + [f"{out} = np.empty({n}, {np_dtype(node.dtype)})", f"for {out}_i in range({n}):"]
            + body + [f"{out} = {out}.reshape({ishape(node)})"])


@lowers("rand")
def _rand(node: Node, args: list, out: str) -> list:
    h, dt = f"{out}_h", np_dtype(node.dtype)
    # float32 takes 24 bits (exact, never rounded up to 1.0), float64 53.
    drop, unit = (40, 2.0 ** -24) if node.dtype == np.float32 else (11, 2.0 ** -53)
    return _draw_loop(node, args[0], out, _words_at(out, f"{out}_i", h, "    ") + [
        f"    {out}[{out}_i] = {dt}(np.float64({h} >> {_u64(drop)}) * {unit!r})"])


@lowers("randn")
def _randn(node: Node, args: list, out: str) -> list:
    h, h2, dt = f"{out}_h", f"{out}_g", np_dtype(node.dtype)
    return _draw_loop(node, args[0], out, (
        _words_at(out, f"2 * {out}_i", h, "    ")
        + _words_at(out, f"2 * {out}_i + 1", h2, "    ")
        + [f"    {out}_u = 1.0 - np.float64({h} >> {_u64(11)}) * {2.0 ** -53!r}",
           f"    {out}_v = np.float64({h2} >> {_u64(11)}) * {2.0 ** -53!r}",
           f"    {out}[{out}_i] = {dt}(np.sqrt(-2.0 * np.log({out}_u)) * "
           f"np.cos({2.0 * math.pi!r} * {out}_v))"]))


@lowers("dropout")
def _dropout(node: Node, args: list, out: str) -> list:
    from ...ops.random import dropout_scale

    p = float(node.attrs["p"])
    n = math.prod(node.shape)
    dt = np_dtype(node.dtype)
    scale = dropout_scale(p, node.dtype).item()
    h = f"{out}_h"
    return (_random_base(node, args[1], out) + [
        f"{out}_x = np.ascontiguousarray({args[0]}).reshape({n})",
        f"{out} = np.empty({n}, {dt})",
        f"{out}_s = {dt}({scale!r})",
        f"{out}_0 = {dt}(0.0)",
        f"for {out}_i in range({n}):",
    ] + _words_at(out, f"{out}_i", h, "    ") + [
        f"    if np.float64({h} >> {_u64(11)}) * {2.0 ** -53!r} >= {p!r}:",
        f"        {out}[{out}_i] = {out}_x[{out}_i] * {out}_s",
        "    else:",
        f"        {out}[{out}_i] = {out}_x[{out}_i] * {out}_0",
        f"{out} = {out}.reshape({ishape(node)})",
    ])


# ------------------------------------------------------- arg reductions and their gather
# Both move the reduced axis last and view the operand as (lines, length): a size-1 axis
# can be moved anywhere without changing the C-order layout, so results are plain reshapes.


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


@lowers("argmax")
def _argmax(node: Node, args: list, out: str) -> list:
    return _argextremum(node, args, out, ">")


@lowers("argmin")
def _argmin(node: Node, args: list, out: str) -> list:
    return _argextremum(node, args, out, "<")


def _argextremum(node: Node, args: list, out: str, better: str) -> list:
    src = node.inputs[0]
    lines_src, m, n = _lines(src, args[0], node.attrs["axis"])
    # The first extremum wins; the first nan wins over everything (np.argmax's rule and
    # PyTorch's): a nan found stops the line.
    return [
        f"{out}_t = {lines_src}",
        f"{out} = np.zeros({m}, np.int64)",
        f"for {out}_i in range({m}):",
        f"    {out}_b = {out}_t[{out}_i, 0]",
        f"    if {out}_b != {out}_b:",
        "        continue",
        f"    for {out}_j in range(1, {n}):",
        f"        {out}_v = {out}_t[{out}_i, {out}_j]",
        f"        if {out}_v != {out}_v or {out}_v {better} {out}_b:",
        f"            {out}[{out}_i] = {out}_j",
        f"            {out}_b = {out}_v",
        f"            if {out}_v != {out}_v:",
        "                break",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("take_along_axis")
def _take_along_axis(node: Node, args: list, out: str) -> list:
    x, idx = node.inputs
    axis = node.attrs["axis"]
    lines_src, m, _ = _lines(x, args[0], axis)
    return [
        f"{out}_t = {lines_src}",
        f"{out}_k = np.ascontiguousarray({args[1]}).reshape({m})",
        f"{out} = np.empty({m}, {np_dtype(node.dtype)})",
        f"for {out}_i in range({m}):",
        f"    {out}[{out}_i] = {out}_t[{out}_i, {out}_k[{out}_i]]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


# ------------------------------------------------------------------ issue 12: prod
@lowers("prod")
def _prod(node: Node, args: list, out: str) -> list:
    """Reduced axes moved last and flattened: one running product per kept element."""
    src = node.inputs[0]
    shape = tuple(src.shape)
    axis = node.attrs["axis"]
    axis = tuple(range(len(shape))) if axis is None else axis
    kept = tuple(i for i in range(len(shape)) if i not in axis)
    n_kept = math.prod(shape[i] for i in kept)
    n_red = math.prod(shape[i] for i in axis)
    dtype = np_dtype(node.dtype)
    x = args[0] if src.dtype == node.dtype else f"{args[0]}.astype({dtype})"
    lines = [f"_p = np.ascontiguousarray({x}).reshape({ishape(src)})"]
    if shape and kept + axis != tuple(range(len(shape))):
        lines.append(f"_p = np.ascontiguousarray(np.transpose(_p, {kept + axis}))")
    return lines + [
        f"_p = _p.reshape(({n_kept}, {n_red}))",
        f"{out} = np.empty(({n_kept},), {dtype})",
        f"for _i in range({n_kept}):",
        f"    _acc = {dtype}(1)",
        f"    for _j in range({n_red}):",
        "        _acc *= _p[_i, _j]",
        f"    {out}[_i] = _acc",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


# ---- issue 12: losses and attention
# softmax/log_softmax and their backward ops view their operands as (A, n, B) with the
# normalized axis in the middle (a C-order reshape, no transpose) and loop per line: max,
# sum of exp, write. nll_loss views its input as (N, C, R) (`nnops.nll_layout`).


def _around(shape: tuple, axis: int) -> tuple[int, int, int]:
    if not shape:
        return 1, 1, 1
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _as3(node: Node, var: str, abc: tuple, dtype: np.dtype) -> str:
    src = var if node.dtype == dtype else f"{var}.astype({np_dtype(dtype)})"
    return f"np.ascontiguousarray({src}).reshape({abc})"


def _softmax_lines(node: Node, args: list, out: str, log: bool) -> list:
    a, n, b = abc = _around(tuple(node.shape), node.attrs["axis"])
    dt = np_dtype(node.dtype)
    x, m, s = f"{out}_x", f"{out}_m", f"{out}_s"
    # The same steps as the NumPy kernel: shift by the max (nan wins), sum exp, then
    # (x - max) - log(sum) or exp(x - max) / sum.
    lines = [f"{x} = {_as3(node.inputs[0], args[0], abc, node.dtype)}",
             f"{out} = np.empty({abc}, {dt})",
             f"for {out}_i in range({a}):",
             f"    for {out}_k in range({b}):",
             f"        {m} = {x}[{out}_i, 0, {out}_k]" if n else f"        {m} = {dt}(0)",
             f"        for {out}_j in range(1, {n}):",
             f"            {out}_v = {x}[{out}_i, {out}_j, {out}_k]",
             f"            if {out}_v > {m} or {out}_v != {out}_v:",
             f"                {m} = {out}_v",
             f"        {s} = 0.0",
             f"        for {out}_j in range({n}):"]
    at = f"[{out}_i, {out}_j, {out}_k]"
    if log:
        lines += [f"            {s} += np.exp({x}{at} - {m})",
                  f"        {s} = np.log({s})",
                  f"        for {out}_j in range({n}):",
                  f"            {out}{at} = ({x}{at} - {m}) - {s}"]
    else:
        lines += [f"            {out}_e = np.exp({x}{at} - {m})",
                  f"            {out}{at} = {out}_e",
                  f"            {s} += {out}_e",
                  f"        for {out}_j in range({n}):",
                  f"            {out}{at} = {out}{at} / {s}"]
    return lines + [f"{out} = {out}.reshape({ishape(node)})"]


@lowers("log_softmax")
def _log_softmax(node: Node, args: list, out: str) -> list:
    return _softmax_lines(node, args, out, log=True)


@lowers("softmax")
def _softmax(node: Node, args: list, out: str) -> list:
    return _softmax_lines(node, args, out, log=False)


def _softmax_grad_lines(node: Node, args: list, out: str, log: bool) -> list:
    a, n, b = abc = _around(tuple(node.shape), node.attrs["axis"])
    g, y, s = f"{out}_g", f"{out}_y", f"{out}_s"
    at = f"[{out}_i, {out}_j, {out}_k]"
    # log: g - exp(y) * sum(g); plain: y * (g - sum(g * y)).
    acc = f"{g}{at}" if log else f"{g}{at} * {y}{at}"
    val = f"{g}{at} - np.exp({y}{at}) * {s}" if log else f"{y}{at} * ({g}{at} - {s})"
    return [f"{g} = {_as3(node.inputs[0], args[0], abc, node.dtype)}",
            f"{y} = {_as3(node.inputs[1], args[1], abc, node.dtype)}",
            f"{out} = np.empty({abc}, {np_dtype(node.dtype)})",
            f"for {out}_i in range({a}):",
            f"    for {out}_k in range({b}):",
            f"        {s} = 0.0",
            f"        for {out}_j in range({n}):",
            f"            {s} += {acc}",
            f"        for {out}_j in range({n}):",
            f"            {out}{at} = {val}",
            f"{out} = {out}.reshape({ishape(node)})"]


@lowers("log_softmax_backward")
def _log_softmax_backward(node: Node, args: list, out: str) -> list:
    return _softmax_grad_lines(node, args, out, log=True)


@lowers("softmax_backward")
def _softmax_backward(node: Node, args: list, out: str) -> list:
    return _softmax_grad_lines(node, args, out, log=False)


def _nll_prelude(node: Node, args: list, out: str, shape: tuple) -> tuple[list, str, tuple]:
    """Lines binding ``{out}_t`` (targets as (N, R)) and the weight lookup expression;
    the loop header over counted positions is left to the caller."""
    from ...ops.nnops import nll_layout

    n, c, r = nll_layout(shape)
    weight = node.inputs[2]
    lines = [f"{out}_t = np.ascontiguousarray({args[1]}).reshape(({n}, {r}))"]
    if isinstance(weight, Node):
        lines.append(f"{out}_w = np.ascontiguousarray({args[2]}).reshape({c})")
        w = f"{np_dtype(node.dtype)}({out}_w[{out}_c])"
    else:
        w = f"{np_dtype(node.dtype)}({float(weight)!r})"
    return lines, w, (n, c, r)


def _nll_loop(out: str, n: int, c: int, r: int, ignore: int) -> list:
    return [f"for {out}_n in range({n}):",
            f"    for {out}_r in range({r}):",
            f"        {out}_c = {out}_t[{out}_n, {out}_r]",
            f"        if {out}_c == {ignore}:",
            "            continue",
            f"        if {out}_c < 0 or {out}_c >= {c}:",
            "            raise IndexError('nll_loss: Target is out of bounds.')"]


@lowers("nll_loss")
def _nll_loss(node: Node, args: list, out: str) -> list:
    x = node.inputs[0]
    lines, w, (n, c, r) = _nll_prelude(node, args, out, tuple(x.shape))
    dt = np_dtype(node.dtype)
    reduction = node.attrs["reduction"]
    lines += [f"{out}_x = np.ascontiguousarray({args[0]}).reshape(({n}, {c}, {r}))",
              f"{out}_l = np.zeros(({n}, {r}), {dt})",
              f"{out}_tw = 0.0"]
    lines += _nll_loop(out, n, c, r, node.attrs["ignore_index"])
    lines += [f"        {out}_wc = {w}",
              f"        {out}_l[{out}_n, {out}_r] = -{out}_wc * {out}_x[{out}_n, {out}_c, {out}_r]",
              f"        {out}_tw += {out}_wc"]
    if reduction == "none":
        return lines + [f"{out} = {out}_l.reshape({ishape(node)})"]
    total = f"{out}_l.sum()"
    if reduction == "mean":
        total = f"np.float64({out}_l.sum()) / {out}_tw"  # error_model numpy: 0/0 is nan
    return lines + [f"{out} = np.full((1,), {total}, {dt})"]


@lowers("nll_loss_backward")
def _nll_loss_backward(node: Node, args: list, out: str) -> list:
    lines, w, (n, c, r) = _nll_prelude(node, args, out, tuple(node.attrs["shape"]))
    dt = np_dtype(node.dtype)
    reduction = node.attrs["reduction"]
    g = f"{out}_g[{out}_n, {out}_r]" if reduction == "none" else f"{out}_g[0]"
    lines += [f"{out}_g = np.ascontiguousarray({args[0]}).reshape("
              f"{(n, r) if reduction == 'none' else (1,)})",
              f"{out} = np.zeros(({n}, {c}, {r}), {dt})"]
    if reduction == "mean":  # the summed weights first: every gradient is divided by them
        lines += [f"{out}_tw = 0.0"] + _nll_loop(out, n, c, r, node.attrs["ignore_index"])
        lines += [f"        {out}_tw += {w}"]
        g = f"({g} / {out}_tw)"
    lines += _nll_loop(out, n, c, r, node.attrs["ignore_index"])
    lines += [f"        {out}[{out}_n, {out}_c, {out}_r] = -{w} * {g}",
              f"{out} = {out}.reshape({ishape(node)})"]
    return lines
