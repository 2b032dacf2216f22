"""What eager mode reads on every call, a compiled call reads or guards: settings the
program branches on, and the attributes of the user's own Python modules (``config.X``)."""

from __future__ import annotations

import sys
import types

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
