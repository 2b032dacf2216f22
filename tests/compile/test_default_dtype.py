"""``dg.set_default_dtype``: factories, Python floats, float ops on integers and new
layers' parameters follow it as torch's do (goldens from record_default_dtype_goldens.py),
and a compiled function traces again when it changes instead of reusing a float32 trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from . import default_dtype_cases as cases

GOLD = json.loads(Path(__file__).with_name("default_dtype_goldens.json").read_text())["dtypes"]


@pytest.fixture
def float64_default():
    dg.set_default_dtype(dg.float64)
    yield
    dg.set_default_dtype(dg.float32)


def test_matches_torch() -> None:
    got = cases.run(dg)
    assert got == GOLD
    assert dg.get_default_dtype() == dg.float32


def test_errors() -> None:
    with pytest.raises(TypeError, match="only floating-point types"):
        dg.set_default_dtype(dg.int64)
    with pytest.raises(TypeError, match="invalid type"):
        dg.set_default_tensor_type("torch.LongTensor")
    with pytest.raises(TypeError, match="CPU only"):
        dg.set_default_tensor_type("torch.cuda.FloatTensor")
    assert dg.get_default_dtype() == dg.float32


def _f(x):
    return x * 0.1 + dg.ones(x.shape) + dg.tensor(1e-9)


def test_compiled_function_retraces_for_a_new_default() -> None:
    f = dg.compile(_f)
    x = dg.tensor(np.arange(3), dtype=dg.int64)
    y32 = f(x)
    assert y32.dtype == np.float32 and f.stats.traces == 1
    dg.set_default_dtype(dg.float64)
    try:
        y64 = f(x)
        assert y64.dtype == np.float64
        assert f.stats.traces == 2
        assert "default dtype float64 instead of float32" in f.stats.retrace_reasons[-1]
        np.testing.assert_array_equal(y64.numpy(), _f(x).numpy())  # 1e-9 is kept
        f(x)
        assert f.stats.traces == 2
    finally:
        dg.set_default_dtype(dg.float32)
    assert f(x).dtype == np.float32 and f.stats.traces == 2  # the float32 entry again


def test_float64_training_step_compiled_equals_eager(float64_default) -> None:
    runs = []
    for compiled in (False, True):
        dg.manual_seed(0)
        net = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 1))
        assert net[0].weight.dtype == np.float64
        opt = dg.optim.Adam(net.parameters(), lr=0.01)

        def step(x, net=net, opt=opt):
            opt.zero_grad()
            loss = (net(x) ** 2).mean() + 0.5
            loss.backward()
            opt.step()
            return loss

        f = dg.compile(step) if compiled else step
        x = dg.randn(5, 3)
        runs.append(([f(x).item() for _ in range(3)], f))
    assert_close(runs[1][0], runs[0][0], rtol=1e-12, atol=0.0)
    assert runs[1][1].stats.traces == 1
