"""The retrace policy: a budget, a reason per retrace, one warning, eager fallback or strict.

The functions here are tiny (one elementwise op); their kernels persist in the test cache.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.compile import CompiledFunction


def _retrace_warnings(record: list) -> list[str]:
    return [str(w.message) for w in record if "retraced" in str(w.message)]


def scale(x, s):
    return x * s


def keyed(x, s):
    # A float argument is a graph input unless Python reads its value, as this comparison
    # does: then each value is its own trace.
    return x * s if s != 0 else x


def test_default_budget_is_8():
    f = dg.compile(scale)
    assert isinstance(f, CompiledFunction) and f.max_retraces == 8
    assert dg.compile(scale, max_retraces=3).max_retraces == 3


def test_each_retrace_records_which_argument_and_property():
    f = dg.compile(lambda x, y, s: x * y + s if s != 0 else x * y)
    x32 = dg.tensor(np.ones((2, 3), np.float32))
    y = dg.tensor(np.ones(3, np.float32))
    f(x32, y, 1.0)
    f(dg.tensor(np.ones((4, 3), np.float32)), y, 1.0)  # shape of argument 0
    f(dg.tensor(np.ones((4, 3), np.float64)), y, 1.0)  # dtype of argument 0
    f(dg.tensor(np.ones((4, 3), np.float64)), y, 2.0)  # baked Python value of argument 2
    f(dg.tensor(np.ones((4, 3)), requires_grad=True), y, 2.0)  # requires_grad of argument 0
    with dg.no_grad():
        f(dg.tensor(np.ones((4, 3)), requires_grad=True), y, 2.0)  # grad mode
    f(dg.tensor(np.ones((4, 3)), requires_grad=True), np.ones(3, np.float32), 2.0)  # type
    reasons = f.stats.retrace_reasons
    assert f.stats.traces == 7 and len(reasons) == 6, reasons
    assert reasons[0] == "argument 0 (tensor): shape (4, 3) instead of (2, 3)"
    assert reasons[1] == "argument 0 (tensor): dtype float64 instead of float32"
    assert reasons[2].startswith("argument 2: Python value 2.0 instead of 1.0 (baked constant)")
    assert reasons[3] == "argument 0: requires_grad=True instead of False"
    assert reasons[4] == "grad mode off instead of on"
    # A NumPy array where a tensor was (the array's own signature: shape, dtype).
    assert reasons[5].startswith("argument 1"), reasons[5]


def test_same_signature_never_retraces():
    f = dg.compile(scale)
    x = dg.tensor(np.arange(3.0))
    for _ in range(20):
        f(x, 2.0)
    assert f.stats.traces == 1 and f.stats.cache_hits == 19
    assert f.stats.retrace_reasons == []


def test_past_budget_warns_once_with_reasons_and_fix_then_runs_eagerly():
    f = dg.compile(keyed, max_retraces=2)
    x = dg.tensor(np.arange(4.0))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        results = [f(x, float(s)).numpy() for s in range(1, 8)]
    for s, r in enumerate(results, 1):  # every result correct, compiled or eager
        np.testing.assert_array_equal(r, np.arange(4.0) * s)
    (msg,) = _retrace_warnings(record)  # once, not once per eager call
    assert "retraced 2 times (budget 2)" in msg
    assert "argument 1: Python value 2.0 instead of 1.0 (baked constant)" in msg
    assert "argument 1: Python value 4.0 instead of 3.0 (baked constant)" in msg
    assert "dg.tensor(value)" in msg and "max_retraces" in msg  # the fix
    assert "Running eagerly" in msg
    assert f.stats.traces == 3  # no trace after the budget
    # Signatures compiled before the budget ran out still run compiled.
    hits = f.stats.cache_hits
    np.testing.assert_array_equal(f(x, 2.0).numpy(), np.arange(4.0) * 2)
    assert f.stats.cache_hits == hits + 1


def test_eager_fallback_keeps_gradients_correct():
    f = dg.compile(lambda x, s: (x * s).sum() if s != 0 else x.sum(), max_retraces=0)
    x = dg.tensor(np.arange(3.0), requires_grad=True)
    f(x, 1.0)
    with pytest.warns(RuntimeWarning, match="retraced"):
        y = f(x, 3.0)
    assert y.grad_fn is not None and y.grad_fn.name() == "SumBackward0"  # eager tape
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


def test_strict_raises_retrace_limit_error():
    f = dg.compile(lambda x: x.sum(), strict=True, max_retraces=1)
    f(dg.ones(2))
    f(dg.ones(3))
    with pytest.raises(dg.RetraceLimitError) as info:
        f(dg.ones(4))
    msg = str(info.value)
    assert "argument 0 (tensor): shape (3,) instead of (2,)" in msg
    assert "argument 0 (tensor): shape (4,) instead of (3,)" in msg
    assert "budget 1" in msg and "max_retraces" in msg
    assert isinstance(info.value, RuntimeError)
    # Still strict: the next new signature raises again, known ones run.
    with pytest.raises(dg.RetraceLimitError):
        f(dg.ones(5))
    assert f(dg.ones(3)).item() == 3.0
    assert f.stats.traces == 2


def test_budget_is_configurable_through_decorator_form():
    @dg.compile(max_retraces=4)
    def f(x, s):
        return x + s if s != 0 else x

    x = dg.tensor(np.zeros(2))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for s in range(5):
            f(x, float(s))
    assert f.stats.traces == 5 and not _retrace_warnings(record)
    with pytest.warns(RuntimeWarning, match="budget 4"):
        f(x, 9.0)


def test_dynamic_python_number_is_an_input_not_a_retrace():
    f = dg.compile(scale, dynamic=(1,))
    x = dg.tensor(np.linspace(-1.0, 1.0, 5).astype(np.float32))
    for s in (0.5, 1.5, 2, -3.25):
        out = f(x, s)
        assert out.dtype == dg.float32
        dg.testing.assert_close(out.numpy(), (x * s).numpy(), rtol=1e-6, atol=0, equal_nan=True,
                                check_dtype=False)
    assert f.stats.traces == 1 and f.stats.retrace_reasons == []
    # The 0-d input takes the dtype of the floating tensor argument: float64 stays float64.
    x64 = dg.tensor(np.linspace(-1.0, 1.0, 5))
    np.testing.assert_array_equal(f(x64, 1 / 3).numpy(), x64.numpy() * (1 / 3))


def test_retrace_warning_names_the_dynamic_fix():
    f = dg.compile(keyed, max_retraces=1)
    x = dg.ones(3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for s in (1.0, 2.0, 3.0):
            f(x, s)
    (msg,) = _retrace_warnings(record)
    assert "dynamic=(position,)" in msg and "dg.tensor(value)" in msg
