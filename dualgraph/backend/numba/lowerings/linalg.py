"""Contractions: matmul and addmm as GEMM calls (or small loops) in the kernel IR."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....ir.graph import Node
from ... import kir
from ..blas import HAVE_CBLAS
from . import _reshaped, ishape, lowers

# --------------------------------------------------------------------- contractions

# Below this many multiply-adds a plain loop beats a BLAS call (whose fixed cost is ~1 us).
SMALL_MATMUL = 4096




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
    xv = kir.Var(f"{res.name}_xv", res.dtype)
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




def matmul_block(node: Node, args: list, out: str) -> kir.Block:
    """``x @ y`` as kernel IR: one BLAS product where the batch folds into the rows (a
    batched ``x`` against a matrix ``y``: PyTorch's linear layer on 3-D input), else one
    ``gemm_batched`` library call over the batch (never a copy BLAS does not need)."""
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
    if len(y.shape) > 2 and HAVE_CBLAS and k and rows and n:
        # One library call for the whole batch: each operand's layout (row-major, or a
        # transposed view read with the transpose flag) decided once when the kernel
        # runs, then one BLAS call per item at its offset in the operand's memory. The
        # result is written where it stands (it may be a strided view: `plan_joins`).
        c3 = res if len(res.shape) == len(batch) + 2 else _reshaped(
            block, res, batch + (m, n), f"{out}_c")
        block.add(kir.LibCall("gemm_batched", (x, y), (c3,)))
        return block
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
