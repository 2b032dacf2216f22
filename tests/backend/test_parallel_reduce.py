"""Whole-array reductions under ``parallel=True``: a ``prange``
over fixed chunks, each folding its own row of partials, so the result is right, does not
depend on the number of threads, and the reduction is not left serial."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.workloads import chain_data, elementwise_chain


@pytest.mark.parametrize("n", [40_000, 100_003])
def test_parallel_sum_matches_serial_and_is_a_prange(n):
    x = chain_data(n)
    got = {}
    for par in (False, True):
        t = dg.tensor(x, requires_grad=True)
        f = dg.compile(elementwise_chain, tiered=False, parallel=par)
        v = f(t)
        v.backward()
        got[par] = (float(v.numpy()), t.grad.numpy().copy())
        src = f.entries()[0].kernel.source
        assert ("parts" in src and "numba.prange" in src) == par, src
    xd = x.astype(np.float64)
    ref = (np.tanh(xd * 0.5 + 1) / (1 + np.exp(-xd)) + 0.1 * xd ** 2).sum()
    assert got[True][0] == pytest.approx(ref, rel=1e-6)
    assert got[True][0] == pytest.approx(got[False][0], rel=1e-6)
    dg.testing.assert_close(got[True][1], got[False][1], rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_parallel_max_propagates_nan_and_finds_the_maximum():
    x = np.random.default_rng(0).standard_normal(50_000).astype(np.float32)
    f = dg.compile(lambda t: (t * 2.0).max(), tiered=False, parallel=True)
    assert float(f(dg.tensor(x)).numpy()) == pytest.approx(2 * x.max())
    x[31_111] = np.nan
    assert np.isnan(float(f(dg.tensor(x)).numpy()))


def test_parallel_kernels_ask_openmp_to_wait_passively(monkeypatch):
    """Spinning OpenMP workers starved OpenBLAS's threads (the batch-1024 MLP step ran
    2.5x slower with parallel=True): a parallel build sets OMP_WAIT_POLICY=PASSIVE before
    Numba starts its threads, unless the user set it."""
    from dualgraph.backend.numba import build

    graph = dg.trace(lambda x: (x * 2.0).sum(), dg.ones(8))
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    build(graph, parallel=False)
    assert "OMP_WAIT_POLICY" not in os.environ
    build(graph, parallel=True)
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    build(graph, parallel=True)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
