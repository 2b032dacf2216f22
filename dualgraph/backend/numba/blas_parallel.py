"""Matrix products for ``parallel=True`` kernels: split over Numba's threads, each part one
single-threaded BLAS call.

A parallel kernel that left its products to OpenBLAS's own threads ran two pools in one
step, taking turns on the same cores: Numba's for the loops, OpenBLAS's for the products.
OpenBLAS's threads wait for each other by spinning, and on a loaded 2-core machine the
CNN step's CPU time went to 60x the one-thread kernel's (many small products, each waking
OpenBLAS's thread). Here a large product is cut into `ROW_PARTS` blocks of rows or
columns of its result and a large batched product into its items, run in a
``numba.prange``, while the kernel runs with BLAS on one thread (`Kernel` sets it): one
pool, whose workers sleep between loops. The cut does not depend on the number of
threads, so neither does the result. Generated parallel kernels import this module as
``dgb`` instead of `blas`.
"""

from __future__ import annotations

import numba
from numba.extending import overload

from .blas import (  # noqa: F401 - re-exported: a parallel kernel's ``dgb``
    HAVE_CBLAS,
    _gemm_at,
    conv_col2im_float32,
    conv_col2im_float64,
    conv_conv2d_float32,
    conv_conv2d_float64,
    conv_dgrad_float32,
    conv_dgrad_float64,
    conv_im2col_float32,
    conv_im2col_float64,
    conv_wgrad_float32,
    conv_wgrad_float64,
    gemm,
    max_pool_indices,
    need_batched,
    need_conv,
    operand,
    pool_gather,
    pool_scatter,
)
from .blas import gemm_batched as _serial_batched

_TRANS = 112
# Row blocks of a large product; products under SPLIT_FLOPS multiply-adds (a batched one:
# in all) stay one call on the calling thread.
ROW_PARTS = 4
SPLIT_FLOPS = 1 << 20


@numba.njit(cache=True, parallel=True, nogil=True)
def _row_blocks(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """The product's result in ROW_PARTS blocks of rows over Numba's threads."""
    for p in numba.prange(ROW_PARTS):
        r0 = m * p // ROW_PARTS
        r1 = m * (p + 1) // ROW_PARTS
        # Row r of op(a) starts at r * lda in a row-major a, at column r of a transposed one.
        ia = r0 if ta == _TRANS else r0 * lda
        _gemm_at(ta, tb, r1 - r0, n, k, a, ia, lda, b, 0, ldb, beta, c, r0 * ldc, ldc)


@numba.njit(cache=True, parallel=True, nogil=True)
def _column_blocks(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """The product's result in ROW_PARTS blocks of columns over Numba's threads."""
    for p in numba.prange(ROW_PARTS):
        c0 = n * p // ROW_PARTS
        c1 = n * (p + 1) // ROW_PARTS
        # Column j of op(b) starts at j in a row-major b, at row j of a transposed one.
        ib = c0 * ldb if tb == _TRANS else c0
        _gemm_at(ta, tb, m, c1 - c0, k, a, 0, lda, b, ib, ldb, beta, c, c0, ldc)


@numba.njit(cache=True, nogil=True)
def gemm_call(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """`blas.gemm_call`, a large product cut in ROW_PARTS blocks over Numba's threads: of
    rows of its result when it has more rows than columns, else of columns. Each block
    is one BLAS call, which packs the whole of the operand the cut does not divide
    (``b`` for row blocks, ``a`` for column blocks): the cut re-packs the smaller one
    (an MLP's weight gradient, 256 x 784 from a 1024-long sum, would re-pack its
    1024 x 784 right operand per row block). A small product is one call on the calling thread:
    entering a parallel region wakes the pool's sleeping workers and waits for them,
    which costs more than such a product (a convolution makes one per sample)."""
    if m * n * k < SPLIT_FLOPS or (m < ROW_PARTS and n < ROW_PARTS):
        _gemm_at(ta, tb, m, n, k, a, 0, lda, b, 0, ldb, beta, c, 0, ldc)
    elif m >= n:
        _row_blocks(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)
    else:
        _column_blocks(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)


@numba.njit(cache=True, parallel=True, nogil=True)
def _items(x, y, c):
    """The leading batch axis's items over Numba's threads, one batched call each."""
    for i in numba.prange(c.shape[0]):
        _serial_batched(x[i], y[i], c[i])


def gemm_batched(x, y, c):  # noqa: ARG001 - typed by the overload below
    """`blas.gemm_batched` with the items of the leading batch axis over Numba's threads
    when both operands have that axis in full and the whole product has SPLIT_FLOPS
    multiply-adds or more; else the serial call (as `gemm_call`)."""


@overload(gemm_batched)
def _gemm_batched_by_rank(x, y, c):
    if c.ndim >= 3 and x.ndim == c.ndim and y.ndim == c.ndim:
        def impl(x, y, c):
            if (x.shape[0] == c.shape[0] and y.shape[0] == c.shape[0] and c.shape[0] > 1
                    and c.size * x.shape[-1] >= SPLIT_FLOPS):
                _items(x, y, c)
            else:
                _serial_batched(x, y, c)
        return impl
    return lambda x, y, c: _serial_batched(x, y, c)


# The names serial kernels call the batched product by (one C function per dtype there).
gemm_batched_float32 = gemm_batched_float64 = gemm_batched
