"""Reductions that are not a fold of a `Reduction` spec: arg reductions and their gather."""

from __future__ import annotations

from ....ir.graph import Node
from ... import kir
from . import lowers
from .shape import fresh, lines, reshaped

# ------------------------------------------------------- arg reductions and their gather
# Both move the reduced axis last and view the operand as (lines, length): a size-1 axis
# can be moved anywhere without changing the C-order layout, so results are plain reshapes.


@lowers("argmax")
def _argmax(node: Node, args: list, out: str) -> kir.Block:
    return _argextremum(node, args, out, ">")


@lowers("argmin")
def _argmin(node: Node, args: list, out: str) -> kir.Block:
    return _argextremum(node, args, out, "<")


def _argextremum(node: Node, args: list, out: str, better: str) -> kir.Block:
    src = node.inputs[0]
    block, res = fresh(node, out, fill=0)
    t, m, n = lines(block, args[0].buf, tuple(src.shape), node.attrs["axis"], f"{out}_t")
    r = reshaped(block, res, (m,), f"{out}_r")
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    b, v = kir.Var(f"{out}_b", src.dtype), kir.Var(f"{out}_v", src.dtype)
    nan = kir.Bin("!=", v, v)
    # The first extremum wins; the first nan wins over everything (np.argmax's rule and
    # PyTorch's): a nan found stops the line.
    return block.add(kir.Loop(i, m, (
        kir.Let(b, t[i, kir.const(0)]),
        kir.If(kir.Bin("!=", b, b), (kir.Jump("continue"),)),
        kir.Loop(j, n, (
            kir.Let(v, t[i, j]),
            kir.If(kir.Bin("or", nan, kir.Bin(better, v, b)), (
                kir.Store(r, (i,), j),
                kir.Let(b, v),
                kir.If(nan, (kir.Jump("break"),)),
            )),
        ), start=1),
    )))
