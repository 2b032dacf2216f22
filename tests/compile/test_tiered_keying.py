"""The keying rules at tier 0 (the optimized graph interpreted while the worker
compiles): an argument only detached, an int argument made an input, an attribute set
each call and a small integer argument read as numbers reuse their entry there too, and
a call whose shapes depend on the data runs eagerly, with eager's answers."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import cache as kernel_cache
from dualgraph.compile import tiered as tiering

from .test_argument_values import _model, _step
from .test_rebound_attributes import _setup
from .test_requires_grad_twin import _run


@pytest.fixture(autouse=True)
def _tiered(tiered, tmp_path):
    """Tiered compiles into an empty kernel cache of the test's own, which also hides the
    kernels earlier tests of this worker process loaded: entries start at tier 0."""
    with kernel_cache.isolated(str(tmp_path / "kernels")):
        yield
        tiering.shutdown()


def _served(f) -> int:
    return f.stats.tier0_calls + f.stats.tier1_calls


def test_a_detached_argument_reuses_its_entry_at_tier0():
    f, got = _run(True, False)
    _, want = _run(False, False)
    assert f.stats.traces == 1, f.stats.retrace_reasons
    assert f.stats.tier0_calls > 0 and _served(f) == 4
    for g, e in zip(got, want):
        dg.testing.assert_close(g, e, rtol=1e-5, atol=1e-6, check_dtype=False)


def test_an_int_argument_made_an_input_runs_at_tier0():
    def step(x, xi, i):
        return x * (i * 7 - (i // 3)) + 0.25, xi * i

    f = dg.compile(step)
    x, xi = dg.tensor(np.linspace(0, 1, 3, dtype=np.float32)), dg.tensor([1, 2, 3])
    for i in (4, 9, -2, 11, 0):
        for g, w in zip(f(x, xi, i), step(x, xi, i)):
            dg.testing.assert_close(g, w)
    assert f.stats.traces == 2, f.stats.retrace_reasons
    assert f.stats.tier0_calls > 0 and _served(f) == 5


def test_an_attribute_set_each_call_reuses_its_entry_at_tier0():
    outs = {}
    for compiled in (False, True):
        step, holder, _ = _setup()
        f = dg.compile(step) if compiled else step
        t = dg.tensor([1, 0])
        outs[compiled] = [(f(dg.ones(2, 4) * (i + 2), t)[0], holder.criterion.true_dist)
                          for i in range(3)]
    for (a, b), (c, d) in zip(outs[True], outs[False]):
        dg.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)
        dg.testing.assert_close(b, d, rtol=1e-5, atol=1e-6)
    assert f.stats.traces == 1, f.stats.retrace_reasons
    assert f.stats.tier0_calls > 0


def test_packed_lengths_argument_runs_at_tier0():
    step = _step(_model())
    f = dg.compile(step)
    x = dg.ones(2, 3, 3) * 0.3
    for lengths in ([1, 3], [1, 3], [3, 3]):
        dg.testing.assert_close(f(x, dg.tensor(lengths)), step(x, dg.tensor(lengths)))
    assert f.stats.traces == 2 and f.stats.tier0_calls > 0


def test_shapes_that_depend_on_the_data_run_eagerly_at_tier0_too():
    def pick(x, t):
        return x[dg.nonzero(t == 1).squeeze(1)].sum() * 3

    f = dg.compile(pick)
    x, t = dg.arange(8, dtype=dg.float32).reshape(4, 2), dg.tensor([1, 0, 1, 1])
    with pytest.warns(RuntimeWarning, match="depends on the data"):
        got = f(x, t)
    dg.testing.assert_close(got, pick(x, t))
    dg.testing.assert_close(f(x, dg.tensor([0, 1, 0, 0])), pick(x, dg.tensor([0, 1, 0, 0])))
    assert _served(f) == 0
