"""The row routines' float32 ``exp`` zeroes the lanes below ``kernels.exp_f32``'s range
itself (a masked score at -inf would otherwise underflow, slowly): its bits are
``exp_f32``'s everywhere, the edge of the range, infinities and nan included."""

from __future__ import annotations

import numba
import numpy as np

import dualgraph as dg
from dualgraph.backend.numba import kernels, row_kernels


# Compiled as a float32 kernel is (``contract``): the row routines' ``exp`` carries that
# flag of its own, and a kernel's inlined `exp_f32` takes its kernel's.
@numba.njit(fastmath={"contract"})
def _both(x, a, b):
    for i in range(x.size):
        a[i] = kernels.exp_f32(x[i])
        b[i] = row_kernels._exp_f32(x[i])  # noqa: SLF001 - the function under test


def test_row_exp_has_exp_f32s_bits():
    # Every float32 from -112 to -96 (the range's lower edge), and a sweep of the rest.
    lo, hi = np.float32(-112.0).view(np.int32), np.float32(-96.0).view(np.int32)
    edge = np.arange(hi, lo, dtype=np.int32).view(np.float32)
    sweep = np.random.default_rng(0).uniform(-300, 100, 1 << 16).astype(np.float32)
    special = np.array([-np.inf, np.inf, np.nan, -104.0, -103.98, -103.97, 88.7, 88.8, 89.0,
                        0.0, -0.0], np.float32)
    x = np.concatenate([edge, sweep, special])
    a, b = np.empty_like(x), np.empty_like(x)
    _both(x, a, b)
    dg.testing.assert_close(b.view(np.int32), a.view(np.int32), rtol=0, atol=0)
    assert (b[x < -104] == 0).all() and np.isnan(b[-9])
