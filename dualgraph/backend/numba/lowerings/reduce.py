"""Reductions that are not a plain fold: arg reductions, their gather, and prod."""

from __future__ import annotations

import math

from ....ir.graph import Node
from . import _lines, ishape, lowers, np_dtype

# ------------------------------------------------------- arg reductions and their gather
# Both move the reduced axis last and view the operand as (lines, length): a size-1 axis
# can be moved anywhere without changing the C-order layout, so results are plain reshapes.




@lowers("argmax")
def _argmax(node: Node, args: list, out: str) -> list:
    return _argextremum(node, args, out, ">")


@lowers("argmin")
def _argmin(node: Node, args: list, out: str) -> list:
    return _argextremum(node, args, out, "<")


def _argextremum(node: Node, args: list, out: str, better: str) -> list:
    src = node.inputs[0]
    lines_src, m, n = _lines(src, args[0], node.attrs["axis"])
    # The first extremum wins; the first nan wins over everything (np.argmax's rule and
    # PyTorch's): a nan found stops the line.
    return [
        f"{out}_t = {lines_src}",
        f"{out} = np.zeros({m}, np.int64)",
        f"for {out}_i in range({m}):",
        f"    {out}_b = {out}_t[{out}_i, 0]",
        f"    if {out}_b != {out}_b:",
        "        continue",
        f"    for {out}_j in range(1, {n}):",
        f"        {out}_v = {out}_t[{out}_i, {out}_j]",
        f"        if {out}_v != {out}_v or {out}_v {better} {out}_b:",
        f"            {out}[{out}_i] = {out}_j",
        f"            {out}_b = {out}_v",
        f"            if {out}_v != {out}_v:",
        "                break",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("take_along_axis")
def _take_along_axis(node: Node, args: list, out: str) -> list:
    x, idx = node.inputs
    axis = node.attrs["axis"]
    lines_src, m, _ = _lines(x, args[0], axis)
    return [
        f"{out}_t = {lines_src}",
        f"{out}_k = np.ascontiguousarray({args[1]}).reshape({m})",
        f"{out} = np.empty({m}, {np_dtype(node.dtype)})",
        f"for {out}_i in range({m}):",
        f"    {out}[{out}_i] = {out}_t[{out}_i, {out}_k[{out}_i]]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


# ------------------------------------------------------------------ prod
@lowers("prod")
def _prod(node: Node, args: list, out: str) -> list:
    """Reduced axes moved last and flattened: one running product per kept element."""
    src = node.inputs[0]
    shape = tuple(src.shape)
    axis = node.attrs["axis"]
    axis = tuple(range(len(shape))) if axis is None else axis
    kept = tuple(i for i in range(len(shape)) if i not in axis)
    n_kept = math.prod(shape[i] for i in kept)
    n_red = math.prod(shape[i] for i in axis)
    dtype = np_dtype(node.dtype)
    x = args[0] if src.dtype == node.dtype else f"{args[0]}.astype({dtype})"
    lines = [f"_p = np.ascontiguousarray({x}).reshape({ishape(src)})"]
    if shape and kept + axis != tuple(range(len(shape))):
        lines.append(f"_p = np.ascontiguousarray(np.transpose(_p, {kept + axis}))")
    return lines + [
        f"_p = _p.reshape(({n_kept}, {n_red}))",
        f"{out} = np.empty(({n_kept},), {dtype})",
        f"for _i in range({n_kept}):",
        f"    _acc = {dtype}(1)",
        f"    for _j in range({n_red}):",
        "        _acc *= _p[_i, _j]",
        f"    {out}[_i] = _acc",
        f"{out} = {out}.reshape({ishape(node)})",
    ]
