"""Values a compiled call bakes in, aliased arguments written in place, and IEEE edges
across the tier swap: same answer as eager, or a warning that says what to do."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.compile.baked import CHECK_EVERY

COMPILED = ["blocking", "tiered"]


def _baked_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "captured a NumPy array" in str(w.message)]


@pytest.mark.parametrize("runner", COMPILED, indirect=True)
def test_a_changed_captured_array_warns_once(runner):
    table = np.array([1.0, 2.0, 3.0], np.float32)
    f = runner(lambda x: x * table)
    x = dg.ones(3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2 * CHECK_EVERY):
            assert f(x).tolist() == [1.0, 2.0, 3.0]
        assert _baked_warnings(record) == []
        table[0] = 10.0
        for _ in range(3 * CHECK_EVERY):
            f(x)
    msgs = _baked_warnings(record)
    assert len(msgs) == 1, msgs
    assert "test_baked_values.py" in msgs[0]  # where the trace read it
    assert "Pass it as an argument" in msgs[0]
    assert record[[str(w.message) for w in record].index(msgs[0])].category is RuntimeWarning


@pytest.mark.parametrize("runner", ["blocking"], indirect=True)
def test_each_changed_array_warns_once_per_function(runner):
    a = np.zeros(2)
    b = np.zeros(2)
    f = runner(lambda x: x + a + b)
    g = runner(lambda x: x - a)
    x = dg.ones(2, dtype=dg.float64)
    f(x), g(x)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        a[0] = -0.0  # a new bit pattern is a change: the kernel would see it
        for _ in range(2 * CHECK_EVERY):
            f(x), g(x)
        assert len(_baked_warnings(record)) == 2  # once for f, once for g
        b[1] = np.nan
        for _ in range(2 * CHECK_EVERY):
            f(x), g(x)
        assert len(_baked_warnings(record)) == 3  # b, in f only


@pytest.mark.parametrize("runner", ["blocking"], indirect=True)
def test_arrays_that_do_not_change_never_warn(runner):
    c = np.array([np.nan, -0.0])
    f = runner(lambda x: x * c)
    x = dg.ones(2, dtype=dg.float64)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(4 * CHECK_EVERY):
            f(x)
    assert _baked_warnings(record) == []
