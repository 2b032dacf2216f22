"""``Tensor.new_*``: shape from the arguments, dtype from the tensor unless given."""

import numpy as np
import pytest

import dualgraph as dg


@pytest.mark.parametrize("dtype", [dg.float32, dg.float64, dg.int64])
def test_new_factories_take_the_tensors_dtype(dtype) -> None:
    x = dg.ones(2, dtype=dtype)
    z = x.new_zeros(3, 4)
    assert z.shape == (3, 4) and z.dtype == x.dtype and not z.numpy().any()
    o = x.new_ones((2, 5))
    assert o.shape == (2, 5) and o.dtype == x.dtype and (o.numpy() == 1).all()
    f = x.new_full((2,), 7)
    assert f.dtype == x.dtype and (f.numpy() == 7).all()
    e = x.new_empty(4)
    assert e.shape == (4,) and e.dtype == x.dtype
    t = x.new_tensor([1, 2])
    assert t.dtype == x.dtype
    np.testing.assert_array_equal(t.numpy(), [1, 2])


def test_new_factories_take_dtype_device_and_requires_grad() -> None:
    x = dg.ones(2, dtype=dg.float32)
    z = x.new_zeros(2, dtype=dg.float64, device="cpu", requires_grad=True)
    assert z.dtype == dg.float64 and z.requires_grad and z.device == dg.device("cpu")
    with pytest.raises((RuntimeError, ValueError)):
        x.new_zeros(2, device="cuda")
