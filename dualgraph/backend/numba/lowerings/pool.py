"""Pooling, padding and unfold: window tables, max-pool indices, average pools and their
backward ops, pad, unfold."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import _reshaped, ishape, lowers, np_dtype

# ---- pooling and padding
# Plain loops over the operand viewed as (batch, H, W) (or (batch, ...) for padding and
# unfold). Window tables come from `pool_windows`, the same description the NumPy kernels
# read, written into the source as small int64 arrays; every variable carries the output's
# name as a prefix, so two lowerings in one function never share a name.


def _table(values: tuple, dtype: str = "np.int64") -> str:
    if not values:
        return f"np.zeros(0, {dtype})"
    return f"np.array({tuple(values)!r}, {dtype})"


def _batch(shape: tuple, trailing: int) -> int:
    return math.prod(shape[:len(shape) - trailing])


def _window_tables(out: str, node: Node, hw: tuple, divisors: bool = False) -> tuple:
    from ....ops.pool import pool_windows

    h, w = pool_windows(node.attrs, hw)
    lines = [f"{out}_hs = {_table(h.start)}", f"{out}_hc = {_table(h.count)}",
             f"{out}_ws = {_table(w.start)}", f"{out}_wc = {_table(w.count)}"]
    if divisors:
        lines += [f"{out}_hd = {_table(tuple(float(d) for d in h.div), 'np.float64')}",
                  f"{out}_wd = {_table(tuple(float(d) for d in w.div), 'np.float64')}"]
    return lines, h, w


def _regular(win) -> tuple[int, int] | None:
    """(first start, stride) when every window has the same count and the starts step
    evenly (any pool without padding or ceil_mode cropping a window), else None."""
    if not len(win) or len(set(win.count)) != 1:
        return None
    stride = win.start[1] - win.start[0] if len(win) > 1 else 1
    if any(b - a != stride for a, b in zip(win.start, win.start[1:])):
        return None
    return win.start[0], stride


def _max_pool_indices_block(node: Node, args: list, out: str, h, w) -> kir.Block:
    """Regular windows: every window offset is affine in the output position, so the
    loops have constant extents and no table is read."""
    shape = tuple(node.inputs[0].shape)
    (hh, ww), b = shape[-2:], _batch(shape, 2)
    (h0, sh), (w0, sw) = _regular(h), _regular(w)
    res = kir.Buffer(out, ishape(node), np.int64)
    block = kir.Block([kir.Alloc(res)], res)
    if not (b and len(h) and len(w)):
        return block
    x = _reshaped(block, args[0].buf, (b, hh, ww), f"{out}_x")
    r3 = _reshaped(block, res, (b, len(h), len(w)), f"{out}_r")
    n, i, j, a, c = (kir.Var(f"{out}_{v}") for v in ("b", "i", "j", "a", "c"))
    p0, q0, p, q, k = (kir.Var(f"{out}_{v}") for v in ("p0", "q0", "p", "q", "k"))
    v, e = kir.Var(f"{out}_v", x.dtype), kir.Var(f"{out}_e", x.dtype)
    # The first position of the window starts; a larger value or any nan takes over
    # (PyTorch's rule: ties keep the first max, the last nan wins).
    take = kir.Bin("or", kir.Bin(">", e, v), kir.Bin("!=", e, e))
    block.add(kir.Loop(n, b, (kir.Loop(i, len(h), (kir.Loop(j, len(w), (
        kir.Let(p0, i * sh + h0), kir.Let(q0, j * sw + w0),
        kir.Let(v, x[n, p0, q0]), kir.Let(k, p0 * ww + q0),
        kir.Loop(a, h.count[0], (
            kir.Let(p, p0 + a * h.step),
            kir.Loop(c, w.count[0], (
                kir.Let(q, q0 + c * w.step), kir.Let(e, x[n, p, q]),
                kir.If(take, (kir.Let(v, e), kir.Let(k, p * ww + q))),
            )),
        )),
        kir.Store(r3, (n, i, j), k),
    )),)),)))
    return block


@lowers("max_pool2d_indices", "adaptive_max_pool2d_indices")
def _max_pool_indices(node: Node, args: list, out: str) -> kir.Block | list:
    from ....ops.pool import pool_windows

    shape = tuple(node.inputs[0].shape)
    h, w = pool_windows(node.attrs, shape[-2:])
    if _regular(h) and _regular(w):
        return _max_pool_indices_block(node, args, out, h, w)
    (hh, ww), b = shape[-2:], _batch(shape, 2)
    tables, h, w = _window_tables(out, node, (hh, ww))
    o = out
    return tables + [
        f"{o}_x = np.ascontiguousarray({args[0]}).reshape(({b}, {hh}, {ww}))",
        f"{o} = np.empty(({b}, {len(h)}, {len(w)}), np.int64)",
        f"for {o}_b in range({b}):",
        f"    for {o}_i in range({len(h)}):",
        f"        for {o}_j in range({len(w)}):",
        f"            {o}_p0 = {o}_hs[{o}_i]",
        f"            {o}_q0 = {o}_ws[{o}_j]",
        f"            {o}_v = {o}_x[{o}_b, {o}_p0, {o}_q0]",
        f"            {o}_k = {o}_p0 * {ww} + {o}_q0",
        f"            for {o}_a in range({o}_hc[{o}_i]):",
        f"                {o}_p = {o}_p0 + {o}_a * {h.step}",
        f"                for {o}_c in range({o}_wc[{o}_j]):",
        f"                    {o}_q = {o}_q0 + {o}_c * {w.step}",
        f"                    {o}_e = {o}_x[{o}_b, {o}_p, {o}_q]",
        f"                    if {o}_e > {o}_v or {o}_e != {o}_e:",
        f"                        {o}_v = {o}_e",
        f"                        {o}_k = {o}_p * {ww} + {o}_q",
        f"            {o}[{o}_b, {o}_i, {o}_j] = {o}_k",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


def _gather_views(block: kir.Block, src: Node, idx: Node, args: list, out: str) -> tuple:
    """The plane operand as (batch, plane) and the indices as (batch or 1, m) views; the
    batch, the indices' row index function and m."""
    shape = tuple(src.shape)
    b = _batch(shape, 2)
    m = math.prod(idx.shape[-2:])
    rows = b if len(idx.shape) > 2 else 1
    x = _reshaped(block, args[0].buf, (b, math.prod(shape[-2:])), f"{out}_x")
    k = _reshaped(block, args[1].buf, (rows, m), f"{out}_k")
    return x, k, b, m, (lambda n: n if rows > 1 else kir.const(0))


