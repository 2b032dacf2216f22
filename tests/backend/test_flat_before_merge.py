"""Elementwise nests flattened before loop merging, and flat loops merged.

A nest that stores a mask and reads it back at the same element (leaky ReLU's forward) is
flat, as any other elementwise nest; flat loops of one length over whole arrays merge as
n-d nests did (a flat view's index lines up with the same flat index of that array only);
a compiled kernel of such nests equals eager."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.loops import flatten_nests, merge_loops

from .test_flat_loops import same_results as _same

F4 = np.dtype(np.float32)
B1 = np.dtype(np.bool_)
i, j = kir.Var("i"), kir.Var("j")


def _nest(body: list) -> kir.Loop:
    return kir.Loop(i, 4, (kir.Loop(j, 5, tuple(body)),))


def _loops(stmts: list) -> list:
    return [s for s in kir.walk(stmts) if isinstance(s, kir.Loop)]


def test_mask_stored_and_read_back_is_flat_and_flat_loops_merge():
    x = kir.Buffer("x", (4, 5), F4, kir.ARG, "C")
    m = kir.Buffer("m", (4, 5), B1, kir.OUT, "C")
    mv = kir.Buffer("mv", (4, 5), B1, kir.VIEW, "C")  # the mask read through an alias
    o = kir.Buffer("o", (4, 5), F4, kir.OUT, "C")
    p = kir.Buffer("p", (4, 5), F4, kir.OUT, "C")
    t = kir.Var("t", F4)
    ix = (i, j)
    before = [
        kir.View(mv, m, "alias"),
        _nest([kir.Store(m, ix, kir.Bin(">", x[ix], kir.const(0.0, F4))),
               kir.Let(t, x[ix] * 0.2),
               kir.Store(o, ix, kir.Select(mv[ix], x[ix], t))]),
        _nest([kir.Store(p, ix, o[ix] * 2.0)]),
    ]
    flat = flatten_nests(before)
    assert [lp.extent for lp in _loops(flat)] == [20, 20]
    merged = merge_loops(flat)
    (loop,) = _loops(merged)
    assert loop.extent == 20
    _same([x, m, o, p], before, merged)


def test_flat_loop_and_nest_reading_it_transposed_stay_apart():
    x = kir.Buffer("x", (4, 4), F4, kir.ARG, "C")
    o = kir.Buffer("o", (4, 4), F4, kir.OUT, "C")
    q = kir.Buffer("q", (4, 4), F4, kir.OUT, "C")
    first = kir.Loop(i, 4, (kir.Loop(j, 4, (kir.Store(o, (i, j), x[i, j] * 3.0),)),))
    flat = flatten_nests([first])
    # The second nest reads o transposed: element (i, j) needs o's (j, i), written by the
    # flat loop at another index, so the two must not merge.
    second = kir.Loop(i, 4, (kir.Loop(j, 4, (kir.Store(q, (i, j), o[j, i] + 1.0),)),))
    merged = merge_loops([*flat, second])
    assert len([s for s in merged if isinstance(s, kir.Loop)]) == 2
    _same([x, o, q], [first, second], merged)


def test_compiled_leaky_relu_and_its_mask_equal_eager():
    def f(x):
        m = x > 0
        y = dg.where(m, x, x * 0.2)
        return m, y, y * 2 - x

    x = dg.tensor(np.random.default_rng(0).standard_normal((3, 4, 5, 6)).astype(np.float32))
    c = dg.compile(f, tiered=False)
    for got, want in zip(c(x), f(x)):
        dg.testing.assert_close(got.numpy(), want.numpy(), rtol=1e-6, atol=0)
    (entry,) = c.entries()
    # The mask, the select and the last product are one flat loop.
    assert entry.kernel.source.count("for i") == 1
