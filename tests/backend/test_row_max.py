"""A softmax row's max taken LANES at a time (`row_simd.lane_max`): the max of every
block and tail length, wherever in the row it sits, the serial loop's for rows without
nan; and the softmax and log_softmax C routines unchanged by it (a row with a nan is nan,
a row of -inf and finite values is finite)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import row_kernels as rk
from dualgraph.backend.numba.kernels import LANES
from dualgraph.backend.numba.row_simd import lane_max


@numba.njit
def _lane_max(x, count):
    return lane_max(x, count)


@numba.njit
def _softmax(x, out, log):
    rk.row_softmax(x, out, 3, log, 0.0)


def _serial_max(row):
    m = row[0]
    for v in row[1:]:
        if v > m:
            m = v
    return m


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lane_max_is_the_serial_max(dtype):
    rng = np.random.default_rng(3)
    for blocks in (1, 2, 3, 8):
        n = blocks * LANES
        for at in (0, 1, LANES - 1, LANES, n - 1):
            if at >= n:
                continue
            x = rng.standard_normal(n).astype(dtype)
            x[at] = 9.0
            assert _lane_max(x, n) == 9.0
        x = np.full(n, -np.inf, dtype)
        assert _lane_max(x, n) == -np.inf
        x = -np.abs(rng.standard_normal(n)).astype(dtype) - 1.0
        assert _lane_max(x, n) == _serial_max(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_rows_of_every_length(dtype):
    rng = np.random.default_rng(5)
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for n in (1, 7, 15, 16, 17, 31, 32, 33, 64, 100, 256):
        x = (rng.standard_normal((6, n)) * 3).astype(dtype)
        # The max in each row at a different place: the first, a lane's end, the tail.
        for r, at in enumerate((0, n - 1, min(15, n - 1), min(16, n - 1), n // 2, 0)):
            x[r, at] = 20.0
        x[5, -1] = -np.inf
        shifted = x.astype(np.float64) - x.astype(np.float64).max(1, keepdims=True)
        e = np.exp(shifted)
        for log, want in ((0, e / e.sum(1, keepdims=True)),
                          (1, shifted - np.log(e.sum(1, keepdims=True)))):
            out = np.empty_like(x)
            _softmax(x, out, log)
            finite = np.isfinite(want)
            dg.testing.assert_close(out[finite], want[finite].astype(dtype), rtol=tol,
                                    atol=tol)
            assert np.array_equal(np.isfinite(out), finite)


def test_softmax_row_with_nan_is_nan():
    x = np.zeros((3, 48), np.float32)
    x[0, 0] = np.nan
    x[1, 20] = np.nan
    x[2, 47] = np.nan
    for log in (0, 1):
        out = np.empty_like(x)
        _softmax(x, out, log)
        assert np.isnan(out).all()
