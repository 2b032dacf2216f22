"""Normalisation, softmax and losses: layer_norm, softmax/log_softmax and their backward ops,
nll_loss."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ....ir.graph import Node
from ... import kir
from ..printer import literal
from . import _reshaped, ishape, lowers, np_dtype


# ---- normalisation and modules
@lowers("layer_norm")
def _layer_norm(node: Node, args: list, out: str) -> kir.Block:
    """Rows of ``n`` elements (the normalised dims, flattened), each in three vectorizable
    passes over a row-sized work array: the row copied in and summed for the mean, the
    squared deviations written and summed for the variance (two passes: no cancellation
    when the mean is large against the spread), then the normalised row written in the
    input's dtype, as the NumPy kernel computes it. Sums are float64 (`_row_sum`)."""
    x, weight, bias = node.inputs
    shape = tuple(x.shape)
    n = math.prod(shape[len(shape) - node.attrs["ndim"]:])
    m = math.prod(shape) // n if n else 0
    dtype = np.dtype(node.dtype)
    f8 = np.dtype(np.float64)
    res = kir.Buffer(out, ishape(node), dtype)
    block = kir.Block([kir.Alloc(res)], res)
    if m == 0 or n == 0:
        return block
    row, lanes = _row_work(block, node, n, out)
    xr = _reshaped(block, args[0].buf, (m, n), f"{out}_x")
    rows = _reshaped(block, res, (m, n), f"{out}_r")
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    s, v = kir.Var(f"{out}_s", f8), kir.Var(f"{out}_v", f8)
    mu, r = kir.Var(f"{out}_mu", dtype), kir.Var(f"{out}_rs", dtype)
    count = kir.const(float(n), f8)
    xv = _as(xr[i, j], dtype)
    value = (xv - mu) * r
    if isinstance(weight, Node):
        value = value * _as(_reshaped(block, args[1].buf, (n,), f"{out}_w")[j], dtype)
    if isinstance(bias, Node):
        value = value + _as(_reshaped(block, args[2].buf, (n,), f"{out}_b")[j], dtype)
    d = kir.Var(f"{out}_d", dtype)
    block.add(kir.Loop(i, m, (
        kir.Loop(j, n, (kir.Store(row, (j,), xv),)),
        *_row_sum(row, n, s, lanes, f"{out}_a"),
        kir.Let(mu, kir.Cast(s / count, dtype)),
        kir.Loop(j, n, (kir.Let(d, xv - mu), kir.Store(row, (j,), d * d))),
        *_row_sum(row, n, v, lanes, f"{out}_q"),
        kir.Let(r, kir.Cast(kir.const(1.0, f8) / kir.Call(
            "sqrt", (v / count + kir.const(float(node.attrs["eps"]), f8),), f8), dtype)),
        kir.Loop(j, n, (kir.Store(rows, (i, j), value),)),
    )))
    return block


# ---- losses and attention
# softmax/log_softmax and their backward ops work row by row over their operands' own
# shapes and strides (no reshape or contiguous copy; no loop over a size-1 dim), the
# normalized axis innermost. Each row is a few short passes, each either a vectorizable
# loop (an exp from `MATH` and a store into a row-sized work array) or a sum of that
# work array: float32 rows are summed 16 lanes at a time in float64 (`fold_lanes`), so no
# pass is a serial chain of dependent additions.
# nll_loss indexes its input as (N, C, positions...) (`nnops.nll_layout`'s dims).

_LANES = 16


def _norm_axis(node: Node) -> tuple[tuple, int]:
    shape = tuple(node.shape)
    return (shape, node.attrs["axis"]) if shape else ((1,), 0)


def _rows(shape: tuple, axis: int, out: str, body: list) -> list:
    """``body`` inside loops over every dim of ``shape`` but ``axis`` (a size-1 dim is
    index 0, not a loop)."""
    nest = tuple(body)
    for d in reversed(range(len(shape))):
        if d != axis and shape[d] != 1:
            nest = (kir.Loop(kir.Var(f"{out}_i{d}"), shape[d], nest),)
    return list(nest)


