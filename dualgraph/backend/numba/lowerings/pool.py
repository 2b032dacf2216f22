"""Pooling, padding and unfold: window tables, max-pool indices, average pools and their
backward ops, pad, unfold (the gathers and scatters of pooling and padding are in
`index`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import _reshaped, ishape, lowers
from .shape import as_dtype, nest

# ---- pooling and padding
# Plain loops over the operand viewed as (batch, H, W) (or (batch, ...) for padding and
# unfold). The windows come from `pool_windows`, the same description the NumPy kernels
# read: where they are regular, a window's start is affine in the output position and its
# length a constant; otherwise they are read from small `kir.Table`s (kernel constants).
# Every variable carries the output's name as a prefix, so two lowerings in one function
# never share a name.


def batch_size(shape: tuple, trailing: int) -> int:
    return math.prod(shape[:len(shape) - trailing])


@dataclass(frozen=True)
class _Dim:
    """The windows of one pooled dimension at output position ``o`` as expressions: the
    first position read, the number read, and the divisor factor (average pools)."""

    start: kir.Expr
    count: kir.Expr
    div: kir.Expr


def _dim(block: kir.Block, win: Any, o: kir.Var, name: str, divisor: bool = False) -> _Dim:
    """``win``'s windows at ``o``: affine where they are regular, else table lookups
    (``divisor``: the divisor factor too, else a constant 1)."""
    def values(vals: tuple, suffix: str) -> kir.Expr:
        if len(set(vals)) <= 1:
            return kir.const(int(vals[0]) if vals else 0)
        stmt, buf = kir.table(f"{name}{suffix}", vals)
        block.add(stmt)
        return buf[o]

    div = values(win.div, "d") if divisor else kir.const(1)
    reg = _regular(win)
    if reg is None:
        return _Dim(values(win.start, "s"), values(win.count, "c"), div)
    first, stride = reg
    start = o if stride == 1 else o * stride
    return _Dim(start + first if first else start, kir.const(int(win.count[0])), div)


def _regular(win) -> tuple[int, int] | None:
    """(first start, stride) when every window has the same count and the starts step
    evenly (any pool without padding or ceil_mode cropping a window), else None."""
    if not len(win) or len(set(win.count)) != 1:
        return None
    stride = win.start[1] - win.start[0] if len(win) > 1 else 1
    if any(b - a != stride for a, b in zip(win.start, win.start[1:])):
        return None
    return win.start[0], stride


@lowers("max_pool2d_indices", "adaptive_max_pool2d_indices")
def _max_pool_indices(node: Node, args: list, out: str) -> kir.Block:
    """Each window's first largest value's flat position in its plane. Regular windows
    (constant extents, starts affine in the output position: every pool without padding
    or a cropped last window) are one call of the compiled routine
    `blas.max_pool_indices` (2x2 windows without dilation: `blas.max_pool_indices_2x2`);
    others read their windows from tables in loops of their own."""
    from ....ops.pool import pool_windows

    shape = tuple(node.inputs[0].shape)
    (hh, ww), b = shape[-2:], batch_size(shape, 2)
    h, w = pool_windows(node.attrs, (hh, ww))
    res = kir.Buffer(out, ishape(node), np.int64)
    block = kir.Block([kir.Alloc(res)], res)
    if not (b and len(h) and len(w)):
        return block
    x = _reshaped(block, args[0].buf, (b, hh, ww), f"{out}_x")
    r3 = _reshaped(block, res, (b, len(h), len(w)), f"{out}_r")
    rh, rw = _regular(h), _regular(w)
    if rh is not None and rw is not None:
        stmt, geo = kir.table(f"{out}_g", (rh[0], rh[1], h.count[0], h.step,
                                            rw[0], rw[1], w.count[0], w.step))
        pairs = h.count[0] == w.count[0] == 2 and h.step == w.step == 1
        call = "max_pool_indices_2x2" if pairs else "max_pool_indices"
        return block.add(stmt, kir.LibCall(call, (x, geo), (r3,)))
    n, i, j, a, c = (kir.Var(f"{out}_{v}") for v in ("b", "i", "j", "a", "c"))
    p0, q0, p, q, k = (kir.Var(f"{out}_{v}") for v in ("p0", "q0", "p", "q", "k"))
    hd, wd = _dim(block, h, i, f"{out}_h"), _dim(block, w, j, f"{out}_w")
    v, e = kir.Var(f"{out}_v", x.dtype), kir.Var(f"{out}_e", x.dtype)
    # The first position of the window starts; a larger value or any nan takes over
    # (PyTorch's rule: ties keep the first max, the last nan wins).
    take = kir.Bin("or", kir.Bin(">", e, v), kir.Bin("!=", e, e))
    block.add(kir.Loop(n, b, (kir.Loop(i, len(h), (kir.Loop(j, len(w), (
        kir.Let(p0, hd.start), kir.Let(q0, wd.start),
        kir.Let(v, x[n, p0, q0]), kir.Let(k, p0 * ww + q0),
        kir.Loop(a, hd.count, (
            kir.Let(p, p0 + a * h.step if h.step != 1 else p0 + a),
            kir.Loop(c, wd.count, (
                kir.Let(q, q0 + c * w.step if w.step != 1 else q0 + c),
                kir.Let(e, x[n, p, q]),
                kir.If(take, (kir.Let(v, e), kir.Let(k, p * ww + q))),
            )),
        )),
        kir.Store(r3, (n, i, j), k),
    )),)),)))
    return block


def zero_loops(buf: kir.Buffer, prefix: str) -> list:
    """Loops writing zeros into ``buf`` (an allocation the caller may pass, where a
    zero-filled one would be a new array per call)."""
    return nest(buf.shape, prefix, lambda at: [kir.Store(buf, at, kir.Const(0, buf.dtype))])


def _divisor(hd: _Dim, wd: _Dim, dtype: np.dtype) -> kir.Expr:
    """The averaging divisor in ``dtype``, as the NumPy kernel forms it."""
    return kir.Cast(hd.div * wd.div, dtype)


@lowers("avg_pool2d", "adaptive_avg_pool2d")
def _avg_pool(node: Node, args: list, out: str) -> kir.Block:
    """Each window's sum, row by row (the NumPy kernel's order), over its divisor."""
    from ....ops.pool import pool_windows

    shape = tuple(node.inputs[0].shape)
    (hh, ww), b = shape[-2:], batch_size(shape, 2)
    h, w = pool_windows(node.attrs, (hh, ww))
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    block = kir.Block([kir.Alloc(res)], res)
    if not (b and len(h) and len(w)):
        return block
    n, i, j, p, q = (kir.Var(f"{out}_{v}") for v in ("b", "i", "j", "p", "q"))
    hd, wd = _dim(block, h, i, f"{out}_h", True), _dim(block, w, j, f"{out}_w", True)
    x = _reshaped(block, args[0].buf, (b, hh, ww), f"{out}_x")
    r3 = _reshaped(block, res, (b, len(h), len(w)), f"{out}_r")
    total, row = kir.Var(f"{out}_s", dt), kir.Var(f"{out}_t", dt)
    zero = kir.Const(0.0, dt)
    return block.add(kir.Loop(n, b, (kir.Loop(i, len(h), (kir.Loop(j, len(w), (
        kir.Let(total, zero),
        kir.Loop(p, hd.start + hd.count, (
            kir.Let(row, zero),
            kir.Loop(q, wd.start + wd.count, (kir.Accum(row, "add", x[n, p, q]),),
                     start=wd.start),
            kir.Accum(total, "add", row),
        ), start=hd.start),
        kir.Store(r3, (n, i, j), total / _divisor(hd, wd, dt)),
    )),)),)))


@lowers("avg_pool2d_backward", "adaptive_avg_pool2d_backward")
def _avg_pool_backward(node: Node, args: list, out: str) -> kir.Block:
    """Each gradient over its window's divisor, added over the window."""
    from ....ops.pool import pool_windows

    gshape = tuple(node.inputs[0].shape)
    (oh, ow), b = gshape[-2:], batch_size(gshape, 2)
    hh, ww = node.attrs["size"]
    h, w = pool_windows(node.attrs, (hh, ww))
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    block = kir.Block([kir.Alloc(res)], res)
    r3 = _reshaped(block, res, (b, hh, ww), f"{out}_r")
    block.add(*zero_loops(r3, f"{out}_z"))
    if not (b and oh and ow):
        return block
    n, i, j, p, q = (kir.Var(f"{out}_{v}") for v in ("b", "i", "j", "p", "q"))
    hd, wd = _dim(block, h, i, f"{out}_h", True), _dim(block, w, j, f"{out}_w", True)
    g = _reshaped(block, args[0].buf, (b, oh, ow), f"{out}_g")
    v = kir.Var(f"{out}_v", dt)
    return block.add(kir.Loop(n, b, (kir.Loop(i, oh, (kir.Loop(j, ow, (
        kir.Let(v, g[n, i, j] / _divisor(hd, wd, dt)),
        kir.Loop(p, hd.start + hd.count, (
            kir.Loop(q, wd.start + wd.count, (kir.Store(r3, (n, p, q), v, "+"),),
                     start=wd.start),
        ), start=hd.start),
    )),)),)))


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


