"""NumPy scalars with tensors: Python numbers to PyTorch's operators and ``where`` (``lam =
np.random.beta(...)`` times a float32 tensor stays float32), not 0-d arrays."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

CASES = [  # (tensor dtype, scalar, result dtype as torch gives it)
    (np.float32, np.float64(0.3), np.float32),
    (np.float64, np.float32(0.3), np.float64),
    (np.int32, np.int64(2), np.int32),
    (np.int32, np.float64(2.5), np.float32),
    (np.float32, np.bool_(True), np.float32),
]


@pytest.mark.parametrize(("dtype", "scalar", "want"), CASES)
def test_a_numpy_scalar_operand_is_a_python_number(dtype, scalar, want):
    x = dg.tensor(np.array([1, 2, 3], dtype))
    python = scalar.item()
    for got, ref in ((x * scalar, x * python), (scalar * x, python * x),
                     (x - scalar, x - python), (scalar - x, python - x),
                     (dg.where(x > 1, x, scalar), dg.where(x > 1, x, python)),
                     (dg.where(x > 1, scalar, x), dg.where(x > 1, python, x))):
        assert got.dtype == ref.dtype == want
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