@lowers("pool_gather")
def _pool_gather(node: Node, args: list, out: str) -> kir.Block:
    """``out[b, m] = x[b, idx[b, m]]``: the values at the saved argmax positions."""
    x_node, idx = node.inputs
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    x, k, b, m, row = _gather_views(block, x_node, idx, args, out)
    if not (b and m):
        return block
    r2 = _reshaped(block, res, (b, m), f"{out}_r")
    n, j = kir.Var(f"{out}_b"), kir.Var(f"{out}_m")
    load = x[n, k[row(n), j]]
    value = load if x.dtype == res.dtype else kir.Cast(load, res.dtype)
    return block.add(kir.Loop(n, b, (kir.Loop(j, m, (kir.Store(r2, (n, j), value),)),)))


@lowers("pool_scatter")
def _pool_scatter(node: Node, args: list, out: str) -> kir.Block:
    """The gradient of `pool_gather`: each value added at its saved argmax position, no
    dense mask (zeros, then one scatter-add per output element)."""
    g, idx = node.inputs
    plane = math.prod(node.attrs["size"])
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res, fill=0)], res)
    gv, k, b, m, row = _gather_views(block, g, idx, args, out)
    if not (b and m and plane):
        return block
    r2 = _reshaped(block, res, (b, plane), f"{out}_r")
    n, j = kir.Var(f"{out}_b"), kir.Var(f"{out}_m")
    load = gv[n, j]
    value = load if gv.dtype == res.dtype else kir.Cast(load, res.dtype)
    return block.add(kir.Loop(n, b, (kir.Loop(j, m, (
        kir.Store(r2, (n, k[row(n), j]), value, "+"),)),)))


