"""Random kernel IR programs through the reference executor (`kir_exec`).

- Hypothesis builds small well-formed programs: a few buffers (arguments, allocations,
  aliases and transposed views), one to three loop nests over one or two shared extents,
  with stores (``=`` and ``+=``), scalar lets and reductions into a scalar, at affine
  indices chosen to meet or miss each other (the loop's own cell, a shifted or reversed
  one, a transposed one, a constant). `kir.verify` accepts them and rejects each of them
  corrupted; `loops.merge_loops` leaves their results unchanged, element for element.
- The fuzz programs of the project (`tests/_support/random_programs.py`), lowered to kernel IR
  without compiling anything, run through the executor and agree with the graph
  interpreter.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dualgraph as dg
from dualgraph import passes as P
from dualgraph.backend import kir
from dualgraph.backend.loops import merge_loops

from .._support.random_programs import programs
from .._support.tolerance import tolerance
from .kir_exec import run

F8 = np.dtype(np.float64)


# ------------------------------------------------------------------ random kernels
class _Gen:
    """State of one program being drawn: the buffers so far and the scalars in scope."""

    def __init__(self, draw: Any, n0: int, n1: int) -> None:
        self.draw = draw
        self.n0, self.n1 = n0, n1
        self.bufs: list[kir.Buffer] = []
        self.params: list[kir.Buffer] = []
        self.scalars: list[kir.Var] = []
        self.written: list[kir.Buffer] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def shape(self) -> tuple:
        n0, n1 = self.n0, self.n1
        return self.draw(st.sampled_from([(n0, n1), (n0,), (n0 + 1, n1), (1, n1), (n0, 1),
                                          (n1, n0), (n0 + 1,)]))

    def index(self, buf: kir.Buffer, loops: list) -> tuple:
        """An in-range index of ``buf`` from the loop variables ``loops`` ((var, extent))."""
        out = []
        for d, dim in enumerate(buf.shape):
            if d < len(loops) and loops[d][1] <= dim and self.draw(st.booleans()):
                out.append(loops[d][0])  # the loop's own cell, most often
                continue
            cands: list = [kir.const(c) for c in range(min(dim, 2))]
            for v, n in loops:
                if n <= dim:
                    cands += [v, kir.const(dim - 1) - v]
                if n + 1 <= dim:
                    cands.append(v + 1)
            if len(loops) == 2 and loops[0][1] + loops[1][1] - 1 <= dim:
                cands.append(loops[0][0] + loops[1][0])
            out.append(self.draw(st.sampled_from(cands)))
        return tuple(out)

    def expr(self, loops: list, lets: list, depth: int = 0) -> kir.Expr:
        kinds = ["load", "const", "var"] + (["bin"] * 2 if depth < 2 else [])
        kinds += ["let"] * bool(lets) + ["scalar"] * bool(self.scalars)
        kind = self.draw(st.sampled_from(kinds))
        if kind == "load":
            # What an earlier statement wrote, often: dependences are what merging is about.
            b = self.draw(st.sampled_from(self.written if self.written and self.draw(
                st.booleans()) else self.bufs))
            return kir.Load(b, self.index(b, loops))
        if kind == "const":
            return kir.const(self.draw(st.sampled_from([0.5, -1.0, 2.0])), F8)
        if kind == "var":
            return kir.Cast(self.draw(st.sampled_from([v for v, _ in loops])), F8)
        if kind == "let":
            return self.draw(st.sampled_from(lets))
        if kind == "scalar":
            return self.draw(st.sampled_from(self.scalars))
        op = self.draw(st.sampled_from(["+", "-", "*"]))
        return kir.Bin(op, self.expr(loops, lets, depth + 1), self.expr(loops, lets, depth + 1))

    def body(self, loops: list, accums: list) -> tuple:
        stmts: list = []
        lets: list = []
        for _ in range(self.draw(st.integers(1, 3))):
            kind = self.draw(st.sampled_from(["store", "store", "let", "accum"]))
            if kind == "let":
                v = kir.Var(self.name("t"), F8)
                stmts.append(kir.Let(v, self.expr(loops, lets)))
                lets.append(v)
            elif kind == "accum" and accums:
                v = self.draw(st.sampled_from(accums))
                stmts.append(kir.Accum(v, "add", self.expr(loops, lets)))
            else:
                b = self.draw(st.sampled_from([b for b in self.bufs if b.role != kir.VIEW
                                               or b.layout == "C"] or self.bufs))
                combine = self.draw(st.sampled_from([None, None, "+"]))
                self.written.append(b)
                stmts.append(kir.Store(b, self.index(b, loops), self.expr(loops, lets),
                                       combine))
        return tuple(stmts)

    def nest(self, accums: list) -> kir.Loop:
        names = self.draw(st.sampled_from([("i", "j"), ("k", "m")]))
        i, j = kir.Var(names[0]), kir.Var(names[1])
        deep = self.draw(st.booleans())
        loops = [(i, self.n0)] + [(j, self.n1)] * deep
        body = self.body(loops, accums)
        if deep:
            body = (kir.Loop(j, self.n1, body),)
        return kir.Loop(i, self.n0, body, parallel=self.draw(st.booleans()) and
                        self.draw(st.booleans()))

    def between(self) -> list:
        """Statements between two nests: comments, allocations, views, a scalar."""
        out: list = []
        for _ in range(self.draw(st.integers(0, 2))):
            kind = self.draw(st.sampled_from(["transpose", "comment", "alloc", "alias",
                                              "scalar"]))
            if kind == "comment":
                out.append(kir.Comment(self.name("%")))
            elif kind == "alloc":
                b = kir.Buffer(self.name("l"), self.shape(), F8)
                out.append(kir.Alloc(b, 0.0))
                self.bufs.append(b)
            elif kind == "alias":
                base = self.draw(st.sampled_from(self.bufs))
                b = kir.Buffer(self.name("v"), base.shape, F8, kir.VIEW, base.layout)
                out.append(kir.View(b, base, "alias"))
                self.bufs.append(b)
                if base in self.written:
                    self.written.append(b)
            elif kind == "transpose":
                two = [b for b in self.bufs if len(b.shape) == 2]
                if two:
                    base = self.draw(st.sampled_from(two))
                    b = kir.Buffer(self.name("v"), base.shape[::-1], F8, kir.VIEW, "A")
                    out.append(kir.View(b, base, "transpose", (1, 0)))
                    self.bufs.append(b)
                    if base in self.written:
                        self.written.append(b)
            else:
                v = kir.Var(self.name("s"), F8)
                b = self.draw(st.sampled_from(self.bufs))
                out.append(kir.Let(v, kir.Load(b, tuple(kir.const(0) for _ in b.shape))))
                self.scalars.append(v)
        return out


@st.composite
def kernels(draw: Any) -> tuple[list, list]:
    """(parameter buffers, statements) of a small random kernel."""
    sizes = st.sampled_from([3, 2, 1])
    g = _Gen(draw, draw(sizes), draw(sizes))
    for _ in range(draw(st.integers(1, 3))):
        b = kir.Buffer(g.name("a"), g.shape(), F8, kir.ARG)
        g.bufs.append(b)
        g.params.append(b)
    out = kir.Buffer("res", (2,), F8, kir.OUT)
    g.params.append(out)
    stmts: list = []
    accums: list = []
    if draw(st.booleans()):
        acc = kir.Var(g.name("acc"), F8)
        stmts.append(kir.Let(acc, kir.const(0.0, F8)))
        accums.append(acc)
        g.scalars.append(acc)
    for n in range(draw(st.sampled_from([2, 3, 1]))):
        if n:
            stmts += g.between()
        stmts.append(g.nest(accums))
    # What scalars hold at the end is part of the result.
    for k, v in enumerate(g.scalars[-2:]):
        stmts.append(kir.Store(out, (kir.const(k),), v))
    return g.params, stmts


def execute(params: list, stmts: list, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    arrays = {p.name: rng.standard_normal(p.shape).astype(p.dtype) for p in params}
    env = run(stmts, arrays)
    return {k: v for k, v in env.items() if isinstance(v, np.ndarray)}


def top_loops(stmts: list) -> int:
    return sum(isinstance(s, kir.Loop) for s in stmts)


FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(kernels())
def test_merging_loops_keeps_every_result(kernel: tuple) -> None:
    params, stmts = kernel
    kir.verify(stmts, params)
    merged = merge_loops(stmts)
    kir.verify(merged, params)
    event(f"{top_loops(stmts)} -> {top_loops(merged)} loops")
    want, got = execute(params, stmts), execute(params, merged)
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name}\n" +
                                      kir.format_block(stmts) + "\n--- merged:\n" +
                                      kir.format_block(merged))
    assert merge_loops(merged) == merged  # nothing left to merge


@st.composite
def dependent_pairs(draw: Any) -> tuple[list, list]:
    """Two nests over an (n, n) square sharing one array ``x``: the first writes or reads
    it, the second reads or writes it through an alias, a transpose or a shifted slice,
    each at an index drawn from the loop's own cell, a transposed, shifted, reversed or
    mixed one: the cases where merging is right or wrong by one element."""
    n = draw(st.sampled_from([2, 3]))
    i, j = kir.Var("i"), kir.Var("j")
    x = kir.Buffer("x", (n + 1, n + 1), F8, kir.ARG)
    y, z = kir.Buffer("y", (n, n), F8, kir.OUT), kir.Buffer("z", (n, n), F8, kir.OUT)
    how = draw(st.sampled_from(["alias", "transpose", "slice"]))
    shape = (n, n + 1) if how == "slice" else (n + 1, n + 1)
    v = kir.Buffer("v", shape, F8, kir.VIEW, "C" if how == "alias" else "A")
    arg = {"alias": None, "transpose": (1, 0), "slice": ((1, None, 1), (0, None, 1))}[how]

    def index(buf: kir.Buffer) -> tuple:
        forms = [(i, j), (j, i), (i + 1, j), (i, j + 1), (kir.const(0), j),
                 (kir.const(n - 1) - i, j), (i + j, kir.const(0)), (i, i)]
        fits = [f for f in forms if all(
            kir.affine(e)[1] + sum(c * (n - 1) for c in kir.affine(e)[0].values() if c > 0)
            < d for e, d in zip(f, buf.shape))]
        return draw(st.sampled_from(fits))

    one = kir.const(1.0, F8)
    first_writes = draw(st.booleans())
    a_body = (kir.Store(x, index(x), kir.Load(y, (i, j)) + one) if first_writes else
              kir.Store(y, (i, j), kir.Load(x, index(x)) * one))
    b_body = (kir.Store(z, (i, j), kir.Load(v, index(v))) if first_writes or
              draw(st.booleans()) else kir.Store(v, index(v), kir.Load(z, (i, j))))
    par = draw(st.booleans())
    stmts = [kir.Loop(i, n, (kir.Loop(j, n, (a_body,)),), parallel=par),
             kir.View(v, x, how, arg),
             kir.Loop(i, n, (kir.Loop(j, n, (b_body,)),), parallel=par)]
    return [x, y, z], stmts


@FUZZ
@given(dependent_pairs())
def test_merging_dependent_pairs_keeps_every_result(kernel: tuple) -> None:
    params, stmts = kernel
    kir.verify(stmts, params)
    merged = merge_loops(stmts)
    kir.verify(merged, params)
    event(f"{top_loops(merged)} loops")
    want, got = execute(params, stmts), execute(params, merged)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name}\n" +
                                      kir.format_block(stmts))


def _corruptions(params: list, stmts: list) -> list:
    """Ways to break ``stmts``, each a (what, statements, parameters) verify must reject."""
    out = []
    n, loop = next((n, s) for n, s in enumerate(stmts) if isinstance(s, kir.Loop))
    # A read of a name nothing binds.
    bad = replace(loop, body=loop.body + (kir.Let(kir.Var("q", F8), kir.Var("zz", F8)),))
    out.append(("unbound variable", stmts[:n] + [bad] + stmts[n + 1:], params))
    # A parameter left out: its loads and stores use an undefined buffer.
    used = {b.name for b in params if any(
        isinstance(x, kir.Store) and x.buf == b for x in kir.walk(stmts))}
    if used:
        out.append(("undefined buffer", stmts, [p for p in params if p.name not in used]))
    # A store with one index too many.
    for k, s in enumerate(stmts):
        if isinstance(s, kir.Store):
            out.append(("index rank", stmts[:k] + [replace(s, index=s.index + (kir.const(0),))]
                        + stmts[k + 1:], params))
            break
    # An allocation of a parameter.
    out.append(("alloc of an argument", [kir.Alloc(params[0])] + stmts, params))
    return out


@FUZZ
@given(kernels())
def test_verify_accepts_well_formed_kernels_and_rejects_broken_ones(kernel: tuple) -> None:
    params, stmts = kernel
    kir.verify(stmts, params)
    for what, bad, ps in _corruptions(params, stmts):
        with pytest.raises(kir.IRError):
            kir.verify(bad, ps)
            pytest.fail(f"verify accepted a kernel with a {what}")


# ------------------------------------------------------- the project's fuzz programs
def _params_of(stmts: list) -> dict:
    """The parameter buffers (roles arg, out, scratch) a kernel's statements name."""
    found: dict = {}
    for s in kir.walk(stmts):
        bufs = [getattr(s, "buf", None), getattr(s, "base", None)]
        bufs += [o.buf for o in (getattr(s, "a", None), getattr(s, "b", None),
                                 getattr(s, "c", None)) if isinstance(o, kir.Operand)]
        bufs += [a for a in getattr(s, "args", ()) + getattr(s, "outs", ())
                 if isinstance(a, kir.Buffer)]
        for e in kir.exprs_of(s):
            bufs += [x.buf for x in kir.subexprs(e) if isinstance(x, kir.Load)]
        for b in bufs:
            if isinstance(b, kir.Buffer) and b.role in (kir.ARG, kir.OUT, kir.SCRATCH):
                found[b.name] = b
    return found


