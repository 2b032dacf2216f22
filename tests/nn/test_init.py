"""`dg.nn.init` against torch: gains exactly, and each initialiser's distribution (sample
moments and range on a large tensor) against torch's, recorded in surface_goldens.json.
The draws differ (other generators), so moments are compared, never values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg

GOLD = json.loads(Path(__file__).with_name("surface_goldens.json").read_text())


@pytest.mark.parametrize("name, param, gain", GOLD["gains"])
def test_calculate_gain_equals_torch(name, param, gain) -> None:
    assert dg.nn.init.calculate_gain(name, param) == gain


def test_calculate_gain_errors() -> None:
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        dg.nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        dg.nn.init.calculate_gain("leaky_relu", "x")


@pytest.mark.parametrize("case", GOLD["inits"],
                         ids=lambda c: f"{c['name']}{c['kwargs']}{tuple(c['shape'])}")
def test_initialiser_distribution_matches_torch(case) -> None:
    dg.manual_seed(1)
    t = dg.empty(*case["shape"])
    out = getattr(dg.nn.init, case["name"])(t, **case["kwargs"])
    assert out is t and t.dtype == np.float32
    a = t.numpy().astype(np.float64)
    scale = case["std"]
    n = a.size
    # Sample mean and std of n draws: within a few standard errors of torch's.
    assert abs(a.mean() - case["mean"]) < 6 * scale / math.sqrt(n) + 1e-6
    assert abs(a.std() / scale - 1) < 0.05
    if case["name"] == "trunc_normal_":  # a and b are values, not multiples of std
        lo, hi = case["kwargs"].get("a", -2.0), case["kwargs"].get("b", 2.0)
        assert lo <= a.min() and a.max() <= hi
        assert lo <= case["min"] and case["max"] <= hi
    if case["name"] in ("uniform_", "xavier_uniform_", "kaiming_uniform_"):
        # Bounded: the extremes sit at the same bounds as torch's.
        span = case["max"] - case["min"]
        assert a.min() >= case["min"] - 0.01 * span and a.max() <= case["max"] + 0.01 * span
        assert a.min() <= case["min"] + 0.02 * span and a.max() >= case["max"] - 0.02 * span


def test_orthogonal_is_orthogonal_times_gain() -> None:
    w = dg.nn.init.orthogonal_(dg.empty(4, 6), gain=2.0).numpy().astype(np.float64)
    dg.testing.assert_close(w @ w.T, 4.0 * np.eye(4), rtol=1e-7, atol=1e-5, equal_nan=True,
                            check_dtype=False)
    w = dg.nn.init.orthogonal_(dg.empty(6, 4)).numpy().astype(np.float64)
    dg.testing.assert_close(w.T @ w, np.eye(4), rtol=1e-7, atol=1e-5, equal_nan=True,
                            check_dtype=False)


def test_constant_family_eye_dirac_and_parameters() -> None:
    lin = dg.nn.Linear(3, 3)
    assert dg.nn.init.zeros_(lin.bias) is lin.bias and not lin.bias.numpy().any()
    dg.nn.init.ones_(lin.weight)
    assert (lin.weight.numpy() == 1).all() and lin.weight.is_leaf and lin.weight.requires_grad
    dg.nn.init.constant_(lin.weight, 0.25)
    assert (lin.weight.numpy() == 0.25).all()
    dg.nn.init.eye_(lin.weight)
    np.testing.assert_array_equal(lin.weight.numpy(), np.eye(3))
    w = dg.nn.init.dirac_(dg.empty(2, 2, 3, 3)).numpy()
    assert w.sum() == 2 and w[0, 0, 1, 1] == 1 and w[1, 1, 1, 1] == 1
    with pytest.raises(ValueError, match="2 dimensions"):
        dg.nn.init.eye_(dg.empty(2, 2, 2))


def test_fan_errors_and_empty_tensors() -> None:
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        dg.nn.init.xavier_uniform_(dg.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        dg.nn.init.kaiming_normal_(dg.empty(2, 2), mode="fan_avg")
    assert dg.nn.init.kaiming_uniform_(dg.empty(0, 3)).shape == (0, 3)


def test_generator_makes_initialisation_reproducible() -> None:
    a = dg.nn.init.normal_(dg.empty(5), generator=dg.Generator().manual_seed(2)).numpy()
    b = dg.nn.init.normal_(dg.empty(5), generator=dg.Generator().manual_seed(2)).numpy()
    np.testing.assert_array_equal(a, b)


def test_tensor_in_place_random_fills() -> None:
    x = dg.empty(1000)
    assert x.uniform_(-2, -1) is x and x.numpy().min() >= -2 and x.numpy().max() < -1
    x.normal_(5.0, 0.1)
    assert abs(x.numpy().mean() - 5.0) < 0.05
    with pytest.raises(RuntimeError, match="leaf"):
        dg.nn.Parameter(dg.ones(2)).normal_()
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        x.normal_(0.0, -1.0)


def test_apply_init_like_mingpt() -> None:
    """The ``model.apply(_init_weights)`` pattern minGPT and nanoGPT use."""
    net = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.ReLU(), dg.nn.Linear(8, 2))

    def init(m):
        if isinstance(m, dg.nn.Linear):
            dg.nn.init.normal_(m.weight, mean=0.0, std=0.02)
            dg.nn.init.zeros_(m.bias)

    net.apply(init)
    assert not net[0].bias.numpy().any() and net[2].weight.numpy().std() < 0.05


def test_initialising_inside_a_compiled_function_says_where_to_do_it() -> None:
    f = dg.compile(lambda w: dg.nn.init.normal_(w) * 2, strict=True)
    with pytest.raises(dg.TraceError, match="outside the compiled function"):
        f(dg.ones(2))
