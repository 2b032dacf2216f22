"""A stretch of a graph met twice, not back to back (two layers' backward, one of them
with an extra gradient sum), is cut alike both times, so its parts are one function."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import partition as P
from dualgraph.ir.interpret import interpret


def test_twins_finds_a_stretch_met_twice_apart_not_back_to_back():
    toks = [9, 1, 2, 3, 4, 5, 7, 8, 1, 2, 3, 4, 5, 6]
    assert P.twins(toks, [1] * len(toks), 4) == [(1, 8, 5)]
    assert P.twins(toks, [1] * len(toks), 6) == []  # lighter than one part
    toks = [1, 2, 3, 1, 2, 3]
    assert P.twins(toks, [1] * len(toks), 2) == []  # back to back: `repeats`' kind


def _apart(width: int = 6):
    """Two identical layers with other work between them: not a back-to-back run."""
    rng = np.random.default_rng(0)
    ws = [dg.tensor(rng.standard_normal((width, width)) * 0.3) for _ in range(2)]

    def layer(x, w):
        return dg.tanh(x @ w + 0.5).exp().sqrt().log1p().cos()

    def f(x, w0, w1):
        y = layer(x, w0)
        y = dg.sin(y * 3.0).abs().exp().sum(0, keepdim=True) * y
        return layer(y, w1).sum()

    x = dg.tensor(rng.standard_normal((5, width)))
    # Not fused: each op a unit of its own, as a backward pass keeps many.
    return dg.trace(f, x, *ws), [x.numpy()] + [w.numpy() for w in ws]


def test_a_layer_met_twice_apart_is_cut_alike(monkeypatch):
    g, arrays = _apart()
    weights = {id(n): 3 for n in g.nodes}
    plan = P.partition(g, {}, weights, 8)
    keys = [s.graph.key() for s in plan.segments]
    shared = len(keys) - len(set(keys))
    assert shared >= 1
    monkeypatch.setattr(P, "twins", lambda *a, **k: [])
    apart = P.partition(g, {}, weights, 8)
    assert len(apart.segments) - len({s.graph.key() for s in apart.segments}) < shared

    (want,) = interpret(g, *arrays)
    monkeypatch.undo()
    from dualgraph.backend.numba import build
    k = build(g, segment_lines=4)
    dg.testing.assert_close(k(*arrays)[0], want, rtol=1e-12, atol=0, check_dtype=False)
