"""Normalisation, softmax and losses: layer_norm, softmax/log_softmax and their backward ops,
nll_loss."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.graph import Node
from ... import kir
from ..printer import LIBRARY
from . import _reshaped, ishape, lowers
from .shape import as_dtype, nest

# ---- row kernels in the library
# softmax, log_softmax, layer_norm and their backward ops are calls of C functions
# compiled once per installation and dtype (`row_kernels`) where their operands allow:
# float32 or float64 throughout, at most 4 dims. A kernel's cold compile then holds one
# call line per op instead of the row loops (about 20-30 lines each, typed and optimised
# again in every kernel), and the call computes the same values in the same order. The
# loops stay in the kernel when its item loops run on threads (a parallel kernel spreads
# the rows; the library runs on the calling thread) and where the operands do not allow
# the call. No neighbour fuses into these ops either way (each is a block of its own over
# its operands' buffers), so the call gives up no fusion. A softmax op of fewer than
# `MIN_ELEMENTS` elements keeps its loops: the `cnn` step's log_softmax and its backward
# (64 rows of 10) as calls measured a 1.2x slower step (the call itself costs about 3 us;
# the kernel's parts are cut elsewhere around it, which is where the time went). That
# holds for rows of a matrix (one loop over the rows): rows under more than one outer loop
# (attention's batch x heads x queries) are a call at any size: their loop nest three or
# four deep took nanoGPT's attention forward part 0.6-0.8 s more compile (a fifth of the
# part) than the call, which costs microseconds of run time.
CALL_C = True
MIN_ELEMENTS = 1024
_C_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_LOG, _WEIGHT, _BIAS = 1, 2, 4
_WEIGHT_GRAD, _BIAS_GRAD = 8, 16

LIBRARY.update({
    # rows of a softmax or layer norm and their gradients: calls into C functions
    # compiled once, named by dtype as the batched product is (row_kernels); the last
    # three arguments are the row axis (of the operands padded to 4-D), flags and eps
    "row_softmax": "dgw.row_softmax_{dtype}({0}, {out}, {1}, {2}, {3})",
    "row_softmax_backward": "dgw.row_softmax_backward_{dtype}({0}, {1}, {out}, {2}, {3}, {4})",
    "row_layer_norm": "dgw.row_layer_norm_{dtype}({0}, {1}, {2}, {out}, {3}, {4}, {5})",
    "row_layer_norm_backward": ("dgw.row_layer_norm_backward_{dtype}({0}, {1}, {2}, {out}, "
                                "{3}, {4}, {5})"),
    "row_layer_norm_weight_grad": ("dgw.row_layer_norm_weight_grad_{dtype}({0}, {1}, {out}, "
                                   "{2}, {3}, {4})"),
    # the input's gradient ({out}) and the weight's ({3}) and bias's ({4}) in one pass
    "row_layer_norm_grads": ("dgw.row_layer_norm_grads_{dtype}({0}, {1}, {2}, {out}, {3}, "
                             "{4}, {5}, {6}, {7})"),
    # a reduction over every dim but the last (a bias's gradient, `column_sums`)
    "row_column_sum": "dgw.row_column_sum_{dtype}({0}, {out}, {1}, {2}, {3})",
})


def _library(node: Node, bufs: list, least: int = 0) -> bool:
    """Whether the op is a call of its C function: ``bufs`` (its array operands) and the
    result of one float dtype, at most 4 dims."""
    dtype = np.dtype(node.dtype)
    return (CALL_C and dtype in _C_DTYPES
            and max(math.prod(b.shape) for b in bufs) >= least
            and all(np.dtype(b.dtype) == dtype and len(b.shape) <= 4 for b in bufs)
            and len(ishape(node)) <= 4)


def _softmax_least(node: Node) -> int:
    """The fewest elements a softmax op (or its gradient) needs to be a call: `MIN_ELEMENTS`
    when its rows sit under at most one loop, none when under more."""
    shape, axis = _norm_axis(node)
    outer = sum(1 for d, n in enumerate(shape) if d != axis and n != 1)
    return MIN_ELEMENTS if outer <= 1 else 0


def _ln_rows(block: kir.Block, node: Node, xshape: tuple, bufs: list, out: str) -> tuple:
    """layer_norm's row-shaped operands (``x`` of shape ``xshape`` and those shaped as it)
    as the C function reads them, and the row axis: each buffer itself when one dim is
    normalised, else viewed as (rows, n)."""
    k = node.attrs["ndim"]
    if k == 1 and len(xshape) <= 4:
        return bufs, 3
    n = math.prod(xshape[len(xshape) - k:])
    m = math.prod(xshape) // n if n else 0
    return [_reshaped(block, b, (m, n), f"{out}_v{i}") for i, b in enumerate(bufs)], 3


def _param(block: kir.Block, node: Node, arg, n: int, name: str) -> kir.Buffer:
    view = arg.buf
    return view if len(view.shape) == 1 else _reshaped(block, view, (n,), name)


# ---- normalisation and modules
@lowers("layer_norm")
def _layer_norm(node: Node, args: list, out: str) -> kir.Block:
    """Rows of ``n`` elements (the normalised dims, flattened), each in three vectorizable
    passes over a row-sized work array: the row copied in and summed for the mean, the
    squared deviations written and summed for the variance (two passes: no cancellation
    when the mean is large against the spread), then the normalised row written in the
    input's dtype, as the NumPy kernel computes it. Sums are float64 (`_row_sum`)."""
    x, weight, bias = node.inputs
    if _ln_library_ok(node, args, (0, 1, 2)):
        return _ln_call(node, args, out, "row_layer_norm", (0, 1, 2))
    block, m, n, row, lanes = _ln_frame(node, out, x.shape)
    if row is None:
        return block
    dtype = np.dtype(node.dtype)
    xr = _reshaped(block, args[0].buf, (m, n), f"{out}_x")
    rows = _reshaped(block, block.result, (m, n), f"{out}_r")
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    xv = _as(xr[i, j], dtype)
    stats, mu, r, _ = _ln_stats(node, n, xv, j, row, lanes, out)
    value = (xv - mu) * r
    if isinstance(weight, Node):
        value = value * _as(_reshaped(block, args[1].buf, (n,), f"{out}_w")[j], dtype)
    if isinstance(bias, Node):
        value = value + _as(_reshaped(block, args[2].buf, (n,), f"{out}_b")[j], dtype)
    block.add(kir.Loop(i, m, (*stats, kir.Loop(j, n, (kir.Store(rows, (i, j), value),)))))
    return block


