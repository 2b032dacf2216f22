"""Loop merging on the kernel IR (`backend/loops.py`): adjacent nests over the same range
merge when every access either shares with the other nest is at the same iteration, and
stay apart otherwise. Each case runs before and after through the reference executor
(`kir_exec`) on random data; the must-not-merge cases also show that forcing the merge
would change the result, so each refusal guards something real."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dualgraph.backend import kir
from dualgraph.backend.loops import Memory, _rename, merge_loops

from .kir_exec import run

F4, F8 = np.dtype(np.float32), np.dtype(np.float64)
i, j, k, m = (kir.Var(n) for n in ("i", "j", "k", "m"))


def arg(name: str, *shape: int, role: str = kir.ARG) -> kir.Buffer:
    return kir.Buffer(name, shape, F8, role)


def loops2(x: kir.Var, y: kir.Var, n: int, p: int, *body: object, par: bool = False):
    return kir.Loop(x, n, (kir.Loop(y, p, tuple(body)),), parallel=par)


def top_loops(stmts: list) -> int:
    return sum(isinstance(s, kir.Loop) for s in stmts)


def inputs(params: list, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {p.name: rng.standard_normal(p.shape or (1,)).astype(p.dtype) for p in params}


def results(params: list, stmts: list) -> dict:
    env = run(stmts, inputs(params))
    return {p.name: env[p.name] for p in params}


def check(params: list, stmts: list, loops: int) -> list:
    """Merge ``stmts``: the result verifies, has ``loops`` top-level loops, computes what
    the original does, and the original is untouched."""
    before = list(stmts)
    out = merge_loops(stmts)
    assert stmts == before
    kir.verify(stmts, params)
    kir.verify(out, params)
    assert top_loops(out) == loops, kir.format_block(out)
    want, got = results(params, stmts), results(params, out)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    return out


def forced(a: kir.Loop, b: kir.Loop) -> kir.Loop:
    """``a`` and ``b`` run as one loop regardless of legality (b's variable renamed the
    simple way: these cases use the same names)."""
    assert a.var == b.var
    return replace(a, body=a.body + b.body)


def differs(params: list, stmts: list, merged: list) -> bool:
    want, got = results(params, stmts), results(params, merged)
    return any(not np.array_equal(want[n], got[n]) for n in want)


# --------------------------------------------------------------------------- merges
def test_an_elementwise_chain_becomes_one_perfect_nest():
    x, y, z, w = arg("x", 4, 3), arg("y", 4, 3, role=kir.OUT), arg("z", 4, 3), arg("w", 4, 3)
    stmts = [
        kir.Comment("%1 = mul %0, 2"),
        loops2(i, j, 4, 3, kir.Store(y, (i, j), x[i, j] * kir.const(2.0, F8))),
        kir.Comment("%2 = add %1, 1"),
        loops2(k, m, 4, 3, kir.Store(z, (k, m), y[k, m] + kir.const(1.0, F8))),
        kir.Comment("%3 = mul %2, %1"),
        loops2(i, j, 4, 3, kir.Store(w, (i, j), z[i, j] * y[i, j])),
    ]
    (c1, nest) = check([x, y, z, w], stmts, 1)
    assert c1 == kir.Comment("%1 = mul %0, 2")
    # One two-deep nest; the later nests' variables are the first's; each source-map
    # comment heads its own statements.
    assert kir.format_block([nest]) == "\n".join([
        "for i in 4:",
        "  for j in 3:",
        "    y[i, j] = (x[i, j] * 2.0:f8)",
        "    # %2 = add %1, 1",
        "    z[i, j] = (y[i, j] + 1.0:f8)",
        "    # %3 = mul %2, %1",
        "    w[i, j] = (z[i, j] * y[i, j])"])


def test_a_producer_consumer_pair_through_a_local_buffer():
    x, out = arg("x", 6), arg("out", 6, role=kir.OUT)
    t = kir.Buffer("t", (6,), F8)
    stmts = [
        kir.Alloc(t),
        kir.Loop(i, 6, (kir.Store(t, (i,), kir.Call("exp", (x[i],), F8)),)),
        kir.Loop(k, 6, (kir.Store(out, (k,), t[k] * x[k]),)),
    ]
    check([x, out], stmts, 1)


def test_nests_updating_in_place_at_the_same_index_merge():
    """An optimizer's step: each nest reads the previous one's output at its own index
    and updates buffers in place (``+=``)."""
    g, mom, p = arg("g", 5, 2), arg("mom", 5, 2), arg("p", 5, 2)
    stmts = [
        loops2(i, j, 5, 2, kir.Store(mom, (i, j), mom[i, j] * kir.const(0.9, F8) + g[i, j])),
        loops2(i, j, 5, 2, kir.Store(p, (i, j), mom[i, j] * kir.const(0.1, F8), "-")),
        loops2(i, j, 5, 2, kir.Store(g, (i, j), kir.const(0.0, F8))),
    ]
    (nest,) = check([g, mom, p], stmts, 1)
    assert top_loops(nest.body) == 1


def test_a_broadcast_read_of_size_one_dims_merges_the_shared_level():
    """A per-row value of shape (4, 1) and a (1, 3) row read by every row: the outer
    loops merge (the row is complete before it is used), the inner ones differ."""
    x, b = arg("x", 4, 3), arg("b", 1, 3)
    s, y = arg("s", 4, 1, role=kir.SCRATCH), arg("y", 4, 3, role=kir.OUT)
    acc = kir.Var("acc", F8)
    stmts = [
        kir.Loop(i, 4, (kir.Let(acc, kir.const(0.0, F8)),
                        kir.Loop(j, 3, (kir.Accum(acc, "maximum", x[i, j]),)),
                        kir.Store(s, (i, 0), acc))),
        loops2(i, j, 4, 3, kir.Store(y, (i, j), x[i, j] - s[i, 0] + b[0, j])),
    ]
    (nest,) = check([x, b, s, y], stmts, 1)
    # The reduction's loop reads acc's own scalar chain; the row loop reads acc: apart.
    assert top_loops(nest.body) == 2


def test_a_nest_after_an_allocation_and_an_alias():
    """Allocations and renames between the nests move above the first; the comment that
    heads the second stays with its statements."""
    x, o = arg("x", 3, 2), arg("o0", 3, 2, role=kir.OUT)
    t, r = kir.Buffer("t", (3, 2), F8), kir.Buffer("r", (3, 2), F8, kir.VIEW)
    stmts = [
        kir.Comment("%1 = neg %0"),
        loops2(i, j, 3, 2, kir.Store(o, (i, j), -x[i, j])),
        kir.Comment("%2 = zeros"),
        kir.Alloc(t, 0.0),
        kir.View(r, o, "alias"),
        kir.Comment("%3 = mul %1, %0"),
        loops2(i, j, 3, 2, kir.Store(t, (i, j), x[i, j]),
               kir.Store(r, (i, j), r[i, j] * t[i, j])),
    ]
    out = check([x, o], stmts, 1)
    assert out[:4] == [kir.Comment("%2 = zeros"), kir.Alloc(t, 0.0), kir.View(r, o, "alias"),
                       kir.Comment("%1 = neg %0")]
    assert out[4].body[0].body[1] == kir.Comment("%3 = mul %1, %0")


def test_a_row_statistic_and_the_loop_using_it():
    """layer_norm's shape: a per-row sum stored, then the row normalised by it."""
    x, mu, y = arg("x", 3, 5), arg("mu", 3, role=kir.SCRATCH), arg("y", 3, 5, role=kir.OUT)
    acc = kir.Var("acc", F8)
    stmts = [
        kir.Loop(i, 3, (kir.Let(acc, kir.const(0.0, F8)),
                        kir.Loop(j, 5, (kir.Accum(acc, "add", x[i, j]),)),
                        kir.Store(mu, (i,), acc / kir.const(5.0, F8)))),
        kir.Loop(i, 3, (kir.Loop(j, 5, (kir.Store(y, (i, j), x[i, j] - mu[i]),)),)),
    ]
    check([x, mu, y], stmts, 1)


