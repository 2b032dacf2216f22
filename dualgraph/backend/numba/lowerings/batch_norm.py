"""Training batch norm: ``batch_norm``, ``batch_norm_backward``, ``batch_norm_param_grads``
and ``batch_norm_stats``, each one call of its C function (`channel_kernels`), which takes
the channel count as an argument: a network's batch norms of every width share one
compiled function per op and dtype, and a kernel's cold compile holds a call line per op.
The operands are viewed as ``(N, C, L)`` (C-ordered: a strided operand is copied first)."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ... import kir
from ..printer import LIBRARY
from . import _reshaped, ishape, lowers, missing

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_WEIGHT, _BIAS = 2, 4

LIBRARY.update({
    # the input viewed as (N, C, L), per-channel operands 1-D, pairs of per-channel
    # results (2, C); the last two arguments are flags and eps
    "chan_stats": "dgn.chan_stats_{dtype}({0}, {out}, {1}, {2})",
    "chan_norm": "dgn.chan_norm_{dtype}({0}, {1}, {2}, {out}, {3}, {4})",
    "chan_backward": "dgn.chan_backward_{dtype}({0}, {1}, {2}, {out}, {3}, {4})",
    "chan_param_grads": "dgn.chan_param_grads_{dtype}({0}, {1}, {out}, {2}, {3})",
})


def _frame(node: Node, xshape: tuple, bufs: list, out: str) -> tuple:
    """The result block, the array operands ``bufs`` of one dtype checked, and the
    (N, C, L) extents."""
    dtype = np.dtype(node.dtype)
    if dtype not in _DTYPES or any(np.dtype(b.dtype) != dtype for b in bufs):
        raise missing(node.op, f"operands of {', '.join(str(b.dtype) for b in bufs)}: "
                               "float32 or float64 throughout; run this part eagerly")
    res = kir.Buffer(out, ishape(node), dtype)
    n, c = xshape[0], xshape[1]
    return kir.Block([kir.Alloc(res)], res), (n, c, math.prod(xshape[2:]))


def _channel(block: kir.Block, node: Node, arg, c: int, stand_in: kir.Buffer,
             name: str) -> tuple:
    """A per-channel operand as a 1-D view and its flag bit set (a literal: ``stand_in``,
    not read, and no bit)."""
    if not isinstance(arg, kir.Buffer):
        return stand_in, False
    return _reshaped(block, arg, (c,), name), True


def _bufs(node: Node, args: list) -> list:
    return [a.buf for a, i in zip(args, node.inputs) if isinstance(i, Node)]


@lowers("batch_norm")
def _batch_norm(node: Node, args: list, out: str) -> kir.Block:
    xshape = tuple(node.inputs[0].shape)
    block, ncl = _frame(node, xshape, _bufs(node, args), out)
    x = _reshaped(block, args[0].buf, ncl, f"{out}_x")
    dst = _reshaped(block, block.result, ncl, f"{out}_o")
    flags = 0
    params = []
    for bit, k in ((_WEIGHT, 1), (_BIAS, 2)):
        buf = args[k].buf if isinstance(node.inputs[k], Node) else None
        p, present = _channel(block, node, buf, ncl[1], x, f"{out}_p{k}")
        flags |= bit if present else 0
        params.append(p)
    block.add(kir.LibCall("chan_norm", (x, *params, flags, float(node.attrs["eps"])),
                          (dst,)))
    return block


@lowers("batch_norm_backward")
def _batch_norm_backward(node: Node, args: list, out: str) -> kir.Block:
    xshape = tuple(node.inputs[1].shape)
    block, ncl = _frame(node, xshape, _bufs(node, args), out)
    g = _reshaped(block, args[0].buf, ncl, f"{out}_g")
    x = _reshaped(block, args[1].buf, ncl, f"{out}_x")
    dst = _reshaped(block, block.result, ncl, f"{out}_o")
    buf = args[2].buf if isinstance(node.inputs[2], Node) else None
    w, present = _channel(block, node, buf, ncl[1], x, f"{out}_w")
    block.add(kir.LibCall("chan_backward", (g, x, w, _WEIGHT if present else 0,
                                            float(node.attrs["eps"])), (dst,)))
    return block


@lowers("batch_norm_param_grads")
def _batch_norm_param_grads(node: Node, args: list, out: str) -> kir.Block:
    xshape = tuple(node.inputs[1].shape)
    block, ncl = _frame(node, xshape, _bufs(node, args), out)
    g = _reshaped(block, args[0].buf, ncl, f"{out}_g")
    x = _reshaped(block, args[1].buf, ncl, f"{out}_x")
    dst = _reshaped(block, block.result, (2, ncl[1]), f"{out}_o")
    block.add(kir.LibCall("chan_param_grads", (g, x, 0, float(node.attrs["eps"])), (dst,)))
    return block


@lowers("batch_norm_stats")
def _batch_norm_stats(node: Node, args: list, out: str) -> kir.Block:
    xshape = tuple(node.inputs[0].shape)
    block, ncl = _frame(node, xshape, _bufs(node, args), out)
    x = _reshaped(block, args[0].buf, ncl, f"{out}_x")
    dst = _reshaped(block, block.result, (2, ncl[1]), f"{out}_o")
    block.add(kir.LibCall("chan_stats", (x, 0, 0.0), (dst,)))
    return block
