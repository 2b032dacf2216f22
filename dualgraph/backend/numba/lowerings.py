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
from .. import kir
from .printer import dtype_name, literal


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
    "erf": "math.erf({0})",
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


# ----------------------------------------------------------------------- shape ops


@lowers("reshape")
def _reshape(node: Node, args: list, out: str) -> list:
    return [f"{out} = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]


@lowers("custom_function")
def _custom_function(node: Node, args: list, out: str) -> list:
    """A user-defined autograd Function: its value is its first input (its forward was
    traced into the graph; the other inputs only carry gradients and saved values)."""
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


class Arg(str):
    """An operand as a lowering receives it: its variable name (what a source-line lowering
    formats) carrying its kernel IR buffer (``.buf``: shape, dtype, layout, what an IR
    builder reads)."""

    buf: kir.Buffer

    def __new__(cls, buf: kir.Buffer) -> Arg:
        a = str.__new__(cls, buf.name)
        a.buf = buf
        return a


def _converted(block: kir.Block, arg: Any, x: Node, dtype: np.dtype, name: str) -> kir.Buffer:
    """Operand ``arg`` as a buffer of ``dtype``: itself, or a C-ordered converted copy."""
    buf = arg.buf
    if x.dtype == dtype:
        return buf
    conv = kir.Buffer(name, buf.shape, dtype)
    block.add(kir.Alloc(conv), *copy_loops(conv, buf))
    return conv


def copy_loops(dst: kir.Buffer, src: kir.Buffer) -> list:
    """``dst[...] = dtype(src[...])`` over their common shape."""
    idx = [kir.Var(f"{dst.name}_i{d}") for d in range(len(dst.shape))]
    at = tuple(idx) or (kir.const(0),)
    value = src[at] if src.dtype == dst.dtype else kir.Cast(src[at], dst.dtype)
    body: tuple = (kir.Store(dst, at, value),)
    for v, n in reversed(list(zip(idx, dst.shape))):
        body = (kir.Loop(v, n, body),)
    return list(body)


def _loop_matmul(block: kir.Block, res: kir.Buffer, x: kir.Buffer, y: kir.Buffer) -> None:
    """A small product as loops (a BLAS call's fixed cost would dominate)."""
    m, k = x.shape
    n = y.shape[1]
    i, p, j = (kir.Var(f"{res.name}_{c}") for c in "ipj")
    xv = kir.Var(f"{res.name}_x", res.dtype)
    zero = kir.const(0, res.dtype)
    block.add(kir.Loop(i, m, (
        kir.Loop(j, n, (kir.Store(res, (i, j), zero),)),
        kir.Loop(p, k, (kir.Let(xv, x[i, p]),
                        kir.Loop(j, n, (kir.Store(res, (i, j), xv * y[p, j], "+"),)))),
    )))


def _item_view(block: kir.Block, buf: kir.Buffer, name: str, batch: tuple, items: list,
               shape: tuple) -> kir.Buffer:
    """The matrix of batch item ``items`` of a batched operand (a broadcast batch dim
    reads item 0): a strided view, read in place by BLAS."""
    lead = len(batch) - (len(buf.shape) - 2)
    idx = tuple(kir.const(0) if d == 1 and batch[lead + j] != 1 else items[lead + j]
                for j, d in enumerate(buf.shape[:-2]))
    view = kir.Buffer(name, shape, buf.dtype, kir.VIEW, layout="A")
    block.add(kir.View(view, buf, "slice", idx + ((0, None, 1), (0, None, 1))))
    return view


def _reshaped(block: kir.Block, buf: kir.Buffer, shape: tuple, name: str) -> kir.Buffer:
    view = kir.Buffer(name, shape, buf.dtype, kir.VIEW)
    block.add(kir.View(view, buf, "reshape"))
    return view


def matmul_block(node: Node, args: list, out: str) -> kir.Block:
    """``x @ y`` as kernel IR: one BLAS product where the batch folds into the rows (a
    batched ``x`` against a matrix ``y``: PyTorch's linear layer on 3-D input), else one
    per batch item on strided views of the operands (never a copy BLAS does not need)."""
    a, b = node.inputs
    dtype = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dtype)
    block = kir.Block([kir.Alloc(res)], res)
    x = _converted(block, args[0], a, dtype, f"{out}_x")
    y = _converted(block, args[1], b, dtype, f"{out}_y")
    ra, rb = len(a.shape), len(b.shape)
    if ra == rb == 1:  # a dot product, stored as (1,)
        p, acc = kir.Var(f"{out}_p"), kir.Var(f"{out}_s", dtype)
        block.add(kir.Let(acc, kir.const(0, dtype)),
                  kir.Loop(p, a.shape[0], (kir.Accum(acc, "add", x[p] * y[p]),)),
                  kir.Store(res, (kir.const(0),), acc))
        return block
    if ra == 1:  # (k,) @ (..., k, n): a row vector
        x = _reshaped(block, x, (1, a.shape[0]), f"{out}_xr")
    if rb == 1:  # (..., m, k) @ (k,): a column vector
        y = _reshaped(block, y, (b.shape[0], 1), f"{out}_yr")
    m, k = x.shape[-2:]
    n = y.shape[-1]
    batch = tuple(node.shape[: len(node.shape) - (ra > 1) - (rb > 1)])
    rows = math.prod(batch) * m
    c2 = res if res.shape == (rows, n) else _reshaped(block, res, (rows, n), f"{out}_r")
    if len(x.shape) == len(y.shape) == 2 and m * k * n <= SMALL_MATMUL:
        _loop_matmul(block, c2, x, y)
        return block
    if k == 0 or rows == 0 or n == 0:
        if k == 0 and rows and n:
            i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
            block.add(kir.Loop(i, rows, (kir.Loop(j, n, (
                kir.Store(c2, (i, j), kir.const(0, dtype)),)),)))
        return block
    if len(y.shape) == 2:
        # The batch folds into the rows of x: one product. (A C-ordered x is reshaped in
        # place; another layout is copied once, which BLAS would need per item anyway.)
        x2 = x if x.shape == (rows, k) else _reshaped(block, x, (rows, k), f"{out}_x2")
        block.add(kir.Gemm(rows, n, k, kir.Operand(x2, None), kir.Operand(y, None),
                           kir.Operand(c2, n)))
        return block
    # One product per batch item, each operand read in place through a strided view.
    items = [kir.Var(f"{out}_b{d}") for d in range(len(batch))]
    body = kir.Block()
    xi = _item_view(body, x, f"{out}_xi", batch, items, (m, k)) if len(x.shape) > 2 else x
    yi = _item_view(body, y, f"{out}_yi", batch, items, (k, n))
    flat_item: kir.Expr = kir.const(0)
    for v, d in zip(items, batch):
        flat_item = flat_item * d + v
    body.add(kir.Gemm(m, n, k, kir.Operand(xi, None), kir.Operand(yi, None),
                      kir.Operand(c2, n, offset=flat_item * (m * n))))
    nest: tuple = tuple(body.stmts)
    for v, d in reversed(list(zip(items, batch))):
        nest = (kir.Loop(v, d, nest),)
    block.add(*nest)
    return block


@lowers("matmul")
def _matmul(node: Node, args: list, out: str) -> kir.Block:
    return matmul_block(node, args, out)


def addmm_product(node: Node) -> Node:
    """The product an ``addmm`` node adds its bias to (the one place that says so)."""
    _, a, b = node.inputs
    return Node("matmul", (a, b), {}, tuple(node.shape), node.dtype)