def test_views_map_indices_to_their_array():
    x = arg("x", 4, 6)
    tr = kir.Buffer("tr", (6, 4), F8, kir.VIEW, "F")
    sl = kir.Buffer("sl", (2, 6), F8, kir.VIEW, "A")
    rs = kir.Buffer("rs", (4, 1, 6), F8, kir.VIEW)
    mem = Memory([kir.View(tr, x, "transpose", (1, 0)),
                  kir.View(sl, x, "slice", ((1, None, 2), (None, None, None))),
                  kir.View(rs, x, "reshape")])
    f = kir.affine
    assert mem.locate(tr, (f(i), f(j))) == ("x", (f(j), f(i)))
    assert mem.locate(sl, (f(i), f(j))) == ("x", (f(i * 2 + 1), f(j)))
    assert mem.locate(rs, (f(i), f(kir.const(0)), f(j))) == ("x", (f(i), f(j)))
    assert mem.locate(kir.Buffer("u", (3,), F8), (f(i),)) == (None, None)


def test_a_row_loop_over_a_transposed_view_merges_by_its_column():
    """A slice and a transpose of a written array: the index maps through both to the
    same element of the array."""
    x, y = arg("x", 4, 3), arg("y", 4, 3, role=kir.OUT)
    yt = kir.Buffer("yt", (3, 4), F8, kir.VIEW, "F")
    stmts = [
        loops2(i, j, 4, 3, kir.Store(y, (i, j), x[i, j] + kir.const(1.0, F8))),
        kir.View(yt, y, "transpose", (1, 0)),
        loops2(i, j, 4, 3, kir.Store(yt, (j, i), yt[j, i] * kir.const(3.0, F8))),
    ]
    check([x, y], stmts, 1)


