"""Special float values in compiled code: non-finite constants print as ``np.inf``/``np.nan``
(a bare ``inf`` is a NameError in the generated module), ``sign`` of -0.0 is +0.0 and of nan
is 0, as in eager mode and PyTorch; compiled equals eager."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F

from .._support.compiled import B3


def _run(fn, *arrays):
    f = dg.compile(fn)
    ts = [dg.tensor(a) for a in arrays]
    got = f(*ts)
    assert f.stats.kernels >= 1  # compiled, not run eagerly
    return got.numpy(), fn(*ts).numpy()


@pytest.mark.parametrize("value", [-math.inf, math.inf, math.nan])
def test_pad_with_a_non_finite_value(value: float):
    def pad(x):
        return F.pad(x, (1, 0, 0, 2), value=value)

    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    got, want = _run(pad, x)
    dg.testing.assert_close(got, want, equal_nan=True, **B3[want.dtype])
    assert np.isnan(got[0, 0, 0, 0]) if value != value else got[0, 0, 0, 0] == value


def test_max_pool2d_over_asymmetric_padding():
    # "same" pooling: pad one side only with -inf, so padding never wins a window.
    def pool(x):
        return F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=-math.inf), 2)

    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32) - 10
    got, want = _run(pool, x)
    dg.testing.assert_close(got, want, equal_nan=True, **B3[want.dtype])
    assert np.isfinite(got).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sign_of_zeros_and_nan_as_eager(dtype):
    def sign(x):
        return dg.sign(x) * 1.0

    x = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -3.5, 2.0], dtype)
    got, want = _run(sign, x)
    # PyTorch's values: +0.0 for either zero, 0 for nan.
    expected = np.array([0.0, 0.0, 0.0, -1, 1, -1, 1], dtype)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    np.testing.assert_array_equal(np.signbit(want), np.signbit(expected))


def test_sign_of_integers():
    def sign(x):
        return dg.sign(x)

    x = np.array([-7, 0, 3], np.int64)
    got, want = _run(sign, x)
    np.testing.assert_array_equal(got, [-1, 0, 1])
    np.testing.assert_array_equal(got, want)