def _ln_library_ok(node: Node, args: list, at: tuple) -> bool:
    return _library(node, [args[k].buf for k in at if isinstance(node.inputs[k], Node)])


def _ln_call(node: Node, args: list, out: str, fn: str, at: tuple) -> kir.Block:
    """A layer_norm op (its operands at ``at``, the first two row-shaped, then weight and
    bias when the op takes them) as one call of its C function."""
    xshape = tuple(node.inputs[at[1] if fn != "row_layer_norm" else 0].shape)
    k = node.attrs["ndim"]
    n = math.prod(xshape[len(xshape) - k:])
    res = kir.Buffer(out, ishape(node), np.dtype(node.dtype))
    block = kir.Block([kir.Alloc(res)], res)
    if n == 0:
        return block
    rows = 1 if fn == "row_layer_norm" else 2
    if fn == "row_layer_norm_weight_grad":
        bufs, axis = _ln_rows(block, node, xshape, [args[a].buf for a in at], out)
        dst = res if len(res.shape) == 1 else _reshaped(block, res, (n,), f"{out}_o")
        block.add(kir.LibCall(fn, (*bufs, axis, 0, float(node.attrs["eps"])), (dst,)))
        return block
    bufs, axis = _ln_rows(block, node, xshape, [args[a].buf for a in at[:rows]] + [res],
                          out)
    *srcs, dst = bufs
    flags = 0
    params = []
    for bit, a in zip((_WEIGHT, _BIAS), at[rows:]):
        if isinstance(node.inputs[a], Node):
            flags |= bit
            params.append(_param(block, node, args[a], n, f"{out}_p{a}"))
        else:  # not read: any array of the dtype stands in
            params.append(srcs[0])
    block.add(kir.LibCall(fn, (*srcs, *params, axis, flags, float(node.attrs["eps"])),
                          (dst,)))
    return block


