"""Matrix products for ``parallel=True`` kernels: split over Numba's threads, each part one
single-threaded BLAS call.

A parallel kernel that left its products to OpenBLAS's own threads ran two pools in one
step, taking turns on the same cores: Numba's for the loops, OpenBLAS's for the products.
OpenBLAS's threads wait for each other by spinning, and on a loaded 2-core machine the
CNN step's CPU time went to 60x the one-thread kernel's (many small products, each waking
OpenBLAS's thread). Here a large product is cut into `ROW_PARTS` blocks of rows of its
result and a batched product into its items, run in a ``numba.prange``, while the
kernel runs with BLAS on one thread (`Kernel` sets it): one pool, whose workers sleep
between loops. The cut does not depend on the number of threads, so neither does the
result. Generated parallel kernels import this module as ``dgb`` instead of `blas`.
"""

from __future__ import annotations

import numba

from .blas import (  # noqa: F401 - re-exported: a parallel kernel's ``dgb``
    HAVE_CBLAS,
    _gemm_at,
    _item_offset,
    _layout,
    gemm,
    max_pool_indices,
    operand,
    pool_gather,
    pool_scatter,
)

_TRANS = 112
# Row blocks of a large product; products under SPLIT_FLOPS multiply-adds stay one call.
ROW_PARTS = 4
SPLIT_FLOPS = 1 << 20


@numba.njit(cache=True, parallel=True, nogil=True)
def gemm_call(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """`blas.gemm_call`, its result's rows in ROW_PARTS blocks, one BLAS call each."""
    parts = ROW_PARTS if m >= ROW_PARTS and m * n * k >= SPLIT_FLOPS else 1
    for p in numba.prange(parts):
        r0 = m * p // parts
        r1 = m * (p + 1) // parts
        # Row r of op(a) starts at r * lda in a row-major a, at column r of a transposed one.
        ia = r0 if ta == _TRANS else r0 * lda
        _gemm_at(ta, tb, r1 - r0, n, k, a, ia, lda, b, 0, ldb, beta, c, r0 * ldc, ldc)


@numba.njit(cache=True, parallel=True, nogil=True)
def gemm_batched(x, y, c):
    """`blas.gemm_batched` with the items in a ``numba.prange``."""
    m, k = x.shape[-2], x.shape[-1]
    n = y.shape[-1]
    batch = c.shape[:-2]
    count = c.size // max(m * n, 1)
    if m == 0 or n == 0 or count == 0:
        return
    if k == 0:
        c.reshape(c.size)[:] = 0
        return
    xa, tx, lx = _layout(x, m, k)
    ya, ty, ly = _layout(y, k, n)
    for t in numba.prange(count):
        _gemm_at(tx, ty, m, n, k, xa, _item_offset(xa, t, batch), lx,
                 ya, _item_offset(ya, t, batch), ly, 0.0, c, t * m * n, n)