_KNOWN = (kir.Alloc, kir.View, kir.Let, kir.Store, kir.Loop, kir.If, kir.Accum, kir.Gemm,
          kir.LibCall, kir.Table, kir.Raise, kir.Jump, kir.Comment)


def lowered_ir(graph: Any) -> tuple[Any, list, list]:
    """``graph`` lowered (no Numba compile), its scheduled kernel IR, and the statements
    in it that are not kernel IR (there must be none); skips the test while the code
    generator does not expose the IR (``Lowered.ir``)."""
    from dualgraph.backend.numba.codegen import lower

    low = lower(graph)
    ir = getattr(low, "ir", None)
    if ir is None:
        pytest.skip("the code generator does not expose the scheduled kernel IR "
                    "(Lowered.ir) yet")
    stmts = list(ir.stmts if isinstance(ir, kir.Block) else ir)
    return low, stmts, [s for s in kir.walk(stmts) if not isinstance(s, _KNOWN)]


def run_lowered(low: Any, stmts: list, args: list) -> list:
    """The kernel's outputs, its IR run by the executor: arguments ``a{k}``, constants
    ``c{k}``, work arrays ``w{k}`` and outputs ``o{k}`` bound as the runtime binds them."""
    arrays: dict = {}
    for k, a in enumerate(args):
        a = np.array(a)
        arrays[f"a{k}"] = a.reshape(1) if a.ndim == 0 else a
    for k, c in enumerate(low.consts):
        arrays[f"c{k}"] = np.array(c)
    for k, (shape, dtype) in enumerate(low.scratch):
        arrays[f"w{k}"] = np.zeros(shape, dtype)
    params = _params_of(stmts)
    outs = sorted((n for n in params if n.startswith("o") and n[1:].isdigit()),
                  key=lambda n: int(n[1:]))
    for n in outs:
        arrays[n] = np.zeros(params[n].shape or (1,), params[n].dtype)
    kir.verify(stmts, [params[n] for n in params])
    env = run(stmts, arrays)
    return [env[n] for n in outs]


