"""Max pooling whose windows tile the plane (``MaxPool2d(2)``) takes a reshape-and-argmax
path; it must pick the indices the general path picks (first maximum among ties, the last
nan when a window holds one)."""

from __future__ import annotations

import numpy as np
import pytest

from dualgraph.ops import pool

ATTRS = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1),
         "ceil_mode": False}


def _general(x: np.ndarray, attrs: dict) -> np.ndarray:
    """The general path's answer (the tile test made to fail)."""
    real = pool._tiles
    pool._tiles = lambda win: 0
    try:
        return pool._max_indices_impl(x, **attrs)
    finally:
        pool._tiles = real


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (4, 7, 6), (5, 9), (1, 1, 2, 2)])
@pytest.mark.parametrize("values", ["normal", "ties", "inf"])
def test_tiled_indices_equal_the_general_ones(shape, values):
    rng = np.random.default_rng(0)
    if values == "normal":
        x = rng.standard_normal(shape).astype(np.float32)
    elif values == "ties":
        x = rng.integers(0, 2, shape).astype(np.float32)
    else:
        x = np.where(rng.random(shape) < 0.5, -np.inf, rng.standard_normal(shape))
    assert pool._tiles(pool.pool_windows(ATTRS, x.shape[-2:])[0]) == 2
    got = pool._max_indices_impl(x, **ATTRS)
    np.testing.assert_array_equal(got, _general(x, ATTRS))
    assert got.dtype == np.int64


def test_three_by_three_tiles_and_odd_sizes():
    attrs = dict(ATTRS, kernel_size=(3, 3), stride=(3, 3))
    x = np.random.default_rng(1).standard_normal((2, 2, 10, 11))  # 10 % 3 = 1 left over
    np.testing.assert_array_equal(pool._max_indices_impl(x, **attrs), _general(x, attrs))


def test_a_nan_takes_the_general_path():
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 0, 0] = x[0, 0, 1, 1] = np.nan
    idx = pool._max_indices_impl(x, **ATTRS)
    assert idx[0, 0, 0, 0] == 5  # the window's last nan, as PyTorch


def test_overlapping_windows_do_not_tile():
    attrs = dict(ATTRS, stride=(1, 1))
    assert pool._tiles(pool.pool_windows(attrs, (6, 6))[0]) == 0
    padded = dict(ATTRS, padding=(1, 1))
    assert pool._tiles(pool.pool_windows(padded, (6, 6))[0]) == 0