# ------------------------------------------------------------------ must not merge
def refuse(params: list, stmts: list, a: int, b: int, changes: bool = True) -> None:
    """``stmts`` keep every loop; merging loops ``a`` and ``b`` by force (what a pass
    without the check would do) changes the result when ``changes``."""
    check(params, stmts, top_loops(stmts))
    if changes:
        bad = [s for n, s in enumerate(stmts) if n != b]
        bad[bad.index(stmts[a])] = forced(stmts[a], stmts[b])
        assert differs(params, stmts, bad)


def test_a_shifted_index_keeps_nests_apart():
    x, a, y = arg("x", 5), arg("a", 6), arg("y", 5, role=kir.OUT)
    stmts = [kir.Loop(i, 5, (kir.Store(a, (i,), x[i] * kir.const(2.0, F8)),)),
             kir.Loop(i, 5, (kir.Store(y, (i,), a[i + 1]),))]
    refuse([x, a, y], stmts, 0, 1)


def test_a_transposed_read_keeps_nests_apart():
    x, t, y = arg("x", 3, 3), arg("t", 3, 3), arg("y", 3, 3, role=kir.OUT)
    stmts = [loops2(i, j, 3, 3, kir.Store(t, (i, j), x[i, j] + kir.const(1.0, F8))),
             loops2(i, j, 3, 3, kir.Store(y, (i, j), t[j, i]))]
    refuse([x, t, y], stmts, 0, 1)


def test_a_transposed_view_of_a_written_array_keeps_nests_apart():
    x, t, y = arg("x", 3, 3), arg("t", 3, 3), arg("y", 3, 3, role=kir.OUT)
    tv = kir.Buffer("tv", (3, 3), F8, kir.VIEW, "F")
    stmts = [loops2(i, j, 3, 3, kir.Store(t, (i, j), x[i, j] + kir.const(1.0, F8))),
             kir.View(tv, t, "transpose", (1, 0)),
             loops2(i, j, 3, 3, kir.Store(y, (i, j), tv[i, j]))]
    check([x, t, y], stmts, 2)


def test_different_extents_keep_nests_apart():
    x, y, z = arg("x", 4), arg("y", 4, role=kir.OUT), arg("z", 4, role=kir.OUT)
    stmts = [kir.Loop(i, 4, (kir.Store(y, (i,), x[i]),)),
             kir.Loop(i, 3, (kir.Store(z, (i,), x[i]),))]
    assert merge_loops(stmts) == stmts
    stmts[1] = kir.Loop(i, 4, stmts[1].body, start=1)
    assert merge_loops(stmts) == stmts


def test_a_reduction_result_read_by_the_next_nest_keeps_them_apart():
    x, y = arg("x", 6), arg("y", 6, role=kir.OUT)
    s = kir.Var("s", F8)
    stmts = [kir.Let(s, kir.const(0.0, F8)),
             kir.Loop(i, 6, (kir.Accum(s, "add", x[i]),)),
             kir.Loop(i, 6, (kir.Store(y, (i,), x[i] / s),))]
    refuse([x, y], stmts, 1, 2)
    # ... and into a one-element buffer.
    tot = arg("tot", 1, role=kir.SCRATCH)
    stmts = [kir.Loop(i, 6, (kir.Store(tot, (0,), x[i], "+"),)),
             kir.Loop(i, 6, (kir.Store(y, (i,), x[i] / tot[0]),))]
    refuse([x, y, tot], stmts, 0, 1)


