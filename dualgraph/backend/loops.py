"""Loop merging on the kernel IR: adjacent loop nests over the same range become one nest
when dependence analysis on their affine indices proves it changes no result.

Numba's compile time grows with every loop it types and optimises (about 50 ms each), and
every nest is a pass over memory. A training step has runs of same-range nests: an Adam
update is three nests of one parameter's shape, a fused epilogue is followed by a
reduction of its result, a per-row statistic by the loop that uses it.

Two loops A (first) and B over the same range (equal extent, start, step and parallel
flag) become one loop running A's body then B's, B's loop variable renamed to A's. In the
merged loop, iteration ``i`` of A runs before iteration ``j`` of B only when ``i <= j``,
so the merge is legal when no iteration of B touches memory that a later iteration of A
touches, where either writes it. This pass proves the stronger property that they touch
it at the same iteration: for every pair of accesses, one in each body, to the same array
(through views: `Memory`), at least one of them a write, some dimension of the array is
indexed by the same affine expression in both, with a nonzero coefficient on the merged
variable and otherwise only variables of enclosing loops. Then ``x[i]`` of B meets only
``x[i]`` of A, and never ``x[i + 1]``, ``x[j, i]`` or ``x[0]``.

Scalars are checked the same way: a name one body binds (a `Let`, an `Accum`, an inner
loop variable) must not be read by the other before it binds it itself, so a reduction
into a scalar stays apart from the nest that reads its result.

The merged body is merged again, so perfect nests merge at every level (``for i: for j``
twice becomes one two-deep nest) and imperfect ones at the levels they share. Between the
two loops only `Comment`, `Alloc`, `View` and `Let` may stand, and only when they do not
depend on the first loop; they move above it (the comments that head B go into the merged
body, in front of B's statements, so each source-map comment stays with its statements).
Anything else is a barrier: a `Gemm`, `LibCall`, `Raise` or `Jump` between the loops or
inside either body, an allocation or view inside a body, a statement this module does not
know (opaque text), a non-affine loop bound, and any statement the caller's ``keep``
marks.

Parameters (roles arg, out, scratch) are distinct arrays; an array the statements neither
allocate nor view, nor receive as a parameter, may share memory with any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

import numpy as np

from . import kir

__all__ = ["Memory", "flatten_nests", "hoist_invariants", "merge_loops"]

# Statements a loop body may hold for its accesses to be understood.
_UNDERSTOOD = (kir.Comment, kir.Let, kir.Store, kir.Loop, kir.If, kir.Accum)
# Statements that may stand between two loops (and move above the first).
_MOVABLE = (kir.Comment, kir.Alloc, kir.View, kir.Let)
# Buffer roles the caller passes: each its own array.
_PARAMS = (kir.ARG, kir.OUT, kir.SCRATCH)

Form = tuple  # (coefficients by variable name, constant): `kir.affine`'s reading


def merge_loops(stmts: Iterable, keep: Callable[[Any], bool] | None = None) -> list:
    """``stmts`` (a kernel's statements, or a `kir.Block`) with adjacent loop nests merged
    where that is proven not to change any result, at every nesting level; a new list,
    ``stmts`` untouched. ``keep(stmt)`` true: the statement stays where it is and is a
    barrier (the caller knows something the IR does not say)."""
    stmts = list(stmts.stmts if isinstance(stmts, kir.Block) else stmts)
    return _Merger(Memory(stmts), keep or (lambda s: False)).level(stmts, frozenset())


# --------------------------------------------------------------------------- memory
class Memory:
    """Which array each buffer of a kernel is, and where its elements are in it: a
    view's index maps to its base's through aliases, transposes, slices and reshapes
    that only add or drop size-1 dimensions; other reshapes are opaque."""

    def __init__(self, stmts: Iterable) -> None:
        self.defs: dict[str, Any] = {}  # name -> its Alloc or View; None: bound twice
        for s in kir.walk(stmts):
            if isinstance(s, (kir.Alloc, kir.View)):
                name = s.buf.name
                self.defs[name] = None if name in self.defs else s
            elif not isinstance(s, _UNDERSTOOD + _MOVABLE):
                # A statement this module does not know (transitional source text) may
                # bind the buffers it declares to anything.
                for b in getattr(s, "defines", ()):
                    self.defs[b.name] = None

    def locate(self, buf: kir.Buffer, coords: tuple | None) -> tuple[str | None, tuple | None]:
        """The array ``buf`` lives in (None: unknown, may be any) and ``coords`` (the
        index as affine forms, None where not affine; None: unknown) in that array."""
        for _ in range(64):
            name = buf.name
            if name not in self.defs:
                return (name, coords) if buf.role in _PARAMS else (None, None)
            d = self.defs[name]
            if d is None:
                return None, None
            if isinstance(d, kir.Alloc):
                return name, coords
            coords = _through(d, coords)
            buf = d.base
        return None, None


def _int(x: Any) -> int | None:
    if isinstance(x, kir.Const):
        x = x.value
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return int(x)
    return None


def _shape(b: kir.Buffer) -> tuple:
    return b.shape or (1,)


def _scale(f: Form | None, k: int, c: int) -> Form | None:
    if f is None:
        return None
    return {v: k * a for v, a in f[0].items()}, k * f[1] + c


def _through(view: kir.View, coords: tuple | None) -> tuple | None:
    """``coords`` in ``view.buf`` as coordinates in ``view.base`` (None: unknown)."""
    if coords is None:
        return None
    base = _shape(view.base)
    if view.how == "alias":
        return coords
    if view.how == "transpose":
        if len(view.arg) != len(coords) or len(base) != len(coords):
            return None
        out: list = [None] * len(base)
        for k, ax in enumerate(view.arg):
            out[ax] = coords[k]
        return tuple(out)
    if view.how == "slice":
        out, k = [], 0
        arg = tuple(view.arg)
        for d, dim in enumerate(base):
            e = arg[d] if d < len(arg) else (None, None, None)
            if isinstance(e, slice):
                e = (e.start, e.stop, e.step)
            if isinstance(e, tuple):
                if k >= len(coords):
                    return None
                start, _, step = (tuple(e) + (None, None, None))[:3]
                step = 1 if step is None else _int(step)
                start = (0 if step is not None and step > 0 else dim - 1) if start is None \
                    else _int(start)
                if start is not None and start < 0:
                    start += dim
                ok = step is not None and start is not None and 0 <= start < dim
                out.append(_scale(coords[k], step, start) if ok else None)
                k += 1
            elif isinstance(e, (int, np.integer, kir.Expr)):
                c = _int(e)  # None: an index known only when the kernel runs
                if c is not None and c < 0:
                    c += dim
                out.append(None if c is None else ({}, c))
            else:
                return None
        return tuple(out) if k == len(coords) else None
    if view.how == "reshape":
        mine = [k for k, n in enumerate(_shape(view.buf)) if n != 1]
        theirs = [d for d, n in enumerate(base) if n != 1]
        if [view.buf.shape[k] for k in mine] != [base[d] for d in theirs]:
            if len(coords) == 1 and view.buf.shape == (math.prod(base),):
                # A whole array's flat view (`flatten_nests`): its index, past the base's
                # dimensions, so it lines up with the same flat index only, never with
                # an n-d subscript of the base.
                return (None,) * len(base) + (coords[0],)
            return None
        out = [({}, 0)] * len(base)
        for k, d in zip(mine, theirs):
            out[d] = coords[k]
        return tuple(out)
    return None


# ------------------------------------------------------------------------- accesses
@dataclass
class _Scan:
    """What a statement list does: its array accesses (write?, buffer, index), the
    scalar names it binds, the names it reads before binding them, the buffers it names,
    and whether every statement in it is understood."""

    accesses: list = field(default_factory=list)
    binds: set = field(default_factory=set)
    free: set = field(default_factory=set)
    buffers: set = field(default_factory=set)
    ok: bool = True


def _scan(stmts: Iterable, keep: Callable, bound: frozenset = frozenset(),
          into: _Scan | None = None) -> _Scan:
    sc = _Scan() if into is None else into
    bound = set(bound)

    def read(e: Any) -> None:
        for x in kir.subexprs(kir.const(e)):
            if isinstance(x, kir.Var) and x.name not in bound:
                sc.free.add(x.name)
            elif isinstance(x, kir.Load):
                sc.accesses.append((False, x.buf, x.index))
                sc.buffers.add(x.buf.name)

    for s in stmts:
        if keep(s) or not isinstance(s, _UNDERSTOOD):
            sc.ok = False
        if isinstance(s, kir.Let):
            read(s.value)
            bound.add(s.var.name)
            sc.binds.add(s.var.name)
        elif isinstance(s, kir.Accum):
            read(s.value)
            read(s.var)
            sc.binds.add(s.var.name)
        elif isinstance(s, kir.Store):
            for i in s.index:
                read(i)
            read(s.value)
            sc.accesses.append((True, s.buf, s.index))
            if s.combine:
                sc.accesses.append((False, s.buf, s.index))
            sc.buffers.add(s.buf.name)
        elif isinstance(s, kir.Loop):
            read(s.extent)
            read(s.start)
            sc.binds.add(s.var.name)
            _scan(s.body, keep, frozenset(bound | {s.var.name}), sc)
        elif isinstance(s, kir.If):
            read(s.cond)
            _scan(s.then, keep, frozenset(bound), sc)
            _scan(s.orelse, keep, frozenset(bound), sc)
        elif isinstance(s, (kir.Alloc, kir.View)):
            sc.buffers.add(s.buf.name)
    return sc


def _key(coords: tuple | None) -> tuple | None:
    """Coordinates (affine forms) in a hashable form: ((var, coeff) pairs, const)."""
    if coords is None:
        return None
    return tuple(None if f is None else (tuple(sorted(f[0].items())), f[1]) for f in coords)


def _aligned(a: tuple | None, b: tuple | None, var: str, outer: frozenset) -> bool:
    """Two accesses at these coordinates (`_key`) can touch the same element only in the
    same iteration of ``var``: one dimension reads the same affine form in both, a
    multiple of ``var`` plus enclosing loop variables (fixed while the two loops run)."""
    if a is None or b is None:
        return False
    for fa, fb in zip(a, b):
        if fa is not None and fa == fb:
            coeffs = dict(fa[0])
            if coeffs.get(var) and set(coeffs) - {var} <= outer:
                return True
    return False


@dataclass
class _Nest:
    """A loop's body as merging sees it: `_Scan`'s names, and its accesses located in
    their arrays, each (write?, `_key` coordinates) once per array (None: unknown)."""

    ok: bool
    binds: set
    free: set
    buffers: set
    at: dict

    def written(self) -> set:
        return {r for r, accs in self.at.items() if any(w for w, _ in accs)}

    def __or__(self, o: _Nest) -> _Nest:
        at = {r: set(accs) for r, accs in self.at.items()}
        for r, accs in o.at.items():
            at.setdefault(r, set()).update(accs)
        return _Nest(self.ok and o.ok, self.binds | o.binds, self.free | o.free,
                     self.buffers | o.buffers, at)


def _same_bound(x: Any, y: Any, outer: frozenset) -> bool:
    fx, fy = kir.affine(kir.const(x)), kir.affine(kir.const(y))
    return fx is not None and fx == fy and set(fx[0]) <= outer


def _rename(x: Any, old: str, new: str) -> Any:
    """``x`` (a statement, an expression or a tuple of them) with the variable ``old``
    called ``new``."""
    if isinstance(x, kir.Var):
        return replace(x, name=new) if x.name == old else x
    if isinstance(x, (tuple, list)):
        return type(x)(_rename(i, old, new) for i in x)
    if isinstance(x, kir.Buffer) or not is_dataclass(x) or isinstance(x, type):
        return x
    return replace(x, **{f.name: _rename(getattr(x, f.name), old, new) for f in fields(x)})


# -------------------------------------------------------------------------- merging
class _Merger:
    def __init__(self, memory: Memory, keep: Callable) -> None:
        self.memory = memory
        self.keep = keep
        self.nests: dict = {}  # id(loop) -> (loop, its _Nest)

    def level(self, stmts: list, outer: frozenset) -> list:
        """One statement list merged (``outer``: the enclosing loops' variables), then
        every loop body and branch in it."""
        out: list = []
        last: int | None = None  # position in ``out`` of the loop a next one may join
        gap: list = []  # statements since that loop
        for s in stmts:
            if isinstance(s, kir.Loop) and not self.keep(s):
                joined = None if last is None else self.join(out[last], gap, s, outer)
                if joined is not None:
                    moved, loop = joined
                    at = last
                    while at > 0 and isinstance(out[at - 1], kir.Comment):
                        at -= 1  # above the comments that head the first loop
                    out[at:at] = moved
                    last += len(moved)
                    out[last] = loop
                else:
                    out += gap
                    out.append(s)
                    last = len(out) - 1
                gap = []
            elif last is not None and isinstance(s, _MOVABLE) and not self.keep(s):
                gap.append(s)
            else:
                out += gap
                out.append(s)
                gap, last = [], None
        out += gap
        return [self.inner(s, outer) for s in out]

    def inner(self, s: Any, outer: frozenset) -> Any:
        if self.keep(s):
            return s
        if isinstance(s, kir.Loop):
            return replace(s, body=tuple(self.level(list(s.body), outer | {s.var.name})))
        if isinstance(s, kir.If):
            return replace(s, then=tuple(self.level(list(s.then), outer)),
                           orelse=tuple(self.level(list(s.orelse), outer)))
        return s

    def nest(self, loop: kir.Loop) -> _Nest:
        """``loop``'s body summarised (cached: a loop that keeps merging is read once)."""
        hit = self.nests.get(id(loop))
        if hit is not None and hit[0] is loop:
            return hit[1]
        sc = _scan(loop.body, self.keep, frozenset({loop.var.name}))
        at: dict = {}
        for w, b, index in sc.accesses:
            root, coords = self.memory.locate(b, _forms(index))
            at.setdefault(root, set()).add((w, _key(coords)))
        nest = _Nest(sc.ok, sc.binds, sc.free, sc.buffers, at)
        self.nests[id(loop)] = (loop, nest)
        return nest

    def join(self, a: kir.Loop, gap: list, b: kir.Loop,
             outer: frozenset) -> tuple[list, kir.Loop] | None:
        """(the statements moved above ``a``, ``a`` and ``b`` as one loop), or None when
        merging them is not proven safe."""
        if (a.parallel != b.parallel or a.step != b.step
                or not _same_bound(a.extent, b.extent, outer)
                or not _same_bound(a.start, b.start, outer)):
            return None
        var = a.var.name
        sa = self.nest(a)
        if not sa.ok or not all(self.movable(g, a, sa) for g in gap):
            return None
        sb = self.nest(b)
        if b.var.name != var:
            if var in sb.free or var in sb.binds:
                return None  # the name would be captured
            b = replace(b, var=a.var, body=_rename(b.body, b.var.name, var))
            sb = self.nest(b)
        if not sb.ok or sa.binds & sb.free or sb.binds & sa.free or (
                sa.binds | sb.binds) & (outer | {var}):
            return None
        if not self.independent(sa.at, sb.at, var, outer):
            return None
        # The comments after the last statement moved head b's statements in the body.
        tail = len(gap)
        while tail > 0 and isinstance(gap[tail - 1], kir.Comment):
            tail -= 1
        loop = replace(a, body=tuple(a.body) + tuple(gap[tail:]) + tuple(b.body))
        self.nests[id(loop)] = (loop, sa | sb)
        return gap[:tail], loop

    @staticmethod
    def independent(xs: dict, ys: dict, var: str, outer: frozenset) -> bool:
        """Every pair of accesses (`_Nest.at`), one of ``xs`` and one of ``ys``, at least
        one a write, to memory that may overlap, is aligned on ``var``."""
        for ry, at_y in ys.items():
            cands = xs.values() if ry is None else (xs.get(ry, ()), xs.get(None, ()))
            for at_x in cands:
                for wx, cx in at_x:
                    for wy, cy in at_y:
                        if (wx or wy) and not _aligned(cx, cy, var, outer):
                            return False
        return True

    def movable(self, g: Any, a: kir.Loop, sa: _Nest) -> bool:
        """``g``, standing between ``a`` and the next loop, may move above ``a``: it
        neither names what ``a`` binds or reads nor reads what ``a`` writes."""
        if self.keep(g) or not isinstance(g, _MOVABLE):
            return False
        if isinstance(g, kir.Comment):
            return True
        if isinstance(g, kir.Alloc):
            return g.buf.name not in sa.buffers
        written = sa.written()

        def clash(buf: kir.Buffer) -> bool:
            root = self.memory.locate(buf, None)[0]
            return bool(written) and (root is None or None in written or root in written)

        if isinstance(g, kir.View):
            if g.buf.name in sa.buffers:
                return False
            # A reshape of a non-C array copies it where it stands: it reads the base.
            return g.how != "reshape" or g.base.layout == "C" or not clash(g.base)
        # Let
        bounds = _scan([kir.Let(kir.Var("_"), kir.const(e)) for e in (a.extent, a.start)],
                       self.keep)
        if g.var.name in sa.binds | sa.free | bounds.free | {a.var.name}:
            return False
        sg = _scan([kir.Let(kir.Var("_"), g.value)], self.keep)
        return not (sg.free & (sa.binds | {a.var.name})
                    or any(clash(b) for _, b, _ in sg.accesses))


def _forms(index: tuple) -> tuple:
    return tuple(kir.affine(kir.const(i)) for i in index)


# -------------------------------------------------------------------------- hoisting
def hoist_invariants(stmts: Iterable) -> list:
    """``stmts`` (a kernel's statements, or a `kir.Block`) with the work that is the same
    in every iteration of a loop done once, before it; a new list, ``stmts`` untouched.

    A loop body's top-level `kir.Let` moves above the loop when its value reads no
    variable the loop binds (its index, an accumulator, a let that stays) and no array
    the loop writes (located through views by `Memory`), and it is bound once in the
    body. Inside the lets and stores that stay, the largest invariant subexpressions that
    do work (a load, a math call, a power) become lets of their own and move too. Loops
    are processed innermost first, so work rises as far as it is invariant: Adam's bias
    corrections (two float64 powers of the 0-d step count per element, as the fused group
    reads them) are computed once per kernel call.

    Nothing moves out of a loop that might run no iteration (a bound not known to be
    positive), since a load moved out would then read an element the loop never reads;
    nor out of a loop whose body holds a statement merging does not understand (a
    library call, a GEMM, opaque text, a jump). The values are the same expressions, in
    the same order of operations: results are bit for bit those of the original.
    """
    stmts = list(stmts.stmts if isinstance(stmts, kir.Block) else stmts)
    return _Hoister(Memory(stmts), kir.Fresh("inv", kir.scalar_names(stmts))).level(stmts)


def _trips(loop: kir.Loop) -> int | None:
    start, stop = _int(loop.start), _int(loop.extent)
    if start is None or stop is None or not loop.step:
        return None
    return len(range(start, stop, loop.step))


class _Hoister:
    def __init__(self, memory: Memory, fresh: kir.Fresh) -> None:
        self.memory = memory
        self.fresh = fresh

    def level(self, stmts: list) -> list:
        out: list = []
        for s in stmts:
            if isinstance(s, kir.Loop):
                body = self.level(list(s.body))
                lifted, body = self.lift(s, body)
                out += lifted
                out.append(replace(s, body=tuple(body)))
            elif isinstance(s, kir.If):
                out.append(replace(s, then=tuple(self.level(list(s.then))),
                                   orelse=tuple(self.level(list(s.orelse)))))
            else:
                out.append(s)
        return out

    def lift(self, loop: kir.Loop, body: list) -> tuple[list, list]:
        """(the lets moved above ``loop``, its new body)."""
        trips = _trips(loop)
        sc = _scan(body, lambda s: False, frozenset({loop.var.name}))
        if not trips or trips <= 0 or not sc.ok:
            return [], body
        written = {self.memory.locate(b, None)[0] for w, b, _ in sc.accesses if w}
        once = _bound_once(body)
        # Names whose value may change between iterations: the loop's index and every
        # name bound in the body except the top-level lets decided below.
        variant = {loop.var.name} | (sc.binds - {s.var.name for s in body
                                                 if isinstance(s, kir.Let)})
        read_before: set = set()

        def invariant(e: kir.Expr) -> bool:
            for x in kir.subexprs(e):
                if isinstance(x, kir.Var) and x.name in variant:
                    return False
                if isinstance(x, kir.Load) and written and (
                        None in written or self.memory.locate(x.buf, None)[0] in written
                        or self.memory.locate(x.buf, None)[0] is None):
                    return False
            return True

        lifted: list = []
        kept: list = []
        for s in body:
            if (isinstance(s, kir.Let) and s.var.name in once
                    and s.var.name not in read_before and invariant(s.value)):
                lifted.append(s)
                continue
            if isinstance(s, kir.Let):
                s = replace(s, value=self.extract(s.value, invariant, lifted))
                variant.add(s.var.name)
            elif isinstance(s, kir.Store):
                s = replace(s, value=self.extract(s.value, invariant, lifted))
            kept.append(s)
            read_before |= {x.name for e in _reads(s) for x in kir.subexprs(e)
                            if isinstance(x, kir.Var)}
        return lifted, kept

    def extract(self, e: kir.Expr, invariant: Callable, lifted: list) -> kir.Expr:
        """``e`` with its largest invariant subexpressions that do work bound to new
        lets (appended to ``lifted``)."""
        if invariant(e):
            if not _works(e):
                return e
            v = self.fresh.var(e.dtype)
            lifted.append(kir.Let(v, e, "loop-invariant"))
            return v
        # Only operands evaluated whenever ``e`` is: not a load's index (a load is
        # invariant whole or not at all), not the branches of a select nor the right
        # side of ``and``/``or``, which may be skipped (and guard what they read).
        if isinstance(e, (kir.Un, kir.Cast)):
            return replace(e, a=self.extract(e.a, invariant, lifted))
        if isinstance(e, kir.Bin):
            b = e.b if e.op in kir.LOGIC else self.extract(e.b, invariant, lifted)
            return replace(e, a=self.extract(e.a, invariant, lifted), b=b)
        if isinstance(e, kir.Call):
            return replace(e, args=tuple(self.extract(a, invariant, lifted)
                                         if isinstance(a, kir.Expr) else a for a in e.args))
        if isinstance(e, kir.Select):
            return replace(e, cond=self.extract(e.cond, invariant, lifted))
        return e


def _works(e: kir.Expr) -> bool:
    """``e`` costs something to evaluate: it loads, calls a math function or raises to a
    power (a constant, a variable or a cast of them is free)."""
    return any(isinstance(x, (kir.Load, kir.Call)) or (isinstance(x, kir.Bin) and x.op == "**")
               for x in kir.subexprs(e))


def _bound_once(body: list) -> set:
    """Names a `kir.Let` binds exactly once in ``body`` (nested statements included), and
    nothing else binds."""
    seen: dict = {}
    for s in kir.walk(body):
        if isinstance(s, (kir.Let, kir.Accum, kir.Loop)):
            seen[s.var.name] = seen.get(s.var.name, 0) + (1 if isinstance(s, kir.Let) else 2)
    return {n for n, c in seen.items() if c == 1}


def _reads(s: Any) -> list:
    """The expressions statement ``s`` reads, nested statements included."""
    return [e for t in kir.walk([s]) for e in kir.exprs_of(t)] + (
        [s.var] if isinstance(s, kir.Accum) else [])


# ------------------------------------------------------------------------- flattening
# Roles of buffers the caller or the kernel allocates C-ordered: a flat view of one is
# the same memory, so stores through it land in the array itself.
_FRESH = (kir.OUT, kir.SCRATCH, kir.LOCAL)


def flatten_nests(stmts: Iterable, depth: int = 2,
                  sized: Callable[[int], bool] | None = None) -> list:
    """``stmts`` (a kernel's top-level statements, or a `kir.Block`) with each perfect
    elementwise nest over whole arrays as one loop over flat views of them; a new list.

    A nest qualifies when it is at least two loops deep, each loop from 0 by 1 over an
    integer extent, each holding only the next, and the innermost body only `kir.Let`,
    `kir.Store` and `kir.Comment`, whose every load and store indexes an array of exactly
    the nest's extents by exactly the nest's variables in order (so element ``(i0, .., ik)``
    is element ``i0 * .. + ik`` of every operand in C order), and no variable of the nest
    is read any other way. The arrays it stores to must be allocated C-ordered (output,
    work or local arrays, or aliases of them), so a flat view is the same memory; an array
    it only reads may have any layout (its flat view is a C-ordered copy when it is
    strided, as a `kir.View` reshape is). Iteration order and values are unchanged.

    Numba types, indexes and lowers each loop level and each n-d subscript separately: a
    4-D elementwise nest over three arrays compiles in about 80 ms beside an empty
    function's 55 ms, its flat form with views in about 45 ms. ``depth``: only nests at
    least that deep (a 2-D nest left for `merge_loops` joins its neighbours' loops).
    ``sized``: when given, only nests whose flat length it accepts (the printer reads a
    length an argument's shape gives from that shape; a literal one would make kernels
    that differ only in such a length, an RNN step at two sequence lengths, two modules)."""
    stmts = list(stmts.stmts if isinstance(stmts, kir.Block) else stmts)
    aliases = {s.buf.name: s.base for s in kir.walk(stmts)
               if isinstance(s, kir.View) and s.how == "alias"}
    taken = {b.name for s in kir.walk(stmts) for b in _buffers_of(s)}
    memory = Memory(stmts)
    made: dict[str, kir.Buffer] = {}
    out: list = []
    for s in stmts:
        flat = (_flatten(s, aliases, taken, memory, made, depth, sized)
                if isinstance(s, kir.Loop) else None)
        out += flat if flat is not None else [s]
    return out


def _buffers_of(s: Any) -> list:
    bufs = [s.buf] if isinstance(s, (kir.Alloc, kir.View, kir.Store, kir.Table)) else []
    if isinstance(s, kir.View):
        bufs.append(s.base)
    return bufs + [x.buf for e in kir.exprs_of(s) for x in kir.subexprs(e)
                   if isinstance(x, kir.Load)]


def _fresh_array(buf: kir.Buffer, aliases: dict) -> bool:
    for _ in range(64):
        if buf.role in _FRESH:
            return buf.layout == "C"
        if buf.role != kir.VIEW or buf.name not in aliases:
            return False
        buf = aliases[buf.name]
    return False


def _flatten(nest: kir.Loop, aliases: dict, taken: set, memory: Memory,
             made: dict | None = None, depth: int = 2,
             sized: Callable[[int], bool] | None = None) -> list | None:
    """``nest`` as flat views and one loop over them, or None (`flatten_nests`).
    ``made``: the flat views earlier nests made, by array name; one of an array allocated
    C-ordered is the array's own memory, so a later nest reads it again (one line less)."""
    made = {} if made is None else made
    loops = [nest]
    while len(loops[-1].body) == 1 and isinstance(loops[-1].body[0], kir.Loop):
        loops.append(loops[-1].body[0])
    if len(loops) < max(2, depth) or any(lp.parallel for lp in loops):
        # Numba's parallel loops write through a view made inside the kernel into an
        # array of their own (measured: the output came back unwritten).
        return None
    extents = []
    for lp in loops:
        n = _int(lp.extent)
        if n is None or n <= 0 or _int(lp.start) != 0 or lp.step != 1:
            return None
        extents.append(n)
    body = loops[-1].body
    if not all(isinstance(s, (kir.Let, kir.Store, kir.Comment)) for s in body):
        return None
    index = tuple(lp.var for lp in loops)
    nest_vars = {v.name for v in index}
    bufs: dict[str, kir.Buffer] = {}

    def check(e: kir.Expr) -> bool:
        if isinstance(e, kir.Load):
            if e.index != index or e.buf.shape != tuple(extents):
                return False
            bufs.setdefault(e.buf.name, e.buf)
            return True
        if isinstance(e, kir.Var):
            return e.name not in nest_vars
        kids = [k for k in (getattr(e, f, None) for f in ("a", "b", "cond"))
                if isinstance(k, kir.Expr)]
        if isinstance(e, kir.Call):
            kids = [k for k in e.args if isinstance(k, kir.Expr)]
        return all(check(k) for k in kids)

    for s in body:
        if isinstance(s, kir.Store):
            if (s.index != index or s.buf.shape != tuple(extents)
                    or not _fresh_array(s.buf, aliases)):
                return None
            bufs.setdefault(s.buf.name, s.buf)
        if isinstance(s, (kir.Let, kir.Store)) and not check(s.value):
            return None
    # A read array that may share memory with a stored one (another view of it) would
    # be read before the nest writes it when its flat view is a copy.
    stored = {s.buf.name for s in body if isinstance(s, kir.Store)}
    roots = {memory.locate(bufs[n], None)[0] for n in stored}
    # One that is itself a C-ordered array of its own or an alias of one (a mask the nest
    # stores, then reads back at the same element) is no copy: its flat view is the
    # same memory, element for element.
    for name, b in bufs.items():
        if name not in stored and (memory.locate(b, None)[0] in roots | {None}) \
                and not _fresh_array(b, aliases):
            return None
    size = math.prod(extents)
    if sized is not None and not sized(size):
        return None
    views, flat = [], {}
    for name, b in bufs.items():
        own = _fresh_array(b, aliases)
        root = b
        while own and root.name in aliases:
            root = aliases[root.name]
        if own and root.name in made:
            flat[name] = made[root.name]
            continue
        k = 0
        while f"{name}_fl{k}" in taken:
            k += 1
        taken.add(f"{name}_fl{k}")
        flat[name] = kir.Buffer(f"{name}_fl{k}", (size,), b.dtype, kir.VIEW, "C")
        views.append(kir.View(flat[name], b, "reshape"))
        if own:
            made[root.name] = flat[name]
    i = kir.Var(index[0].name)

    def sub(e: kir.Expr) -> kir.Expr:
        if isinstance(e, kir.Load):
            return kir.Load(flat[e.buf.name], (i,))
        if isinstance(e, kir.Call):
            return replace(e, args=tuple(sub(a) if isinstance(a, kir.Expr) else a
                                         for a in e.args))
        if isinstance(e, (kir.Un, kir.Cast)):
            return replace(e, a=sub(e.a))
        if isinstance(e, kir.Bin):
            return replace(e, a=sub(e.a), b=sub(e.b))
        if isinstance(e, kir.Select):
            return replace(e, cond=sub(e.cond), a=sub(e.a), b=sub(e.b))
        return e

    new_body = []
    for s in body:
        if isinstance(s, kir.Let):
            s = replace(s, value=sub(s.value))
        elif isinstance(s, kir.Store):
            s = replace(s, buf=flat[s.buf.name], index=(i,), value=sub(s.value))
        new_body.append(s)
    return views + [kir.Loop(i, size, tuple(new_body))]
