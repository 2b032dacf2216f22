"""Reduction clusters (`codegen._Writer.plan_clusters`): a whole-array reduction takes the
elementwise loops that feed only it and its siblings, and the sibling loops over the same
elements, into its own loop; the values they share are scalars there, never stored.

Each program is checked against the reference interpreter, and its source for the loop
structure the plan promises. The source is generated without compiling; one small kernel
per case is compiled to run it.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.backend.numba.codegen import lower
from dualgraph.passes import optimize

N = 100  # above the lane reduction's minimum (4 x 16)


def _graph(fn, *shapes):
    args = [dg.tensor(np.ones(s, np.float64)) for s in shapes]
    return optimize(dg.trace(fn, *args))


def _nests(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.startswith("    for "))


def _run(graph, *arrays):
    expected = dg.interpret(graph, *arrays)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = build(graph, use_cache=False)(*arrays)
    for g, e in zip(got, expected):
        dg.testing.assert_close(g, e, rtol=1e-13, atol=1e-13, equal_nan=True, check_dtype=False)


def _value_and_grad(x):
    # What `value_and_grad` makes of sum(tanh(x) * sigmoid(x)): a loss and its gradient
    # reading the same tanh and sigmoid.
    t, s = dg.tanh(x * 0.5), dg.sigmoid(x)
    loss = (t * s).sum()
    grad = (1 - t * t) * 0.5 * s + t * s * (1 - s)
    return loss, grad


def test_loss_and_gradient_share_one_loop():
    g = _graph(_value_and_grad, (N,))
    src = lower(g).source
    # The lanes' init and fold, and one blocked loop with its tail: no pass stores tanh
    # or sigmoid, and the gradient is written in the reduction's loop.
    assert _nests(src) == 4, src
    body = src[src.index("for i0b"):src.index("for i0 in range(96")]
    assert "tanh" in body and "sigmoid" in body and "o1[i0] =" in body, src
    assert "w1" not in src, src  # the only work array is the lanes'
    x = np.random.default_rng(0).standard_normal(N)
    _run(g, x)


def test_a_shared_value_that_is_also_an_output_is_stored():
    def fn(x):
        t = dg.tanh(x)
        return t.sum(), t * 2.0, t
    g = _graph(fn, (N,))
    src = lower(g).source
    # tanh is an output, so it is computed into its buffer first; the sum and the
    # sibling read it there and still share a loop.
    assert "o2[i0] =" in src and _nests(src) == 5, src
    _run(g, np.linspace(-3, 3, N))


def test_a_sibling_needed_after_the_loop_gets_an_array(monkeypatch):
    from dualgraph.backend.numba import codegen

    monkeypatch.setattr(codegen, "LOCAL_WORK_BYTES", -1)  # its array a work array, however small

    def fn(x, y):
        a = dg.exp(x * 0.1)
        loss = (a * y).sum()
        b = a + y  # a sibling; the product below reads it after the loop
        return loss, b.reshape(10, 10) @ y.reshape(10, 10)
    g = _graph(fn, (N,), (N,))
    src = lower(g).source
    body = src[src.index("for i0b"):src.index("for i0 in range(96")]
    assert "exp" in body and "v4[i0] =" in body and "v4 = w" in src, src  # a work array
    rng = np.random.default_rng(1)
    _run(g, rng.standard_normal(N), rng.standard_normal(N))


def test_parallel_cluster_runs_in_the_chunked_prange():
    g = _graph(_value_and_grad, (1 << 15,))
    src = lower(g, parallel=True).source
    body = src[src.index("numba.prange"):src.index("for i0 in range(32768, 32768)")
               if "range(32768, 32768)" in src else None]
    assert "tanh" in body and "o1[i0] =" in body, src
    assert sum(1 for line in src.splitlines() if "prange" in line) == 1, src
    x = np.random.default_rng(2).standard_normal(1 << 15)
    expected = dg.interpret(g, x)
    got = build(g, parallel=True, use_cache=False)(x)
    for a, e in zip(got, expected):
        dg.testing.assert_close(a, e, rtol=1e-12, atol=1e-12, equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("case", ["rows", "short", "unrelated"])
def test_no_cluster(case):
    if case == "rows":  # a reduction along one axis of a matrix: no whole-array loop
        g = _graph(lambda x: (dg.tanh(x).sum(1), dg.tanh(x) * 2.0), (4, N))
    elif case == "short":  # too short for lanes
        g = _graph(lambda x: (dg.tanh(x).sum(), dg.tanh(x) * 2.0), (10,))
    else:  # a loop that reads nothing the reduction reads saves no pass
        g = _graph(lambda x, y: ((x * x).sum(), y * 2.0), (N,), (N,))
    src = lower(g).source
    loops = [line for line in src.splitlines() if "for i0b" in line]
    body_writes = [line for line in src.splitlines() if line.startswith("            o1[")]
    assert not (loops and body_writes), src