def _ln_frame(node: Node, out: str, xshape: tuple) -> tuple:
    """The result block, the rows (``m``) and row length (``n``) of an input of ``xshape``
    normalised over its last ``ndim`` dims, and the row work buffers (``None`` when
    there is no row: the block is then complete)."""
    n = math.prod(xshape[len(xshape) - node.attrs["ndim"]:])
    m = math.prod(xshape) // n if n else 0
    res = kir.Buffer(out, ishape(node), np.dtype(node.dtype))
    block = kir.Block([kir.Alloc(res)], res)
    if m == 0 or n == 0:
        return block, m, n, None, None
    return (block, m, n, *_row_work(block, node, n, out))


def _ln_stats(node: Node, n: int, xv: kir.Expr, j: kir.Var, row: kir.Buffer,
              lanes: kir.Buffer | None, out: str, first: tuple = (),
              second: Callable | None = None) -> tuple:
    """The statements giving one row's mean ``mu`` and ``1 / sqrt(var + eps)`` (``r``, in
    the node's dtype; ``r64`` in float64) from its elements ``xv`` (at index ``j``): the
    row copied into ``row`` and summed, then the squared deviations. ``first``: more
    (work buffer, element, float64 sum) written in the first pass and summed; ``second(d)``
    likewise in the second, of the deviation ``d``; the row is read once per pass."""
    dtype = np.dtype(node.dtype)
    f8 = np.dtype(np.float64)
    s, v = kir.Var(f"{out}_s", f8), kir.Var(f"{out}_v", f8)
    mu, r = kir.Var(f"{out}_mu", dtype), kir.Var(f"{out}_rs", dtype)
    r64, d = kir.Var(f"{out}_r8", f8), kir.Var(f"{out}_d", dtype)
    count = kir.const(float(n), f8)
    more = second(d) if second is not None else ()

    def sums(passes: tuple, tag: str) -> list:
        return [st for k, (buf, _, acc) in enumerate(passes)
                for st in _row_sum(buf, n, acc, lanes, f"{out}_{tag}{k}")]

    stmts = [
        kir.Loop(j, n, (kir.Store(row, (j,), xv),
                        *(kir.Store(buf, (j,), e) for buf, e, _ in first))),
        *_row_sum(row, n, s, lanes, f"{out}_a"), *sums(first, "f"),
        kir.Let(mu, kir.Cast(s / count, dtype)),
        kir.Loop(j, n, (kir.Let(d, xv - mu), kir.Store(row, (j,), d * d),
                        *(kir.Store(buf, (j,), e) for buf, e, _ in more))),
        *_row_sum(row, n, v, lanes, f"{out}_q"), *sums(more, "g"),
        kir.Let(r64, kir.const(1.0, f8) / kir.Call(
            "sqrt", (v / count + kir.const(float(node.attrs["eps"]), f8),), f8)),
        kir.Let(r, kir.Cast(r64, dtype)),
    ]
    return stmts, mu, r, r64


@lowers("layer_norm_backward")
def _layer_norm_backward(node: Node, args: list, out: str) -> kir.Block:
    """Per row, with ``a = g * w``: the mean and the sum of ``a`` in the first pass over
    the row, the variance and the sum of ``a * (x - mean)`` in the second, then
    ``r * (a - mean(a) - xhat * mean(a * xhat))`` written (``r = rstd``)."""
    if _ln_library_ok(node, args, (0, 1, 2)):
        return _ln_call(node, args, out, "row_layer_norm_backward", (0, 1, 2))
    block, m, n, row, lanes = _ln_frame(node, out, node.inputs[1].shape)
    if row is None:
        return block
    dtype = np.dtype(node.dtype)
    f8 = np.dtype(np.float64)
    gr, xr, rows = (_reshaped(block, b, (m, n), f"{out}_{t}")
                    for b, t in ((args[0].buf, "g"), (args[1].buf, "x"), (block.result, "r")))
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    xv = _as(xr[i, j], dtype)
    a = _as(gr[i, j], dtype)
    if isinstance(node.inputs[2], Node):
        a = a * _as(_reshaped(block, args[2].buf, (n,), f"{out}_w")[j], dtype)
    work = kir.Buffer(f"{out}_e2", (n,), dtype)
    block.add(kir.Alloc(work))
    sa, sb = kir.Var(f"{out}_sa", f8), kir.Var(f"{out}_sb", f8)
    stats, mu, r, r64 = _ln_stats(node, n, xv, j, row, lanes, out, first=((work, a, sa),),
                                  second=lambda d: ((work, a * d, sb),))
    count = kir.const(float(n), f8)
    ma, c = kir.Var(f"{out}_ma", dtype), kir.Var(f"{out}_c", dtype)
    block.add(kir.Loop(i, m, (
        *stats,
        kir.Let(ma, kir.Cast(sa / count, dtype)),
        kir.Let(c, kir.Cast(r64 * sb / count, dtype)),  # mean(a * xhat)
        kir.Loop(j, n, (kir.Store(rows, (i, j), r * (a - ma - (xv - mu) * r * c)),)),
    )))
    return block