def _unfold_dims(shape: tuple, dim: int) -> tuple:
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


@lowers("unfold")
def _unfold(node: Node, args: list, out: str) -> kir.Block:
    """``out[a, l, c, k] = x[a, l * step + k, c]``: the windows along one dim."""
    d, size, step = node.attrs["dimension"], node.attrs["size"], node.attrs["step"]
    a, n, c = _unfold_dims(tuple(node.inputs[0].shape), d)
    windows = node.shape[d]
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    x = _reshaped(block, args[0].buf, (a, n, c), f"{out}_x")
    r = _reshaped(block, res, (a, windows, c, size), f"{out}_r")
    return block.add(*nest((a, windows, c, size), f"{out}_i", lambda at: [kir.Store(
        r, at, as_dtype(x[at[0], at[1] * step + at[3], at[2]], res.dtype))]))


@lowers("unfold_backward")
def _unfold_backward(node: Node, args: list, out: str) -> kir.Block:
    """Each window element's gradient added at the position it was read from."""
    d, size, step = node.attrs["dimension"], node.attrs["size"], node.attrs["step"]
    a, n, c = _unfold_dims(tuple(node.shape), d)
    windows = node.inputs[0].shape[d]
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    r = _reshaped(block, res, (a, n, c), f"{out}_r")
    block.add(*zero_loops(r, f"{out}_z"))
    g = _reshaped(block, args[0].buf, (a, windows, c, size), f"{out}_g")
    return block.add(*nest((a, windows, c, size), f"{out}_i", lambda at: [kir.Store(
        r, (at[0], at[1] * step + at[3], at[2]), as_dtype(g[at], res.dtype), "+")]))
