"""Random ops: counter-based draws (uniform, normal, dropout masks) from the kernel's key."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ..printer import literal
from . import ishape, lowers, np_dtype

# ------------------------------------------------------------------------ random ops
# The counter-based generator of `dualgraph.ops.random`, written out as loops: the same
# uint64 arithmetic as its NumPy kernel, so compiled code and the reference interpreter
# draw the same numbers from the same key (randn up to the last bit of libm's log/cos).
# Every constant is a typed uint64: Numba would turn uint64 mixed with int64 into float64.


def _u64(v: int) -> str:
    return f"np.uint64({v})"


def _mix(z: str, indent: str = "") -> list:
    """SplitMix64's output function applied to ``{z}`` in place."""
    from ....ops.random import MIX1, MIX2

    return [f"{indent}{z} = ({z} ^ ({z} >> {_u64(30)})) * {_u64(MIX1)}",
            f"{indent}{z} = ({z} ^ ({z} >> {_u64(27)})) * {_u64(MIX2)}",
            f"{indent}{z} = {z} ^ ({z} >> {_u64(31)})"]


def _random_base(node: Node, key: str, out: str) -> list:
    """Lines setting ``{out}_b``: the mixed (key, stream) every counter is added to."""
    from ....ops.random import GAMMA

    b = f"{out}_b"
    stream = node.attrs["stream"]
    # The key is stored as int64; its bits, read as uint64, are the generator's key.
    return [f"{b} = np.uint64({key}[0]) + np.uint64({stream}) * {_u64(GAMMA)}"] + _mix(b)


def _words_at(out: str, counter: str, v: str, indent: str) -> list:
    """Lines setting ``{v}`` to the 64-bit word of ``counter`` (from ``{out}_b``)."""
    from ....ops.random import GAMMA

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
    from ....ops.random import dropout_scale

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
