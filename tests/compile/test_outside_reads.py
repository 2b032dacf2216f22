"""What eager mode reads on every call, a compiled call reads or guards: settings the
program branches on, attributes of the user's own Python modules and classes
(``config.X``, ``Settings.x``), and values of captured tensors read into Python."""

from __future__ import annotations

import sys
import types

import pytest

import dualgraph as dg
from dualgraph.testing import assert_close


def test_settings_read_while_tracing_are_guarded():
    """A program that branches on a setting eager reads at each call (the determinism
    flag, the float32 matmul precision) runs the other branch once it changes."""

    def f(x):
        a = 2.0 if dg.are_deterministic_algorithms_enabled() else 3.0
        b = 5.0 if dg.get_float32_matmul_precision() == "highest" else 7.0
        return x * a + b

    cf = dg.compile(f, tiered=False)
    x = dg.ones(2)
    try:
        for det, precision in ((False, "highest"), (True, "highest"), (True, "high"),
                               (False, "highest")):
            dg.use_deterministic_algorithms(det)
            dg.set_float32_matmul_precision(precision)
            assert_close(cf(x), f(x), rtol=0, atol=0)
    finally:
        dg.use_deterministic_algorithms(False)
        dg.set_float32_matmul_precision("highest")
    assert cf.stats.traces == 3


def test_attributes_of_a_users_module_are_guarded():
    config = types.ModuleType("user_config")
    config.SCALE = 0.5
    config.ACT = "relu"
    sys.modules["user_config"] = config
    try:
        code = ("import dualgraph as dg\n"
                "import user_config\n"
                "def f(x):\n"
                "    y = x * user_config.SCALE\n"
                "    return dg.relu(y) if user_config.ACT == 'relu' else dg.tanh(y)\n")
        space: dict = {}
        exec(compile(code, "user_program.py", "exec"), space)
        f = space["f"]
        cf = dg.compile(f, tiered=False)
        x = dg.tensor([-1.0, 0.5, 2.0])
        assert_close(cf(x), f(x), rtol=0, atol=0)
        config.SCALE = 3.0
        assert_close(cf(x), f(x), rtol=0, atol=0)
        config.ACT = "tanh"
        assert_close(cf(x), f(x))
        assert cf.stats.traces == 3
    finally:
        del sys.modules["user_config"]


class Settings:
    scale = 0.5


def test_class_attributes_the_code_names_are_guarded():
    def f(x):
        return x * Settings.scale

    cf = dg.compile(f, tiered=False)
    x = dg.tensor([1.0, 2.0])
    try:
        for scale in (0.5, 0.75, 0.5):
            Settings.scale = scale
            assert_close(cf(x), f(x), rtol=0, atol=0)
    finally:
        Settings.scale = 0.5
    assert cf.stats.traces == 2


def test_values_of_a_captured_tensor_read_into_python_are_guarded():
    """``s.item()``, ``float(s)`` and ``w.tolist()`` of captured tensors are baked into the
    trace as numbers: a change of the tensors retraces, as eager reads them each call."""
    s = dg.tensor(2.0)
    w = dg.tensor([1.0, 3.0])

    def f(x):
        return x * s.item() + float(s) + sum(w.tolist())

    cf = dg.compile(f, tiered=False)
    x = dg.tensor([1.0, 2.0])
    assert_close(cf(x), f(x), rtol=0, atol=0)
    assert_close(cf(x), f(x), rtol=0, atol=0)
    s.fill_(3.0)
    assert_close(cf(x), f(x), rtol=0, atol=0)
    w.add_(1.0)
    assert_close(cf(x), f(x), rtol=0, atol=0)
    assert cf.stats.traces == 3


def test_reading_a_value_the_trace_computed_raises():
    """A tensor made inside and written in place holds a traced value: ``item()`` of it
    would read the made value, not the computed one."""

    def f(x):
        acc = dg.zeros(())
        acc += x.sum()
        return x * acc.item()

    with pytest.raises(dg.TraceError, match="written in place"):
        dg.trace(f, dg.ones(3))
    # Made from numbers and not written: the same value on every call, no guard needed.
    assert dg.trace(lambda x: x * dg.tensor(2.0).item(), dg.ones(3)).nodes[0].op == "mul"
