"""Loop merging on the kernel IR (`schedule.merge_loops`): adjacent loops of one range merge
when each iteration only meets its own cell of what the other loop writes; otherwise, and
across anything the analysis does not see through, they stay apart. Every case also runs
through the IR executor, merged and not, with the same results."""

from __future__ import annotations

import numpy as np

from dualgraph.backend import kir, schedule

from .kir_exec import run

F8 = np.dtype(np.float64)
A0 = kir.Buffer("a0", (4, 3), F8, kir.ARG)
A1 = kir.Buffer("a1", (4, 3), F8, kir.ARG)
O0 = kir.Buffer("o0", (4, 3), F8, kir.OUT)
O1 = kir.Buffer("o1", (4, 3), F8, kir.OUT)
I0, I1 = kir.Var("i0"), kir.Var("i1")


def nest(dst: kir.Buffer, value, i: kir.Var = I0, j: kir.Var = I1, n: int = 4,
         m: int = 3, index=None) -> kir.Loop:
    return kir.Loop(i, n, (kir.Loop(j, m, (kir.Store(dst, index or (i, j), value),)),))


def loops(stmts: list) -> int:
    return sum(isinstance(s, kir.Loop) for s in stmts)


def check(stmts: list, merged_loops: int) -> list:
    """Merge ``stmts``, check the number of top-level loops and that the merged and the
    original statements compute the same."""
    kir.verify(stmts, [A0, A1, O0, O1])
    out = schedule.merge_loops(stmts)
    kir.verify(out, [A0, A1, O0, O1])
    assert loops(out) == merged_loops, kir.format_block(out)
    rng = np.random.default_rng(0)
    arrays = {b.name: rng.standard_normal(b.shape) for b in (A0, A1, O0, O1)}
    want = run(stmts, {k: v.copy() for k, v in arrays.items()})
    got = run(out, {k: v.copy() for k, v in arrays.items()})
    for b in (A0, A1, O0, O1):
        np.testing.assert_array_equal(got[b.name], want[b.name])
    return out


def test_same_cell_reads_and_writes_merge_at_every_level():
    v1 = kir.Buffer("v1", (4, 3), F8, kir.VIEW)
    stmts = [kir.Comment("%1 = first", "%1"), nest(A1, A1[I0, I1] * 2.0),
             kir.View(v1, A1, "alias"), kir.Comment("%2 = second", "%2"),
             nest(O0, v1[I0, I1] + A0[I0, I1])]
    out = check(stmts, 1)
    # The view moves above the merged loop, the second comment into its body, in front
    # of the second loop's statements; the inner loops merged too.
    assert isinstance(out[1], kir.View) and isinstance(out[2], kir.Loop)
    inner = out[2].body
    assert len(inner) == 1 and [type(s) for s in inner[0].body] == [
        kir.Store, kir.Comment, kir.Store]


def test_a_renamed_loop_variable_merges():
    k, m = kir.Var("k0"), kir.Var("k1")
    check([nest(O0, A0[I0, I1] * 2.0), nest(O1, O0[k, m] + 1.0, k, m)], 1)


def test_a_rename_that_would_capture_an_inner_variable_keeps_loops_apart():
    row = kir.Loop(I1, 4, (kir.Store(O0, (I1, kir.const(0)), A0[I1, kir.const(0)]),))
    check([row, nest(O1, A0[I0, I1] * 2.0)], 2)


def test_a_view_that_moves_elements_keeps_loops_apart():
    t = kir.Buffer("t", (3, 4), F8, kir.VIEW, "F")
    stmts = [nest(A1, A1[I0, I1] * 2.0, n=3), kir.View(t, A1, "transpose", (1, 0)),
             nest(O0, t[I0, I1], n=3)]
    check(stmts, 2)


def test_another_index_of_a_written_array_keeps_loops_apart():
    check([nest(A1, A1[I0, I1] * 2.0), nest(O0, A1[kir.const(0), I1])], 2)
    # ... and so does a write over cells the first loop reads in other iterations
    check([nest(O0, A1[kir.const(0), I1]), nest(A1, A0[I0, I1])], 2)
    # Reading one cell of the row the second loop writes: the rows merge (row i is only
    # touched in iteration i), the loops over its cells do not.
    out = check([nest(O0, A1[I0, kir.const(0)]), nest(A1, A0[I0, I1])], 1)
    assert loops(out[0].body) == 2
    # ... and a cell every iteration writes (no dimension follows the loop)
    check([nest(O0, A0[I0, I1], index=(kir.const(0), I1)), nest(O1, O0[kir.const(0), I1])], 2)


def test_reading_what_only_the_first_loop_reads_merges():
    check([nest(O0, A0[I0, I1] + A0[kir.const(0), I1]), nest(O1, A0[I0, I1] * 3.0)], 1)


def test_different_ranges_keep_loops_apart():
    check([nest(O0, A0[I0, I1]), nest(O1, A0[I0, I1], n=3)], 2)
    par = kir.Loop(I0, 4, (kir.Loop(I1, 3, (kir.Store(O1, (I0, I1), A0[I0, I1]),)),), parallel=True)
    check([nest(O0, A0[I0, I1]), par], 2)


def test_a_scalar_the_first_loop_folds_keeps_the_reader_apart():
    acc = kir.Var("acc", F8)
    total = kir.Loop(I0, 4, (kir.Let(acc, kir.const(0.0, F8)), kir.Loop(I1, 3, (
        kir.Accum(acc, "add", A0[I0, I1]),)), kir.Store(O0, (I0, kir.const(0)), acc)))
    reader = kir.Loop(I0, 4, (kir.Loop(I1, 3, (kir.Store(O1, (I0, I1), acc * 1.0),)),))
    out = schedule.merge_loops([kir.Let(acc, kir.const(0.0, F8)), total, reader])
    assert loops(out) == 2


def test_library_calls_and_statements_between_keep_loops_apart():
    lib = kir.Loop(I0, 4, (kir.LibCall("copy", (A0,), (O1,)),))
    check([nest(O0, A0[I0, I1]), lib], 2)
    check([nest(O0, A0[I0, I1]), kir.Store(O1, (kir.const(0), kir.const(0)), A0[
        kir.const(0), kir.const(0)]), nest(O1, A0[I0, I1])], 2)


def test_a_buffer_bound_by_source_text_may_be_any_array():
    v = kir.Buffer("v", (4, 3), F8, kir.LOCAL, "A")
    stmts = [kir.Source(("v = a1.T.T",), (v,)), nest(A1, A0[I0, I1]), nest(O0, v[I0, I1])]
    out = schedule.merge_loops(stmts)
    assert loops(out) == 2