def _at(shape: tuple, axis: int, out: str, j: kir.Expr) -> tuple:
    """The index of element ``j`` of the current row."""
    return tuple(j if d == axis else kir.const(0) if size == 1 else kir.Var(f"{out}_i{d}")
                 for d, size in enumerate(shape))


def _as(e: kir.Expr, dtype: np.dtype) -> kir.Expr:
    return e if e.dtype == dtype else kir.Cast(e, dtype)


def _row_sum(row: kir.Buffer, n: int, acc: kir.Var, lanes: kir.Buffer | None,
             out: str) -> list:
    """``acc`` (float64) = the sum of ``row[:n]``: blocks of 16 float32 values added to
    16 float64 lanes (`fold_lanes`), then the lanes and the remainder; a float64 row is
    added in order."""
    f8 = np.dtype(np.float64)
    j = kir.Var(f"{out}_k")
    stmts: list = [kir.Let(acc, kir.const(0.0, f8))]
    start = 0
    if lanes is not None:
        start = n - n % _LANES
        lane = kir.Var(f"{out}_l")
        stmts += [kir.Loop(lane, _LANES, (kir.Store(lanes, (lane,), kir.const(0.0, f8)),)),
                  kir.LibCall("fold_lanes", (row, start), (lanes,)),
                  kir.Loop(lane, _LANES, (kir.Accum(acc, "add", lanes[lane]),))]
    if start < n:
        stmts.append(kir.Loop(j, n, (kir.Accum(acc, "add", _as(row[j], f8)),), start=start))
    return stmts


def _row_work(block: kir.Block, node: Node, n: int, out: str) -> tuple:
    """The row work array (and the lanes of its sum, for float32 rows of 16 or more)."""
    dtype = np.dtype(node.dtype)
    row = kir.Buffer(f"{out}_e", (max(n, 1),), dtype)
    block.add(kir.Alloc(row))
    lanes = None
    if dtype == np.float32 and n >= _LANES:
        lanes = kir.Buffer(f"{out}_ln", (_LANES,), np.float64)
        block.add(kir.Alloc(lanes))
    return row, lanes


def _row_frame(node: Node, out: str) -> tuple:
    """A row op's result block, its shape and axis, and the row work buffers (`_row_work`);
    the buffers are None when there is no row to write (the block is then complete)."""
    shape, axis = _norm_axis(node)
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    n = shape[axis]
    if n == 0 or math.prod(shape) == 0:
        return block, shape, axis, None, None
    return (block, shape, axis, *_row_work(block, node, n, out))


def _softmax_block(node: Node, args: list, out: str, log: bool) -> kir.Block:
    """Per row: the max (the shift that keeps exp finite), exp of the shifted row into the
    work array, its sum, then the row written. A nan anywhere makes the sum nan, so every
    element of its row is nan, as in the NumPy kernel."""
    block, shape, axis, row, lanes = _row_frame(node, out)
    if row is None:
        return block
    res, n = block.result, shape[axis]
    dtype = np.dtype(node.dtype)
    f8 = np.dtype(np.float64)
    x = args[0].buf
    j = kir.Var(f"{out}_j")
    m, s, t = kir.Var(f"{out}_m", dtype), kir.Var(f"{out}_s", f8), kir.Var(f"{out}_t", dtype)

    def xv(k: kir.Expr) -> kir.Expr:
        return _as(x[_at(shape, axis, out, k)], dtype)

    body = [kir.Let(m, xv(kir.const(0))),
            kir.Loop(j, n, (kir.Accum(m, "maximum", xv(j), nan_propagates=False),), start=1),
            kir.Loop(j, n, (kir.Store(row, (j,), kir.Call("exp", (xv(j) - m,), dtype)),)),
            *_row_sum(row, n, s, lanes, out)]
    if log:
        body += [kir.Let(t, kir.Cast(kir.Call("log", (s,), f8), dtype)),
                 kir.Loop(j, n, (kir.Store(res, _at(shape, axis, out, j), (xv(j) - m) - t),))]
    else:
        body += [kir.Let(t, kir.Cast(s, dtype)),
                 kir.Loop(j, n, (kir.Store(res, _at(shape, axis, out, j), row[j] / t),))]
    return block.add(*_rows(shape, axis, out, body))


