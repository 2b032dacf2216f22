"""Batched products whose right operand is a transposed view (attention's ``q @ k.T``):
`blas.gemm_batched` copies each small item's operand as stored and multiplies it as
stored, where OpenBLAS's transposed form runs slower. The answers are those of the same
product on a contiguous copy of the operand, bit for bit, and NumPy's to rounding."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import blas


@numba.njit
def _into(x, y, c):
    blas.gemm_batched(x, y, c)


@pytest.mark.skipif(not blas.HAVE_CBLAS, reason="NumPy's BLAS has no cblas symbols")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transposed_operand_matches_its_contiguous_copy(dtype):
    rng = np.random.default_rng(1)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    # (x's shape, the stored operand's shape): heads of a wider projection, a broadcast
    # batch axis, a single column, items above the size that is copied (not copied).
    cases = [((3, 2, 64, 32), (3, 64, 2, 96)), ((3, 1, 7, 5), (2, 9, 5)),
             ((2, 5, 4), (2, 1, 4)), ((1, 3, 130, 8), (1, 3, 140, 8))]
    for xs, ys in cases:
        x = rng.standard_normal(xs).astype(dtype)
        stored = rng.standard_normal(ys).astype(dtype)
        if len(ys) == 4 and ys[2] == 2:  # k: 32 columns of each head of a 96-wide row
            y = stored[..., 16:48].transpose(0, 2, 3, 1)
        else:
            y = stored.swapaxes(-1, -2)
        got = np.full(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (xs[-2], y.shape[-1]),
                      np.nan, dtype)
        same = np.full_like(got, np.nan)
        _into(x, y, got)
        _into(x, np.ascontiguousarray(y), same)
        assert got.tobytes() == same.tobytes()
        want = x.astype(np.float64) @ y.astype(np.float64)
        dg.testing.assert_close(got, want.astype(dtype), rtol=tol, atol=tol)
    # A strided row-major result (a slice of a wider array) is written in place only.
    x = rng.standard_normal((2, 3, 16, 8)).astype(dtype)
    y = rng.standard_normal((2, 3, 12, 8)).astype(dtype).swapaxes(-1, -2)
    wide = np.full((2, 16, 3, 20), np.nan, dtype)
    c = wide[..., 4:16].transpose(0, 2, 1, 3)
    _into(x, y, c)
    dg.testing.assert_close(c, x @ y, rtol=tol, atol=tol)
    assert np.isnan(wide[..., :4]).all() and np.isnan(wide[..., 16:]).all()