def test_a_gemm_between_keeps_nests_apart():
    a, b, c = arg("a", 2, 2), arg("b", 2, 2), arg("c", 2, 2, role=kir.OUT)
    stmts = [loops2(i, j, 2, 2, kir.Store(a, (i, j), a[i, j] + kir.const(1.0, F8))),
             kir.Gemm(2, 2, 2, kir.Operand(a, 2), kir.Operand(b, 2), kir.Operand(c, 2)),
             loops2(i, j, 2, 2, kir.Store(b, (i, j), c[i, j]))]
    check([a, b, c], stmts, 2)


def test_parallel_and_serial_loops_stay_apart():
    x, y, z = arg("x", 4), arg("y", 4, role=kir.OUT), arg("z", 4, role=kir.OUT)
    stmts = [kir.Loop(i, 4, (kir.Store(y, (i,), x[i]),), parallel=True),
             kir.Loop(i, 4, (kir.Store(z, (i,), x[i]),))]
    assert merge_loops(stmts) == stmts
    both = [stmts[0], replace(stmts[1], parallel=True)]
    assert top_loops(merge_loops(both)) == 1


def test_a_write_after_read_elsewhere_keeps_nests_apart():
    """The second nest overwrites what the first reads at another index."""
    x, y = arg("x", 5), arg("y", 5, role=kir.OUT)
    stmts = [kir.Loop(i, 5, (kir.Store(y, (i,), x[kir.const(4) - i]),)),
             kir.Loop(i, 5, (kir.Store(x, (i,), kir.const(0.0, F8)),))]
    refuse([x, y], stmts, 0, 1)


def test_shared_scalars_jumps_and_kept_statements_are_barriers():
    x, y, z = arg("x", 4), arg("y", 4, role=kir.OUT), arg("z", 4, role=kir.OUT)
    t = kir.Var("t", F8)
    # A scalar the first body binds and the second reads before binding it.
    stmts = [kir.Let(t, kir.const(0.0, F8)),
             kir.Loop(i, 4, (kir.Let(t, x[i]), kir.Store(y, (i,), t))),
             kir.Loop(i, 4, (kir.Store(z, (i,), t),))]
    refuse([x, y, z], stmts, 1, 2)
    # Each binds its own: they merge.
    stmts[2] = kir.Loop(i, 4, (kir.Let(t, x[i] * kir.const(2.0, F8)), kir.Store(z, (i,), t)))
    check([x, y, z], stmts, 1)
    stmts = stmts[1:]
    # A jump, an unknown statement between, a kept loop.
    jump = kir.Loop(i, 4, (kir.If(kir.Bin(">", x[i], kir.const(0.0, F8)),
                                  (kir.Jump("continue"),)), kir.Store(y, (i,), x[i])))
    assert top_loops(merge_loops([jump, stmts[1]])) == 2
    assert top_loops(merge_loops([stmts[0], "opaque text", stmts[1]])) == 2
    assert top_loops(merge_loops(stmts, keep=lambda s: s is stmts[1])) == 2


def test_a_statement_between_that_depends_on_the_first_nest_stays():
    x, y = arg("x", 4), arg("y", 4, role=kir.OUT)
    t = kir.Var("t", F8)
    stmts = [kir.Loop(i, 4, (kir.Store(x, (i,), x[i] + kir.const(1.0, F8)),)),
             kir.Let(t, x[0]),
             kir.Loop(i, 4, (kir.Store(y, (i,), x[i] * t),))]
    check([x, y], stmts, 2)
    # Independent of it, it moves above.
    stmts[1] = kir.Let(t, y[0])
    out = check([x, y], stmts, 1)
    assert out[0] == stmts[1]


def test_a_reshape_of_an_array_of_unknown_origin_keeps_nests_apart():
    y = arg("y", 6, role=kir.OUT)
    u = kir.Buffer("u", (2, 3), F8, kir.LOCAL, "A")  # bound by a statement not seen here
    flat = kir.Buffer("flat", (6,), F8, kir.VIEW)
    stmts = [kir.Loop(i, 6, (kir.Store(y, (i,), kir.const(1.0, F8)),)),
             kir.View(flat, u, "reshape"),
             kir.Loop(i, 6, (kir.Store(y, (i,), flat[i], "+"),))]
    assert top_loops(merge_loops(stmts)) == 2


