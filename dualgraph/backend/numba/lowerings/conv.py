"""Convolution: im2col, col2im and conv2d as window loops and GEMMs in the kernel IR."""

from __future__ import annotations

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import _reshaped, ishape, lowers

# ---- convolution
# Shared compiled routines (`blas.im2col`, `blas.col2im`) gather and scatter-add the sliding
# windows, so a convolution costs a call, not a loop nest, in each kernel; conv2d is im2col
# into a scratch buffer, then one BLAS product per (sample, group) written in place into
# the output, which is already in (N, O, oH, oW) order.


def _geometry(block: kir.Block, name: str, attrs: dict, image: tuple, kmajor: bool = False,
              zero: bool = False) -> kir.Buffer:
    """The window geometry the shared window routines read (``blas.im2col``): a kernel
    constant, so that one compiled routine serves every convolution."""
    from ....ops.conv import out_size

    kh, kw = attrs["kernel_size"]
    oh, ow = out_size(image, attrs["kernel_size"], attrs["dilation"], attrs["padding"],
                      attrs["stride"])
    (pt, _), (pl, _) = attrs["padding"]
    # The last entry, 0, is the first sample of a whole-batch call: read from the table,
    # as a literal argument would make the routine compile once more for its type.
    stmt, geo = kir.table(name, (kh, kw, *attrs["dilation"], *attrs["stride"], pt, pl, oh, ow,
                                 int(kmajor), int(zero), 0))
    block.add(stmt)
    return geo


def _padded(attrs: dict) -> bool:
    return any(p for pair in attrs["padding"] for p in pair)


def _im2col_into(block: kir.Block, x_node: Node, x: kir.Buffer, attrs: dict,
                 cols: kir.Buffer, kmajor: bool = False) -> None:
    """Fill ``cols`` (n, c*kh*kw, oh*ow), or (c*kh*kw, n, oh*ow) when ``kmajor``, with the
    sliding windows of image ``x``: zeros first where there is padding, as window elements
    in the padding are never written."""
    geo = _geometry(block, f"{cols.name}_g", attrs, tuple(x_node.shape[2:]), kmajor,
                    _padded(attrs))
    block.add(kir.LibCall("im2col", (x, geo[12], geo), (cols,)))


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
    _im2col_into(block, node.inputs[0], args[0].buf, node.attrs, store, kmajor=True)
    block.add(kir.View(res, store, "transpose", (1, 0, 2)))
    return block


@lowers("col2im")
def _col2im(node: Node, args: list, out: str) -> kir.Block:
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    geo = _geometry(block, f"{out}_g", node.attrs, tuple(node.shape[2:]))
    return block.add(kir.LibCall("col2im", (args[0].buf, geo), (res,)))


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
    """Sample by sample (ungrouped): the sample's columns gathered into a (K, L) buffer
    that stays in cache, its output started at the bias, and one BLAS product adding
    to it (``beta=1``). Gathering the whole batch's columns first (5 MB for LeNet's first
    layer) and then multiplying reads them back from memory. Grouped: im2col of the whole
    batch, then one product per (sample, group)."""
    x, w = node.inputs[:2]
    n, o, oh, ow = node.shape
    _, cg, kh, kw = w.shape
    g = node.attrs["groups"]
    og, k, length = o // g, cg * kh * kw, oh * ow
    dtype = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dtype)
    bias = args[2].buf if len(args) == 3 else None
    block = kir.Block([kir.Comment(f"conv2d as im2col + GEMM (a window of {k} elements"
                                   f"{', per sample' if g == 1 else ''})"),
                       kir.Alloc(res)], res)
    wc = _reshaped(block, args[1].buf, (o * k,), f"{out}_w")  # C-ordered (copied if not)
    r3 = _reshaped(block, res, (n, o, length), f"{out}_r")
    attrs = dict(node.attrs, kernel_size=(kh, kw))
    i, c, p = kir.Var(f"{out}_n"), kir.Var(f"{out}_o"), kir.Var(f"{out}_l")
    init = bias[(c,)] if bias is not None else kir.const(0, dtype)
    start = kir.Loop(c, o, (kir.Loop(p, length, (kir.Store(r3, (i, c, p), init),)),))
    if g == 1:
        cols = kir.Buffer(f"{out}_c", (k, length), dtype)
        block.add(kir.Alloc(cols))
        if not (n * o * length):
            return block
        geo = _geometry(block, f"{cols.name}_g", attrs, tuple(x.shape[2:]),
                        zero=_padded(attrs))
        c3 = _reshaped(block, cols, (1, k, length), f"{cols.name}_3")
        body: list = [kir.LibCall("im2col", (args[0].buf, i, geo), (c3,))]
        body.append(start)
        if k:
            body.append(kir.Gemm(o, length, k, kir.Operand(wc, k), kir.Operand(cols, length),
                                 kir.Operand(res, length, offset=i * (o * length)),
                                 beta=1.0))
        return block.add(kir.Loop(i, n, tuple(body)))
    cols = kir.Buffer(f"{out}_c", (n, g * k, length), dtype)
    block.add(kir.Alloc(cols))
    _im2col_into(block, x, args[0].buf, attrs, cols)
    if n * o * length:
        block.add(kir.Loop(i, n, (start,)))
    item = kir.Var(f"{out}_g")
    if og and length and k:
        # (sample, group) pairs in order: item = sample * g + group.
        group = kir.Bin("%", item, kir.const(g))
        block.add(kir.Loop(item, n * g, (kir.Gemm(
            og, length, k, kir.Operand(wc, k, offset=group * (og * k)),
            kir.Operand(cols, length, offset=item * (k * length)),
            kir.Operand(res, length, offset=item * (og * length)), beta=1.0),)))
    return block
