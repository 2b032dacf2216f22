"""Repeated subexpressions computed once (`schedule.share_subexpressions`): a value built
as a graph prints each repeated part once, results are unchanged (run before and after
through the reference executor), and what only a condition's branch may evaluate stays
there when evaluating it early could read what the condition guards."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba import build
from dualgraph.backend.schedule import share_subexpressions
from dualgraph.ir.interpret import interpret
from dualgraph.passes import optimize
from dualgraph.testing import assert_close

from .kir_exec import run

F4 = np.dtype(np.float32)
i = kir.Var("i")


def loads_of(stmts: list) -> int:
    return sum(isinstance(x, kir.Load) for s in kir.walk(stmts) for e in kir.exprs_of(s)
               for x in kir.subexprs(e))


def same_results(params: list, before: list, after: list) -> None:
    rng = np.random.default_rng(0)
    arrays = {p.name: (rng.random(p.shape) - 0.5).astype(p.dtype) for p in params}
    arrays.update({p.name: rng.integers(-2, 6, p.shape) for p in params
                   if p.dtype.kind == "i"})
    want = run(before, {n: a.copy() for n, a in arrays.items()})
    got = run(after, {n: a.copy() for n, a in arrays.items()})
    for p in params:
        assert_close(got[p.name], want[p.name], rtol=0, atol=0, msg=p.name)


def test_a_repeated_polynomial_is_computed_once():
    x, o = kir.Buffer("x", (8,), F4, kir.ARG), kir.Buffer("o", (8,), F4, kir.OUT)
    a = kir.Select(kir.Bin("<", x[i], kir.const(0.0, F4)), -x[i], x[i])
    s = kir.const(1.0, F4) / (kir.const(1.0, F4) + a * 0.35)
    r: kir.Expr = kir.const(0.5, F4)
    for c in (0.25, -0.125, 2.0):
        r = r * s + kir.const(c, F4)
    value = kir.Select(kir.Bin("<", x[i], kir.const(0.0, F4)), r, kir.const(1.0, F4) - r)
    before = [kir.Loop(i, 8, (kir.Store(o, (i,), x[i] * value),))]
    after = share_subexpressions(before)
    kir.verify(after, [x, o])
    assert loads_of(before) == 20 and loads_of(after) == 1
    (loop,) = after
    lets = [s for s in loop.body if isinstance(s, kir.Let)]
    assert len({s.value for s in lets}) == len(lets)  # each bound once
    same_results([x, o], before, after)


def test_a_guarded_load_stays_under_its_condition():
    k = kir.Buffer("k", (8,), np.dtype(np.int64), kir.ARG)
    x, o = kir.Buffer("x", (6,), F4, kir.ARG), kir.Buffer("o", (8,), F4, kir.OUT)
    inside = kir.Bin("and", kir.Bin(">=", k[i], kir.const(0)), kir.Bin("<", k[i], kir.const(6)))
    # x[k[i]] twice, only where k[i] is a valid index: never read early.
    guarded = kir.Select(inside, x[k[i]] * x[k[i]], kir.const(0.0, F4))
    before = [kir.Loop(i, 8, (kir.Store(o, (i,), guarded),))]
    after = share_subexpressions(before)
    (loop,) = after
    bound = [s.value for s in loop.body if isinstance(s, kir.Let)]
    assert bound == [k[i]]  # the unconditional load of k, not x[k[i]]
    same_results([k, x, o], before, after)


def test_compiled_gelu_prints_its_load_once_and_matches():
    rng = np.random.default_rng(2)
    x = dg.tensor(rng.standard_normal((6, 40)).astype(np.float32) * 3)
    g = optimize(dg.trace(lambda x: dg.nn.functional.gelu(x) * 2.0, x))
    kernel = build(g, segment_lines=0)
    body = kernel.lowered.source
    assert body.count("[i0]") <= 3, body  # one load, one store (and a flat view)
    (got,) = kernel(x.numpy())
    (want,) = interpret(g, x.numpy())
    assert_close(got, want)
