"""Compiled float32 GELU and its backward (the normal CDF through its upper tail, one
``exp`` shared with the density): accuracy against a float64 reference, agreement with
eager, and the shape of the generated loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.ops import activation as ACT


def _cdf64(x: np.ndarray) -> np.ndarray:
    return np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])


@pytest.fixture(scope="module")
def gelu_pair():
    """One compiled kernel for the forward and the backward (g = 1 gives Phi + x phi)."""
    f = dg.compile(lambda x, g: (F.gelu(x), ACT.gelu_backward(g, x)))
    x = np.concatenate([np.linspace(-13.0, 13.0, 2601), np.linspace(-1.0, 1.0, 401),
                        [0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0, np.inf, -np.inf]])
    x = x.astype(np.float32)
    y, dy = f(dg.tensor(x), dg.tensor(np.ones_like(x)))
    return x, y.numpy(), dy.numpy(), f


def _ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    tiny = np.finfo(np.float32).smallest_subnormal
    return np.abs(got - ref) / np.maximum(np.spacing(np.abs(ref).astype(np.float32)), tiny)


def test_forward_within_stated_ulps(gelu_pair):
    """x * Phi(x): within 8 ulp for x >= -3 and 72 ulp down to -13 (the rounding of x*x
    amplified by exp), where erf(x) + 1 would cancel to nothing."""
    x, y, _, _ = gelu_pair
    fin = np.isfinite(x)
    ref = x[fin].astype(np.float64) * _cdf64(x[fin])
    u = _ulps(y[fin].astype(np.float64), ref)
    assert u[x[fin] >= -3].max() <= 8
    assert u.max() <= 72
    assert y[x == np.inf][0] == np.inf and y[x == -np.inf][0] == 0 or np.isnan(
        y[x == -np.inf][0])


def test_backward_close_to_reference(gelu_pair):
    x, _, dy, _ = gelu_pair
    fin = np.isfinite(x) & (np.abs(x) <= 13)
    xd = x[fin].astype(np.float64)
    ref = _cdf64(x[fin]) + xd * np.exp(-xd * xd / 2) / math.sqrt(2 * math.pi)
    dg.testing.assert_close(dy[fin].astype(np.float64), ref, rtol=2e-6, atol=1e-7)


def test_compiled_equals_eager(gelu_pair):
    x, y, dy, _ = gelu_pair
    fin = np.isfinite(x)
    ye = F.gelu(dg.tensor(x[fin])).numpy()
    dye = ACT.gelu_backward(dg.tensor(np.ones_like(x[fin])), dg.tensor(x[fin])).numpy()
    dg.testing.assert_close(y[fin], ye, rtol=1e-6, atol=1e-6)
    dg.testing.assert_close(dy[fin], dye, rtol=1e-6, atol=1e-6)


def test_float32_loop_calls_exp_not_erf(gelu_pair):
    """The float32 loop computes the CDF with the vectorizable exp and no erf."""
    x, *_, f = gelu_pair
    src = dg.explain(f, dg.tensor(x), dg.tensor(np.ones_like(x))).numba_source or ""
    assert "exp_f32(" in src
    assert "erf" not in src
