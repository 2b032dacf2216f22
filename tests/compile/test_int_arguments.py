"""Int arguments: baked in on the first value, a graph input from the second on
(torch.compile's automatic dynamic), keyed by value where the function needs the value
itself. Every value gives eager's answer, eagerly, compiled blocking and tiered."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg

from .conftest import MODES, traces

VALUES = (0, 1, 5, -3, 1000, 7, 2)


def _unused(x, i):
    return (x * 2).sum()


def _arithmetic(x, xi, i):
    j = i * 3 - (i // 2) % 3 + abs(-i)
    return (x * j + 0.5, xi + i, dg.add(x, i), i - x, x / (i * i + 1), (i + 1) / (x + 3),
            x // (i + 1) + x % (i + 2))


@pytest.mark.parametrize("runner", MODES, indirect=True)
def test_an_unused_int_traces_twice_over_many_values(runner):
    f = runner(_unused)
    x = dg.ones(3)
    for i in VALUES:
        dg.testing.assert_close(f(x, i), _unused(x, i))
    if runner.mode != "eager":
        assert traces(f) == 2, f.stats.retrace_reasons
        assert "automatic dynamic" in f.stats.retrace_reasons[0]


@pytest.mark.parametrize("runner", MODES, indirect=True)
def test_int_arithmetic_runs_in_the_graph_as_python_computes_it(runner):
    f = runner(_arithmetic)
    x = dg.tensor(np.linspace(-1, 1, 4, dtype=np.float32))
    xi = dg.tensor(np.arange(4, dtype=np.int32))
    for i in VALUES:
        got, want = f(x, xi, i), _arithmetic(x, xi, i)
        for g, w in zip(got, want):
            dg.testing.assert_close(g, w)  # dtypes too: an int32 tensor plus an int
    if runner.mode != "eager":
        assert traces(f) == 2, f.stats.retrace_reasons


def _branches(x, i):
    if i % 2:
        return x.sum()
    return (x * 2).sum()


def _slices(x, i):
    return x[:i].sum() + len(range(i))


def _returns(x, i):
    return x * 2, i


def _power(x, i):
    return x ** i  # a literal exponent: computed otherwise than by a tensor one


@pytest.mark.parametrize("fn", [_branches, _slices, _returns, _power])
def test_an_int_the_function_needs_as_a_value_stays_keyed_by_value(fn):
    f = dg.compile(fn)
    x = dg.ones(9)
    for i in (1, 2, 3, 2, 1):
        dg.testing.assert_close(f(x, i), fn(x, i))
    assert f.stats.traces == 3, f.stats.retrace_reasons
    assert "uses it as a Python value" in f.stats.retrace_reasons[-1]


def test_keyed_by_value_past_the_budget_warns_and_runs_eagerly():
    f = dg.compile(_slices, max_retraces=2)
    x = dg.ones(9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(6):
            dg.testing.assert_close(f(x, i), _slices(x, i))
    msgs = [str(w.message) for w in caught if "retraced" in str(w.message)]
    assert len(msgs) == 1 and "as an index or a size" in msgs[0], msgs
    assert f.stats.traces == 3


def test_other_values_at_the_int_position_keep_their_own_entries():
    def scale(x, i):
        return x * i

    f = dg.compile(scale)
    x = dg.ones(2)
    for i in (1, 2, 3):
        f(x, i)
    assert f.stats.traces == 2
    # A 0-d tensor, a float and a bool are not ints: each has an entry of its own, and
    # ints still run the shared one.
    for other in (dg.tensor(4), 2.5, True, 4, dg.tensor(5), 6):
        got = f(x, other)
        dg.testing.assert_close(got, scale(x, other))
    assert f.stats.traces == 5, f.stats.retrace_reasons


def test_an_int_passed_by_keyword_or_by_default_is_an_input_too():
    def step(x, *, i=0):
        return x + i

    f = dg.compile(step)
    x = dg.zeros(2)
    for i in (1, 2, 3):
        dg.testing.assert_close(f(x, i=i), step(x, i=i))
    dg.testing.assert_close(f(x), step(x))
    assert f.stats.traces == 2, f.stats.retrace_reasons


def test_a_dynamic_float_and_an_automatic_int_together():
    def step(x, lr, i):
        return x * lr + i

    f = dg.compile(step, dynamic=(1,))
    x = dg.ones(2)
    for lr, i in ((0.5, 1), (0.25, 2), (2.0, 3)):
        dg.testing.assert_close(f(x, lr, i), step(x, lr, i))
    assert f.stats.traces == 2