@lowers("layer_norm_weight_grad")
def _layer_norm_weight_grad(node: Node, args: list, out: str) -> kir.Block:
    """``sum(g * xhat)`` over the rows: each row's statistics, then its terms added to
    float64 column totals, written in the node's dtype at the end."""
    if _ln_library_ok(node, args, (0, 1)):
        return _ln_call(node, args, out, "row_layer_norm_weight_grad", (0, 1))
    xshape = tuple(node.inputs[1].shape)
    block, m, n, row, lanes = _ln_frame(node, out, xshape)
    dtype = np.dtype(node.dtype)
    f8 = np.dtype(np.float64)
    res = _reshaped(block, block.result, (n,), f"{out}_r") if n else None
    j = kir.Var(f"{out}_j")
    if row is None:
        if n:  # no rows: a sum of nothing
            block.add(kir.Loop(j, n, (kir.Store(res, (j,), kir.Const(0.0, dtype)),)))
        return block
    gr, xr = (_reshaped(block, b, (m, n), f"{out}_{t}")
              for b, t in ((args[0].buf, "g"), (args[1].buf, "x")))
    total = kir.Buffer(f"{out}_t", (n,), f8)
    block.add(kir.Alloc(total))
    i = kir.Var(f"{out}_i")
    xv = _as(xr[i, j], dtype)
    stats, mu, r, _ = _ln_stats(node, n, xv, j, row, lanes, out)
    term = kir.Cast(_as(gr[i, j], dtype) * ((xv - mu) * r), f8)
    block.add(kir.Loop(j, n, (kir.Store(total, (j,), kir.const(0.0, f8)),)),
              kir.Loop(i, m, (*stats, kir.Loop(j, n, (
                  kir.Store(total, (j,), total[j] + term),)))),
              kir.Loop(j, n, (kir.Store(res, (j,), kir.Cast(total[j], dtype)),)))
    return block


def merge_layer_norm_grads(stmts: list) -> list:
    """A kernel's top-level statements with each layer_norm weight gradient call folded
    into the input gradient call over the same rows (one pass over ``g`` and ``x`` that
    computes the row statistics once), and the bias gradient ``sum(g)`` over those rows
    folded in too where it follows as the plain reduction loops the sum lowers to.

    The input gradient's call moves down to the weight gradient's place, so it applies
    only when nothing in between reads its result or writes ``g`` or ``x``."""
    out = list(stmts)
    k = 0
    while k < len(out):
        s = out[k]
        if isinstance(s, kir.LibCall) and s.fn == "row_layer_norm_backward":
            merged = _fold_weight_grad(out, k)
            if merged is not None:
                out = merged
                continue
        k += 1
    return out


def column_sums(stmts: list) -> list:
    """A kernel's top-level statements with each reduction ``sum(g)`` over every dim but
    the last, left as its plain loops (a bias's gradient: its float64 column totals
    zeroed, the rows added in order, then cast into a 1-D result), as one call of the
    library's column sum (`row_kernels`), which adds the same terms in the same order:
    one line of the kernel's cold compile instead of about eight. The loops stay where
    the operand does not allow the call (`_library`'s dtypes and ranks)."""
    out = list(stmts)
    k = 0
    while k < len(out):
        found = _column_sum_at(out, k)
        if found is None:
            k += 1
            continue
        g, acc, db, own, end = found
        rest = out[end:]
        if any(acc.name in _names(s) for s in rest) or any(
                acc.name in _names(s) for s in out[:k] if not (
                    isinstance(s, kir.Alloc) and s.buf == acc)):
            k += 1
            continue
        call = kir.LibCall("row_column_sum", (g, 3, 0, 0.0), (db,))
        head = [s for s in out[:k] if not (isinstance(s, kir.Alloc) and s.buf == acc)]
        out = [*head, *own, call, *rest]
        k = len(head) + len(own) + 1
    return out