def check_lowered(graph: Any, args: list, report: str) -> None:
    """The kernel IR of ``graph`` run by the executor equals the graph interpreter's
    outputs, with its loops merged or not."""
    low, stmts, opaque = lowered_ir(graph)
    assert not opaque, f"statements that are not kernel IR: {opaque}\n{report}"
    expected = dg.interpret(graph, *args)
    got = run_lowered(low, stmts, args)
    assert len(got) == len(expected), report
    # Merging the scheduled kernel's loops again changes nothing either.
    for g, m in zip(got, run_lowered(low, merge_loops(stmts), args)):
        np.testing.assert_array_equal(m, g, err_msg=report)
    for k, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        msg = f"output {k}\n{report}\n{kir.format_block(stmts)}"
        if e.dtype.kind == "f":  # the fuzz tests' tolerances between modes
            dg.testing.assert_close(g.reshape(e.shape), e, equal_nan=True, check_dtype=False,
                                    msg=msg, **tolerance(
                e, 2e-4 if e.dtype == np.float32 else 1e-9))
        else:
            np.testing.assert_array_equal(g.reshape(e.shape), e, err_msg=msg)


def _graph(fn: Any, *args: Any) -> Any:
    return P.optimize(dg.trace(fn, *[dg.tensor(a) for a in args]))


def test_a_training_shaped_program_kernel_ir_matches_the_interpreter() -> None:
    """Fused elementwise loops, row and column reductions, a product, a whole-array sum."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))

    def fn(x: Any, w: Any) -> Any:
        h = dg.tanh(x @ w) * 2.0 + 1.0
        return h - dg.amax(h, 1, keepdim=True), (h * h).sum() + h.mean(axis=0)

    check_lowered(_graph(fn, x, w), [x, w], "tanh(x @ w) program")


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs(max_statements=5))
def test_fuzz_programs_kernel_ir_matches_the_interpreter(prog: Any) -> None:
    """Each fuzz program's kernel IR."""
    arrays = prog.arrays()
    args = [arrays[k] for k in prog.arg_of]
    check_lowered(_graph(prog.function(), *args), args, prog.report())