@lowers("log_softmax")
def _log_softmax(node: Node, args: list, out: str) -> kir.Block:
    return _softmax_block(node, args, out, log=True)


@lowers("softmax")
def _softmax(node: Node, args: list, out: str) -> kir.Block:
    return _softmax_block(node, args, out, log=False)


def _softmax_grad_block(node: Node, args: list, out: str, log: bool) -> kir.Block:
    """log: ``g - exp(y) * sum(g)``; plain: ``y * (g - sum(g * y))``, per row: the summed
    terms into the work array, their sum, then the row written."""
    block, shape, axis, row, lanes = _row_frame(node, out)
    if row is None:
        return block
    res, n = block.result, shape[axis]
    dtype = np.dtype(node.dtype)
    f8 = np.dtype(np.float64)
    j = kir.Var(f"{out}_j")
    s, t = kir.Var(f"{out}_s", f8), kir.Var(f"{out}_t", dtype)
    at = _at(shape, axis, out, j)
    g, y = (_as(a.buf[at], dtype) for a in args[:2])
    term = g if log else g * y
    value = g - kir.Call("exp", (y,), dtype) * t if log else y * (g - t)
    body = [kir.Loop(j, n, (kir.Store(row, (j,), term),)),
            *_row_sum(row, n, s, lanes, out),
            kir.Let(t, kir.Cast(s, dtype)),
            kir.Loop(j, n, (kir.Store(res, at, value),))]
    return block.add(*_rows(shape, axis, out, body))


@lowers("log_softmax_backward")
def _log_softmax_backward(node: Node, args: list, out: str) -> kir.Block:
    return _softmax_grad_block(node, args, out, log=True)


@lowers("softmax_backward")
def _softmax_backward(node: Node, args: list, out: str) -> kir.Block:
    return _softmax_grad_block(node, args, out, log=False)


def _axis_loops(shape: tuple, axis: int | None, out: str,
                loop: bool = False) -> tuple[list, str, Callable]:
    """Loop headers over every dim of ``shape`` but ``axis`` (a size-1 dim gets index 0,
    not a loop), the indent inside them, and ``at(j)``: the index with ``j`` at ``axis``.
    ``loop``: at least one loop, for a body that ``continue``s."""
    heads, names = [], []
    for d, size in enumerate(shape):
        if d == axis:
            names.append(None)
        elif size == 1:
            names.append("0")
        else:
            heads.append("    " * len(heads) + f"for {out}_i{d} in range({size}):")
            names.append(f"{out}_i{d}")
    if loop and not heads:
        heads.append(f"for {out}_once in range(1):")
    return heads, "    " * len(heads), lambda j: "[" + ", ".join(
        j if n is None else n for n in names) + "]"


def _load(node: Node, src: Node, var: str, at: str) -> str:
    """``var[at]`` as a scalar of ``node``'s dtype."""
    return f"{var}{at}" if src.dtype == node.dtype else f"{np_dtype(node.dtype)}({var}{at})"