def _column_sum_at(stmts: list, k: int) -> tuple | None:
    """(``g``, its totals, the result, the result's allocation if it stands among the
    loops, the index after them) when the statements at ``k`` are `_column_sum`'s loops
    of a reduction the library can run; else None."""
    if not isinstance(stmts[k], kir.Loop) or k + 2 >= len(stmts):
        return None
    own = [s for s in stmts[k + 2:k + 3] if isinstance(s, kir.Alloc)]
    loops = [stmts[k], stmts[k + 1], stmts[k + 2 + len(own)]] if (
        k + 2 + len(own) < len(stmts)) else []
    g = _summed(loops[1]) if len(loops) == 3 else None
    if g is None or not 1 <= len(g.shape) <= 4 or np.dtype(g.dtype) not in _C_DTYPES:
        return None
    found = _column_sum(loops, g)
    if found is None or (own and own[0].buf != found[1]):
        return None
    return g, found[0], found[1], own, k + 3 + len(own)


def _summed(nest: kir.Loop) -> kir.Buffer | None:
    """The buffer the innermost statement of a loop nest adds from, when it is one load
    (cast or not)."""
    body: object = nest
    while isinstance(body, kir.Loop) and len(body.body) == 1:
        body = body.body[0]
    if not isinstance(body, kir.Store):
        return None
    v = body.value.a if isinstance(body.value, kir.Cast) else body.value
    return v.buf if isinstance(v, kir.Load) else None


def _names(s) -> set:
    """Every buffer a statement (and any nested in it) names."""
    seen: set = set()
    for t in kir.walk([s]):
        for e in kir.exprs_of(t):
            seen |= {x.buf.name for x in kir.subexprs(e) if isinstance(x, kir.Load)}
        for f in ("buf", "base"):
            b = getattr(t, f, None)
            if isinstance(b, kir.Buffer):
                seen.add(b.name)
        if isinstance(t, kir.LibCall):
            seen |= {b.name for b in (*t.args, *t.outs) if isinstance(b, kir.Buffer)}
        elif isinstance(t, kir.Gemm):
            seen.add("*")  # a product: not looked into, so never passed over
    return seen


def _fold_weight_grad(stmts: list, k: int) -> list | None:
    back = stmts[k]
    g, x, w, axis, flags, eps = back.args
    dx = back.outs[0]
    keep = {g.name, x.name, dx.name, "*"}
    for m in range(k + 1, len(stmts)):
        s = stmts[m]
        if (isinstance(s, kir.LibCall) and s.fn == "row_layer_norm_weight_grad"
                and s.args[:3] == (g, x, axis) and s.args[4] == eps):
            dw = s.outs[0]
            call = kir.LibCall("row_layer_norm_grads",
                               (g, x, w, dw, g, axis, flags | _WEIGHT_GRAD, eps), (dx, dw))
            return _fold_bias_grad([*stmts[:k], *stmts[k + 1:m], call, *stmts[m + 1:]],
                                   m - 1)
        if isinstance(s, (kir.Alloc, kir.View, kir.Comment)) and not (_names(s) & keep):
            continue
        return None
    return None


def _fold_bias_grad(stmts: list, k: int) -> list:
    """``stmts`` with the reduction ``sum(g)`` over the rows of the grads call at ``k``
    (its float64 column totals zeroed, the rows added in order, then cast) folded into
    the call, which adds the same terms in the same order; ``stmts`` unchanged when the
    loops after the call are not that reduction."""
    call = stmts[k]
    g, x, w, dw, _, axis, flags, eps = call.args
    keep = {g.name, x.name, w.name, "*", *(b.name for b in call.outs)}
    m = k + 1
    while m < len(stmts) and isinstance(stmts[m], (kir.Alloc, kir.Comment)) and not (
            _names(stmts[m]) & keep):
        m += 1
    loops = stmts[m:m + 3]
    # The result's allocation may stand between the additions and the cast.
    own = [s for s in stmts[m + 2:m + 3] if isinstance(s, kir.Alloc)]
    if own:
        loops = [*stmts[m:m + 2], *stmts[m + 3:m + 4]]
    found = _column_sum(loops, g) if axis == 3 else None
    if found is None or (own and own[0].buf != found[1]):
        return stmts
    acc, db = found
    rest = stmts[m + 3 + len(own):]
    if any(acc.name in _names(s) for s in rest):
        return stmts
    between = [s for s in stmts[k + 1:m] if not (isinstance(s, kir.Alloc) and s.buf == acc)]
    between += own
    merged = kir.LibCall(call.fn, (g, x, w, dw, db, axis, flags | _BIAS_GRAD, eps),
                         (*call.outs, db))
    return [*stmts[:k], *between, merged, *rest]


