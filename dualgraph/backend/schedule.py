"""Scheduling passes over the kernel IR: small pure functions from a `kir.Block` to a new
one (or None where the pass does not apply), each decided on the block's structure.

- `write_into`: a block that allocates its result and only fills it writes an array it is
  given instead (an output buffer): the allocation and the copy at the end go.
- `hoist_allocations`: a kernel's top-level allocations (its work arrays) are bound at
  its entry.
- `share_subexpressions`: an expression a statement computes twice is computed once,
  into a let.
- `swap_product`: ``x @ W.T`` (W a C-ordered (out, in) weight, so ``W.T`` is F-ordered)
  computed as ``(W @ x.T).T`` when x has fewer rows than the product has columns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from . import kir

__all__ = ["hoist_allocations", "share_subexpressions", "swap_product", "write_into"]


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


# The longest contraction `swap_product` writes transposed for its epilogue's sake: the
# product then costs about as much as the epilogue's pass whichever way it is written
# (measured: 64x256 from k=10, both ways within 1 us).
SHORT_K = 64


def _flip(layout: str) -> str:
    return {"C": "F", "F": "C"}.get(layout, "A")


def swap_product(block: kir.Block,
                 layout: Callable[[kir.Buffer], str] | None = None,
                 epilogue_reads_f: bool = False) -> kir.Block | None:
    """A lone 2-D product ``x @ y`` with ``y`` F-ordered (a transposed view) and fewer
    rows than columns, as its transpose ``(y.T @ x.T).T`` into a (n, m) array.
    ``layout(buf)``: the layout the caller expects a buffer to have when the kernel runs
    (the transpose of an argument, known only as "A", is F-ordered unless the argument is
    a strided view); the operands are read in place by their actual layout either way.
    ``epilogue_reads_f``: the product's epilogue reads an F-ordered array of the result's
    shape element by element, and the contraction is short (at most `SHORT_K`): written
    transposed, the epilogue runs down the columns of both arrays, where a C-ordered
    result makes one of them strided (or, flattened, a transposing copy of it).

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
    packs_faster = (layout or (lambda b: b.layout))(y) == "F" and 0 < g.m < g.n
    if not (packs_faster or epilogue_reads_f and 0 < g.k <= SHORT_K and g.m > 0 and g.n > 0):
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



def hoist_allocations(stmts: list) -> list:
    """``stmts`` (a kernel's top-level statements) with their unfilled top-level
    allocations first, in order: they are the work arrays the caller passes, bound before
    anything runs. Standing between a graph node's comment and its loop, an allocation
    would keep the two apart when loops merge (the comment moves with the allocation
    above the merged loop, away from the statements it heads)."""
    allocs = [s for s in stmts if isinstance(s, kir.Alloc) and s.fill is None]
    return allocs + [s for s in stmts if not (isinstance(s, kir.Alloc) and s.fill is None)]


def share_subexpressions(stmts: list) -> list:
    """``stmts`` with every expression a `kir.Let` or `kir.Store` computes more than once
    computed once, into a new let in front of it; a new list, nested bodies included.

    A lowering may build its value as a graph (GELU's tail polynomial reads ``1 / (1 +
    0.35 |x|)`` nine times, and both branches of a select read the polynomial); printed as
    a tree, each use is Numba work of its own (every load a subscript to type and lower,
    every operation an instruction to type), which LLVM then merges again. Smallest
    repeated subexpressions are bound first, so a bound one is read by name in the larger
    ones. One evaluated only under a condition (a branch of a select, the right side of
    ``and``/``or``) is bound before the statement only when that cannot read or compute
    what the condition guards: when some use of it is evaluated unconditionally, or it
    reads no array and divides no integer. The same operations on the same operands give
    the same values."""
    return _Sharer(kir.Fresh("cs", kir.scalar_names(stmts))).body(stmts)


class _Sharer:
    """The sharing of one kernel. Every expression is known by a number that equal
    expressions share (`_Interned`), so counting a statement's subexpressions, again after
    each one bound, hashes no tree."""

    def __init__(self, fresh: kir.Fresh) -> None:
        self.fresh = fresh
        self.known = _Interned()

    def body(self, stmts: Any) -> list:
        out: list = []
        for s in stmts:
            if isinstance(s, kir.Loop):
                out.append(replace(s, body=tuple(self.body(s.body))))
            elif isinstance(s, kir.If):
                out.append(replace(s, then=tuple(self.body(s.then)),
                                   orelse=tuple(self.body(s.orelse))))
            elif isinstance(s, (kir.Let, kir.Store)):
                lets, value = self.share(s.value)
                out += lets
                out.append(replace(s, value=value))
            else:
                out.append(s)
        return out

    def share(self, e: kir.Expr) -> tuple[list, kir.Expr]:
        known = self.known
        lets: list = []
        while True:
            uses: dict[int, int] = {}  # in the order first met, as printed
            always: set[int] = set()
            known.census(e, True, uses, always)
            pick = None
            for x, n in uses.items():
                if n < 2 or not known.worth[x] or not (x in always or known.harmless[x]):
                    continue
                if pick is None or known.size[x] < known.size[pick]:
                    pick = x
            if pick is None:
                return lets, e
            v = self.fresh.var(known.expr[pick].dtype)
            lets.append(kir.Let(v, known.expr[pick]))
            e = known.substitute(e, pick, v)


