"""The cheap paths of a small eager backward: the sum's gradient as a broadcast view made
without NumPy's iterator, and ReLU's backward select by ``np.where`` on small arrays. Both
must give what the general forms give, bit for bit, and leave every ``.grad`` its own
writeable array."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops import elementwise as E
from dualgraph.ops.reduce import _broadcast_view


@pytest.mark.parametrize("gshape,shape", [((), (3, 4)), ((1, 4), (3, 4)), ((3, 1), (3, 4)),
                                          ((1, 1, 5), (2, 3, 5)), ((), ()), ((2,), (2,)),
                                          ((1,), (0,)), ((1, 3), (2, 3))])
def test_broadcast_view_is_numpys_broadcast(gshape, shape):
    g = np.asarray(np.arange(1, 1 + int(np.prod(gshape)), dtype=np.float32).reshape(gshape))
    got, want = _broadcast_view(g, shape), np.broadcast_to(g, shape)
    assert got.shape == want.shape and got.strides == want.strides
    assert got.dtype == want.dtype and not got.flags.writeable
    np.testing.assert_array_equal(got, want)
    if got.size:
        assert np.shares_memory(got, g)


def test_broadcast_view_refuses_what_numpy_refuses():
    with pytest.raises(ValueError):
        _broadcast_view(np.ones((2, 3), np.float32), (4, 3))


def test_a_sums_gradient_becomes_each_leafs_own_array():
    x = dg.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    y = dg.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    (x + y).sum().backward()
    gx, gy = x.grad.numpy(), y.grad.numpy()
    assert gx.flags.writeable and gy.flags.writeable and not np.shares_memory(gx, gy)
    x.grad.add_(1.0)
    np.testing.assert_array_equal(y.grad.numpy(), np.ones((3, 4), np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2.0, np.float32))


def test_a_rows_sum_gradient_broadcasts_along_the_summed_axis():
    x = dg.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    w = dg.tensor(np.array([1.0, -2.0, 3.0], np.float32))
    (x.sum(dim=1) * w).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(w.numpy()[:, None], 4, axis=1))


@pytest.mark.parametrize("n", [7, E._WHERE_MAX, E._WHERE_MAX + 1, 5000])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relu_backward_select_gives_np_wheres_bits(n, dtype):
    rng = np.random.default_rng(n)
    g = rng.standard_normal(n).astype(dtype)
    g[:4] = [np.nan, -0.0, np.inf, -np.inf]
    y = rng.standard_normal(n).astype(dtype)
    y[:4] = [1.0, 1.0, 0.0, 2.0]
    got = E._threshold_backward_impl(g, y, 0.0)
    want = np.where(y > 0.0, g, dtype(0))
    assert got.dtype == want.dtype and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()
    both = E._select_or_zero(y > 0.0, g, False)
    assert both.tobytes() == np.where(y > 0.0, dtype(0), g).tobytes()


def test_relu_gradient_through_a_small_layer():
    x = dg.tensor(np.array([[-1.0, 0.0, 2.0], [3.0, -0.5, 1.0]]), requires_grad=True)
    (dg.nn.functional.relu(x) * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0, 3.0], [3.0, 0.0, 3.0]])