@lowers("addmm")
def _addmm(node: Node, args: list, out: str) -> kir.Block:
    """``bias + x @ y``: the product, then the bias added in one loop over it."""
    bias = node.inputs[0]
    block = matmul_block(addmm_product(node), args[1:], out)
    res = block.result
    m, n = res.shape
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    lead = 2 - len(bias.shape)
    at = tuple((i, j)[lead + d] if size != 1 else kir.const(0)
               for d, size in enumerate(bias.shape)) or (kir.const(0),)
    load = args[0].buf[at]
    value = load if bias.dtype == node.dtype else kir.Cast(load, node.dtype)
    block.add(kir.Loop(i, m, (kir.Loop(j, n, (kir.Store(res, (i, j), value, "+"),)),)))
    return block


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
        f"    {out}[{out}_i] = {dt}(np.float64({h} >> {_u64(drop)}) * {literal(unit)})"])


@lowers("randn")
def _randn(node: Node, args: list, out: str) -> list:
    h, h2, dt = f"{out}_h", f"{out}_g", np_dtype(node.dtype)
    return _draw_loop(node, args[0], out, (
        _words_at(out, f"2 * {out}_i", h, "    ")
        + _words_at(out, f"2 * {out}_i + 1", h2, "    ")
        + [f"    {out}_u = 1.0 - np.float64({h} >> {_u64(11)}) * {literal(2.0 ** -53)}",
           f"    {out}_v = np.float64({h2} >> {_u64(11)}) * {literal(2.0 ** -53)}",
           f"    {out}[{out}_i] = {dt}(np.sqrt(-2.0 * np.log({out}_u)) * "
           f"np.cos({literal(2.0 * math.pi)} * {out}_v))"]))


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
        f"{out}_s = {literal(scale, node.dtype)}",
        f"{out}_0 = {dt}(0.0)",
        f"for {out}_i in range({n}):",
    ] + _words_at(out, f"{out}_i", h, "    ") + [
        f"    if np.float64({h} >> {_u64(11)}) * {literal(2.0 ** -53)} >= {literal(p)}:",
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


# ------------------------------------------------------------------ prod
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


# ---- normalisation and modules
@lowers("layer_norm")
def _layer_norm(node: Node, args: list, out: str) -> kir.Block:
    """Rows of ``n`` elements (the normalised dims, flattened): two passes per row for the
    mean and the variance, accumulated in float64, then one pass writing the result."""
    x, weight, bias = node.inputs
    shape = tuple(x.shape)
    n = math.prod(shape[len(shape) - node.attrs["ndim"]:])
    m = math.prod(shape) // n if n else 0
    f8 = np.dtype(np.float64)
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    xr = _reshaped(block, args[0].buf, (m, n), f"{out}_x")
    rows = _reshaped(block, res, (m, n), f"{out}_r")
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    s, mu, v, d, r = (kir.Var(f"{out}_{c}", f8) for c in ("s", "mu", "v", "d", "rs"))
    count = kir.const(float(n), f8)
    value = (xr[i, j] - mu) * r
    if isinstance(weight, Node):
        value = value * _reshaped(block, args[1].buf, (n,), f"{out}_w")[j]
    if isinstance(bias, Node):
        value = value + _reshaped(block, args[2].buf, (n,), f"{out}_b")[j]
    block.add(kir.Loop(i, m, (
        kir.Let(s, kir.const(0.0, f8)),
        kir.Loop(j, n, (kir.Accum(s, "add", xr[i, j]),)),
        kir.Let(mu, s / count),
        kir.Let(v, kir.const(0.0, f8)),
        kir.Loop(j, n, (kir.Let(d, xr[i, j] - mu), kir.Accum(v, "add", d * d))),
        kir.Let(r, kir.const(1.0, f8) / kir.Call(
            "sqrt", (v / count + kir.const(float(node.attrs["eps"]), f8),), f8)),
        kir.Loop(j, n, (kir.Store(rows, (i, j), value),)),
    )))
    return block


# ---- convolution
# Plain loops gather (im2col) and scatter-add (col2im) the sliding windows; conv2d is im2col
# into a scratch buffer, then one BLAS product per (sample, group) written in place into
# the output, which is already in (N, O, oH, oW) order.


def _window_loops(node_in: tuple, attrs: dict, cols: tuple, out: str,
                  body: Callable[[tuple, tuple], kir.Stmt]) -> kir.Loop:
    """Loops over every (sample, channel, kernel offset, window position) reading an image
    element that lies inside the unpadded input; ``body(image index, column index)`` is
    the statement for one element. The columns a kernel offset reads inside the image
    are a range computed once (``lo``, ``hi``): no test in the innermost loop."""
    _, c, h, w = node_in
    kh, kw = attrs["kernel_size"]
    dh, dw = attrs["dilation"]
    sh, sw = attrs["stride"]
    (pt, _), (pl, _) = attrs["padding"]
    n, oh, ow = cols
    v = {name: kir.Var(f"{out}_{name}") for name in
         ("n", "c", "ki", "kj", "r", "b", "lo", "hi", "oy", "h", "ox", "w", "l")}
    inner = kir.Loop(v["ox"], v["hi"], (
        kir.Let(v["w"], v["ox"] * sw + v["b"]),
        kir.Let(v["l"], v["oy"] * ow + v["ox"]),
        body((v["n"], v["c"], v["h"], v["w"]), (v["n"], v["r"], v["l"])),
    ), start=v["lo"])
    rows = kir.Loop(v["oy"], oh, (
        kir.Let(v["h"], v["oy"] * sh + v["ki"] * dh - pt),
        kir.If(kir.Bin("or", kir.Bin("<", v["h"], kir.const(0)),
                       kir.Bin(">=", v["h"], kir.const(h))), (kir.Jump("continue"),)),
        inner,
    ))
    offsets = kir.Loop(v["kj"], kw, (
        kir.Let(v["r"], (v["c"] * kh + v["ki"]) * kw + v["kj"]),
        kir.Let(v["b"], v["kj"] * dw - pl),
        kir.Let(v["lo"], kir.Call("max", (kir.const(0), (kir.const(sw - 1) - v["b"]) // sw),
                                  kir.INDEX)),
        kir.Let(v["hi"], kir.Call("min", (kir.const(ow), (kir.const(w - 1) - v["b"]) // sw
                                          + 1), kir.INDEX)),
        rows,
    ))
    return kir.Loop(v["n"], n, (kir.Loop(v["c"], c, (kir.Loop(v["ki"], kh, (offsets,)),)),))


def _im2col_into(block: kir.Block, x_node: Node, x: kir.Buffer, attrs: dict,
                 cols: kir.Buffer) -> None:
    """Fill ``cols`` (n, c*kh*kw, oh*ow) with the sliding windows of image ``x``: zeros
    first, as window elements in the padding are never written."""
    from ...ops.conv import out_size

    n, _, h, w = x_node.shape
    oh, ow = out_size((h, w), attrs["kernel_size"], attrs["dilation"], attrs["padding"],
                      attrs["stride"])
    flat = _reshaped(block, cols, (cols.size,), f"{cols.name}_f")
    z = kir.Var(f"{cols.name}_z")
    block.add(kir.Loop(z, cols.size, (kir.Store(flat, (z,), kir.const(0, cols.dtype)),)),
              _window_loops(tuple(x_node.shape), attrs, (n, oh, ow), cols.name,
                            lambda img, col: kir.Store(cols, col, x[img])))


@lowers("im2col")
def _im2col(node: Node, args: list, out: str) -> kir.Block:
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    _im2col_into(block, node.inputs[0], args[0].buf, node.attrs, res)
    return block


@lowers("col2im")
def _col2im(node: Node, args: list, out: str) -> kir.Block:
    from ...ops.conv import out_size

    a = node.attrs
    n, c, h, w = node.shape
    oh, ow = out_size((h, w), a["kernel_size"], a["dilation"], a["padding"], a["stride"])
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    flat = _reshaped(block, res, (res.size,), f"{out}_f")
    z = kir.Var(f"{out}_z")
    cols = args[0].buf
    block.add(kir.Loop(z, res.size, (kir.Store(flat, (z,), kir.const(0, res.dtype)),)),
              _window_loops(tuple(node.shape), a, (n, oh, ow), out,
                            lambda img, col: kir.Store(res, img, cols[col], "+")))
    return block


@lowers("conv2d")
def _conv2d(node: Node, args: list, out: str) -> kir.Block:
    """im2col into a scratch buffer, then the products of every (sample, group) as one
    strided batch of BLAS calls writing the output in its (N, O, oH, oW) order, then the
    bias added in one loop."""
    x, w = node.inputs[:2]
    n, o, oh, ow = node.shape
    _, cg, kh, kw = w.shape
    g = node.attrs["groups"]
    og, k, length = o // g, cg * kh * kw, oh * ow
    dtype = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dtype)
    block = kir.Block([kir.Alloc(res)], res)
    cols = kir.Buffer(f"{out}_c", (n, g * k, length), dtype)
    block.add(kir.Alloc(cols))
    _im2col_into(block, x, args[0].buf, dict(node.attrs, kernel_size=(kh, kw)), cols)
    wc = _reshaped(block, args[1].buf, (o * k,), f"{out}_w")  # C-ordered (copied if not)
    item = kir.Var(f"{out}_g")
    if og and length and k:
        # (sample, group) pairs in order: item = sample * g + group.
        if g == 1:
            block.add(kir.Gemm(og, length, k, kir.Operand(wc, k, batch_stride=0),
                               kir.Operand(cols, length, batch_stride=k * length),
                               kir.Operand(res, length, batch_stride=og * length),
                               batch=n))
        if g > 1:
            group = kir.Bin("%", item, kir.const(g))
            block.add(kir.Loop(item, n * g, (kir.Gemm(
                og, length, k, kir.Operand(wc, k, offset=group * (og * k)),
                kir.Operand(cols, length, offset=item * (k * length)),
                kir.Operand(res, length, offset=item * (og * length))),)))
    elif n * o * length:
        flat = _reshaped(block, res, (res.size,), f"{out}_z")
        z = kir.Var(f"{out}_zi")
        block.add(kir.Loop(z, res.size, (kir.Store(flat, (z,), kir.const(0, dtype)),)))
    if len(args) == 3:
        i, c, p = kir.Var(f"{out}_n"), kir.Var(f"{out}_o"), kir.Var(f"{out}_l")
        r3 = _reshaped(block, res, (n, o, length), f"{out}_r")
        block.add(kir.Loop(i, n, (kir.Loop(c, o, (kir.Loop(p, length, (
            kir.Store(r3, (i, c, p), args[2].buf[(c,)], "+"),)),)),)))
    return block


# ---- indexing
# `index` and `index_put` (dualgraph/ops/index.py) view the operand as (P, A, Q): the
# result's leading kept dims, the indexed dims (flattened), the trailing kept dims. With
# adjacent indexed dims that is a plain reshape; separated ones go first (PyTorch's rule),
# so the operand is transposed to (indexed, kept) order. One loop per index then copies
# (or adds) a Q-long row.


def _index_layout(shape: tuple, dims: tuple) -> tuple[tuple, int, int, int]:
    """``(perm, P, A, Q)`` for an operand of ``shape`` indexed at ``dims``."""
    rest = [d for d in range(len(shape)) if d not in dims]
    if dims == tuple(range(dims[0], dims[0] + len(dims))):
        pre = [d for d in rest if d < dims[0]]
        post = [d for d in rest if d > dims[0]]
    else:
        pre, post = [], rest
    perm = tuple(pre) + tuple(dims) + tuple(post)
    return (perm, math.prod(shape[d] for d in pre), math.prod(shape[d] for d in dims),
            math.prod(shape[d] for d in post))


def _flat_position(out: str, shape: tuple, dims: tuple) -> list:
    """Lines (indented for the loop over ``{out}_b``) setting ``{out}_a``: the flat
    position among the indexed dims, each index wrapped if negative and bounds-checked."""
    lines = [f"    {out}_a = 0"]
    for j, d in enumerate(dims):
        n = shape[d]
        lines += [f"    {out}_i = {out}_k[{j}, {out}_b]",
                  f"    if {out}_i < 0:",
                  f"        {out}_i += {n}",
                  f"    if {out}_i < 0 or {out}_i >= {n}:",
                  f"        raise IndexError('index out of bounds for dimension {d} with "
                  f"size {n}')",
                  f"    {out}_a = {out}_a * {n} + {out}_i"]
    return lines


def _operand_pqa(var: str, perm: tuple, p: int, a: int, q: int) -> str:
    moved = var if perm == tuple(range(len(perm))) else f"np.transpose({var}, {perm})"
    return f"np.ascontiguousarray({moved}).reshape(({p}, {a}, {q}))"


@lowers("index")
def _index(node: Node, args: list, out: str) -> list:
    x, idx = node.inputs
    dims = node.attrs["dims"]
    perm, p, a, q = _index_layout(tuple(x.shape), dims)
    nb = math.prod(idx.shape[1:])
    return [
        f"{out}_x = {_operand_pqa(args[0], perm, p, a, q)}",
        f"{out}_k = np.ascontiguousarray({args[1]}).reshape(({len(dims)}, {nb}))",
        f"{out} = np.empty(({p}, {nb}, {q}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({nb}):",
        *_flat_position(out, tuple(x.shape), dims),
        f"    for {out}_p in range({p}):",
        f"        for {out}_q in range({q}):",
        f"            {out}[{out}_p, {out}_b, {out}_q] = {out}_x[{out}_p, {out}_a, {out}_q]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("index_put")
def _index_put(node: Node, args: list, out: str) -> list:
    x, v, idx = node.inputs
    dims = node.attrs["dims"]
    shape = tuple(node.shape)
    perm, p, a, q = _index_layout(shape, dims)
    nb = math.prod(idx.shape[1:])
    dt = np_dtype(node.dtype)
    if isinstance(x, Node):
        start = f"{_operand_pqa(args[0], perm, p, a, q)}.copy()"
    else:  # a number filling the new array (index's gradient: zeros)
        start = f"np.full(({p}, {a}, {q}), {dt}({args[0]}))"
    lines = [f"{out}_o = {start}",
             f"{out}_k = np.ascontiguousarray({args[2]}).reshape(({len(dims)}, {nb}))"]
    if isinstance(v, Node):
        target = (p, nb, q)
        val = args[1] if v.dtype == node.dtype else f"{args[1]}.astype({dt})"
        # v broadcasts to the indexed shape, whose (P, B, Q) order is the loop's.
        from ...ops.index import indexed_shape

        full = indexed_shape(shape, dims, tuple(idx.shape[1:])) or (1,)
        vshape = (1,) * (len(full) - len(v.shape)) + tuple(v.shape) if v.shape else (1,)
        if vshape == full:
            lines.append(f"{out}_v = np.ascontiguousarray({val}).reshape({target})")
        else:
            lines.append(f"{out}_v = np.ascontiguousarray(np.broadcast_to("
                         f"np.ascontiguousarray({val}).reshape({vshape}), {full}))"
                         f".reshape({target})")
        src = f"{out}_v[{out}_p, {out}_b, {out}_q]"
    else:
        src = f"{dt}({args[1]})"
    op = "+=" if node.attrs.get("accumulate") else "="
    lines += [
        f"for {out}_b in range({nb}):",
        *_flat_position(out, shape, dims),
        f"    for {out}_p in range({p}):",
        f"        for {out}_q in range({q}):",
        f"            {out}_o[{out}_p, {out}_a, {out}_q] {op} {src}",
    ]
    if perm == tuple(range(len(perm))):
        return lines + [f"{out} = {out}_o.reshape({ishape(node)})"]
    inverse = tuple(perm.index(d) for d in range(len(perm)))
    moved = tuple(shape[d] for d in perm)
    return lines + [f"{out} = np.ascontiguousarray(np.transpose({out}_o.reshape({moved}), "
                    f"{inverse})).reshape({ishape(node)})"]
# ---- scans and sorting (dualgraph/ops/scan.py)
# Every op works on lines: the operand viewed as a C-contiguous (lines, length) array with
# its axis last (`_lines`), one small loop per line, and the result moved back.


def _unlines(node: Node, var: str, axis: int, out: str) -> list:
    """Lines setting ``out`` to the (lines, length) array ``var`` in ``node``'s shape, with
    the last axis moved back to ``axis``."""
    shape = tuple(node.shape)
    if not shape or axis == len(shape) - 1:
        return [f"{out} = {var}.reshape({ishape(node)})"]
    moved = tuple(d for i, d in enumerate(shape) if i != axis) + (shape[axis],)
    back = tuple(range(axis)) + (len(shape) - 1,) + tuple(range(axis, len(shape) - 1))
    return [f"{out} = np.ascontiguousarray(np.transpose({var}.reshape({moved}), {back}))"]


def _index_lines(idx: Node, var: str, axis: int, m: int, squeezed: bool) -> str:
    """Indices as (lines, count); a squeezed index (the axis dropped) has one per line."""
    if squeezed:
        return f"np.ascontiguousarray({var}).reshape(({m}, 1))"
    return _lines(idx, var, axis)[0]


def _scan_source(node: Node, args: list, out: str) -> tuple[list, int, int, int]:
    src = node.inputs[0]
    axis = node.attrs["axis"]
    var = args[0] if src.dtype == node.dtype else f"{args[0]}.astype({np_dtype(node.dtype)})"
    lines_src, m, n = _lines(src, var, axis)
    return [f"{out}_t = {lines_src}"], m, n, axis


def _scan(node: Node, args: list, out: str, start: str, step: str) -> list:
    lines, m, n, axis = _scan_source(node, args, out)
    js = f"range({n} - 1, -1, -1)" if node.attrs.get("reverse") else f"range({n})"
    dt = np_dtype(node.dtype)
    return lines + [
        f"{out}_r = np.empty(({m}, {n}), {dt})",
        f"for {out}_i in range({m}):",
        f"    {out}_a = {start}",
        f"    for {out}_j in {js}:",
        f"        {out}_a = {step.format(a=f'{out}_a', v=f'{out}_t[{out}_i, {out}_j]')}",
        f"        {out}_r[{out}_i, {out}_j] = {out}_a",
    ] + _unlines(node, f"{out}_r", axis, out)


@lowers("cumsum")
def _cumsum(node: Node, args: list, out: str) -> list:
    return _scan(node, args, out, f"{np_dtype(node.dtype)}(0)", "{a} + {v}")


@lowers("cumprod")
def _cumprod(node: Node, args: list, out: str) -> list:
    return _scan(node, args, out, f"{np_dtype(node.dtype)}(1)", "{a} * {v}")


@lowers("logcumsumexp")
def _logcumsumexp(node: Node, args: list, out: str) -> list:
    # logaddexp(-inf, x) is x exactly, so starting from -inf equals NumPy's accumulate.
    return _scan(node, args, out, f"{np_dtype(node.dtype)}(-np.inf)", "np.logaddexp({a}, {v})")


# NaN-aware orders (NaN is the largest value, NumPy's and PyTorch's rule): whether element
# {a} strictly comes before {b} in the sorted line.
_BEFORE = {False: "({a} < {b} or ({b} != {b} and {a} == {a}))",
           True: "({a} > {b} or ({a} != {a} and {b} == {b}))"}


@lowers("argsort")
def _argsort(node: Node, args: list, out: str) -> list:
    """A bottom-up merge sort of each line's indices: stable, and a plain loop (Numba's
    np.argsort(kind='mergesort') costs ~10 s of compile per kernel)."""
    src = node.inputs[0]
    axis = node.attrs["axis"]
    var = f"{args[0]}.astype(np.uint8)" if src.dtype == np.bool_ else args[0]
    lines_src, m, n = _lines(src, var, axis)
    o = out
    before = _BEFORE[bool(node.attrs["descending"])].format(
        a=f"{o}_t[{o}_i, {o}_s[{o}_q]]", b=f"{o}_t[{o}_i, {o}_s[{o}_p]]")
    return [
        f"{o}_t = {lines_src}",
        f"{o}_r = np.empty(({m}, {n}), np.int64)",
        f"{o}_u = np.empty({n}, np.int64)",
        f"{o}_e = np.empty({n}, np.int64)",
        f"for {o}_i in range({m}):",
        f"    for {o}_j in range({n}):",
        f"        {o}_u[{o}_j] = {o}_j",
        f"    {o}_s, {o}_d = {o}_u, {o}_e",
        f"    {o}_w = 1",
        f"    while {o}_w < {n}:",
        f"        for {o}_lo in range(0, {n}, 2 * {o}_w):",
        f"            {o}_mid = min({o}_lo + {o}_w, {n})",
        f"            {o}_hi = min({o}_lo + 2 * {o}_w, {n})",
        f"            {o}_p, {o}_q = {o}_lo, {o}_mid",
        f"            for {o}_j in range({o}_lo, {o}_hi):",
        # The right run's element goes first only if strictly before: a stable merge.
        f"                if {o}_q < {o}_hi and ({o}_p >= {o}_mid or {before}):",
        f"                    {o}_d[{o}_j] = {o}_s[{o}_q]",
        f"                    {o}_q += 1",
        "                else:",
        f"                    {o}_d[{o}_j] = {o}_s[{o}_p]",
        f"                    {o}_p += 1",
        f"        {o}_s, {o}_d = {o}_d, {o}_s",
        f"        {o}_w *= 2",
        f"    {o}_r[{o}_i, :] = {o}_s",
    ] + _unlines(node, f"{o}_r", axis, out)


def _argcum(node: Node, args: list, out: str, better: str) -> list:
    src = node.inputs[0]
    axis = node.attrs["axis"]
    lines_src, m, n = _lines(src, args[0], axis)
    lines = [f"{out}_t = {lines_src}", f"{out}_r = np.zeros(({m}, {n}), np.int64)"]
    if n:
        # A tie moves to the later index; a NaN always takes over (PyTorch).
        lines += [
            f"for {out}_i in range({m}):",
            f"    {out}_b = {out}_t[{out}_i, 0]",
            f"    {out}_k = 0",
            f"    for {out}_j in range({n}):",
            f"        {out}_v = {out}_t[{out}_i, {out}_j]",
            f"        if {out}_v {better} {out}_b or {out}_v != {out}_v:",
            f"            {out}_b = {out}_v",
            f"            {out}_k = {out}_j",
            f"        {out}_r[{out}_i, {out}_j] = {out}_k",
        ]
    return lines + _unlines(node, f"{out}_r", axis, out)


@lowers("argcummax")
def _argcummax(node: Node, args: list, out: str) -> list:
    return _argcum(node, args, out, ">=")


@lowers("argcummin")
def _argcummin(node: Node, args: list, out: str) -> list:
    return _argcum(node, args, out, "<=")


def _squeezed_index(idx: Node, full: Node) -> bool:
    return len(full.shape) > 0 and len(idx.shape) == len(full.shape) - 1


@lowers("gather_axis")
def _gather_axis(node: Node, args: list, out: str) -> list:
    x, idx = node.inputs
    axis = node.attrs["axis"]
    squeezed = _squeezed_index(idx, x)
    lines_x, m, _ = _lines(x, args[0], axis)
    k = 1 if squeezed or not idx.shape else idx.shape[axis]
    lines = [
        f"{out}_t = {lines_x}",
        f"{out}_k = {_index_lines(idx, args[1], axis, m, squeezed)}",
        f"{out}_r = np.empty(({m}, {k}), {np_dtype(node.dtype)})",
        f"for {out}_i in range({m}):",
        f"    for {out}_j in range({k}):",
        f"        {out}_r[{out}_i, {out}_j] = {out}_t[{out}_i, {out}_k[{out}_i, {out}_j]]",
    ]
    if squeezed:
        return lines + [f"{out} = {out}_r.reshape({ishape(node)})"]
    return lines + _unlines(node, f"{out}_r", axis, out)


@lowers("scatter_add_axis")
def _scatter_add_axis(node: Node, args: list, out: str) -> list:
    src, idx = node.inputs
    axis, size = node.attrs["axis"], node.attrs["size"]
    squeezed = node.attrs.get("squeezed", False)
    if squeezed:
        m = math.prod(src.shape)
        lines_src = f"np.ascontiguousarray({args[0]}).reshape(({m}, 1))"
        k = 1
    else:
        lines_src, m, k = _lines(src, args[0], axis)
    return [
        f"{out}_t = {lines_src}",
        f"{out}_k = {_index_lines(idx, args[1], axis, m, squeezed)}",
        f"{out}_r = np.zeros(({m}, {size}), {np_dtype(node.dtype)})",
        f"for {out}_i in range({m}):",
        f"    for {out}_j in range({k}):",
        f"        {out}_r[{out}_i, {out}_k[{out}_i, {out}_j]] += {out}_t[{out}_i, {out}_j]",
    ] + _unlines(node, f"{out}_r", axis, out)


@lowers("searchsorted")
def _searchsorted(node: Node, args: list, out: str) -> list:
    """A binary search per value, NaN-aware as np.searchsorted (NaN sorts last)."""
    seq, values = node.inputs
    common = np.result_type(seq.dtype, values.dtype)
    s = args[0] if seq.dtype == common else f"{args[0]}.astype({np_dtype(common)})"
    v = args[1] if values.dtype == common else f"{args[1]}.astype({np_dtype(common)})"
    n = seq.shape[-1]
    rows = math.prod(seq.shape[:-1])
    k = math.prod(values.shape) // rows if rows else 0
    o = out
    a, b = f"{o}_s[{o}_i, {o}_mid]", f"{o}_v"
    # left: the first place whose element is not before v; right: the first place after v.
    go_right = (f"not {_BEFORE[False].format(a=b, b=a)}" if node.attrs["right"]
                else _BEFORE[False].format(a=a, b=b))
    return [
        f"{o}_s = np.ascontiguousarray({s}).reshape(({rows}, {n}))",
        f"{o}_x = np.ascontiguousarray({v}).reshape(({rows}, {k}))",
        f"{o}_r = np.empty(({rows}, {k}), np.int64)",
        f"for {o}_i in range({rows}):",
        f"    for {o}_j in range({k}):",
        f"        {o}_v = {o}_x[{o}_i, {o}_j]",
        f"        {o}_lo, {o}_hi = 0, {n}",
        f"        while {o}_lo < {o}_hi:",
        f"            {o}_mid = ({o}_lo + {o}_hi) // 2",
        f"            if {go_right}:",
        f"                {o}_lo = {o}_mid + 1",
        "            else:",
        f"                {o}_hi = {o}_mid",
        f"        {o}_r[{o}_i, {o}_j] = {o}_lo",
        f"{o} = {o}_r.reshape({ishape(node)})",
    ]


@lowers("histc")
def _histc(node: Node, args: list, out: str) -> list:
    bins, lo, hi = node.attrs["bins"], float(node.attrs["lo"]), float(node.attrs["hi"])
    n = math.prod(node.inputs[0].shape)
    lines = [f"{out}_x = np.ascontiguousarray({args[0]}).reshape({n})",
             f"{out}_lo = {literal(lo)}",
             f"{out}_hi = {literal(hi)}"]
    if lo == hi:
        # The data's range (finite values only), as the NumPy kernel and PyTorch.
        lines += [
            f"{out}_a = np.inf",
            f"{out}_b = -np.inf",
            f"for {out}_j in range({n}):",
            f"    {out}_v = np.float64({out}_x[{out}_j])",
            f"    if np.isfinite({out}_v):",
            f"        {out}_a = min({out}_a, {out}_v)",
            f"        {out}_b = max({out}_b, {out}_v)",
            f"if {out}_a <= {out}_b:",
            f"    {out}_lo = {out}_a",
            f"    {out}_hi = {out}_b",
        ]
    return lines + [
        f"if {out}_lo == {out}_hi:",
        f"    {out}_lo -= 1.0",
        f"    {out}_hi += 1.0",
        f"{out} = np.zeros({bins}, {np_dtype(node.dtype)})",
        f"for {out}_j in range({n}):",
        f"    {out}_v = np.float64({out}_x[{out}_j])",
        f"    if {out}_v >= {out}_lo and {out}_v <= {out}_hi:",
        f"        {out}_k = min(int(({out}_v - {out}_lo) * {bins} / ({out}_hi - {out}_lo)), "
        f"{bins - 1})",
        f"        {out}[{out}_k] += 1",
    ]

# ---- pooling and padding
# Plain loops over the operand viewed as (batch, H, W) (or (batch, ...) for padding and
# unfold). Window tables come from `pool_windows`, the same description the NumPy kernels
# read, written into the source as small int64 arrays; every variable carries the output's
# name as a prefix, so two lowerings in one function never share a name.


def _table(values: tuple, dtype: str = "np.int64") -> str:
    if not values:
        return f"np.zeros(0, {dtype})"
    return f"np.array({tuple(values)!r}, {dtype})"


def _batch(shape: tuple, trailing: int) -> int:
    return math.prod(shape[:len(shape) - trailing])


def _window_tables(out: str, node: Node, hw: tuple, divisors: bool = False) -> tuple:
    from ...ops.pool import pool_windows

    h, w = pool_windows(node.attrs, hw)
    lines = [f"{out}_hs = {_table(h.start)}", f"{out}_hc = {_table(h.count)}",
             f"{out}_ws = {_table(w.start)}", f"{out}_wc = {_table(w.count)}"]
    if divisors:
        lines += [f"{out}_hd = {_table(tuple(float(d) for d in h.div), 'np.float64')}",
                  f"{out}_wd = {_table(tuple(float(d) for d in w.div), 'np.float64')}"]
    return lines, h, w


@lowers("max_pool2d_indices", "adaptive_max_pool2d_indices")
def _max_pool_indices(node: Node, args: list, out: str) -> list:
    shape = tuple(node.inputs[0].shape)
    (hh, ww), b = shape[-2:], _batch(shape, 2)
    tables, h, w = _window_tables(out, node, (hh, ww))
    o = out
    # The first position of the window starts; a larger value or any nan takes over
    # (PyTorch's rule: ties keep the first max, the last nan wins).
    return tables + [
        f"{o}_x = np.ascontiguousarray({args[0]}).reshape(({b}, {hh}, {ww}))",
        f"{o} = np.empty(({b}, {len(h)}, {len(w)}), np.int64)",
        f"for {o}_b in range({b}):",
        f"    for {o}_i in range({len(h)}):",
        f"        for {o}_j in range({len(w)}):",
        f"            {o}_p0 = {o}_hs[{o}_i]",
        f"            {o}_q0 = {o}_ws[{o}_j]",
        f"            {o}_v = {o}_x[{o}_b, {o}_p0, {o}_q0]",
        f"            {o}_k = {o}_p0 * {ww} + {o}_q0",
        f"            for {o}_a in range({o}_hc[{o}_i]):",
        f"                {o}_p = {o}_p0 + {o}_a * {h.step}",
        f"                for {o}_c in range({o}_wc[{o}_j]):",
        f"                    {o}_q = {o}_q0 + {o}_c * {w.step}",
        f"                    {o}_e = {o}_x[{o}_b, {o}_p, {o}_q]",
        f"                    if {o}_e > {o}_v or {o}_e != {o}_e:",
        f"                        {o}_v = {o}_e",
        f"                        {o}_k = {o}_p * {ww} + {o}_q",
        f"            {o}[{o}_b, {o}_i, {o}_j] = {o}_k",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


def _gather_operands(node: Node, src: Node, idx: Node, args: list, out: str) -> tuple:
    """Lines viewing the plane operand as (batch, plane) and the indices as (batch or 1,
    m); also the batch, the indices' row expression and m."""
    shape = tuple(src.shape)
    b = _batch(shape, 2)
    plane = math.prod(shape[-2:])
    m = math.prod(idx.shape[-2:])
    rows = b if len(idx.shape) > 2 else 1
    lines = [f"{out}_x = np.ascontiguousarray({args[0]}).reshape(({b}, {plane}))",
             f"{out}_k = np.ascontiguousarray({args[1]}).reshape(({rows}, {m}))"]
    return lines, b, (f"{out}_b" if rows > 1 else "0"), m


@lowers("pool_gather")
def _pool_gather(node: Node, args: list, out: str) -> list:
    x, idx = node.inputs
    lines, b, row, m = _gather_operands(node, x, idx, args, out)
    return lines + [
        f"{out} = np.empty(({b}, {m}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({b}):",
        f"    for {out}_m in range({m}):",
        f"        {out}[{out}_b, {out}_m] = {out}_x[{out}_b, {out}_k[{row}, {out}_m]]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("pool_scatter")
def _pool_scatter(node: Node, args: list, out: str) -> list:
    g, idx = node.inputs
    lines, b, row, m = _gather_operands(node, g, idx, args, out)
    plane = math.prod(node.attrs["size"])
    return lines + [
        f"{out} = np.zeros(({b}, {plane}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({b}):",
        f"    for {out}_m in range({m}):",
        f"        {out}[{out}_b, {out}_k[{row}, {out}_m]] += {out}_x[{out}_b, {out}_m]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("avg_pool2d", "adaptive_avg_pool2d")
def _avg_pool(node: Node, args: list, out: str) -> list:
    shape = tuple(node.inputs[0].shape)
    (hh, ww), b = shape[-2:], _batch(shape, 2)
    tables, h, w = _window_tables(out, node, (hh, ww), divisors=True)
    dt, o = np_dtype(node.dtype), out
    return tables + [
        f"{o}_x = np.ascontiguousarray({args[0]}).reshape(({b}, {hh}, {ww}))",
        f"{o} = np.empty(({b}, {len(h)}, {len(w)}), {dt})",
        f"for {o}_b in range({b}):",
        f"    for {o}_i in range({len(h)}):",
        f"        for {o}_j in range({len(w)}):",
        f"            {o}_s = {dt}(0)",
        f"            for {o}_p in range({o}_hs[{o}_i], {o}_hs[{o}_i] + {o}_hc[{o}_i]):",
        f"                for {o}_q in range({o}_ws[{o}_j], {o}_ws[{o}_j] + {o}_wc[{o}_j]):",
        f"                    {o}_s += {o}_x[{o}_b, {o}_p, {o}_q]",
        f"            {o}[{o}_b, {o}_i, {o}_j] = {o}_s / {dt}({o}_hd[{o}_i] * {o}_wd[{o}_j])",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


@lowers("avg_pool2d_backward", "adaptive_avg_pool2d_backward")
def _avg_pool_backward(node: Node, args: list, out: str) -> list:
    gshape = tuple(node.inputs[0].shape)
    (oh, ow), b = gshape[-2:], _batch(gshape, 2)
    hh, ww = node.attrs["size"]
    tables, h, w = _window_tables(out, node, (hh, ww), divisors=True)
    dt, o = np_dtype(node.dtype), out
    return tables + [
        f"{o}_g = np.ascontiguousarray({args[0]}).reshape(({b}, {oh}, {ow}))",
        f"{o} = np.zeros(({b}, {hh}, {ww}), {dt})",
        f"for {o}_b in range({b}):",
        f"    for {o}_i in range({oh}):",
        f"        for {o}_j in range({ow}):",
        f"            {o}_v = {o}_g[{o}_b, {o}_i, {o}_j] / {dt}({o}_hd[{o}_i] * {o}_wd[{o}_j])",
        f"            for {o}_p in range({o}_hs[{o}_i], {o}_hs[{o}_i] + {o}_hc[{o}_i]):",
        f"                for {o}_q in range({o}_ws[{o}_j], {o}_ws[{o}_j] + {o}_wc[{o}_j]):",
        f"                    {o}[{o}_b, {o}_p, {o}_q] += {o}_v",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


@lowers("pad")
def _pad(node: Node, args: list, out: str) -> kir.Block:
    """The fill value everywhere, then the kept part of the input copied in by loops (a
    slice assignment costs Numba a generic setitem to compile)."""
    x = node.inputs[0]
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res, fill=node.attrs["value"])], res)
    src_at, dst_at, extents = [], [], []
    for d, (size, (b, a)) in enumerate(zip(x.shape, node.attrs["pad"])):
        lo, hi = max(-b, 0), size - max(-a, 0)
        if hi <= lo:
            return block  # everything was cropped: only the fill value is left
        v = kir.Var(f"{out}_i{d}")
        src_at.append(v + lo if lo else v)
        dst_at.append(v + max(b, 0) if b > 0 else v)
        extents.append((v, hi - lo))
    if not extents:
        return block
    load = args[0].buf[tuple(src_at)]
    value = load if x.dtype == node.dtype else kir.Cast(load, node.dtype)
    nest: tuple = (kir.Store(res, tuple(dst_at), value),)
    for v, e in reversed(extents):
        nest = (kir.Loop(v, e, nest),)
    return block.add(*nest)


def _pad_loops(out: str, outer: tuple, stmt: str) -> list:
    """Loops over ``outer`` (the batch, then the padded output dims) running ``stmt``, with
    ``{out}_a`` and ``{out}_i{d}`` the loop variables."""
    lines = [f"for {out}_a in range({outer[0]}):"]
    for d, n in enumerate(outer[1:]):
        lines.append("    " * (d + 1) + f"for {out}_i{d} in range({n}):")
    lines.append("    " * len(outer) + stmt)
    return lines


@lowers("pad_index", "pad_index_backward")
def _pad_index(node: Node, args: list, out: str) -> list:
    from ...ops.pool import pad_map

    pad, mode = node.attrs["pad"], node.attrs["mode"]
    k = len(pad)
    backward = "size" in node.attrs
    small = tuple(node.attrs["size"]) if backward else tuple(node.inputs[0].shape[-k:])
    big = tuple(s + b + a for s, (b, a) in zip(small, pad))
    lead = _batch(tuple(node.shape), k)
    dt, o = np_dtype(node.dtype), out
    lines = [f"{o}_m{d} = {_table(tuple(int(v) for v in pad_map(small[d], b, a, mode)))}"
             for d, (b, a) in enumerate(pad)]
    at_big = ", ".join([f"{o}_a"] + [f"{o}_i{d}" for d in range(k)])
    at_small = ", ".join([f"{o}_a"] + [f"{o}_m{d}[{o}_i{d}]" for d in range(k)])
    src = f"{o}_x"
    lines.append(f"{src} = np.ascontiguousarray({args[0]}).reshape("
                 f"{(lead,) + (big if backward else small)})")
    if backward:  # every output element of the pad adds into the input element it copied
        lines.append(f"{o} = np.zeros({(lead,) + small}, {dt})")
        lines += _pad_loops(o, (lead,) + big, f"{o}[{at_small}] += {src}[{at_big}]")
    else:
        lines.append(f"{o} = np.empty({(lead,) + big}, {dt})")
        lines += _pad_loops(o, (lead,) + big, f"{o}[{at_big}] = {src}[{at_small}]")
    return lines + [f"{o} = {o}.reshape({ishape(node)})"]


def _unfold_dims(shape: tuple, dim: int) -> tuple:
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


@lowers("unfold")
def _unfold(node: Node, args: list, out: str) -> list:
    d, size, step = node.attrs["dimension"], node.attrs["size"], node.attrs["step"]
    a, n, c = _unfold_dims(tuple(node.inputs[0].shape), d)
    windows = node.shape[d]
    o = out
    return [
        f"{o}_x = np.ascontiguousarray({args[0]}).reshape(({a}, {n}, {c}))",
        f"{o} = np.empty(({a}, {windows}, {c}, {size}), {np_dtype(node.dtype)})",
        f"for {o}_a in range({a}):",
        f"    for {o}_l in range({windows}):",
        f"        for {o}_c in range({c}):",
        f"            for {o}_k in range({size}):",
        f"                {o}[{o}_a, {o}_l, {o}_c, {o}_k] = "
        f"{o}_x[{o}_a, {o}_l * {step} + {o}_k, {o}_c]",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


@lowers("unfold_backward")
def _unfold_backward(node: Node, args: list, out: str) -> list:
    d, size, step = node.attrs["dimension"], node.attrs["size"], node.attrs["step"]
    a, n, c = _unfold_dims(tuple(node.shape), d)
    windows = node.inputs[0].shape[d]
    o = out
    return [
        f"{o}_g = np.ascontiguousarray({args[0]}).reshape(({a}, {windows}, {c}, {size}))",
        f"{o} = np.zeros(({a}, {n}, {c}), {np_dtype(node.dtype)})",
        f"for {o}_a in range({a}):",
        f"    for {o}_l in range({windows}):",
        f"        for {o}_c in range({c}):",
        f"            for {o}_k in range({size}):",
        f"                {o}[{o}_a, {o}_l * {step} + {o}_k, {o}_c] += "
        f"{o}_g[{o}_a, {o}_l, {o}_c, {o}_k]",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


# ---- shape
# diagonal / diag_scatter move (dim1, dim2) last and view the operand as (planes, n, m);
# each is one loop over the planes' diagonals. flip is a negative-step slice, copied.


def _planes(shape: tuple, dim1: int, dim2: int) -> tuple[tuple, int, int, int]:
    """The permutation moving (dim1, dim2) last, and the (planes, n, m) sizes after it."""
    perm = tuple(d for d in range(len(shape)) if d not in (dim1, dim2)) + (dim1, dim2)
    n, m = shape[dim1], shape[dim2]
    return perm, math.prod(shape) // (n * m) if n * m else 0, n, m


def _diag_loop(node_attrs: dict, n: int, m: int) -> tuple[int, int, int]:
    """Start row, start column and length of diagonal ``offset`` of an (n, m) plane."""
    k = node_attrs["offset"]
    r0, c0 = max(-k, 0), max(k, 0)
    return r0, c0, max(min(n - r0, m - c0), 0)


@lowers("diagonal")
def _diagonal(node: Node, args: list, out: str) -> list:
    src = node.inputs[0]
    perm, b, n, m = _planes(tuple(src.shape), node.attrs["dim1"], node.attrs["dim2"])
    r0, c0, ln = _diag_loop(node.attrs, n, m)
    moved = args[0] if perm == tuple(range(len(perm))) else f"np.transpose({args[0]}, {perm})"
    return [
        f"{out}_t = np.ascontiguousarray({moved}).reshape(({b}, {n}, {m}))",
        f"{out} = np.empty(({b}, {ln}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({b}):",
        f"    for {out}_i in range({ln}):",
        f"        {out}[{out}_b, {out}_i] = {out}_t[{out}_b, {out}_i + {r0}, {out}_i + {c0}]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("diag_scatter")
def _diag_scatter(node: Node, args: list, out: str) -> list:
    shape = tuple(node.shape)
    perm, b, n, m = _planes(shape, node.attrs["dim1"], node.attrs["dim2"])
    r0, c0, ln = _diag_loop(node.attrs, n, m)
    lines = [
        f"{out}_g = np.ascontiguousarray({args[0]}).reshape(({b}, {ln}))",
        f"{out}_t = np.zeros(({b}, {n}, {m}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({b}):",
        f"    for {out}_i in range({ln}):",
        f"        {out}_t[{out}_b, {out}_i + {r0}, {out}_i + {c0}] = {out}_g[{out}_b, {out}_i]",
    ]
    if perm == tuple(range(len(perm))):
        return lines + [f"{out} = {out}_t.reshape({ishape(node)})"]
    inverse = tuple(perm.index(d) for d in range(len(perm)))
    moved = tuple(shape[d] for d in perm)
    return lines + [f"{out} = np.ascontiguousarray(np.transpose({out}_t.reshape({moved}), "
                    f"{inverse}))"]


@lowers("flip")
def _flip(node: Node, args: list, out: str) -> list:
    axes = node.attrs["axes"]
    if not axes or not node.shape:
        return [f"{out} = {args[0]}.copy()"]
    code = ", ".join("::-1" if d in axes else ":" for d in range(len(node.shape)))
    return [f"{out} = np.ascontiguousarray({args[0]}[{code}])"]


@lowers("view_dtype")
def _view_dtype(node: Node, args: list, out: str) -> list:
    n = math.prod(node.inputs[0].shape)
    return [f"{out} = np.ascontiguousarray({args[0]}).reshape({n}).view("
            f"{np_dtype(node.dtype)}).reshape({ishape(node)}).copy()"]


# ---- losses and attention
# softmax/log_softmax and their backward ops loop over their operands' own shapes, with
# the normalized axis innermost per line: max, sum of exp, write. No reshape or
# contiguous copy and no loop over a size-1 dim: each of those is Numba compile time.
# nll_loss indexes its input as (N, C, positions...) (`nnops.nll_layout`'s dims).


def _axis_loops(shape: tuple, axis: int | None, out: str,
                loop: bool = False) -> tuple[list, str, Callable]:
    """Loop headers over every dim of ``shape`` but ``axis`` (a size-1 dim gets index 0,
    not a loop), the indent inside them, and ``at(j)``: the index with ``j`` at ``axis``.
    ``loop``: at least one loop, for a body that ``continue``s."""
    heads, names = [], []
    for d, size in enumerate(shape):
        if d == axis:
            names.append(None)
        elif size == 1:
            names.append("0")
        else:
            heads.append("    " * len(heads) + f"for {out}_i{d} in range({size}):")
            names.append(f"{out}_i{d}")
    if loop and not heads:
        heads.append(f"for {out}_once in range(1):")
    return heads, "    " * len(heads), lambda j: "[" + ", ".join(
        j if n is None else n for n in names) + "]"


def _load(node: Node, src: Node, var: str, at: str) -> str:
    """``var[at]`` as a scalar of ``node``'s dtype."""
    return f"{var}{at}" if src.dtype == node.dtype else f"{np_dtype(node.dtype)}({var}{at})"


def _norm_axis(node: Node) -> tuple[tuple, int]:
    shape = tuple(node.shape)
    return (shape, node.attrs["axis"]) if shape else ((1,), 0)


def _softmax_lines(node: Node, args: list, out: str, log: bool) -> list:
    shape, axis = _norm_axis(node)
    n = shape[axis]
    dt = np_dtype(node.dtype)
    heads, ind, at = _axis_loops(shape, axis, out)
    j = f"{out}_j"
    x = node.inputs[0]
    xv = _load(node, x, args[0], at(j))
    m, s = f"{out}_m", f"{out}_s"
    # The same steps as the NumPy kernel: shift by the max (nan wins), sum exp, then
    # (x - max) - log(sum) or exp(x - max) / sum.
    lines = [f"{out} = np.empty({shape}, {dt})", *heads,
             f"{ind}{m} = {_load(node, x, args[0], at('0'))}" if n else f"{ind}{m} = {dt}(0)",
             f"{ind}for {j} in range(1, {n}):",
             f"{ind}    {out}_v = {xv}",
             f"{ind}    if {out}_v > {m} or {out}_v != {out}_v:",
             f"{ind}        {m} = {out}_v",
             f"{ind}{s} = 0.0",
             f"{ind}for {j} in range({n}):"]
    if log:
        lines += [f"{ind}    {s} += np.exp({xv} - {m})",
                  f"{ind}{s} = np.log({s})",
                  f"{ind}for {j} in range({n}):",
                  f"{ind}    {out}{at(j)} = ({xv} - {m}) - {s}"]
    else:
        lines += [f"{ind}    {out}_e = np.exp({xv} - {m})",
                  f"{ind}    {out}{at(j)} = {out}_e",
                  f"{ind}    {s} += {out}_e",
                  f"{ind}for {j} in range({n}):",
                  f"{ind}    {out}{at(j)} = {out}{at(j)} / {s}"]
    return lines


@lowers("log_softmax")
def _log_softmax(node: Node, args: list, out: str) -> list:
    return _softmax_lines(node, args, out, log=True)


@lowers("softmax")
def _softmax(node: Node, args: list, out: str) -> list:
    return _softmax_lines(node, args, out, log=False)


def _softmax_grad_lines(node: Node, args: list, out: str, log: bool) -> list:
    shape, axis = _norm_axis(node)
    n = shape[axis]
    heads, ind, at = _axis_loops(shape, axis, out)
    j = f"{out}_j"
    g = _load(node, node.inputs[0], args[0], at(j))
    y = _load(node, node.inputs[1], args[1], at(j))
    s = f"{out}_s"
    # log: g - exp(y) * sum(g); plain: y * (g - sum(g * y)).
    acc = g if log else f"{g} * {y}"
    val = f"{g} - np.exp({y}) * {s}" if log else f"{y} * ({g} - {s})"
    return [f"{out} = np.empty({shape}, {np_dtype(node.dtype)})", *heads,
            f"{ind}{s} = 0.0",
            f"{ind}for {j} in range({n}):",
            f"{ind}    {s} += {acc}",
            f"{ind}for {j} in range({n}):",
            f"{ind}    {out}{at(j)} = {val}"]


@lowers("log_softmax_backward")
def _log_softmax_backward(node: Node, args: list, out: str) -> list:
    return _softmax_grad_lines(node, args, out, log=True)


@lowers("softmax_backward")
def _softmax_backward(node: Node, args: list, out: str) -> list:
    return _softmax_grad_lines(node, args, out, log=False)


def _nll_frame(node: Node, args: list, out: str, xshape: tuple) -> tuple:
    """The loop over target positions (headers, indent), the target, input and target
    index functions, the weight lookup, and C. ``x[n, c, pos...]`` / ``t[n, pos...]``; a
    1-D input is one sample (``x[c]``, ``t[0]``)."""
    weight = node.inputs[2]
    c = xshape[0] if len(xshape) == 1 else xshape[1]
    tshape = (1,) if len(xshape) == 1 else (xshape[0],) + tuple(xshape[2:])
    heads, ind, tat = _axis_loops(tshape, None, out, loop=True)
    names = tat("")[1:-1].split(", ")
    xat = ((lambda k: f"[{k}]") if len(xshape) == 1
           else (lambda k: "[" + ", ".join([names[0], k] + names[1:]) + "]"))
    t = f"{out}_c"
    if isinstance(weight, Node):
        w = _load(node, weight, args[2], f"[{t}]")
    else:
        w = literal(float(weight), node.dtype)
    return heads, ind, tat(""), xat, w, c


def _nll_target(out: str, tvar: str, tat: str, ind: str, c: int, ignore: int,
                on_ignore: list | None = None) -> list:
    return [f"{ind}{out}_c = {tvar}{tat}",
            f"{ind}if {out}_c == {ignore}:",
            *[f"{ind}    {line}" for line in (on_ignore or [])],
            f"{ind}    continue",
            f"{ind}if {out}_c < 0 or {out}_c >= {c}:",
            f"{ind}    raise IndexError('nll_loss: Target is out of bounds.')"]


@lowers("nll_loss")
def _nll_loss(node: Node, args: list, out: str) -> list:
    xshape = tuple(node.inputs[0].shape)
    heads, ind, tat, xat, w, c = _nll_frame(node, args, out, xshape)
    dt = np_dtype(node.dtype)
    reduction = node.attrs["reduction"]
    ignore = node.attrs["ignore_index"]
    loss = f"-{out}_wc * {_load(node, node.inputs[0], args[0], xat(out + '_c'))}"
    lines = [f"{out} = np.empty({ishape(node)}, {dt})"]
    if reduction == "none":
        return lines + heads + _nll_target(out, args[1], tat, ind, c, ignore,
                                           [f"{out}{tat} = {dt}(0)"]) + [
            f"{ind}{out}_wc = {w}",
            f"{ind}{out}{tat} = {loss}"]
    lines += [f"{out}_tot = 0.0", f"{out}_tw = 0.0"] + heads + _nll_target(
        out, args[1], tat, ind, c, ignore)
    lines += [f"{ind}{out}_wc = {w}",
              f"{ind}{out}_tot += {dt}({loss})",
              f"{ind}{out}_tw += {out}_wc"]
    total = f"{out}_tot / {out}_tw" if reduction == "mean" else f"{out}_tot"
    return lines + [f"{out}[0] = {dt}({total})"]  # error_model numpy: 0/0 is nan


@lowers("nll_loss_backward")
def _nll_loss_backward(node: Node, args: list, out: str) -> list:
    xshape = tuple(node.attrs["shape"])
    heads, ind, tat, xat, w, c = _nll_frame(node, args, out, xshape)
    dt = np_dtype(node.dtype)
    reduction = node.attrs["reduction"]
    ignore = node.attrs["ignore_index"]
    g = (_load(node, node.inputs[0], args[0], tat) if reduction == "none"
         else _load(node, node.inputs[0], args[0], "[0]"))
    lines = [f"{out} = np.empty({ishape(node)}, {dt})"]
    if reduction == "mean":  # the summed weights first: every gradient is divided by them
        lines += [f"{out}_tw = 0.0"] + heads + _nll_target(out, args[1], tat, ind, c, ignore)
        lines += [f"{ind}{out}_tw += {w}"]
        g = f"({g} / {out}_tw)"
    # Each line of classes is zeroed as the loop reaches it: one loop nest, no np.zeros.
    zero = [f"{ind}for {out}_z in range({c}):", f"{ind}    {out}{xat(out + '_z')} = {dt}(0)"]
    lines += heads + zero + _nll_target(out, args[1], tat, ind, c, ignore)
    lines += [f"{ind}{out}{xat(out + '_c')} = -{w} * {g}"]
    return lines