@pytest.mark.parametrize("shift", [0, 1])
def test_inner_loops_merge_only_at_the_same_column(shift: int):
    """Inside a shared row loop, the column loops merge when the second reads the first's
    column at its own index."""
    x, t, y = arg("x", 3, 5), arg("t", 3, 6), arg("y", 3, 5, role=kir.OUT)
    stmts = [kir.Loop(i, 3, (
        kir.Loop(j, 5, (kir.Store(t, (i, j), x[i, j] * kir.const(2.0, F8)),)),
        kir.Loop(k, 5, (kir.Store(y, (i, k), t[i, k + shift]),)),
    ))]
    (nest,) = check([x, t, y], stmts, 1)
    assert top_loops(nest.body) == (1 if shift == 0 else 2)


def test_statements_between_move_only_when_the_first_nest_does_not_see_them():
    x, y, z = arg("x", 4), arg("y", 4, role=kir.OUT), arg("z", 4, role=kir.OUT)
    t = kir.Buffer("t", (4,), F8)
    # The first nest reads an old ``t``; a new one is allocated between.
    stmts = [kir.Alloc(t, 1.0),
             kir.Loop(i, 4, (kir.Store(y, (i,), t[i]),)),
             kir.Alloc(t, 0.0),
             kir.Loop(i, 4, (kir.Store(z, (i,), t[i] + x[i]),))]
    check([x, y, z], stmts, 2)
    # ... even when neither nest writes memory (two reductions).
    s1, s2 = kir.Var("s1", F8), kir.Var("s2", F8)
    stmts = [kir.Alloc(t, 1.0), kir.Let(s1, kir.const(0.0, F8)), kir.Let(s2, kir.const(0.0, F8)),
             kir.Loop(i, 4, (kir.Accum(s1, "add", t[i]),)),
             kir.Alloc(t, 0.0),
             kir.Loop(i, 4, (kir.Accum(s2, "add", x[i]),)),
             kir.Store(y, (0,), s1), kir.Store(y, (1,), s2)]
    check([x, y, z], stmts, 2)
    stmts[4] = kir.Comment("no allocation between")
    check([x, y, z], stmts, 1)
    # A scalar between, computed from one the first nest rebinds.
    s, u = kir.Var("s", F8), kir.Var("u", F8)
    stmts = [kir.Let(s, kir.const(0.0, F8)),
             kir.Loop(i, 4, (kir.Let(s, x[i]), kir.Store(y, (i,), s))),
             kir.Let(u, s),
             kir.Loop(i, 4, (kir.Store(z, (i,), x[i] * u),))]
    check([x, y, z], stmts, 2)
    # A scalar the first nest reads, rebound between.
    stmts = [kir.Let(s, kir.const(0.0, F8)),
             kir.Loop(i, 4, (kir.Store(y, (i,), x[i] + s),)),
             kir.Let(s, kir.const(5.0, F8)),
             kir.Loop(i, 4, (kir.Store(z, (i,), x[i] * s),))]
    check([x, y, z], stmts, 2)


def test_a_reshape_copy_between_stays_after_the_nest_writing_its_base():
    """A reshape of a non-C array copies it where it stands: it cannot move above the
    nest that writes the array, even when the second nest does not use it."""
    b = kir.Buffer("b", (2, 3), F8, kir.ARG, "F")
    x, y = arg("x", 2, 3), arg("y", 2, 3, role=kir.OUT)
    flat, o = kir.Buffer("flat", (6,), F8, kir.VIEW), arg("o", 6, role=kir.OUT)
    stmts = [loops2(i, j, 2, 3, kir.Store(b, (i, j), x[i, j] * kir.const(2.0, F8))),
             kir.View(flat, b, "reshape"),
             loops2(i, j, 2, 3, kir.Store(y, (i, j), x[i, j])),
             kir.Loop(i, 6, (kir.Store(o, (i,), flat[i]),))]
    check([b, x, y, o], stmts, 3)


def test_an_index_mixing_the_merged_and_an_inner_variable_is_not_aligned():
    """``t[i + j]``: element 1 is written at (i=1, j=0) after it is read at (i=0, j=1)."""
    x, t, y = arg("x", 3, 3), arg("t", 5), arg("y", 3, 3, role=kir.OUT)
    stmts = [loops2(i, j, 3, 3, kir.Store(t, (i + j,), x[i, j])),
             loops2(i, j, 3, 3, kir.Store(y, (i, j), t[i + j]))]
    refuse([x, t, y], stmts, 0, 1)