def _column_sum(stmts: list, g: kir.Buffer) -> tuple | None:
    """(the float64 totals, the result) when ``stmts`` are the reduction loops of
    ``sum(g)`` over every dim but the last, in order: the totals zeroed, every element
    of ``g`` added to its column's total (the dims looped in order), the totals cast to
    ``g``'s dtype into a 1-D result; else None."""
    if len(stmts) != 3 or not all(isinstance(s, kir.Loop) for s in stmts) or not g.shape:
        return None
    zero, nest, final = stmts
    n, f8 = g.shape[-1], np.dtype(np.float64)
    lead = (kir.const(0),) * (len(g.shape) - 1)

    def lone(loop: kir.Loop, extent: int) -> Any:
        plain = loop.start == 0 and loop.step == 1 and not loop.parallel
        ok = plain and loop.extent == extent and len(loop.body) == 1
        return loop.body[0] if ok else None

    st = lone(zero, n)
    if not isinstance(st, kir.Store) or st.combine is not None:
        return None
    acc = st.buf
    if (acc.dtype != f8 or acc.shape != (1,) * len(lead) + (n,)
            or st.index != (*lead, zero.var) or st.value != kir.Const(0.0, f8)):
        return None
    body: Any = nest
    loops = []
    for d in g.shape:
        if not isinstance(body, kir.Loop):
            return None
        loops.append(body.var)
        body = lone(body, d)
    ok = (isinstance(body, kir.Store) and body.buf == acc and body.combine in ("+", "add")
          and body.index == (*lead, loops[-1]) and body.value == _as(g[tuple(loops)], f8))
    st = lone(final, n)
    if not ok or not isinstance(st, kir.Store) or st.combine is not None:
        return None
    db = st.buf
    if (db.shape != (n,) or db.dtype != g.dtype or st.index != (final.var,)
            or st.value != _as(acc[(*lead, final.var)], g.dtype)):
        return None
    return acc, db


# ---- losses and attention
# softmax/log_softmax and their backward ops work row by row over their operands' own
# shapes and strides (no reshape or contiguous copy; no loop over a size-1 dim), the
# normalized axis innermost. Each row is a few short passes, each either a vectorizable
# loop (an exp from `MATH` and a store into a row-sized work array) or a sum of that
# work array: float32 rows are summed 16 lanes at a time in float64 (`fold_lanes`), so no
# pass is a serial chain of dependent additions.
# nll_loss indexes its input as (N, C, positions...) (`loss.nll_layout`'s dims).

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


def _row_call(node: Node, bufs: list, out: str, fn: str, flags: int) -> kir.Block:
    """A softmax op over its operands' own shapes and strides as one call of its C
    function (`row_kernels`); the row axis counted in the operands padded to 4-D."""
    shape, axis = _norm_axis(node)
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    if math.prod(shape) == 0:
        return block
    axis += 4 - len(shape)
    return block.add(kir.LibCall(fn, (*bufs, axis, flags, 0.0), (res,)))


def _softmax_block(node: Node, args: list, out: str, log: bool) -> kir.Block:
    """Per row: the max (the shift that keeps exp finite), exp of the shifted row into the
    work array, its sum, then the row written. A nan anywhere makes the sum nan, so every
    element of its row is nan, as in the NumPy kernel."""
    if _library(node, [args[0].buf], _softmax_least(node)):
        return _row_call(node, [args[0].buf], out, "row_softmax", _LOG if log else 0)
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
    if _library(node, [a.buf for a in args[:2]], _softmax_least(node)):
        return _row_call(node, [a.buf for a in args[:2]], out, "row_softmax_backward",
                         _LOG if log else 0)
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


# ---- losses
# nll_loss reads its input as (N, C, positions...) and its target as (N, positions...) in
# their own shapes (no reshape: an argument's reshape may be a copy); a 1-D input is one
# sample, ``x[c]`` with a 0-d target. One loop nest over the target positions reads each
# position's class.


