"""Hoisting loop-invariant work on the kernel IR (`loops.hoist_invariants`): what is the
same in every iteration moves above the loop, results stay bit for bit the same (run
before and after through the reference executor), and what may differ between iterations,
or might never be evaluated, stays. The must-stay cases also show that forcing the move
would change the result or read what the loop never reads."""

from __future__ import annotations

import numpy as np

from dualgraph.backend import kir
from dualgraph.backend.loops import hoist_invariants

from .kir_exec import run

F4, F8 = np.dtype(np.float32), np.dtype(np.float64)
i, j = kir.Var("i"), kir.Var("j")


def buf(name: str, *shape: int, dtype=F4, role: str = kir.ARG) -> kir.Buffer:
    return kir.Buffer(name, shape, dtype, role)


def same_results(params: list, before: list, after: list) -> None:
    rng = np.random.default_rng(0)
    arrays = {p.name: (rng.random(p.shape or (1,)) + 0.5).astype(p.dtype) for p in params}
    want = run(before, {k: v.copy() for k, v in arrays.items()})
    got = run(after, {k: v.copy() for k, v in arrays.items()})
    for p in params:
        np.testing.assert_array_equal(got[p.name], want[p.name], err_msg=p.name)


def lets_in(stmts: list) -> list[str]:
    return [s.var.name for s in stmts if isinstance(s, kir.Let)]


def adam_like() -> tuple[list, list]:
    """An update reading a 0-d step count inside its loop nest, as the fused Adam group
    does: two float64 powers of it per element."""
    step, b1, b2 = buf("step", 1), buf("b1", 1, dtype=F8), buf("b2", 1, dtype=F8)
    m, v, p = buf("m", 8, 4), buf("v", 8, 4), buf("p", 8, 4)
    t = kir.Var("t", F8)
    c1, c2, u = kir.Var("c1", F8), kir.Var("c2", F8), kir.Var("u", F4)
    body = (kir.Let(t, kir.Cast(step[0], F8), "astype"),
            kir.Let(c1, kir.const(1.0, F8) - kir.Bin("**", b1[0], t), "sub"),
            kir.Let(c2, kir.const(1.0, F8) - kir.Bin("**", b2[0], t), "sub"),
            kir.Let(u, m[i, j] / kir.Cast(kir.Call("sqrt", (c2,), F8), F4), "div"),
            kir.Store(p, (i, j), p[i, j] - u * kir.Cast(kir.const(0.1, F8) / c1, F4)))
    stmts = [kir.Store(step, (0,), step[0] + kir.const(1.0, F4)),
             kir.Loop(i, 8, (kir.Loop(j, 4, body),))]
    return [step, b1, b2, m, v, p], stmts


def test_a_zero_d_value_read_in_a_loop_nest_is_computed_once_before_it():
    params, stmts = adam_like()
    before = list(stmts)
    out = hoist_invariants(stmts)
    assert stmts == before  # pure
    kir.verify(out, params)
    # The step's cast and both bias corrections rose out of both loops; the per-element
    # division stays, its invariant square root bound before the nest.
    assert lets_in(out)[:3] == ["t", "c1", "c2"]
    inner = out[-1].body[0]
    assert [s.var.name for s in inner.body if isinstance(s, kir.Let)] == ["u"]
    pows = [x for s in kir.walk(inner.body) for e in kir.exprs_of(s)
            for x in kir.subexprs(e) if isinstance(x, (kir.Call, kir.Load))
            and not (isinstance(x, kir.Load) and x.index == (kir.const(0),))]
    assert not any(isinstance(x, kir.Call) for x in pows)
    same_results(params, stmts, out)


def test_work_rises_only_as_far_as_it_is_invariant():
    # x[i] * 2 is the same for every j but not for every i: it leaves the j loop only.
    x, y = buf("x", 6), buf("y", 6, 5, role=kir.OUT)
    s = kir.Var("s", F4)
    stmts = [kir.Loop(i, 6, (kir.Loop(j, 5, (
        kir.Let(s, kir.Call("exp", (x[i],), F4)),
        kir.Store(y, (i, j), s + kir.Cast(j, F4)))),))]
    out = hoist_invariants(stmts)
    assert lets_in(out) == []
    assert lets_in(list(out[0].body)) == ["s"]
    same_results([x, y], stmts, out)