def _nll_frame(node: Node, args: list, out: str, xshape: tuple) -> tuple:
    """The loop over target positions (headers, indent), the target, input and target
    index functions, the weight lookup, and C. ``x[n, c, pos...]`` / ``t[n, pos...]``; a
    1-D input is one sample (``x[c]``, ``t[0]``)."""
    weight = node.inputs[2]
    c = xshape[0] if len(xshape) == 1 else xshape[1]
    tshape = (1,) if len(xshape) == 1 else (xshape[0],) + tuple(xshape[2:])
    heads, ind, tat = _axis_loops(tshape, None, out, loop=True)
    names = tat("")[1:-1].split(", ")
    xat = ((lambda k: f"[{k}]") if len(xshape) == 1
           else (lambda k: "[" + ", ".join([names[0], k] + names[1:]) + "]"))
    t = f"{out}_c"
    if isinstance(weight, Node):
        w = _load(node, weight, args[2], f"[{t}]")
    else:
        w = literal(float(weight), node.dtype)
    return heads, ind, tat(""), xat, w, c


def _nll_target(out: str, tvar: str, tat: str, ind: str, c: int, ignore: int,
                on_ignore: list | None = None) -> list:
    return [f"{ind}{out}_c = {tvar}{tat}",
            f"{ind}if {out}_c == {ignore}:",
            *[f"{ind}    {line}" for line in (on_ignore or [])],
            f"{ind}    continue",
            f"{ind}if {out}_c < 0 or {out}_c >= {c}:",
            f"{ind}    raise IndexError('nll_loss: Target is out of bounds.')"]


@lowers("nll_loss")
def _nll_loss(node: Node, args: list, out: str) -> list:
    xshape = tuple(node.inputs[0].shape)
    heads, ind, tat, xat, w, c = _nll_frame(node, args, out, xshape)
    dt = np_dtype(node.dtype)
    reduction = node.attrs["reduction"]
    ignore = node.attrs["ignore_index"]
    loss = f"-{out}_wc * {_load(node, node.inputs[0], args[0], xat(out + '_c'))}"
    lines = [f"{out} = np.empty({ishape(node)}, {dt})"]
    if reduction == "none":
        return lines + heads + _nll_target(out, args[1], tat, ind, c, ignore,
                                           [f"{out}{tat} = {dt}(0)"]) + [
            f"{ind}{out}_wc = {w}",
            f"{ind}{out}{tat} = {loss}"]
    lines += [f"{out}_tot = 0.0", f"{out}_tw = 0.0"] + heads + _nll_target(
        out, args[1], tat, ind, c, ignore)
    lines += [f"{ind}{out}_wc = {w}",
              f"{ind}{out}_tot += {dt}({loss})",
              f"{ind}{out}_tw += {out}_wc"]
    total = f"{out}_tot / {out}_tw" if reduction == "mean" else f"{out}_tot"
    return lines + [f"{out}[0] = {dt}({total})"]  # error_model numpy: 0/0 is nan


@lowers("nll_loss_backward")
def _nll_loss_backward(node: Node, args: list, out: str) -> list:
    xshape = tuple(node.attrs["shape"])
    heads, ind, tat, xat, w, c = _nll_frame(node, args, out, xshape)
    dt = np_dtype(node.dtype)
    reduction = node.attrs["reduction"]
    ignore = node.attrs["ignore_index"]
    g = (_load(node, node.inputs[0], args[0], tat) if reduction == "none"
         else _load(node, node.inputs[0], args[0], "[0]"))
    lines = [f"{out} = np.empty({ishape(node)}, {dt})"]
    if reduction == "mean":  # the summed weights first: every gradient is divided by them
        lines += [f"{out}_tw = 0.0"] + heads + _nll_target(out, args[1], tat, ind, c, ignore)
        lines += [f"{ind}{out}_tw += {w}"]
        g = f"({g} / {out}_tw)"
    # Each line of classes is zeroed as the loop reaches it: one loop nest, no np.zeros.
    zero = [f"{ind}for {out}_z in range({c}):", f"{ind}    {out}{xat(out + '_z')} = {dt}(0)"]
    lines += heads + zero + _nll_target(out, args[1], tat, ind, c, ignore)
    lines += [f"{ind}{out}{xat(out + '_c')} = -{w} * {g}"]
    return lines
