"""Convolution: im2col, col2im and conv2d as window loops and GEMMs in the kernel IR."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ....ir.graph import Node
from ... import kir
from ..blas import HAVE_CBLAS
from . import _reshaped, ishape, lowers

# ---- convolution
# Plain loops gather (im2col) and scatter-add (col2im) the sliding windows; conv2d is im2col
# into a scratch buffer, then one BLAS product per (sample, group) written in place into
# the output, which is already in (N, O, oH, oW) order.


def _window_loops(node_in: tuple, attrs: dict, cols: tuple, out: str,
                  body: Callable[[tuple, tuple], kir.Stmt],
                  sample: kir.Expr | None = None) -> kir.Loop:
    """Loops over every (sample, channel, kernel offset, window position) reading an image
    element that lies inside the unpadded input; ``body(image index, column index)`` is
    the statement for one element. The columns a kernel offset reads inside the image
    are a range computed once (``lo``, ``hi``): no test in the innermost loop; where the
    geometry puts every column (row) of every offset inside the image, neither the range
    nor the row test is written. With
    ``sample``, the loops of that one sample only (no loop over the batch)."""
    _, c, h, w = node_in
    kh, kw = attrs["kernel_size"]
    dh, dw = attrs["dilation"]
    sh, sw = attrs["stride"]
    (pt, _), (pl, _) = attrs["padding"]
    n, oh, ow = cols
    v = {name: kir.Var(f"{out}_{name}") for name in
         ("n", "c", "ki", "kj", "r", "b", "lo", "hi", "oy", "h", "ox", "w", "l")}
    at = v["n"] if sample is None else sample
    # Where every kernel offset's columns (rows) lie inside the image, as without padding,
    # the range (the test) is known here and not written.
    offs = [kj * dw - pl for kj in range(kw)]
    cols_inside = all(max(0, (sw - 1 - b) // sw) == 0 and (w - 1 - b) // sw + 1 >= ow
                      for b in offs)
    rows_inside = pt <= 0 and (oh - 1) * sh + (kh - 1) * dh - pt <= h - 1
    inner = kir.Loop(v["ox"], ow if cols_inside else v["hi"], (
        kir.Let(v["w"], v["ox"] * sw + v["b"]),
        kir.Let(v["l"], v["oy"] * ow + v["ox"]),
        body((at, v["c"], v["h"], v["w"]), (at, v["r"], v["l"])),
    ), start=0 if cols_inside else v["lo"])
    rows = kir.Loop(v["oy"], oh, (
        kir.Let(v["h"], v["oy"] * sh + v["ki"] * dh - pt),
        *(() if rows_inside else (kir.If(kir.Bin("or", kir.Bin("<", v["h"], kir.const(0)),
                                                 kir.Bin(">=", v["h"], kir.const(h))),
                                         (kir.Jump("continue"),)),)),
        inner,
    ))
    bounds = () if cols_inside else (
        kir.Let(v["lo"], kir.Call("max", (kir.const(0), (kir.const(sw - 1) - v["b"]) // sw),
                                  kir.INDEX)),
        kir.Let(v["hi"], kir.Call("min", (kir.const(ow), (kir.const(w - 1) - v["b"]) // sw
                                          + 1), kir.INDEX)))
    offsets = kir.Loop(v["kj"], kw, (
        kir.Let(v["r"], (v["c"] * kh + v["ki"]) * kw + v["kj"]),
        kir.Let(v["b"], v["kj"] * dw - pl),
        *bounds,
        rows,
    ))
    channels = kir.Loop(v["c"], c, (kir.Loop(v["ki"], kh, (offsets,)),))
    return channels if sample is not None else kir.Loop(v["n"], n, (channels,))


def _zeros(block: kir.Block, buf: kir.Buffer, prefix: str) -> kir.Loop:
    """A loop storing zeros over all of ``buf`` through its flat view ``<prefix>f`` (added
    to ``block``)."""
    flat = _reshaped(block, buf, (buf.size,), f"{prefix}f")
    z = kir.Var(f"{prefix}z")
    return kir.Loop(z, buf.size, (kir.Store(flat, (z,), kir.const(0, buf.dtype)),))


def _padded(attrs: dict) -> bool:
    return any(p for pair in attrs["padding"] for p in pair)


def _im2col_into(block: kir.Block, x_node: Node, x: kir.Buffer, attrs: dict,
                 cols: kir.Buffer) -> None:
    """Fill ``cols`` (n, c*kh*kw, oh*ow) with the sliding windows of image ``x``: zeros
    first where there is padding, as window elements in the padding are never written."""
    from ....ops.conv import out_size

    n, _, h, w = x_node.shape
    oh, ow = out_size((h, w), attrs["kernel_size"], attrs["dilation"], attrs["padding"],
                      attrs["stride"])
    if _padded(attrs):
        # Without padding every window element lies inside the image and is written.
        block.add(_zeros(block, cols, f"{cols.name}_"))
    block.add(_window_loops(tuple(x_node.shape), attrs, (n, oh, ow), cols.name,
                            lambda img, col: kir.Store(cols, col, x[img])))


def _table(block: kir.Block, out: str, attrs: dict, out_hw: tuple, mode: int = 0,
           bias: bool = False) -> kir.Buffer:
    from ..blas import conv_table

    stmt, geo = kir.table(f"{out}_geo", conv_table(attrs, out_hw, mode, bias))
    block.add(stmt)
    return geo


@lowers("im2col")
def _im2col(node: Node, args: list, out: str) -> kir.Block:
    """The columns (N, K, L) stored kernel-offset major, as a (K, N, L) array seen through
    a transposed view: the weight gradient reads them as (K, N*L), one GEMM over the
    whole batch, and that reshape is then free (stored sample-major it is a copy of the
    whole buffer). Filled by the library's compiled routine (`blas.conv_im2col`), or by
    loops in a kernel spreading its items."""
    from ....ops.conv import out_size

    n, k, length = ishape(node)
    store = kir.Buffer(f"{out}_t", (k, n, length), node.dtype)
    res = kir.Buffer(out, (n, k, length), node.dtype, kir.VIEW, layout="A")
    block = kir.Block([kir.Alloc(store)], res)
    x = node.inputs[0]
    if n * k * length:
        hw = out_size(tuple(x.shape[2:]), node.attrs["kernel_size"], node.attrs["dilation"],
                      node.attrs["padding"], node.attrs["stride"])
        geo = _table(block, out, node.attrs, hw, mode=1)
        block.add(kir.LibCall("conv_im2col", (args[0].buf, geo), (store,)))
    block.add(kir.View(res, store, "transpose", (1, 0, 2)))
    return block


@lowers("col2im")
def _col2im(node: Node, args: list, out: str) -> kir.Block:
    """Zeros, then every column element added where its window reads it: the library's
    compiled routine (`blas.conv_col2im`), or loops in a kernel spreading its items."""
    from ....ops.conv import out_size

    a = node.attrs
    n, c, h, w = node.shape
    hw = out_size((h, w), a["kernel_size"], a["dilation"], a["padding"], a["stride"])
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    if not res.size:
        return block
    if not math.prod(node.inputs[0].shape):
        block.add(_zeros(block, res, f"{out}_"))
        if not math.prod(node.inputs[0].shape):
            return block
        cols = args[0].buf
        return block.add(_window_loops(tuple(node.shape), a, (n, *hw), out,
                                       lambda img, col: kir.Store(res, img, cols[col], "+")))
    geo = _table(block, out, a, hw)
    return block.add(kir.LibCall("conv_col2im", (args[0].buf, geo), (res,)))


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
    attrs = dict(node.attrs, kernel_size=(kh, kw))
    library = HAVE_CBLAS
    if g == 1 and library:
        if n * o * length:
            geo = _table(block, out, attrs, (oh, ow), bias=bias is not None)
            # Without a bias the weight stands in for the pointer (it is not read).
            block.add(kir.LibCall("conv_conv2d", (args[0].buf, wc, bias if bias is not None
                                                  else wc, geo), (res,)))
        return block
    r3 = _reshaped(block, res, (n, o, length), f"{out}_r")
    i, c, p = kir.Var(f"{out}_n"), kir.Var(f"{out}_o"), kir.Var(f"{out}_l")
    init = bias[(c,)] if bias is not None else kir.const(0, dtype)
    start = kir.Loop(c, o, (kir.Loop(p, length, (kir.Store(r3, (i, c, p), init),)),))
    if g == 1:
        cols = kir.Buffer(f"{out}_c", (k, length), dtype)
        block.add(kir.Alloc(cols))
        if not (n * o * length):
            return block
        body: list = []
        if _padded(attrs):
            # Window elements in the padding are never written: zeros first.
            body.append(_zeros(block, cols, f"{cols.name}_"))
        body.append(_window_loops(tuple(x.shape), attrs, (n, oh, ow), cols.name,
                                  lambda img, col: kir.Store(cols, col[1:], args[0].buf[img]),
                                  sample=i))
        body.append(start)
        if k:
            body.append(kir.Gemm(o, length, k, kir.Operand(wc, k), kir.Operand(cols, length),
                                 kir.Operand(res, length, offset=i * (o * length)),
                                 beta=1.0))
        return block.add(kir.Loop(i, n, tuple(body)))
    cols = kir.Buffer(f"{out}_c", (n, g * k, length), dtype)
    block.add(kir.Alloc(cols))
    if not library:
        _im2col_into(block, x, args[0].buf, attrs, cols)
    elif n * k * length:
        geo = _table(block, out, attrs, (oh, ow))
        block.add(kir.LibCall("conv_im2col", (args[0].buf, geo), (cols,)))
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


class _Gradient:
    """What both convolution gradients' lowerings start from: the geometry of the weight
    (O, C/groups, kH, kW) whose windows gave the output gradient ``g`` (N, O, oH, oW),
    the result allocated in ``block``, and ``g`` seen C-ordered as (N, O, oH*oW)."""

    def __init__(self, node: Node, out: str, what: str, weight: tuple, g_at: int,
                 args: list) -> None:
        o, cg, kh, kw = weight
        self.n, _, oh, ow = node.inputs[g_at].shape
        self.groups = node.attrs["groups"]
        self.attrs = dict(node.attrs, kernel_size=(kh, kw))
        self.hw = (oh, ow)
        self.og, self.k, self.length = o // self.groups, cg * kh * kw, oh * ow
        self.res = kir.Buffer(out, ishape(node), np.dtype(node.dtype))
        # Ungrouped, the library's routine runs sample by sample, the sample's columns in
        # a (K, L) buffer that stays in cache.
        self.per_sample = self.groups == 1 and HAVE_CBLAS
        self.block = kir.Block([kir.Comment(
            f"{node.op} as {what} (a window of {self.k} elements"
            f"{', per sample' if self.per_sample else ''})"), kir.Alloc(self.res)], self.res)
        self.gc = (_reshaped(self.block, args[g_at].buf, (self.n, o, self.length),
                             f"{out}_g") if self.res.size else None)  # C-ordered

    def table(self, out: str) -> kir.Buffer:
        return _table(self.block, out, self.attrs, self.hw)

    def items(self, out: str, gemm: Callable[[kir.Expr, kir.Expr], kir.Stmt]) -> kir.Loop:
        """One product per (sample, group) pair, in order: item = sample * groups + group;
        ``gemm(item, group)``."""
        item = kir.Var(f"{out}_i")
        return kir.Loop(item, self.n * self.groups,
                        (gemm(item, kir.Bin("%", item, kir.const(self.groups))),))


@lowers("conv2d_weight")
def _conv2d_weight(node: Node, args: list, out: str) -> kir.Block:
    """Ungrouped, with the library: sample by sample, the sample's columns gathered into a
    (K, L) buffer that stays in cache and one BLAS product adding them times the sample's
    gradient into the sum (`blas.conv_wgrad`). Otherwise: im2col of the whole batch, then
    one product per (sample, group) adding into the zeroed result."""
    x = node.inputs[0]
    h = _Gradient(node, out, "im2col + GEMM", tuple(node.shape), 1, args)
    block, res = h.block, h.res
    if not res.size:
        return block
    if h.per_sample:
        return block.add(kir.LibCall("conv_wgrad", (args[0].buf, h.gc, h.table(out)), (res,)))
    block.add(_zeros(block, res, f"{out}_"))
    if not (h.n * h.length):
        return block
    og, k, length = h.og, h.k, h.length
    cols = kir.Buffer(f"{out}_c", (h.n, h.groups * k, length), res.dtype)
    block.add(kir.Alloc(cols))
    if not HAVE_CBLAS:
        _im2col_into(block, x, args[0].buf, h.attrs, cols)
    else:
        block.add(kir.LibCall("conv_im2col", (args[0].buf, h.table(out)), (cols,)))
    return block.add(h.items(out, lambda item, group: kir.Gemm(
        og, k, length, kir.Operand(h.gc, length, offset=item * (og * length)),
        kir.Operand(cols, length, offset=item * (k * length)),
        kir.Operand(res, k, offset=group * (og * k)), tb=True, beta=1.0)))


@lowers("conv2d_input")
def _conv2d_input(node: Node, args: list, out: str) -> kir.Block:
    """Ungrouped, with the library: sample by sample, the columns' gradient ``w^T @ g``
    into a (K, L) buffer that stays in cache, then added into the sample's image where its
    windows read it (`blas.conv_dgrad`). Otherwise: the columns' gradient of the whole
    batch by one product per (sample, group), then col2im."""
    w = node.inputs[1]
    h = _Gradient(node, out, "GEMM + col2im", tuple(w.shape), 0, args)
    block, res = h.block, h.res
    if not res.size:
        return block
    wc = _reshaped(block, args[1].buf, (math.prod(w.shape),), f"{out}_w")
    if h.per_sample:
        return block.add(kir.LibCall("conv_dgrad", (h.gc, wc, h.table(out)), (res,)))
    og, k, length = h.og, h.k, h.length
    # Not ``<out>_c``: the window loops below name their channel variable so.
    cols = kir.Buffer(f"{out}_cols", (h.n, h.groups * k, length), res.dtype)
    block.add(kir.Alloc(cols))
    if og and length:
        block.add(h.items(out, lambda item, group: kir.Gemm(
            k, length, og, kir.Operand(wc, k, offset=group * (og * k)),
            kir.Operand(h.gc, length, offset=item * (og * length)),
            kir.Operand(cols, length, offset=item * (k * length)), ta=True)))
    else:
        block.add(_zeros(block, cols, f"{out}_cols_"))
    if HAVE_CBLAS:
        return block.add(kir.LibCall("conv_col2im", (cols, h.table(out)), (res,)))
    block.add(_zeros(block, res, f"{out}_"))
    return block.add(_window_loops(tuple(node.shape), h.attrs, (h.n, *h.hw), out,
                                   lambda img, col: kir.Store(res, img, cols[col], "+")))