def test_a_value_the_loop_writes_is_not_invariant():
    # The loop writes acc[0] each iteration: a let reading it must stay, and forcing it
    # out changes the result.
    acc, y = buf("acc", 1), buf("y", 4, role=kir.OUT)
    s = kir.Var("s", F4)
    let = kir.Let(s, acc[0] * kir.const(2.0, F4))
    stmts = [kir.Loop(i, 4, (let, kir.Store(y, (i,), s),
                             kir.Store(acc, (0,), acc[0] + kir.const(1.0, F4))))]
    out = hoist_invariants(stmts)
    assert out == stmts
    forced = [let, kir.Loop(i, 4, (kir.Store(y, (i,), s),
                                   kir.Store(acc, (0,), acc[0] + kir.const(1.0, F4))))]
    rng_in = {"acc": np.ones(1, F4), "y": np.zeros(4, F4)}
    assert not np.array_equal(run(stmts, dict(rng_in))["y"],
                              run(forced, {k: v.copy() for k, v in rng_in.items()})["y"])


def test_a_write_through_a_view_counts_as_a_write_of_its_base():
    acc, y = buf("acc", 2, 2), buf("y", 4, role=kir.OUT)
    flat = kir.Buffer("flat", (4,), F4, kir.VIEW)
    s = kir.Var("s", F4)
    stmts = [kir.View(flat, acc, "reshape"),
             kir.Loop(i, 4, (kir.Let(s, acc[0, 0] + kir.const(1.0, F4)),
                             kir.Store(y, (i,), s), kir.Store(flat, (i,), s)))]
    out = hoist_invariants(stmts)
    assert out == stmts
    same_results([acc, y], stmts, out)


def test_an_accumulator_and_the_loop_index_are_variant():
    x, y = buf("x", 4), buf("y", 1, role=kir.OUT)
    acc, s = kir.Var("acc", F8), kir.Var("s", F8)
    stmts = [kir.Let(acc, kir.const(0.0, F8)),
             kir.Loop(i, 4, (kir.Let(s, acc * kir.const(0.5, F8)),
                             kir.Accum(acc, "add", kir.Cast(x[i], F8) + s))),
             kir.Store(y, (0,), kir.Cast(acc, F4))]
    assert hoist_invariants(stmts) == stmts


def test_nothing_leaves_a_loop_that_may_not_run():
    # With no iteration the load x[3] would be evaluated though the loop never reads it.
    x, y, n = buf("x", 3), buf("y", 3, role=kir.OUT), kir.Var("n")
    s = kir.Var("s", F4)
    empty = [kir.Loop(i, 0, (kir.Let(s, x[2] * kir.const(2.0, F4)), kir.Store(y, (i,), s)))]
    assert hoist_invariants(empty) == empty
    unknown = [kir.Let(n, kir.const(2)),
               kir.Loop(i, n, (kir.Let(s, x[2] * kir.const(2.0, F4)), kir.Store(y, (i,), s)))]
    assert hoist_invariants(unknown) == unknown


def test_a_let_read_before_it_is_bound_in_the_body_stays():
    # ``s`` is read by the store from the previous iteration's binding (and the first
    # iteration's from before the loop): moving its let up would change the first reads.
    x, y = buf("x", 4), buf("y", 4, role=kir.OUT)
    s = kir.Var("s", F4)
    stmts = [kir.Let(s, kir.const(0.0, F4)),
             kir.Loop(i, 4, (kir.Store(y, (i,), s), kir.Let(s, x[0] + kir.const(1.0, F4))))]
    out = hoist_invariants(stmts)
    assert lets_in(list(out[-1].body)) == ["s"]
    same_results([x, y], stmts, out)


def test_select_branches_are_not_evaluated_ahead():
    # x[0] is read only where i > 0; extracting it would read it in every call, so only
    # the condition's invariant work may move.
    x, y, z = buf("x", 4), buf("y", 4, role=kir.OUT), buf("z", 1)
    stmts = [kir.Loop(i, 4, (kir.Store(y, (i,), kir.Select(
        kir.Bin(">", kir.Cast(i, F4), z[0]), x[0], x[i])),))]
    out = hoist_invariants(stmts)
    (store,) = out[-1].body
    assert store.value.a == x[0]  # the branch kept its load
    assert isinstance(store.value.cond.b, kir.Var)  # z[0], from the condition, moved
    same_results([x, y, z], stmts, out)


def test_a_loop_holding_a_library_call_is_left_alone():
    x, y, lanes = buf("x", 16), buf("y", 16, role=kir.OUT), buf("lanes", 16, dtype=F8)
    s = kir.Var("s", F4)
    stmts = [kir.Loop(i, 2, (kir.Let(s, x[0] * kir.const(2.0, F4)), kir.Store(y, (i,), s),
                             kir.LibCall("fold_lanes", (y, kir.const(16)), (lanes,))))]
    assert hoist_invariants(stmts) == stmts
