"""Scans, sorting and searching: cumsum/cumprod/logcumsumexp, argsort, cumulative arg extrema,
gather/scatter along an axis, searchsorted, histc."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ..printer import literal
from . import _lines, ishape, lowers, np_dtype

# ---- scans and sorting (dualgraph/ops/scan.py)
# Every op works on lines: the operand viewed as a C-contiguous (lines, length) array with
# its axis last (`_lines`), one small loop per line, and the result moved back.


def _unlines(node: Node, var: str, axis: int, out: str) -> list:
    """Lines setting ``out`` to the (lines, length) array ``var`` in ``node``'s shape, with
    the last axis moved back to ``axis``."""
    shape = tuple(node.shape)
    if not shape or axis == len(shape) - 1:
        return [f"{out} = {var}.reshape({ishape(node)})"]
    moved = tuple(d for i, d in enumerate(shape) if i != axis) + (shape[axis],)
    back = tuple(range(axis)) + (len(shape) - 1,) + tuple(range(axis, len(shape) - 1))
    return [f"{out} = np.ascontiguousarray(np.transpose({var}.reshape({moved}), {back}))"]


def _index_lines(idx: Node, var: str, axis: int, m: int, squeezed: bool) -> str:
    """Indices as (lines, count); a squeezed index (the axis dropped) has one per line."""
    if squeezed:
        return f"np.ascontiguousarray({var}).reshape(({m}, 1))"
    return _lines(idx, var, axis)[0]


def _scan_source(node: Node, args: list, out: str) -> tuple[list, int, int, int]:
    src = node.inputs[0]
    axis = node.attrs["axis"]
    var = args[0] if src.dtype == node.dtype else f"{args[0]}.astype({np_dtype(node.dtype)})"
    lines_src, m, n = _lines(src, var, axis)
    return [f"{out}_t = {lines_src}"], m, n, axis


def _scan(node: Node, args: list, out: str, start: str, step: str) -> list:
    lines, m, n, axis = _scan_source(node, args, out)
    js = f"range({n} - 1, -1, -1)" if node.attrs.get("reverse") else f"range({n})"
    dt = np_dtype(node.dtype)
    return lines + [
        f"{out}_r = np.empty(({m}, {n}), {dt})",
        f"for {out}_i in range({m}):",
        f"    {out}_a = {start}",
        f"    for {out}_j in {js}:",
        f"        {out}_a = {step.format(a=f'{out}_a', v=f'{out}_t[{out}_i, {out}_j]')}",
        f"        {out}_r[{out}_i, {out}_j] = {out}_a",
    ] + _unlines(node, f"{out}_r", axis, out)


@lowers("cumsum")
def _cumsum(node: Node, args: list, out: str) -> list:
    return _scan(node, args, out, f"{np_dtype(node.dtype)}(0)", "{a} + {v}")


@lowers("cumprod")
def _cumprod(node: Node, args: list, out: str) -> list:
    return _scan(node, args, out, f"{np_dtype(node.dtype)}(1)", "{a} * {v}")


@lowers("logcumsumexp")
def _logcumsumexp(node: Node, args: list, out: str) -> list:
    # logaddexp(-inf, x) is x exactly, so starting from -inf equals NumPy's accumulate.
    return _scan(node, args, out, f"{np_dtype(node.dtype)}(-np.inf)", "np.logaddexp({a}, {v})")


# NaN-aware orders (NaN is the largest value, NumPy's and PyTorch's rule): whether element
# {a} strictly comes before {b} in the sorted line.
_BEFORE = {False: "({a} < {b} or ({b} != {b} and {a} == {a}))",
           True: "({a} > {b} or ({a} != {a} and {b} == {b}))"}


@lowers("argsort")
def _argsort(node: Node, args: list, out: str) -> list:
    """A bottom-up merge sort of each line's indices: stable, and a plain loop (Numba's
    np.argsort(kind='mergesort') costs ~10 s of compile per kernel)."""
    src = node.inputs[0]
    axis = node.attrs["axis"]
    var = f"{args[0]}.astype(np.uint8)" if src.dtype == np.bool_ else args[0]
    lines_src, m, n = _lines(src, var, axis)
    o = out
    before = _BEFORE[bool(node.attrs["descending"])].format(
        a=f"{o}_t[{o}_i, {o}_s[{o}_q]]", b=f"{o}_t[{o}_i, {o}_s[{o}_p]]")
    return [
        f"{o}_t = {lines_src}",
        f"{o}_r = np.empty(({m}, {n}), np.int64)",
        f"{o}_u = np.empty({n}, np.int64)",
        f"{o}_e = np.empty({n}, np.int64)",
        f"for {o}_i in range({m}):",
        f"    for {o}_j in range({n}):",
        f"        {o}_u[{o}_j] = {o}_j",
        f"    {o}_s, {o}_d = {o}_u, {o}_e",
        f"    {o}_w = 1",
        f"    while {o}_w < {n}:",
        f"        for {o}_lo in range(0, {n}, 2 * {o}_w):",
        f"            {o}_mid = min({o}_lo + {o}_w, {n})",
        f"            {o}_hi = min({o}_lo + 2 * {o}_w, {n})",
        f"            {o}_p, {o}_q = {o}_lo, {o}_mid",
        f"            for {o}_j in range({o}_lo, {o}_hi):",
        # The right run's element goes first only if strictly before: a stable merge.
        f"                if {o}_q < {o}_hi and ({o}_p >= {o}_mid or {before}):",
        f"                    {o}_d[{o}_j] = {o}_s[{o}_q]",
        f"                    {o}_q += 1",
        "                else:",
        f"                    {o}_d[{o}_j] = {o}_s[{o}_p]",
        f"                    {o}_p += 1",
        f"        {o}_s, {o}_d = {o}_d, {o}_s",
        f"        {o}_w *= 2",
        f"    {o}_r[{o}_i, :] = {o}_s",
    ] + _unlines(node, f"{o}_r", axis, out)


def _argcum(node: Node, args: list, out: str, better: str) -> list:
    src = node.inputs[0]
    axis = node.attrs["axis"]
    lines_src, m, n = _lines(src, args[0], axis)
    lines = [f"{out}_t = {lines_src}", f"{out}_r = np.zeros(({m}, {n}), np.int64)"]
    if n:
        # A tie moves to the later index; a NaN always takes over (PyTorch).
        lines += [
            f"for {out}_i in range({m}):",
            f"    {out}_b = {out}_t[{out}_i, 0]",
            f"    {out}_k = 0",
            f"    for {out}_j in range({n}):",
            f"        {out}_v = {out}_t[{out}_i, {out}_j]",
            f"        if {out}_v {better} {out}_b or {out}_v != {out}_v:",
            f"            {out}_b = {out}_v",
            f"            {out}_k = {out}_j",
            f"        {out}_r[{out}_i, {out}_j] = {out}_k",
        ]
    return lines + _unlines(node, f"{out}_r", axis, out)


@lowers("argcummax")
def _argcummax(node: Node, args: list, out: str) -> list:
    return _argcum(node, args, out, ">=")


@lowers("argcummin")
def _argcummin(node: Node, args: list, out: str) -> list:
    return _argcum(node, args, out, "<=")


def _squeezed_index(idx: Node, full: Node) -> bool:
    return len(full.shape) > 0 and len(idx.shape) == len(full.shape) - 1


@lowers("gather_axis")
def _gather_axis(node: Node, args: list, out: str) -> list:
    x, idx = node.inputs
    axis = node.attrs["axis"]
    squeezed = _squeezed_index(idx, x)
    lines_x, m, _ = _lines(x, args[0], axis)
    k = 1 if squeezed or not idx.shape else idx.shape[axis]
    lines = [
        f"{out}_t = {lines_x}",
        f"{out}_k = {_index_lines(idx, args[1], axis, m, squeezed)}",
        f"{out}_r = np.empty(({m}, {k}), {np_dtype(node.dtype)})",
        f"for {out}_i in range({m}):",
        f"    for {out}_j in range({k}):",
        f"        {out}_r[{out}_i, {out}_j] = {out}_t[{out}_i, {out}_k[{out}_i, {out}_j]]",
    ]
    if squeezed:
        return lines + [f"{out} = {out}_r.reshape({ishape(node)})"]
    return lines + _unlines(node, f"{out}_r", axis, out)


@lowers("scatter_add_axis")
def _scatter_add_axis(node: Node, args: list, out: str) -> list:
    src, idx = node.inputs
    axis, size = node.attrs["axis"], node.attrs["size"]
    squeezed = node.attrs.get("squeezed", False)
    if squeezed:
        m = math.prod(src.shape)
        lines_src = f"np.ascontiguousarray({args[0]}).reshape(({m}, 1))"
        k = 1
    else:
        lines_src, m, k = _lines(src, args[0], axis)
    return [
        f"{out}_t = {lines_src}",
        f"{out}_k = {_index_lines(idx, args[1], axis, m, squeezed)}",
        f"{out}_r = np.zeros(({m}, {size}), {np_dtype(node.dtype)})",
        f"for {out}_i in range({m}):",
        f"    for {out}_j in range({k}):",
        f"        {out}_r[{out}_i, {out}_k[{out}_i, {out}_j]] += {out}_t[{out}_i, {out}_j]",
    ] + _unlines(node, f"{out}_r", axis, out)


@lowers("searchsorted")
def _searchsorted(node: Node, args: list, out: str) -> list:
    """A binary search per value, NaN-aware as np.searchsorted (NaN sorts last)."""
    seq, values = node.inputs
    common = np.result_type(seq.dtype, values.dtype)
    s = args[0] if seq.dtype == common else f"{args[0]}.astype({np_dtype(common)})"
    v = args[1] if values.dtype == common else f"{args[1]}.astype({np_dtype(common)})"
    n = seq.shape[-1]
    rows = math.prod(seq.shape[:-1])
    k = math.prod(values.shape) // rows if rows else 0
    o = out
    a, b = f"{o}_s[{o}_i, {o}_mid]", f"{o}_v"
    # left: the first place whose element is not before v; right: the first place after v.
    go_right = (f"not {_BEFORE[False].format(a=b, b=a)}" if node.attrs["right"]
                else _BEFORE[False].format(a=a, b=b))
    return [
        f"{o}_s = np.ascontiguousarray({s}).reshape(({rows}, {n}))",
        f"{o}_x = np.ascontiguousarray({v}).reshape(({rows}, {k}))",
        f"{o}_r = np.empty(({rows}, {k}), np.int64)",
        f"for {o}_i in range({rows}):",
        f"    for {o}_j in range({k}):",
        f"        {o}_v = {o}_x[{o}_i, {o}_j]",
        f"        {o}_lo, {o}_hi = 0, {n}",
        f"        while {o}_lo < {o}_hi:",
        f"            {o}_mid = ({o}_lo + {o}_hi) // 2",
        f"            if {go_right}:",
        f"                {o}_lo = {o}_mid + 1",
        "            else:",
        f"                {o}_hi = {o}_mid",
        f"        {o}_r[{o}_i, {o}_j] = {o}_lo",
        f"{o} = {o}_r.reshape({ishape(node)})",
    ]


@lowers("histc")
def _histc(node: Node, args: list, out: str) -> list:
    bins, lo, hi = node.attrs["bins"], float(node.attrs["lo"]), float(node.attrs["hi"])
    n = math.prod(node.inputs[0].shape)
    lines = [f"{out}_x = np.ascontiguousarray({args[0]}).reshape({n})",
             f"{out}_lo = {literal(lo)}",
             f"{out}_hi = {literal(hi)}"]
    if lo == hi:
        # The data's range (finite values only), as the NumPy kernel and PyTorch.
        lines += [
            f"{out}_a = np.inf",
            f"{out}_b = -np.inf",
            f"for {out}_j in range({n}):",
            f"    {out}_v = np.float64({out}_x[{out}_j])",
            f"    if np.isfinite({out}_v):",
            f"        {out}_a = min({out}_a, {out}_v)",
            f"        {out}_b = max({out}_b, {out}_v)",
            f"if {out}_a <= {out}_b:",
            f"    {out}_lo = {out}_a",
            f"    {out}_hi = {out}_b",
        ]
    return lines + [
        f"if {out}_lo == {out}_hi:",
        f"    {out}_lo -= 1.0",
        f"    {out}_hi += 1.0",
        f"{out} = np.zeros({bins}, {np_dtype(node.dtype)})",
        f"for {out}_j in range({n}):",
        f"    {out}_v = np.float64({out}_x[{out}_j])",
        f"    if {out}_v >= {out}_lo and {out}_v <= {out}_hi:",
        f"        {out}_k = min(int(({out}_v - {out}_lo) * {bins} / ({out}_hi - {out}_lo)), "
        f"{bins - 1})",
        f"        {out}[{out}_k] += 1",
    ]
