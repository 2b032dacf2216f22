"""``as_strided``: values against PyTorch's on contiguous inputs (recorded below), the
gradient (float64 finite differences; overlapping windows sum), eager vs compiled, errors."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

A = np.arange(24.0).reshape(4, 6)

# (size, stride, storage_offset) -> flat positions torch.as_strided reads on a contiguous
# tensor (recorded from torch 2.13 with torch.arange(24.).as_strided(...)).
CASES = [
    ((2, 2), (1, 2), None, [[0, 2], [1, 3]]),
    ((3, 3), (6, 1), 2, [[2, 3, 4], [8, 9, 10], [14, 15, 16]]),
    ((4, 4), (1, 1), 0, [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]]),
    ((2, 3, 2), (12, 2, 1), 1, [[[1, 2], [3, 4], [5, 6]], [[13, 14], [15, 16], [17, 18]]]),
    ((5,), (0,), 3, [3, 3, 3, 3, 3]),
]


@pytest.mark.parametrize("size,stride,offset,want", CASES)
def test_values_match_torch(size, stride, offset, want):
    got = dg.tensor(A).as_strided(size, stride, offset)
    np.testing.assert_array_equal(got.numpy(), np.array(want, dtype=np.float64))
    np.testing.assert_array_equal(dg.as_strided(dg.tensor(A), size, stride, offset).numpy(),
                                  got.numpy())


def test_gradient_sums_overlaps_float64():
    x = dg.tensor(A / 7.0).requires_grad_(True)
    assert dg.autograd.gradcheck(lambda t: t.as_strided((4, 4), (1, 1)).sin(), (x,))
    (x.as_strided((4, 4), (1, 1))).sum().backward()
    # Position p is read once per (i, j) with i + j == p.
    want = np.zeros(24)
    want[:7] = [1, 2, 3, 4, 3, 2, 1]
    np.testing.assert_array_equal(x.grad.numpy().reshape(-1), want)


def test_compiled_matches_eager():
    def f(t):
        return t.as_strided((3, 3), (6, 1), 2).exp() * t.as_strided((3, 3), (1, 6))

    x = dg.tensor(A / 10.0)
    assert_close(dg.compile(f)(x), f(x))


def test_errors():
    x = dg.tensor(A)
    with pytest.raises(RuntimeError, match="out of"):
        x.as_strided((5, 5), (6, 1))
    with pytest.raises(RuntimeError, match="mismatch in length"):
        x.as_strided((2, 2), (1,))
    with pytest.raises(RuntimeError, match="negative"):
        x.as_strided((2,), (-1,))
    with pytest.raises(TypeError, match="sequence of ints"):
        x.as_strided(None, (1,))