def _nll_frame(node: Node, args: list, out: str, xshape: tuple) -> tuple:
    """The block allocating the result; the input's index of class ``cls`` at target
    position ``at``; the loop nest over target positions around ``body(at, cls, wc)``
    (``wc``: the class's weight), run only where the class is not ignored and after its
    bounds check."""
    from ....ops.loss import nll_layout

    _, c, _ = nll_layout(xshape)
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    block = kir.Block([kir.Alloc(res)], res)
    positions = (1,) if len(xshape) == 1 else (xshape[0],) + tuple(xshape[2:])
    t = args[1].buf
    cls = kir.Var(f"{out}_c", t.dtype)
    weight = args[2]  # class weights, or one literal weight for every class
    wc = (kir.Const(float(weight.value), dt) if isinstance(weight, kir.Const)
          else as_dtype(weight.buf[cls], dt))
    ignore = kir.const(node.attrs["ignore_index"])
    bad = kir.Bin("or", kir.Bin("<", cls, kir.const(0)), kir.Bin(">=", cls, kir.const(c)))

    def xat(at: tuple, k: kir.Expr) -> tuple:
        return (k,) if len(xshape) == 1 else (at[0], k) + at[1:]

    def loops(body: Callable, ignored: Callable = lambda at: (), before: Callable =
              lambda at: ()) -> list:
        return nest(positions, f"{out}_i", lambda at: [*before(at), kir.Let(cls, t[at]), kir.If(
            kir.Bin("!=", cls, ignore),
            (kir.If(bad, (kir.Raise("IndexError", "nll_loss: Target is out of bounds."),)),
             *body(at, cls, wc)), tuple(ignored(at)))])

    return block, res, c, xat, loops


@lowers("nll_loss")
def _nll_loss(node: Node, args: list, out: str) -> kir.Block:
    """The picked log-probabilities times minus their weights; reduced, a float64 total
    (over the float64 total weight for the mean)."""
    block, res, c, xat, loops = _nll_frame(node, args, out, tuple(node.inputs[0].shape))
    dt = res.dtype
    x = args[0].buf

    def loss(at: tuple, cls: kir.Var, wc: kir.Expr) -> kir.Expr:
        return -wc * as_dtype(x[xat(at, cls)], dt)

    if node.attrs["reduction"] == "none":
        return block.add(*loops(
            lambda at, cls, wc: [kir.Store(res, at, loss(at, cls, wc))],
            lambda at: [kir.Store(res, at, kir.Const(0.0, dt))]))
    f8 = np.dtype(np.float64)
    tot, tw = kir.Var(f"{out}_tot", f8), kir.Var(f"{out}_tw", f8)
    block.add(kir.Let(tot, kir.Const(0.0, f8)), kir.Let(tw, kir.Const(0.0, f8)), *loops(
        lambda at, cls, wc: [kir.Accum(tot, "add", loss(at, cls, wc)),
                             kir.Accum(tw, "add", wc)]))
    total = tot / tw if node.attrs["reduction"] == "mean" else tot
    # error_model numpy: an all-ignored mean is 0/0, nan
    return block.add(kir.Store(res, (kir.const(0),), kir.Cast(total, dt)))


@lowers("nll_loss_backward")
def _nll_loss_backward(node: Node, args: list, out: str) -> kir.Block:
    """Zero but at each position's class: minus its weight times the gradient (over the
    total weight for the mean). Each line of classes is zeroed as the loop reaches it."""
    block, res, c, xat, loops = _nll_frame(node, args, out, tuple(node.attrs["shape"]))
    dt = res.dtype
    reduction = node.attrs["reduction"]
    g = args[0].buf
    if reduction == "none":
        grad: Callable = lambda at: as_dtype(g[at], dt)  # noqa: E731
    else:
        g0 = as_dtype(g[kir.const(0)], dt)
        grad = lambda at: g0  # noqa: E731
    if reduction == "mean":  # the summed weights first: every gradient is divided by them
        tw = kir.Var(f"{out}_tw", np.float64)
        block.add(kir.Let(tw, kir.Const(0.0, np.dtype(np.float64))),
                  *loops(lambda at, cls, wc: [kir.Accum(tw, "add", wc)]))
        scaled = grad
        grad = lambda at: scaled(at) / tw  # noqa: E731
    z = kir.Var(f"{out}_z")
    return block.add(*loops(
        lambda at, cls, wc: [kir.Store(res, xat(at, cls), as_dtype(-wc * grad(at), dt))],
        before=lambda at: [kir.Loop(z, c, (kir.Store(res, xat(at, z), kir.Const(0.0, dt)),))]))
