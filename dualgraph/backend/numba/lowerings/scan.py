"""Scans, sorting and searching: cumsum/cumprod/logcumsumexp, argsort, cumulative arg extrema,
searchsorted, histc."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import ishape, lowers
from .shape import as_dtype, finish_lines, is_last, line_result, lines, reshaped

# ---- scans and sorting (dualgraph/ops/scan.py)
# Every op works on lines: the operand viewed as a (lines, length) array with its axis last
# (`shape.lines`), one small loop per line, and the result moved back (a view) unless the
# axis is last, when the lines are the result's own array.

F8 = np.dtype(np.float64)
I8 = kir.INDEX


def _or(a: kir.Expr, b: kir.Expr) -> kir.Expr:
    return kir.Bin("or", a, b)


def _and(a: kir.Expr, b: kir.Expr) -> kir.Expr:
    return kir.Bin("and", a, b)


def _isnan(a: kir.Expr) -> kir.Expr:
    return kir.Bin("!=", a, a)


def before(a: kir.Expr, b: kir.Expr) -> kir.Expr:
    """Element ``a`` strictly comes before ``b`` in a sorted line, NaN-aware (NaN is the
    largest value, NumPy's and PyTorch's rule)."""
    return _or(kir.Bin("<", a, b), _and(_isnan(b), kir.Bin("==", a, a)))


def _scan(node: Node, args: list, out: str, start: float,
          step: Callable[[kir.Expr, kir.Expr], kir.Expr]) -> kir.Block:
    src = node.inputs[0]
    axis = node.attrs["axis"]
    dt = np.dtype(node.dtype)
    n = src.shape[axis] if src.shape else 1
    m = math.prod(src.shape) // n if n else 0
    block, r = line_result(node, is_last(node, axis), out, m, n)
    t, _, _ = lines(block, args[0].buf, tuple(src.shape), axis, f"{out}_t")
    i, j, a = kir.Var(f"{out}_i"), kir.Var(f"{out}_j"), kir.Var(f"{out}_a", dt)
    rev = bool(node.attrs.get("reverse"))
    block.add(kir.Loop(i, m, (
        kir.Let(a, kir.const(start, dt)),
        kir.Loop(j, -1 if rev else n, (
            kir.Let(a, step(a, as_dtype(t[i, j], dt))),
            kir.Store(r, (i, j), a),
        ), start=n - 1 if rev else 0, step=-1 if rev else 1),
    )))
    return finish_lines(block, r, node, axis, out)


@lowers("cumsum")
def _cumsum(node: Node, args: list, out: str) -> kir.Block:
    return _scan(node, args, out, 0, lambda a, v: a + v)


@lowers("cumprod")
def _cumprod(node: Node, args: list, out: str) -> kir.Block:
    return _scan(node, args, out, 1, lambda a, v: a * v)


@lowers("logcumsumexp")
def _logcumsumexp(node: Node, args: list, out: str) -> kir.Block:
    # logaddexp(-inf, x) is x exactly, so starting from -inf equals NumPy's accumulate.
    return _scan(node, args, out, -math.inf,
                 lambda a, v: kir.Call("logaddexp", (a, v), a.dtype))


@lowers("argsort")
def _argsort(node: Node, args: list, out: str) -> kir.Block:
    """A stable sort of each line's indices by a compiled merge sort the kernel calls
    (`kernels.argsort_lines`), compiled once per dtype and layout, not once per node."""
    src = node.inputs[0]
    axis = node.attrs["axis"]
    n = src.shape[axis] if src.shape else 1
    m = math.prod(src.shape) // n if n else 0
    block, r = line_result(node, is_last(node, axis), out, m, n, I8)
    t, _, _ = lines(block, args[0].buf, tuple(src.shape), axis, f"{out}_t")
    block.add(kir.LibCall("argsort_lines", (t, bool(node.attrs["descending"])), (r,)))
    return finish_lines(block, r, node, axis, out)


def _argcum(node: Node, args: list, out: str, better: str) -> kir.Block:
    src = node.inputs[0]
    axis = node.attrs["axis"]
    n = src.shape[axis] if src.shape else 1
    m = math.prod(src.shape) // n if n else 0
    block, r = line_result(node, is_last(node, axis), out, m, n, I8, fill=0)
    t, _, _ = lines(block, args[0].buf, tuple(src.shape), axis, f"{out}_t")
    if n:
        i, j, k = kir.Var(f"{out}_i"), kir.Var(f"{out}_j"), kir.Var(f"{out}_k")
        b, v = kir.Var(f"{out}_b", src.dtype), kir.Var(f"{out}_v", src.dtype)
        # A tie moves to the later index; a NaN always takes over (PyTorch).
        block.add(kir.Loop(i, m, (
            kir.Let(b, t[i, kir.const(0)]),
            kir.Let(k, kir.const(0)),
            kir.Loop(j, n, (
                kir.Let(v, t[i, j]),
                kir.If(_or(kir.Bin(better, v, b), _isnan(v)), (kir.Let(b, v), kir.Let(k, j))),
                kir.Store(r, (i, j), k),
            )),
        )))
    return finish_lines(block, r, node, axis, out)


@lowers("argcummax")
def _argcummax(node: Node, args: list, out: str) -> kir.Block:
    return _argcum(node, args, out, ">=")


@lowers("argcummin")
def _argcummin(node: Node, args: list, out: str) -> kir.Block:
    return _argcum(node, args, out, "<=")


@lowers("searchsorted")
def _searchsorted(node: Node, args: list, out: str) -> kir.Block:
    """A binary search per value, NaN-aware as np.searchsorted (NaN sorts last): at most
    ``n.bit_length()`` halvings of the interval, the loop left once it is empty."""
    seq, values = node.inputs
    common = np.result_type(seq.dtype, values.dtype)
    n = seq.shape[-1]
    rows = math.prod(seq.shape[:-1])
    k = math.prod(values.shape) // rows if rows else 0
    block, r = line_result(node, True, out, rows, k, I8)
    s = reshaped(block, args[0].buf, (rows, n), f"{out}_s")
    x = reshaped(block, args[1].buf, (rows, k), f"{out}_x")
    o = out
    i, j, step = kir.Var(f"{o}_i"), kir.Var(f"{o}_j"), kir.Var(f"{o}_h")
    lo, hi, mid = kir.Var(f"{o}_lo"), kir.Var(f"{o}_hi"), kir.Var(f"{o}_mid")
    v = kir.Var(f"{o}_v", common)
    a = as_dtype(s[i, mid], common)
    # left: the first place whose element is not before v; right: the first place after v.
    go_right = (kir.Un("not", before(v, a)) if node.attrs["right"] else before(a, v))
    block.add(kir.Loop(i, rows, (kir.Loop(j, k, (
        kir.Let(v, as_dtype(x[i, j], common)),
        kir.Let(lo, kir.const(0)),
        kir.Let(hi, kir.const(n)),
        kir.Loop(step, n.bit_length(), (
            kir.If(kir.Bin(">=", lo, hi), (kir.Jump("break"),)),
            kir.Let(mid, (lo + hi) // 2),
            kir.If(go_right, (kir.Let(lo, mid + 1),), (kir.Let(hi, mid),)),
        )),
        kir.Store(r, (i, j), lo),
    )),)))
    return block


@lowers("histc")
def _histc(node: Node, args: list, out: str) -> kir.Block:
    bins, lo0, hi0 = node.attrs["bins"], float(node.attrs["lo"]), float(node.attrs["hi"])
    n = math.prod(node.inputs[0].shape)
    o = out
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res, fill=0)], res)
    x = reshaped(block, args[0].buf, (n,), f"{o}_x")
    lo, hi, v = kir.Var(f"{o}_lo", F8), kir.Var(f"{o}_hi", F8), kir.Var(f"{o}_v", F8)
    j, k = kir.Var(f"{o}_j"), kir.Var(f"{o}_k")
    block.add(kir.Let(lo, kir.const(lo0, F8)), kir.Let(hi, kir.const(hi0, F8)))
    if lo0 == hi0:
        # The data's range (finite values only), as the NumPy kernel and PyTorch.
        a, b = kir.Var(f"{o}_a", F8), kir.Var(f"{o}_b", F8)
        block.add(
            kir.Let(a, kir.const(math.inf, F8)),
            kir.Let(b, kir.const(-math.inf, F8)),
            kir.Loop(j, n, (
                kir.Let(v, kir.Cast(x[j], F8)),
                kir.If(kir.Call("isfinite", (v,), np.dtype(np.bool_)), (
                    kir.Let(a, kir.Call("min", (a, v), F8)),
                    kir.Let(b, kir.Call("max", (b, v), F8)),
                )),
            )),
            kir.If(kir.Bin("<=", a, b), (kir.Let(lo, a), kir.Let(hi, b))),
        )
    one = kir.const(1.0, F8)
    bin_of = kir.Cast((v - lo) * kir.const(float(bins), F8) / (hi - lo), I8)
    return block.add(
        kir.If(kir.Bin("==", lo, hi), (kir.Let(lo, lo - one), kir.Let(hi, hi + one))),
        kir.Loop(j, n, (
            kir.Let(v, kir.Cast(x[j], F8)),
            kir.If(_and(kir.Bin(">=", v, lo), kir.Bin("<=", v, hi)), (
                kir.Let(k, kir.Call("min", (bin_of, kir.const(bins - 1)), I8)),
                kir.Store(res, (k,), kir.const(1, node.dtype), "+"),
            )),
        )),
    )
