"""Perfect loop nests over consecutive dimensions collapse into one loop over flattened
views (`loops.collapse_loops`): Numba's compile time grows with each loop and index it
types. Each rewrite runs before and after through the reference executor (`kir_exec`)."""

from __future__ import annotations

import numpy as np

from dualgraph.backend import kir
from dualgraph.backend.loops import collapse_loops

from .kir_exec import run

F4 = np.dtype(np.float32)
i, j, k, m = (kir.Var(n) for n in ("i", "j", "k", "m"))


def nest(extents: tuple, body: tuple, names: tuple = (i, j, k, m)) -> kir.Loop:
    for v, n in reversed(list(zip(names, extents))):
        body = (kir.Loop(v, n, body),)
    return body[0]


def loops_in(stmts: list) -> int:
    return sum(isinstance(s, kir.Loop) for s in kir.walk(stmts))


def same_results(params: list, before: list, after: list) -> None:
    rng = np.random.default_rng(0)
    data = {p.name: rng.standard_normal(p.shape).astype(p.dtype) for p in params}
    want = run(before, {n: a.copy() for n, a in data.items()})
    got = run(after, {n: a.copy() for n, a in data.items()})
    for p in params:
        np.testing.assert_array_equal(got[p.name], want[p.name], err_msg=p.name)


def test_an_elementwise_nest_over_c_arrays_becomes_one_loop():
    x = kir.Buffer("x", (2, 3, 1, 4), F4, kir.SCRATCH)
    o = kir.Buffer("o", (2, 3, 1, 4), F4, kir.OUT)
    body = (kir.Store(o, (i, j, kir.const(0), k), x[i, j, kir.const(0), k] * 2.0),)
    before = [nest((2, 3, 4), body)]
    after = collapse_loops(before)
    kir.verify(after, [x, o])
    assert loops_in(after) == 1, kir.format_block(after)
    assert sum(isinstance(s, kir.View) for s in after) == 2
    same_results([x, o], before, after)


def test_a_broadcast_operand_collapses_only_the_dimensions_it_shares():
    x = kir.Buffer("x", (5, 6, 7), F4, kir.OUT)
    b = kir.Buffer("b", (6, 7), F4, kir.ARG, "A")  # read only: a reshape of its copy
    row = kir.Buffer("r", (5,), F4, kir.ARG, "A")
    body = (kir.Store(x, (i, j, k), b[j, k] + row[i]),)
    before = [nest((5, 6, 7), body)]
    after = collapse_loops(before)
    assert loops_in(after) == 2, kir.format_block(after)
    same_results([x, b, row], before, after)


def test_no_collapse_where_it_would_change_or_cannot_express_the_access():
    a = kir.Buffer("a", (4, 6), F4, kir.ARG, "A")
    c = kir.Buffer("c", (4, 6), F4, kir.OUT)
    t = kir.Buffer("t", (6, 4), F4, kir.OUT)
    cases = [
        # an argument written in place may be strided: no flat view of it
        [nest((4, 6), (kir.Store(a, (i, j), a[i, j] * 2.0),))],
        # transposed access
        [nest((4, 6), (kir.Store(t, (j, i), c[i, j]),))],
        # the index used as a value
        [nest((4, 6), (kir.Store(c, (i, j), kir.Cast(j, F4)),))],
        # an inner loop that does not start at 0
        [kir.Loop(i, 4, (kir.Loop(j, 6, (kir.Store(c, (i, j), a[i, j]),), start=1),))],
    ]
    for before in cases:
        after = collapse_loops(before)
        assert after == before, kir.format_block(after)
