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


def _call(node: Node, args: list, out: str, fn: str, rows: tuple, params: tuple,
          pair: bool) -> kir.Block:
    """The op as one call of C function ``fn``: the inputs at ``rows`` (input-shaped)
    viewed as (N, C, L), then the per-channel ones at ``params`` (position, flag bit: an
    absent one is a literal, passed as any array of the dtype and not read), the flags
    and eps; the result is input-shaped, or (2, C) when ``pair``."""
    dtype = np.dtype(node.dtype)
    bufs = [a.buf for a, i in zip(args, node.inputs) if isinstance(i, Node)]
    if dtype not in _DTYPES or any(np.dtype(b.dtype) != dtype for b in bufs):
        raise missing(node.op, f"operands of {', '.join(str(b.dtype) for b in bufs)}: "
                               "float32 or float64 throughout; run this part eagerly")
    xshape = tuple(node.inputs[rows[-1]].shape)
    c = xshape[1]
    ncl = (xshape[0], c, math.prod(xshape[2:]))
    res = kir.Buffer(out, ishape(node), dtype)
    block = kir.Block([kir.Alloc(res)], res)
    views = [_reshaped(block, args[k].buf, ncl, f"{out}_a{k}") for k in rows]
    flags = 0
    per_channel = []
    for k, bit in params:
        if isinstance(node.inputs[k], Node):
            flags |= bit
            per_channel.append(_reshaped(block, args[k].buf, (c,), f"{out}_p{k}"))
        else:
            per_channel.append(views[0])
    dst = _reshaped(block, res, (2, c) if pair else ncl, f"{out}_o")
    eps = float(node.attrs.get("eps", 0.0))
    block.add(kir.LibCall(fn, (*views, *per_channel, flags, eps), (dst,)))
    return block


@lowers("batch_norm")
def _batch_norm(node: Node, args: list, out: str) -> kir.Block:
    return _call(node, args, out, "chan_norm", (0,), ((1, _WEIGHT), (2, _BIAS)), False)


@lowers("batch_norm_backward")
def _batch_norm_backward(node: Node, args: list, out: str) -> kir.Block:
    return _call(node, args, out, "chan_backward", (0, 1), ((2, _WEIGHT),), False)


@lowers("batch_norm_param_grads")
def _batch_norm_param_grads(node: Node, args: list, out: str) -> kir.Block:
    return _call(node, args, out, "chan_param_grads", (0, 1), (), True)


@lowers("batch_norm_stats")
def _batch_norm_stats(node: Node, args: list, out: str) -> kir.Block:
    return _call(node, args, out, "chan_stats", (0,), (), True)
