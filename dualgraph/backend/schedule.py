"""Scheduling passes over the kernel IR: small pure functions from a `kir.Block` to a new
one (or None where the pass does not apply), each decided on the block's structure.

- `write_into`: a block that allocates its result and only fills it writes an array it is
  given instead (an output buffer): the allocation and the copy at the end go.
- `swap_product`: ``x @ W.T`` (W a C-ordered (out, in) weight, so ``W.T`` is F-ordered)
  computed as ``(W @ x.T).T`` when x has fewer rows than the product has columns.
- `merge_loops`: adjacent loops of the same range become one where dependence analysis
  on their affine indices proves no result changes (Numba's compile time grows with every
  loop nest, about 50 ms each, and each nest is a pass over memory).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from . import kir

__all__ = ["merge_loops", "swap_product", "write_into"]


def write_into(block: kir.Block, target: kir.Buffer) -> kir.Block | None:
    """``block`` computing its result in ``target`` (same shape and dtype), or None when
    the block does not just fill a result it allocates."""
    res = block.result
    if res is None or not block.fills(res) or target.shape != res.shape or (
            target.dtype != res.dtype):
        return None
    first = next(k for k, s in enumerate(block.stmts) if not isinstance(s, kir.Comment))
    stmts = list(block.stmts)
    stmts[first] = kir.View(res, target, "alias")
    return kir.Block(stmts, res)


def _flip(layout: str) -> str:
    return {"C": "F", "F": "C"}.get(layout, "A")


def swap_product(block: kir.Block) -> kir.Block | None:
    """A lone 2-D product ``x @ y`` with ``y`` F-ordered (a transposed view) and fewer
    rows than columns, as its transpose ``(y.T @ x.T).T`` into a (n, m) array.

    OpenBLAS packs its first column-major operand; for ``x @ W.T`` written row-major that
    operand is W read across its rows, and packing it is slow enough to dominate when x
    has few rows. Written transposed, the product packs W along its rows and x across
    them. Measured (single-core OpenBLAS 0.3.31, float32, k=784, n=256): m=16 157 -> 82
    us, m=64 336 -> 276 us, m=128 580 -> 535 us, m=256 even, m=512 +4%; at n=10 and
    m >= 128, +60%: so only when x has fewer rows than the product columns.
    """
    stmts = [s for s in block.stmts if not isinstance(s, kir.Comment)]
    res = block.result
    if len(stmts) != 2 or res is None:
        return None
    alloc, g = stmts
    if not (isinstance(alloc, kir.Alloc) and alloc.buf == res and isinstance(g, kir.Gemm)):
        return None
    if (g.c.buf != res or g.c.ld != g.n or g.c.offset != 0 or g.batch != 1 or g.ta or g.tb
            or g.a.resolved or g.b.resolved or len(res.shape) != 2):
        return None
    x, y = g.a.buf, g.b.buf
    if y.layout != "F" or not 0 < g.m < g.n:
        return None
    name = res.name
    res_t = kir.Buffer(f"{name}t", (g.n, g.m), res.dtype, res.role)
    y_t = kir.Buffer(f"{name}_yt", (g.n, g.k), y.dtype, kir.VIEW, _flip(y.layout))
    x_t = kir.Buffer(f"{name}_xt", (g.k, g.m), x.dtype, kir.VIEW, _flip(x.layout))
    out = kir.Buffer(name, res.shape, res.dtype, kir.VIEW, "F")
    return kir.Block([
        kir.Alloc(res_t),
        kir.View(y_t, y, "transpose", (1, 0)),
        kir.View(x_t, x, "transpose", (1, 0)),
        kir.Gemm(g.n, g.m, g.k, kir.Operand(y_t, None), kir.Operand(x_t, None),
                 kir.Operand(res_t, g.m)),
        kir.View(out, res_t, "transpose", (1, 0)),
    ], out)


# ------------------------------------------------------------------- loop merging
def merge_loops(stmts: list) -> list:
    """``stmts`` (a kernel's top-level statements) with adjacent loops of the same range
    merged where no result changes, at every nesting level of a merged loop; a new list.

    Two loops A (first) and B with the same extent, start, step and parallel flag become
    one running A's body then B's (B's variable renamed to A's) when, for every array one
    of them writes and the other touches, every access to it in either body is the same
    index through the array itself (not a view that moves elements) and that index has a
    dimension that is a function of the merged variable alone (beside enclosing loops'):
    then iteration ``i`` of B meets only iteration ``i`` of A. A scalar one body binds may
    not be read or bound by the other. Only comments, allocations and views may stand
    between the loops: they move above the merged loop (comments into it, in front of
    B's statements, so each node's comment stays with its statements). A `Gemm`,
    `LibCall`, `Source`, `Raise` or `Jump` in either body keeps them apart; a buffer a
    `kir.Source` binds may be any array.
    """
    return _merge(list(stmts), _roots(stmts), frozenset())


_ANY = "*"  # the root of a buffer that may share memory with any array


def _roots(stmts: list) -> dict:
    """Buffer name -> (the array it is, whether its indices are that array's)."""
    roots: dict = {}
    for s in kir.walk(stmts):
        if isinstance(s, kir.Alloc):
            roots[s.buf.name] = (s.buf.name, True)
        elif isinstance(s, kir.View):
            base, same = roots.get(s.base.name, (s.base.name, True))
            roots[s.buf.name] = (base, same and s.how == "alias")
        elif isinstance(s, kir.Source):
            roots.update({b.name: (_ANY, False) for b in s.defines})
    return roots


def _merge(stmts: list, roots: dict, outer: frozenset) -> list:
    out: list = []
    last = None  # position in ``out`` of the loop a next loop may merge into
    between: list = []  # comments, allocations and views since that loop
    for s in stmts:
        if isinstance(s, kir.Loop) and last is not None:
            a = out[last]
            merged = _merged(a, s, roots, outer)
            if merged is not None:
                moved = [b for b in between if not isinstance(b, kir.Comment)]
                notes = tuple(b for b in between if isinstance(b, kir.Comment))
                body = _merge(list(a.body) + list(notes + merged), roots,
                              outer | {a.var.name})
                del out[last:]
                out += moved
                last = len(out)
                out.append(replace(a, body=tuple(body)))
                between = []
                continue
        if isinstance(s, kir.Loop):
            last, between = len(out), []
        elif last is not None and isinstance(s, (kir.Comment, kir.Alloc, kir.View)):
            between.append(s)
        else:
            last, between = None, []
        out.append(s)
    return out


def _merged(a: kir.Loop, b: kir.Loop, roots: dict, outer: frozenset) -> tuple | None:
    """B's body with its variable renamed to A's when the two loops may merge."""
    if (a.extent, a.start, a.step, a.parallel) != (b.extent, b.start, b.step, b.parallel):
        return None
    if b.var != a.var and any(isinstance(s, (kir.Loop, kir.Let, kir.Accum))
                              and s.var.name == a.var.name for s in kir.walk(b.body)):
        return None  # renaming B's variable would capture one of B's own
    body = b.body if b.var == a.var else _rename(b.body, b.var.name, a.var)
    ax, bx = _accesses(a.body, roots), _accesses(body, roots)
    if ax is None or bx is None:
        return None
    (aw, ar, abound, aused), (bw, br, bbound, bused) = ax, bx
    if abound & (bused | bbound) or bbound & aused:
        return None
    own = outer | {a.var.name}
    for writes, other in ((aw, bw + br), (bw, ar)):
        for root, same, index in writes:
            for oroot, osame, oindex in other:
                if root != oroot and _ANY not in (root, oroot):
                    continue
                if not (same and osame and _apart(index, oindex, a.var.name, own)):
                    return None
    return body


def _apart(x: tuple, y: tuple, var: str, own: frozenset) -> bool:
    """Some dimension is indexed by the same function of ``var`` (and enclosing loops')
    alone in both, with a nonzero coefficient on ``var``: two accesses in different
    iterations of the merged loop touch different cells."""
    if len(x) != len(y):
        return False
    for e, f in zip(x, y):
        form = kir.affine(e)
        if (form is not None and form == kir.affine(f) and form[0].get(var)
                and set(form[0]) <= own):
            return True
    return False


def _accesses(body: tuple, roots: dict) -> tuple | None:
    """(writes, reads) as (root, same, index) triples, the scalars bound and those read;
    None when the body holds a statement the analysis does not see through."""
    writes: list = []
    reads: list = []
    bound: set = set()
    used: set = set()

    def root(b: kir.Buffer) -> tuple:
        return roots.get(b.name, (b.name, True))

    for s in kir.walk(body):
        if not isinstance(s, (kir.Let, kir.Store, kir.Loop, kir.If, kir.Accum, kir.Comment)):
            return None
        if isinstance(s, (kir.Let, kir.Accum)):
            bound.add(s.var.name)
            if isinstance(s, kir.Accum):
                used.add(s.var.name)
        if isinstance(s, kir.Store):
            writes.append((*root(s.buf), s.index))
            if s.combine:
                reads.append((*root(s.buf), s.index))
        for e in kir.exprs_of(s):
            for x in kir.subexprs(e):
                if isinstance(x, kir.Load):
                    reads.append((*root(x.buf), x.index))
                elif isinstance(x, kir.Var):
                    used.add(x.name)
    loops = {s.var.name for s in kir.walk(body) if isinstance(s, kir.Loop)}
    return writes, reads, bound - loops, used - loops


def _rename(node: Any, old: str, new: kir.Var) -> Any:
    """``node`` (statements, expressions) with variable ``old`` replaced by ``new``."""
    if isinstance(node, kir.Var):
        return new if node.name == old else node
    if isinstance(node, tuple):
        return tuple(_rename(x, old, new) for x in node)
    if isinstance(node, list):
        return [_rename(x, old, new) for x in node]
    if is_dataclass(node) and not isinstance(node, kir.Buffer):
        return replace(node, **{f.name: _rename(getattr(node, f.name), old, new)
                                for f in fields(node) if f.init})
    return node