def test_an_array_of_unknown_origin_may_be_any_array():
    """A buffer no statement here allocates or views (bound by a statement the pass does
    not see) may share memory with what the other nest writes."""
    x, y = arg("x", 4), arg("y", 4, role=kir.OUT)
    u = kir.Buffer("u", (4,), F8)
    stmts = [kir.Loop(i, 4, (kir.Store(x, (i,), x[i] + kir.const(1.0, F8)),)),
             kir.Loop(i, 4, (kir.Store(y, (i,), u[i]),))]
    assert top_loops(merge_loops(stmts)) == 2
    assert top_loops(merge_loops([kir.Alloc(u, 0.0)] + stmts)) == 1


def test_renaming_never_captures_an_inner_variable():
    """The second loop's variable is renamed to the first's; an inner loop of the second
    already named so keeps the loops apart."""
    x, y, z = arg("x", 3, 3), arg("y", 3, role=kir.OUT), arg("z", 3, 3, role=kir.OUT)
    stmts = [kir.Loop(i, 3, (kir.Store(y, (i,), x[i, 0]),)),
             loops2(k, i, 3, 3, kir.Store(z, (k, i), x[k, i] + kir.Cast(k, F8)))]
    check([x, y, z], stmts, 2)
    # ... or a scalar of that name, which the first loop leaves at its last value.
    stmts = [kir.Let(i, kir.const(0)),
             kir.Loop(i, 3, (kir.Store(y, (i,), x[i, 0]),)),
             kir.Loop(k, 3, (kir.Store(y, (k,), y[k] + kir.Cast(i, F8)),))]
    check([x, y, z], stmts, 2)
    assert differs([x, y, z], stmts, [stmts[0], forced(stmts[1], _rename(stmts[2], "k", "i"))])


def test_a_name_bound_twice_may_be_either_array():
    """``v`` is a view of ``p`` where the first nest writes it, a new array later: its
    accesses may be either, so the nests reading ``p`` elsewhere stay apart."""
    x, p = arg("x", 4), arg("p", 5)
    y, z = arg("y", 4, role=kir.OUT), arg("z", 4, role=kir.OUT)
    v = w = kir.Buffer("v", (5,), F8, kir.LOCAL)
    stmts = [kir.View(v, p, "alias"),
             kir.Loop(i, 4, (kir.Store(v, (i,), x[i]),)),
             kir.Loop(i, 4, (kir.Store(y, (i,), p[i + 1]),)),
             kir.Alloc(w, 0.0),
             kir.Loop(j, 4, (kir.Store(z, (j,), w[j]),))]
    refuse([x, p, y, z], stmts, 1, 2)


def test_a_slice_fixing_a_dimension_maps_the_rest():
    x = arg("x", 4, 6)
    row = kir.Buffer("row", (6,), F8, kir.VIEW)
    odd = kir.Buffer("odd", (3,), F8, kir.VIEW, "A")
    mem = Memory([kir.View(row, x, "slice", (2,)),
                  kir.View(odd, row, "slice", (slice(-5, None, 2),))])
    f = kir.affine
    assert mem.locate(row, (f(i),)) == ("x", (({}, 2), f(i)))
    assert mem.locate(odd, (f(i),)) == ("x", (({}, 2), f(i * 2 + 1)))
    dyn = kir.Buffer("dyn", (6,), F8, kir.VIEW)
    assert Memory([kir.View(dyn, x, "slice", (kir.Var("n"),))]).locate(
        dyn, (f(i),)) == ("x", (None, f(i)))


class Opaque:
    """A statement the pass does not know that binds ``defines`` (as transitional source
    text does)."""

    def __init__(self, *defines: kir.Buffer) -> None:
        self.defines = defines


def test_a_buffer_an_unknown_statement_binds_may_be_any_array():
    """``t`` is allocated, then rebound by a statement the pass cannot read (it may now be
    a view of ``x``): the nests around its use stay apart."""
    x, y = arg("x", 4), arg("y", 4, role=kir.OUT)
    t = kir.Buffer("t", (4,), F8)
    tail = [kir.Loop(i, 4, (kir.Store(x, (i,), x[i] + kir.const(1.0, F8)),)),
            kir.Loop(i, 4, (kir.Store(y, (i,), t[3 - i]),))]
    assert top_loops(merge_loops([kir.Alloc(t, 0.0), Opaque(t)] + tail)) == 2
    assert top_loops(merge_loops([kir.Alloc(t, 0.0), Opaque()] + tail)) == 1
