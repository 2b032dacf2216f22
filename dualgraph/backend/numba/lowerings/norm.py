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
    """Rows of ``n`` elements (the normalised dims, flattened): two passes per row for the
    mean and the variance, accumulated in float64, then one pass writing the result."""
    x, weight, bias = node.inputs
    shape = tuple(x.shape)
    n = math.prod(shape[len(shape) - node.attrs["ndim"]:])
    m = math.prod(shape) // n if n else 0
    f8 = np.dtype(np.float64)
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    xr = _reshaped(block, args[0].buf, (m, n), f"{out}_x")
    rows = _reshaped(block, res, (m, n), f"{out}_r")
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    s, mu, v, d, r = (kir.Var(f"{out}_{c}", f8) for c in ("s", "mu", "v", "d", "rs"))
    count = kir.const(float(n), f8)
    value = (xr[i, j] - mu) * r
    if isinstance(weight, Node):
        value = value * _reshaped(block, args[1].buf, (n,), f"{out}_w")[j]
    if isinstance(bias, Node):
        value = value + _reshaped(block, args[2].buf, (n,), f"{out}_b")[j]
    block.add(kir.Loop(i, m, (
        kir.Let(s, kir.const(0.0, f8)),
        kir.Loop(j, n, (kir.Accum(s, "add", xr[i, j]),)),
        kir.Let(mu, s / count),
        kir.Let(v, kir.const(0.0, f8)),
        kir.Loop(j, n, (kir.Let(d, xr[i, j] - mu), kir.Accum(v, "add", d * d))),
        kir.Let(r, kir.const(1.0, f8) / kir.Call(
            "sqrt", (v / count + kir.const(float(node.attrs["eps"]), f8),), f8)),
        kir.Loop(j, n, (kir.Store(rows, (i, j), value),)),
    )))
    return block


# ---- losses and attention
# softmax/log_softmax and their backward ops loop over their operands' own shapes, with
# the normalized axis innermost per line: max, sum of exp, write. No reshape or
# contiguous copy and no loop over a size-1 dim: each of those is Numba compile time.
# nll_loss indexes its input as (N, C, positions...) (`nnops.nll_layout`'s dims).


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


def _norm_axis(node: Node) -> tuple[tuple, int]:
    shape = tuple(node.shape)
    return (shape, node.attrs["axis"]) if shape else ((1,), 0)


def _softmax_lines(node: Node, args: list, out: str, log: bool) -> list:
    shape, axis = _norm_axis(node)
    n = shape[axis]
    dt = np_dtype(node.dtype)
    heads, ind, at = _axis_loops(shape, axis, out)
    j = f"{out}_j"
    x = node.inputs[0]
    xv = _load(node, x, args[0], at(j))
    m, s = f"{out}_m", f"{out}_s"
    # The same steps as the NumPy kernel: shift by the max (nan wins), sum exp, then
    # (x - max) - log(sum) or exp(x - max) / sum.
    lines = [f"{out} = np.empty({shape}, {dt})", *heads,
             f"{ind}{m} = {_load(node, x, args[0], at('0'))}" if n else f"{ind}{m} = {dt}(0)",
             f"{ind}for {j} in range(1, {n}):",
             f"{ind}    {out}_v = {xv}",
             f"{ind}    if {out}_v > {m} or {out}_v != {out}_v:",
             f"{ind}        {m} = {out}_v",
             f"{ind}{s} = 0.0",
             f"{ind}for {j} in range({n}):"]
    if log:
        lines += [f"{ind}    {s} += np.exp({xv} - {m})",
                  f"{ind}{s} = np.log({s})",
                  f"{ind}for {j} in range({n}):",
                  f"{ind}    {out}{at(j)} = ({xv} - {m}) - {s}"]
    else:
        lines += [f"{ind}    {out}_e = np.exp({xv} - {m})",
                  f"{ind}    {out}{at(j)} = {out}_e",
                  f"{ind}    {s} += {out}_e",
                  f"{ind}for {j} in range({n}):",
                  f"{ind}    {out}{at(j)} = {out}{at(j)} / {s}"]
    return lines


@lowers("log_softmax")
def _log_softmax(node: Node, args: list, out: str) -> list:
    return _softmax_lines(node, args, out, log=True)


@lowers("softmax")
def _softmax(node: Node, args: list, out: str) -> list:
    return _softmax_lines(node, args, out, log=False)


def _softmax_grad_lines(node: Node, args: list, out: str, log: bool) -> list:
    shape, axis = _norm_axis(node)
    n = shape[axis]
    heads, ind, at = _axis_loops(shape, axis, out)
    j = f"{out}_j"
    g = _load(node, node.inputs[0], args[0], at(j))
    y = _load(node, node.inputs[1], args[1], at(j))
    s = f"{out}_s"
    # log: g - exp(y) * sum(g); plain: y * (g - sum(g * y)).
    acc = g if log else f"{g} * {y}"
    val = f"{g} - np.exp({y}) * {s}" if log else f"{y} * ({g} - {s})"
    return [f"{out} = np.empty({shape}, {np_dtype(node.dtype)})", *heads,
            f"{ind}{s} = 0.0",
            f"{ind}for {j} in range({n}):",
            f"{ind}    {s} += {acc}",
            f"{ind}for {j} in range({n}):",
            f"{ind}    {out}{at(j)} = {val}"]


@lowers("log_softmax_backward")
def _log_softmax_backward(node: Node, args: list, out: str) -> list:
    return _softmax_grad_lines(node, args, out, log=True)


@lowers("softmax_backward")
def _softmax_backward(node: Node, args: list, out: str) -> list:
    return _softmax_grad_lines(node, args, out, log=False)


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