@lowers("avg_pool2d", "adaptive_avg_pool2d")
def _avg_pool(node: Node, args: list, out: str) -> list:
    shape = tuple(node.inputs[0].shape)
    (hh, ww), b = shape[-2:], _batch(shape, 2)
    tables, h, w = _window_tables(out, node, (hh, ww), divisors=True)
    dt, o = np_dtype(node.dtype), out
    return tables + [
        f"{o}_x = np.ascontiguousarray({args[0]}).reshape(({b}, {hh}, {ww}))",
        f"{o} = np.empty(({b}, {len(h)}, {len(w)}), {dt})",
        f"for {o}_b in range({b}):",
        f"    for {o}_i in range({len(h)}):",
        f"        for {o}_j in range({len(w)}):",
        f"            {o}_s = {dt}(0)",
        f"            for {o}_p in range({o}_hs[{o}_i], {o}_hs[{o}_i] + {o}_hc[{o}_i]):",
        f"                for {o}_q in range({o}_ws[{o}_j], {o}_ws[{o}_j] + {o}_wc[{o}_j]):",
        f"                    {o}_s += {o}_x[{o}_b, {o}_p, {o}_q]",
        f"            {o}[{o}_b, {o}_i, {o}_j] = {o}_s / {dt}({o}_hd[{o}_i] * {o}_wd[{o}_j])",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


@lowers("avg_pool2d_backward", "adaptive_avg_pool2d_backward")
def _avg_pool_backward(node: Node, args: list, out: str) -> list:
    gshape = tuple(node.inputs[0].shape)
    (oh, ow), b = gshape[-2:], _batch(gshape, 2)
    hh, ww = node.attrs["size"]
    tables, h, w = _window_tables(out, node, (hh, ww), divisors=True)
    dt, o = np_dtype(node.dtype), out
    return tables + [
        f"{o}_g = np.ascontiguousarray({args[0]}).reshape(({b}, {oh}, {ow}))",
        f"{o} = np.zeros(({b}, {hh}, {ww}), {dt})",
        f"for {o}_b in range({b}):",
        f"    for {o}_i in range({oh}):",
        f"        for {o}_j in range({ow}):",
        f"            {o}_v = {o}_g[{o}_b, {o}_i, {o}_j] / {dt}({o}_hd[{o}_i] * {o}_wd[{o}_j])",
        f"            for {o}_p in range({o}_hs[{o}_i], {o}_hs[{o}_i] + {o}_hc[{o}_i]):",
        f"                for {o}_q in range({o}_ws[{o}_j], {o}_ws[{o}_j] + {o}_wc[{o}_j]):",
        f"                    {o}[{o}_b, {o}_p, {o}_q] += {o}_v",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


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


def _pad_loops(out: str, outer: tuple, stmt: str) -> list:
    """Loops over ``outer`` (the batch, then the padded output dims) running ``stmt``, with
    ``{out}_a`` and ``{out}_i{d}`` the loop variables."""
    lines = [f"for {out}_a in range({outer[0]}):"]
    for d, n in enumerate(outer[1:]):
        lines.append("    " * (d + 1) + f"for {out}_i{d} in range({n}):")
    lines.append("    " * len(outer) + stmt)
    return lines


@lowers("pad_index", "pad_index_backward")
def _pad_index(node: Node, args: list, out: str) -> list:
    from ....ops.pool import pad_map

    pad, mode = node.attrs["pad"], node.attrs["mode"]
    k = len(pad)
    backward = "size" in node.attrs
    small = tuple(node.attrs["size"]) if backward else tuple(node.inputs[0].shape[-k:])
    big = tuple(s + b + a for s, (b, a) in zip(small, pad))
    lead = _batch(tuple(node.shape), k)
    dt, o = np_dtype(node.dtype), out
    lines = [f"{o}_m{d} = {_table(tuple(int(v) for v in pad_map(small[d], b, a, mode)))}"
             for d, (b, a) in enumerate(pad)]
    at_big = ", ".join([f"{o}_a"] + [f"{o}_i{d}" for d in range(k)])
    at_small = ", ".join([f"{o}_a"] + [f"{o}_m{d}[{o}_i{d}]" for d in range(k)])
    src = f"{o}_x"
    lines.append(f"{src} = np.ascontiguousarray({args[0]}).reshape("
                 f"{(lead,) + (big if backward else small)})")
    if backward:  # every output element of the pad adds into the input element it copied
        lines.append(f"{o} = np.zeros({(lead,) + small}, {dt})")
        lines += _pad_loops(o, (lead,) + big, f"{o}[{at_small}] += {src}[{at_big}]")
    else:
        lines.append(f"{o} = np.empty({(lead,) + big}, {dt})")
        lines += _pad_loops(o, (lead,) + big, f"{o}[{at_big}] = {src}[{at_small}]")
    return lines + [f"{o} = {o}.reshape({ishape(node)})"]


def _unfold_dims(shape: tuple, dim: int) -> tuple:
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


@lowers("unfold")
def _unfold(node: Node, args: list, out: str) -> list:
    d, size, step = node.attrs["dimension"], node.attrs["size"], node.attrs["step"]
    a, n, c = _unfold_dims(tuple(node.inputs[0].shape), d)
    windows = node.shape[d]
    o = out
    return [
        f"{o}_x = np.ascontiguousarray({args[0]}).reshape(({a}, {n}, {c}))",
        f"{o} = np.empty(({a}, {windows}, {c}, {size}), {np_dtype(node.dtype)})",
        f"for {o}_a in range({a}):",
        f"    for {o}_l in range({windows}):",
        f"        for {o}_c in range({c}):",
        f"            for {o}_k in range({size}):",
        f"                {o}[{o}_a, {o}_l, {o}_c, {o}_k] = "
        f"{o}_x[{o}_a, {o}_l * {step} + {o}_k, {o}_c]",
        f"{o} = {o}.reshape({ishape(node)})",
    ]


@lowers("unfold_backward")
def _unfold_backward(node: Node, args: list, out: str) -> list:
    d, size, step = node.attrs["dimension"], node.attrs["size"], node.attrs["step"]
    a, n, c = _unfold_dims(tuple(node.shape), d)
    windows = node.inputs[0].shape[d]
    o = out
    return [
        f"{o}_g = np.ascontiguousarray({args[0]}).reshape(({a}, {windows}, {c}, {size}))",
        f"{o} = np.zeros(({a}, {n}, {c}), {np_dtype(node.dtype)})",
        f"for {o}_a in range({a}):",
        f"    for {o}_l in range({windows}):",
        f"        for {o}_c in range({c}):",
        f"            for {o}_k in range({size}):",
        f"                {o}[{o}_a, {o}_l * {step} + {o}_k, {o}_c] += "
        f"{o}_g[{o}_a, {o}_l, {o}_c, {o}_k]",
        f"{o} = {o}.reshape({ishape(node)})",
    ]
