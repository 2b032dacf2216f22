"""Random ops: counter-based draws (uniform, normal, dropout masks) from the kernel's key."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import lowers
from .shape import fresh, reshaped

# ------------------------------------------------------------------------ random ops
# The counter-based generator of `dualgraph.ops.random`, written out as loops: the same
# uint64 arithmetic as its NumPy kernel, so compiled code and the reference interpreter
# draw the same numbers from the same key (randn up to the last bit of libm's log/cos).
# Every constant is a typed uint64: Numba would turn uint64 mixed with int64 into float64.

U8 = np.dtype(np.uint64)
F8 = np.dtype(np.float64)


def _u64(v: int) -> kir.Expr:
    return kir.const(v, U8)


def _mix(z: kir.Var) -> list:
    """SplitMix64's output function applied to ``z`` in place."""
    from ....ops.random import MIX1, MIX2

    return [kir.Let(z, kir.Bin("*", kir.Bin("^", z, kir.Bin(">>", z, _u64(30))), _u64(MIX1))),
            kir.Let(z, kir.Bin("*", kir.Bin("^", z, kir.Bin(">>", z, _u64(27))), _u64(MIX2))),
            kir.Let(z, kir.Bin("^", z, kir.Bin(">>", z, _u64(31))))]


def _random_base(node: Node, key: kir.Buffer, out: str) -> tuple[kir.Var, list]:
    """``{out}_b``, the mixed (key, stream) every counter is added to, and its statements."""
    from ....ops.random import GAMMA

    b = kir.Var(f"{out}_b", U8)
    # The key is stored as int64; its bits, read as uint64, are the generator's key.
    start = kir.Bin("+", kir.Cast(key[kir.const(0)], U8),
                    kir.Bin("*", _u64(node.attrs["stream"]), _u64(GAMMA)))
    return b, [kir.Let(b, start)] + _mix(b)


def _word(base: kir.Var, counter: kir.Expr, v: kir.Var) -> list:
    """Statements setting ``v`` to the 64-bit word of ``counter`` (from ``base``)."""
    from ....ops.random import GAMMA

    step = kir.Bin("*", kir.Cast(counter + 1, U8), _u64(GAMMA))
    return [kir.Let(v, kir.Bin("+", base, step))] + _mix(v)


def _unit53(h: kir.Var) -> kir.Expr:
    """Uniform float64 in [0, 1) from the top 53 bits of ``h``."""
    return kir.Cast(kir.Bin(">>", h, _u64(11)), F8) * kir.const(2.0 ** -53, F8)


def _draw(node: Node, key: kir.Buffer, out: str, body) -> kir.Block:
    """A loop over the flat output storing ``body(i, base)``'s value at each element."""
    block, res = fresh(node, out)
    n = math.prod(node.shape)
    flat = reshaped(block, res, (n,), f"{out}_f")
    base, stmts = _random_base(node, key, out)
    i = kir.Var(f"{out}_i")
    pre, value = body(i, base)
    return block.add(*stmts, kir.Loop(i, n, (*pre, kir.Store(flat, (i,), value))))


@lowers("rand")
def _rand(node: Node, args: list, out: str) -> kir.Block:
    # float32 takes 24 bits (exact, never rounded up to 1.0), float64 53.
    drop, unit = (40, 2.0 ** -24) if node.dtype == np.float32 else (11, 2.0 ** -53)
    h = kir.Var(f"{out}_h", U8)

    def body(i: kir.Var, base: kir.Var) -> tuple:
        value = kir.Cast(kir.Bin(">>", h, _u64(drop)), F8) * kir.const(unit, F8)
        return _word(base, i, h), kir.Cast(value, node.dtype)

    return _draw(node, args[0].buf, out, body)


@lowers("randn")
def _randn(node: Node, args: list, out: str) -> kir.Block:
    h, g = kir.Var(f"{out}_h", U8), kir.Var(f"{out}_g", U8)
    u, v = kir.Var(f"{out}_u", F8), kir.Var(f"{out}_v", F8)

    def body(i: kir.Var, base: kir.Var) -> tuple:
        radius = kir.Call("sqrt", (kir.const(-2.0, F8) * kir.Call("log", (u,), F8),), F8)
        angle = kir.Call("cos", (kir.const(2.0 * math.pi, F8) * v,), F8)
        return (_word(base, 2 * i, h) + _word(base, 2 * i + 1, g)
                + [kir.Let(u, kir.const(1.0, F8) - _unit53(h)), kir.Let(v, _unit53(g))],
                kir.Cast(radius * angle, node.dtype))

    return _draw(node, args[0].buf, out, body)


@lowers("dropout")
def _dropout(node: Node, args: list, out: str) -> kir.Block:
    from ....ops.random import dropout_scale

    p = float(node.attrs["p"])
    n = math.prod(node.shape)
    scale = kir.const(dropout_scale(p, node.dtype).item(), node.dtype)
    zero = kir.const(0.0, node.dtype)
    x = args[0].buf
    h = kir.Var(f"{out}_h", U8)
    block, res = fresh(node, out)
    xs = reshaped(block, x, (n,), f"{out}_x")
    flat = reshaped(block, res, (n,), f"{out}_f")
    base, stmts = _random_base(node, args[1].buf, out)
    i = kir.Var(f"{out}_i")
    keep = kir.Bin(">=", _unit53(h), kir.const(p, F8))
    return block.add(*stmts, kir.Loop(i, n, (*_word(base, i, h), kir.If(
        keep, (kir.Store(flat, (i,), xs[i] * scale),),
        (kir.Store(flat, (i,), xs[i] * zero),)))))