class _Interned:
    """Expressions numbered by structure: equal expressions (frozen dataclasses compare
    by their fields) get one number, found from the numbers of their operands, so a tree
    is hashed once, node by node. Per number: an expression, its size (`_size`), whether
    binding it is worth it (`_worth`) and whether evaluating it early is harmless
    (`_harmless`). The objects met are kept, so their ids stay theirs."""

    def __init__(self) -> None:
        self.of_id: dict[int, int] = {}
        self.kept: list = []
        self.number: dict[tuple, int] = {}
        self.expr: list = []
        self.size: list[int] = []
        self.worth: list[bool] = []
        self.harmless: list[bool] = []

    def get(self, e: Any) -> int:
        n = self.of_id.get(id(e))
        if n is not None:
            return n
        kids = _kids(e)
        nums = tuple(self.get(k) if isinstance(k, kir.Expr) else ("lit", k) for k in kids)
        if isinstance(e, kir.Load):
            key: tuple = (kir.Load, e.buf, nums)
        elif isinstance(e, kir.Call):
            key = (kir.Call, e.fn, nums, e.dtype)
        elif isinstance(e, (kir.Bin, kir.Un)):
            key = (type(e), e.op, nums)
        elif isinstance(e, kir.Cast):
            key = (kir.Cast, nums, e.dtype)
        elif isinstance(e, kir.Select):
            key = (kir.Select, nums)
        else:  # a leaf (a constant, a name) is its own key
            key = (type(e), e)
        n = self.number.get(key)
        if n is None:
            n = self.number[key] = len(self.expr)
            self.expr.append(e)
            self.size.append(1 + sum(self.size[k] if isinstance(k, int) else 1 for k in nums))
            self.worth.append(_worth(e))
            self.harmless.append(_harmless_here(e) and all(
                self.harmless[k] for k in nums if isinstance(k, int)))
        self.of_id[id(e)] = n
        self.kept.append(e)
        return n

    def census(self, e: Any, always: bool, uses: dict, seen: set) -> None:
        """Count every subexpression's uses as printed, by number (``seen``: those
        evaluated whenever the whole expression is); a load's integer indices are
        constants, never bound, and are not counted."""
        n = self.get(e)
        uses[n] = uses.get(n, 0) + 1
        if always:
            seen.add(n)
        if isinstance(e, kir.Load):
            for i in e.index:
                if isinstance(i, kir.Expr):
                    self.census(i, always, uses, seen)
        elif isinstance(e, kir.Bin):
            self.census(e.a, always, uses, seen)
            self.census(e.b, always and e.op not in kir.LOGIC, uses, seen)
        elif isinstance(e, (kir.Un, kir.Cast)):
            self.census(e.a, always, uses, seen)
        elif isinstance(e, kir.Call):
            for a in e.args:
                if isinstance(a, kir.Expr):
                    self.census(a, always, uses, seen)
        elif isinstance(e, kir.Select):
            self.census(e.cond, always, uses, seen)
            self.census(e.a, False, uses, seen)
            self.census(e.b, False, uses, seen)

    def substitute(self, e: Any, old: int, new: kir.Expr) -> Any:
        """``e`` with every expression numbered ``old`` replaced by ``new``; a subtree
        holding none is returned as it is."""
        if not isinstance(e, kir.Expr):
            return e
        if self.get(e) == old:
            return new
        if isinstance(e, kir.Load):
            index = tuple(self.substitute(i, old, new) for i in e.index)
            return e if all(a is b for a, b in zip(index, e.index)) else replace(e, index=index)
        if isinstance(e, kir.Bin):
            a, b = self.substitute(e.a, old, new), self.substitute(e.b, old, new)
            return e if a is e.a and b is e.b else replace(e, a=a, b=b)
        if isinstance(e, (kir.Un, kir.Cast)):
            a = self.substitute(e.a, old, new)
            return e if a is e.a else replace(e, a=a)
        if isinstance(e, kir.Call):
            args = tuple(self.substitute(a, old, new) for a in e.args)
            return e if all(a is b for a, b in zip(args, e.args)) else replace(e, args=args)
        if isinstance(e, kir.Select):
            c, a, b = (self.substitute(x, old, new) for x in (e.cond, e.a, e.b))
            return e if c is e.cond and a is e.a and b is e.b else replace(
                e, cond=c, a=a, b=b)
        return e


def _kids(e: Any) -> tuple:
    """The operands of an expression, as `kir.subexprs` walks them."""
    if isinstance(e, kir.Load):
        return tuple(e.index)
    if isinstance(e, kir.Bin):
        return (e.a, e.b)
    if isinstance(e, (kir.Un, kir.Cast)):
        return (e.a,)
    if isinstance(e, kir.Call):
        return tuple(e.args)
    if isinstance(e, kir.Select):
        return (e.cond, e.a, e.b)
    return ()


def _worth(e: kir.Expr) -> bool:
    """Binding ``e`` saves work: it loads or computes (a constant or a name is free, a
    cast of one nearly so)."""
    if isinstance(e, (kir.Const, kir.Var)):
        return False
    return not (isinstance(e, kir.Cast) and isinstance(e.a, (kir.Const, kir.Var)))


def _harmless_here(x: Any) -> bool:
    """``x`` itself, not its operands, neither reads an array nor divides or raises to
    a power an integer."""
    if isinstance(x, kir.Load):
        return False
    return not (isinstance(x, kir.Bin) and x.op in ("//", "%", "/", "**")
                and x.dtype.kind in "iub")


