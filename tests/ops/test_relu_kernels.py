"""ReLU's eager kernels: the forward against an array of zeros and the backward's direct
select give NumPy's reference bits, layouts and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from dualgraph.ops.elementwise import _relu_impl, _threshold_backward_impl, _where_impl


def _specials(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        for k, v in enumerate((np.nan, -np.nan, -0.0, np.inf, -np.inf)):
            x.flat[k::7] = v
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
@pytest.mark.parametrize("shape", [(3000,), (64, 256), (7, 5, 40), (10,), ()])
def test_relu_gives_maximum_with_zero_bit_for_bit(dtype, shape) -> None:
    rng = np.random.default_rng(0)
    x = _specials((rng.standard_normal(shape) * 10).astype(dtype))
    for a in (x, np.asfortranarray(x), x[..., ::2] if x.ndim else x):
        got, want = _relu_impl(a), np.maximum(a, a.dtype.type(0))
        assert got.dtype == want.dtype and got.shape == want.shape
        assert type(got) is type(want) and got.strides == want.strides
        assert got.tobytes() == want.tobytes()


def test_relu_results_are_fresh_arrays() -> None:
    x = np.ones((64, 64), np.float32)
    a, b = _relu_impl(x), _relu_impl(-x)
    assert a.flags.writeable and b.flags.writeable and not np.shares_memory(a, b)
    b += 1  # writing a result changes nothing a later call reads
    assert _relu_impl(-x).tobytes() == np.zeros((64, 64), np.float32).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_threshold_backward_is_where_bit_for_bit(dtype, threshold) -> None:
    rng = np.random.default_rng(1)
    g = _specials(rng.standard_normal((64, 256)).astype(dtype))
    y = _specials(rng.standard_normal((64, 256)).astype(dtype))
    for gg, yy in ((g, y), (np.asfortranarray(g), y), (g, y[:1]), (g[:, :8], y[:, :8])):
        got = _threshold_backward_impl(gg, yy, threshold)
        # PyTorch's ``y <= threshold ? 0 : g``: a NaN y passes g.
        want = np.where(np.less_equal(yy, threshold), 0.0, gg)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
        assert got.tobytes() == _where_impl(np.less_equal(yy, threshold), 0.0, gg).tobytes()
        nan_y = np.broadcast_to(np.isnan(yy), got.shape)
        np.testing.assert_array_equal(got[nan_y], np.broadcast_to(gg, got.shape)[nan_y])
