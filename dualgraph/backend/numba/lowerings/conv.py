"""Convolution: im2col, col2im and conv2d as per-sample window routines and GEMMs in the
kernel IR."""

from __future__ import annotations

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import _reshaped, ishape, lowers

# ---- convolution
# The window loops (gathering a sample's columns, adding them back) are library routines
# compiled once (`blas.im2col`, `blas.col2im`), called once per sample: printed into each
# kernel, their loop nests cost about a second of compile per convolution op. conv2d is,
# sample by sample, that sample's columns in a scratch buffer that stays in cache, then
# one BLAS product per group written in place into the output, already in (N, O, oH, oW)
# order.


def _geometry(block: kir.Block, attrs: dict, size: tuple, name: str,
              batch_columns: bool) -> kir.Buffer:
    """The routines' window table (a kernel constant): kernel, dilation, stride, top and
    left padding, the number of window positions along H and W, and whether the columns
    hold the whole batch (sample n at block n) or one sample."""
    from ....ops.conv import out_size

    kh, kw = attrs["kernel_size"]
    (dh, dw), (sh, sw) = attrs["dilation"], attrs["stride"]
    (pt, _), (pl, _) = attrs["padding"]
    oh, ow = out_size(size, (kh, kw), (dh, dw), attrs["padding"], (sh, sw))
    stmt, buf = kir.table(name, (kh, kw, dh, dw, sh, sw, pt, pl, oh, ow, int(batch_columns)))
    block.add(stmt)
    return buf


@lowers("im2col")
def _im2col(node: Node, args: list, out: str) -> kir.Block:
    """The columns (N, K, L) stored kernel-offset major, as a (K, N, L) array seen through
    a transposed view: the weight gradient reads them as (K, N*L), one GEMM over the
    whole batch, and that reshape is then free (stored sample-major it is a copy of the
    whole buffer)."""
    n, k, length = ishape(node)
    store = kir.Buffer(f"{out}_t", (k, n, length), node.dtype)
    res = kir.Buffer(out, (n, k, length), node.dtype, kir.VIEW, layout="A")
    block = kir.Block([kir.Alloc(store)], res)
    i = kir.Var(f"{out}_n")
    if n * k * length:
        geo = _geometry(block, node.attrs, tuple(node.inputs[0].shape[2:]), f"{out}_g", True)
        block.add(kir.Loop(i, n, (kir.LibCall("im2col", (args[0].buf, i, geo), (store,)),)))
    block.add(kir.View(res, store, "transpose", (1, 0, 2)))
    return block


@lowers("col2im")
def _col2im(node: Node, args: list, out: str) -> kir.Block:
    """Sample by sample: the sample's image zeroed, then its columns added in."""
    n = node.shape[0]
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    i = kir.Var(f"{out}_n")
    if res.size:
        geo = _geometry(block, node.attrs, tuple(node.shape[2:]), f"{out}_g", True)
        block.add(kir.Loop(i, n, (kir.LibCall("col2im", (args[0].buf, i, geo), (res,)),)))
    return block


# Measured on one core (float32, AMD EPYC with AVX2, OpenBLAS 0.3.31; median CPU time of
# interleaved rounds on a loaded 2-core VM),
# direct loops (each weight scaling a shifted image row into an output row) against im2col
# and one GEMM per sample: batch 64 1->6 channels 5x5 over 28x28 (LeNet's first layer,
# the smallest window, 25 elements) 4.1 ms against 1.9 ms; 6->16 channels 5x5 over 14x14
# 8.6 against 1.6 ms; 3->8 channels 3x3 over 16x16 2.0 against 0.6 ms; even at batch 4,
# 1->4 channels 3x3 over 8x8 (0.057 against 0.048 ms, mostly the call). So every
# convolution is im2col + GEMM.


@lowers("conv2d")
def _conv2d(node: Node, args: list, out: str) -> kir.Block:
    """Sample by sample: the sample's columns gathered into a (G*K, L) buffer that stays
    in cache, its output started at the bias, and one BLAS product per group adding to it
    (``beta=1``). Gathering the whole batch's columns first (5 MB for LeNet's first layer)
    and then multiplying reads them back from memory."""
    x, w = node.inputs[:2]
    n, o, oh, ow = node.shape
    _, cg, kh, kw = w.shape
    g = node.attrs["groups"]
    og, k, length = o // g, cg * kh * kw, oh * ow
    dtype = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dtype)
    bias = args[2].buf if len(args) == 3 else None
    block = kir.Block([kir.Comment(f"conv2d as im2col + GEMM, per sample (a window of {k} "
                                   f"elements)"),
                       kir.Alloc(res)], res)
    wc = _reshaped(block, args[1].buf, (o * k,), f"{out}_w")  # C-ordered (copied if not)
    r3 = _reshaped(block, res, (n, o, length), f"{out}_r")
    cols = kir.Buffer(f"{out}_c", (g * k, 1, length), dtype)
    block.add(kir.Alloc(cols))
    if not (n * o * length):
        return block
    i, c, p = kir.Var(f"{out}_n"), kir.Var(f"{out}_o"), kir.Var(f"{out}_l")
    init = bias[(c,)] if bias is not None else kir.const(0, dtype)
    geo = _geometry(block, dict(node.attrs, kernel_size=(kh, kw)), tuple(x.shape[2:]),
                    f"{out}_t", False)
    body: list = [
        kir.LibCall("im2col", (args[0].buf, i, geo), (cols,)),
        kir.Loop(c, o, (kir.Loop(p, length, (kir.Store(r3, (i, c, p), init),)),)),
    ]
    if k and og:
        if g == 1:
            body.append(kir.Gemm(o, length, k, kir.Operand(wc, k), kir.Operand(cols, length),
                                 kir.Operand(res, length, offset=i * (o * length)),
                                 beta=1.0))
        else:
            grp = kir.Var(f"{out}_g")
            body.append(kir.Loop(grp, g, (kir.Gemm(
                og, length, k, kir.Operand(wc, k, offset=grp * (og * k)),
                kir.Operand(cols, length, offset=grp * (k * length)),
                kir.Operand(res, length, offset=i * (o * length) + grp * (og * length)),
                beta=1.0),)))
    return block.add(kir.Loop(i, n, tuple(body)))
