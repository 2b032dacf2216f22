"""`kernels.permuted`: generated code's transpose with axes, a view made from the shape and
stride words (Numba's own transpose checks the axes with a helper that is slow to compile)."""

from __future__ import annotations

import numba
import numpy as np

from dualgraph.backend.numba import kernels as dgk


@numba.njit
def _views(x, y):
    return dgk.permuted(x, (0, 2, 1, 3)), dgk.permuted(y, (2, 0, 1))


def test_permuted_is_numpys_transpose_as_a_view():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    y = np.arange(120.0).reshape(5, 3, 8)[:, :, ::2]  # strided: not C-ordered
    px, py = _views(x, y)
    for got, base, axes in ((px, x, (0, 2, 1, 3)), (py, y, (2, 0, 1))):
        want = np.transpose(base, axes)
        assert got.shape == want.shape and got.strides == want.strides
        np.testing.assert_array_equal(got, want)
        assert np.shares_memory(got, base)
    assert numba.typeof(px).layout == "A"
