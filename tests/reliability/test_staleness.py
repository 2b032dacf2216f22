"""Trace staleness: ``verify=True`` (or ``DUALGRAPH_VERIFY=1``) catches a trace that no
longer matches the Python program.

Tracing bakes in Python control flow on non-tensor values (globals, closure variables,
attributes, Python-number arguments are part of the signature and retrace instead) and any
Python value read while tracing. When such a value changes between calls, the compiled
function keeps running the old program; verify mode retraces now and then and compares.
"""

from __future__ import annotations

import inspect
import types

import numpy as np
import pytest

import dualgraph as dg

# Attributes of a plain object are still baked in (short lists and dicts are guarded: a
# change to them retraces), so they are the stale values these tests need.
SETTINGS = types.SimpleNamespace(branch=True, factor=2.0)


def branchy(x):
    if SETTINGS.branch:
        y = x * 2.0
    else:
        y = dg.exp(x)  # LINE_EXP
    return y + 1.0


def scaled(x):
    return x * SETTINGS.factor + 1.0


def _line_of(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


@pytest.fixture(autouse=True)
def _reset_settings():
    saved = dict(vars(SETTINGS))
    yield
    vars(SETTINGS).update(saved)


def test_branch_flip_raises_stale_trace_error_naming_the_line():
    f = dg.compile(branchy, verify=True)
    x = dg.tensor(np.linspace(-1.0, 1.0, 4))
    dg.testing.assert_close(f(x).numpy(), x.numpy() * 2 + 1, rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    SETTINGS.branch = False
    with pytest.raises(dg.StaleTraceError) as info:
        f(x)
    msg = str(info.value)
    assert f"{__file__}:{_line_of(branchy, 'LINE_EXP')}" in msg
    assert "mul was compiled, exp runs now" in msg
    assert "dg.where" in msg
    assert isinstance(info.value, dg.TraceError)


def test_without_verify_the_stale_trace_runs_silently():
    """The hazard verify mode exists for: the compiled result follows the old branch."""
    f = dg.compile(branchy)
    x = dg.tensor(np.linspace(-1.0, 1.0, 4))
    f(x)
    SETTINGS.branch = False
    dg.testing.assert_close(f(x).numpy(), x.numpy() * 2 + 1, rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)  # not exp(x) + 1


def test_env_var_turns_verify_on(monkeypatch):
    monkeypatch.setenv("DUALGRAPH_VERIFY", "1")
    f = dg.compile(branchy)
    assert f.verify
    x = dg.tensor(np.linspace(-1.0, 1.0, 4))
    f(x)
    SETTINGS.branch = False
    with pytest.raises(dg.StaleTraceError, match=f"{_line_of(branchy, 'LINE_EXP')}"):
        f(x)
    monkeypatch.setenv("DUALGRAPH_VERIFY", "0")
    assert not dg.compile(branchy).verify


def test_changed_baked_value_is_caught_by_comparing_results():
    """Same op sequence, different baked literal: the eager rerun disagrees."""
    f = dg.compile(scaled, verify=True)
    x = dg.tensor(np.linspace(-1.0, 1.0, 4))
    f(x)
    SETTINGS.factor = 3.0
    with pytest.raises(dg.StaleTraceError, match="no longer matches the eager one"):
        f(x)


def test_verify_checks_occasionally_and_passes_when_nothing_changed():
    f = dg.compile(branchy, verify=True)
    x = dg.tensor(np.linspace(-1.0, 1.0, 4))
    for _ in range(9):
        dg.testing.assert_close(f(x).numpy(), x.numpy() * 2 + 1, rtol=1e-7, atol=0, equal_nan=True,
                                check_dtype=False)
    assert f.stats.traces == 1  # checking traces again but never adds a signature
    (entry,) = f.entries()
    assert entry.calls == 9  # checked on calls 1, 2, 4 and 8 only


def test_verify_with_gradients_and_training_step():
    w = dg.tensor(np.array([0.5, -0.25]), requires_grad=True)
    opt = dg.optim.SGD([w], lr=0.1)

    @dg.compile(verify=True)
    def step(x):
        opt.zero_grad()
        loss = ((x * w).sum() - 1.0) ** 2
        loss.backward()
        opt.step()
        return loss

    x = dg.tensor(np.array([1.0, 2.0]))
    losses = [step(x).item() for _ in range(4)]
    assert losses[-1] < losses[0]
    # The step ran once per call (verify's retrace writes nothing back).
    w_eager = np.array([0.5, -0.25])
    for _ in range(4):
        g = 2 * ((x.numpy() * w_eager).sum() - 1.0) * x.numpy()
        w_eager = w_eager - 0.1 * g
    dg.testing.assert_close(w.numpy(), w_eager, rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)


def branch_after_an_op(x):
    y = x + 1.0  # LINE_ADD
    if SETTINGS.branch:
        y = y * 2.0
    else:
        y = dg.exp(y)
    return y


def test_stale_error_brackets_the_branch_between_two_lines():
    # The `if` records no op; the message names the last shared line before it too.
    f = dg.compile(branch_after_an_op, verify=True)
    x = dg.tensor(np.linspace(-1.0, 1.0, 4))
    f(x)
    SETTINGS.branch = False
    with pytest.raises(dg.StaleTraceError) as info:
        f(x)
    msg = str(info.value)
    assert f"the Python branch is after {__file__}:{_line_of(branch_after_an_op, 'LINE_ADD')}" \
        in msg
