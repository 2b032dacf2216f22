"""The shared window routines convolutions call (im2col's gather, col2im's scatter-add)
equal the NumPy kernels for geometries the model layers do not all reach: uneven padding,
stride and dilation together, a window wider than the padded image's remainder, and
operands that are views (a transposed image, columns read through a transpose)."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops.conv import col2im, im2col, out_size
from dualgraph.testing import assert_close

GEOMETRIES = [
    # kernel, dilation, padding, stride
    ((3, 2), (1, 1), ((2, 0), (1, 3)), (2, 1)),
    ((2, 3), (2, 2), ((1, 1), (0, 2)), (1, 3)),
    ((4, 4), (1, 1), ((0, 0), (0, 0)), (2, 2)),
]


def windows(x, y):
    """im2col of ``x`` for each geometry, and col2im of columns read from ``y``."""
    outs = []
    for k, d, p, s in GEOMETRIES:
        outs.append(im2col(x.transpose(2, 3), k, d, p, s))
        outs.append(im2col(x * 2.0, k, d, p, s))
    n, c, h, w = x.shape
    k, d, p, s = GEOMETRIES[0]
    outs.append(col2im(y.transpose(1, 2).transpose(1, 2) * 1.0, (h, w), k, d, p, s))
    outs.append(col2im(y, (h, w), k, d, p, s))
    return tuple(outs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_windows_compiled_equal_eager(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    k, d, p, s = GEOMETRIES[0]
    oh, ow = out_size((7, 6), k, d, p, s)
    y = rng.standard_normal((2, 3 * k[0] * k[1], oh * ow)).astype(dtype)
    compiled = dg.compile(windows)
    got = compiled(dg.tensor(x), dg.tensor(y))
    want = windows(dg.tensor(x), dg.tensor(y))
    assert compiled.stats.traces == 1 and len(got) == len(want)
    for a, e in zip(got, want):
        assert a.shape == e.shape
        assert_close(a, e, rtol=1e-6, atol=1e-6)
