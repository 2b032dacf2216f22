"""Matrix products for ``parallel=True`` kernels: split over Numba's threads, each part one
single-threaded BLAS call.

A parallel kernel that left its products to OpenBLAS's own threads ran two pools in one
step, taking turns on the same cores: Numba's for the loops, OpenBLAS's for the products.
OpenBLAS's threads wait for each other by spinning, and on a loaded 2-core machine the
CNN step's CPU time went to 60x the one-thread kernel's (many small products, each waking
OpenBLAS's thread). Here a large product is cut into blocks of rows or columns of its
result (`product_parts`: as many as the pool has threads, at most `ROW_PARTS`) and a
large batched product into its items, run in a ``numba.prange``, while the kernel runs
with BLAS on one thread (`Kernel` sets it): one pool, whose workers sleep between loops.
The cut is fixed when the kernel is generated (its source holds the number of blocks),
not by the threads in use, so the result does not depend on ``set_num_threads``.
Generated parallel kernels import this module as ``dgb`` instead of `blas`.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.extending import overload

from .blas import (  # noqa: F401 - re-exported: a parallel kernel's ``dgb``
    HAVE_CBLAS,
    _data,
    _gemm_at,
    _store,
    conv_col2im,
    conv_conv2d,
    conv_dgrad,
    conv_im2col,
    conv_wgrad,
    gemm,
    max_pool_indices,
    max_pool_indices_2x2,
    need_batched,
    need_conv,
    operand,
    pool_gather,
    pool_scatter,
)
from .blas import gemm_batched as _serial_batched
from .cache_key import cached_njit

_TRANS = 112
# Blocks of a large product at most; products under SPLIT_FLOPS multiply-adds (a batched
# one: in all) stay one call on the calling thread.
ROW_PARTS = 4
SPLIT_FLOPS = 1 << 20


def product_parts() -> int:
    """How many blocks a parallel kernel generated now cuts a large product in: one per
    thread of Numba's pool (``NUMBA_NUM_THREADS``, fixed for the process), at most
    ROW_PARTS. Each block's BLAS call packs again the whole operand the cut does not
    divide, so a block more than there are threads only adds work: on one thread the
    784-256-10 MLP step's two large products cost 6% more in 4 blocks, 3% in 2. A
    product under ROW_PARTS * SPLIT_FLOPS multiply-adds is cut in ROW_PARTS blocks all
    the same (`blocks`)."""
    return max(1, min(int(numba.config.NUMBA_NUM_THREADS), ROW_PARTS))


@cached_njit(nogil=True)
def blocks(parts, m, n, k):
    """The blocks a product of ``m * n * k`` multiply-adds is cut in, given ``parts``
    (`product_parts`): ROW_PARTS under ROW_PARTS * SPLIT_FLOPS, where each block stays
    under SPLIT_FLOPS: OpenBLAS multiplies such blocks without packing its operands
    (a 1024 x 256 result from a 10-long sum: 57 us in 4 blocks, 75 us in 2 or whole,
    one thread), else ``parts``. Fixed by the shapes, not by the threads in use."""
    if parts > 1 and m * n * k < ROW_PARTS * SPLIT_FLOPS:
        return ROW_PARTS
    return parts


@cached_njit(parallel=True, nogil=True)
def _row_blocks(parts, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """The product's result in ``parts`` blocks of rows over Numba's threads."""
    for p in numba.prange(parts):
        r0 = m * p // parts
        r1 = m * (p + 1) // parts
        # Row r of op(a) starts at r * lda in a row-major a, at column r of a transposed one.
        ia = r0 if ta == _TRANS else r0 * lda
        _gemm_at(ta, tb, r1 - r0, n, k, a, ia, lda, b, 0, ldb, beta, c, r0 * ldc, ldc)


@cached_njit(parallel=True, nogil=True)
def _column_blocks(parts, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """The product's result in ``parts`` blocks of columns over Numba's threads."""
    for p in numba.prange(parts):
        c0 = n * p // parts
        c1 = n * (p + 1) // parts
        # Column j of op(b) starts at j in a row-major b, at row j of a transposed one.
        ib = c0 * ldb if tb == _TRANS else c0
        _gemm_at(ta, tb, m, c1 - c0, k, a, 0, lda, b, ib, ldb, beta, c, c0, ldc)


@cached_njit(nogil=True)
def gemm_blocks(parts, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """`blas.gemm_call`, a large product cut in `blocks` blocks over Numba's threads: of
    rows of its result when it has more rows than columns, else of columns. Each block
    is one BLAS call, which packs the whole of the operand the cut does not divide
    (``b`` for row blocks, ``a`` for column blocks): the cut re-packs the smaller one
    (an MLP's weight gradient, 256 x 784 from a 1024-long sum, would re-pack its
    1024 x 784 right operand per row block). A small product is one call on the calling thread:
    entering a parallel region wakes the pool's sleeping workers and waits for them,
    which costs more than such a product (a convolution makes one per sample)."""
    parts = blocks(parts, m, n, k)
    if m * n * k < SPLIT_FLOPS or parts < 2 or (m < parts and n < parts):
        _gemm_at(ta, tb, m, n, k, a, 0, lda, b, 0, ldb, beta, c, 0, ldc)
    elif m >= n:
        _row_blocks(parts, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)
    else:
        _column_blocks(parts, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)


@cached_njit(nogil=True)
def gemm_call(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """`gemm_blocks` in ROW_PARTS blocks (for callers other than generated kernels, which
    print their cut)."""
    gemm_blocks(ROW_PARTS, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)


@cached_njit(nogil=True)
def gemm_part(p, parts, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """Block ``p`` of ``parts`` of the product `gemm_blocks` cuts the same way (rows of its
    result when it has as many rows as columns or more, else columns), at any size: the
    caller's own ``prange`` over the blocks runs each block's elementwise epilogue right
    after it, one parallel region for both. A product `blocks` would cut in ROW_PARTS
    (under ROW_PARTS * SPLIT_FLOPS multiply-adds) is multiplied in the ROW_PARTS blocks
    its part spans, when ``parts`` divides ROW_PARTS: each under SPLIT_FLOPS, which
    OpenBLAS multiplies without packing (a 1024 x 256 result from a 10-long sum: 57 us in
    4 blocks, 75 us in 2). Returns the part's rows and columns ``(r0, r1, c0, c1)``."""
    sub = 1
    if parts < ROW_PARTS and ROW_PARTS % parts == 0 and m * n * k < ROW_PARTS * SPLIT_FLOPS:
        sub = ROW_PARTS // parts
    whole = parts * sub
    if m >= n:
        for q in range(p * sub, (p + 1) * sub):
            r0, r1 = m * q // whole, m * (q + 1) // whole
            if r1 > r0:
                ia = r0 if ta == _TRANS else r0 * lda
                _gemm_at(ta, tb, r1 - r0, n, k, a, ia, lda, b, 0, ldb, beta, c, r0 * ldc,
                         ldc)
        return m * p // parts, m * (p + 1) // parts, 0, n
    for q in range(p * sub, (p + 1) * sub):
        c0, c1 = n * q // whole, n * (q + 1) // whole
        if c1 > c0:
            ib = c0 * ldb if tb == _TRANS else c0
            _gemm_at(ta, tb, m, c1 - c0, k, a, 0, lda, b, ib, ldb, beta, c, c0, ldc)
    return 0, m, n * p // parts, n * (p + 1) // parts


@cached_njit(parallel=True, nogil=True)
def _items(x, y, c):
    """The leading batch axis's items over Numba's threads, one batched call each."""
    for i in numba.prange(c.shape[0]):
        _serial_batched(x[i], y[i], c[i])


def gemm_batched(x, y, c):  # noqa: ARG001 - typed by the overload below
    """`blas.gemm_batched` with the items of the leading batch axis over Numba's threads
    when both operands have that axis in full and the whole product has SPLIT_FLOPS
    multiply-adds or more; else the serial call (as `gemm_blocks`)."""


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


# ---- convolution
# The library's per-sample convolution routines (`blas.conv_conv2d` and the others) over
# Numba's threads: the batch cut in SAMPLE_PARTS contiguous parts, each one call of the
# serial routine on its slice of the samples (each with its own columns buffer). The cut
# does not depend on the number of threads, so neither do the bits. A convolution under
# SPLIT_FLOPS multiply-adds stays one call on the calling thread (as a small product).
SAMPLE_PARTS = 2


@cached_njit(nogil=True, inline="always")
def _sample_parts(n, work):
    """How many parts a convolution over ``n`` samples of ``work`` multiply-adds in all
    runs in: 1 (on the calling thread) or SAMPLE_PARTS."""
    return SAMPLE_PARTS if n >= SAMPLE_PARTS and work >= SPLIT_FLOPS else 1


@cached_njit(parallel=True, nogil=True)
def _conv2d_parts(x, w, bias, out, table, parts):
    n = x.shape[0]
    for p in numba.prange(parts):
        a, b = n * p // parts, n * (p + 1) // parts
        conv_conv2d(x[a:b], w, bias, out[a:b], table)


@cached_njit(nogil=True)
def conv_conv2d_split(x, w, bias, out, table):
    """`blas.conv_conv2d` with the samples cut in SAMPLE_PARTS over Numba's threads."""
    parts = _sample_parts(x.shape[0], out.size * w.size // max(out.shape[1], 1))
    if parts == 1:
        conv_conv2d(x, w, bias, out, table)
    else:
        _conv2d_parts(x, w, bias, out, table, parts)


@cached_njit(parallel=True, nogil=True)
def _dgrad_parts(g, w, res, table, parts):
    n = g.shape[0]
    for p in numba.prange(parts):
        a, b = n * p // parts, n * (p + 1) // parts
        conv_dgrad(g[a:b], w, res[a:b], table)


@cached_njit(nogil=True)
def conv_dgrad_split(g, w, res, table):
    """`blas.conv_dgrad` with the samples cut in SAMPLE_PARTS over Numba's threads."""
    parts = _sample_parts(g.shape[0], g.size * w.size // max(g.shape[1], 1))
    if parts == 1:
        conv_dgrad(g, w, res, table)
    else:
        _dgrad_parts(g, w, res, table, parts)


@cached_njit(parallel=True, nogil=True)
def _wgrad_parts(x, g, sums, table, parts):
    n = x.shape[0]
    for p in numba.prange(parts):
        a, b = n * p // parts, n * (p + 1) // parts
        conv_wgrad(x[a:b], g[a:b], sums[p], table)


@cached_njit(nogil=True)
def conv_wgrad_split(x, g, gw, table):
    """`blas.conv_wgrad` with the samples cut in SAMPLE_PARTS over Numba's threads: each
    part's sum into its own buffer, the parts then added in order (not the serial
    routine's bits, which add sample by sample into one sum; the same bits on any
    number of threads)."""
    parts = _sample_parts(x.shape[0], g.size * gw.size // max(gw.shape[0], 1))
    if parts == 1:
        conv_wgrad(x, g, gw, table)
        return
    sums = np.empty((parts,) + gw.shape, gw.dtype)
    _wgrad_parts(x, g, sums, table, parts)
    # The routine writes ``gw`` C-ordered from its data pointer, whatever its type says.
    out, size = _data(gw), gw.size
    whole = sums.reshape(parts * size)
    for j in range(size):
        v = whole[j]
        for p in range(1, parts):
            v += whole[p * size + j]
        _store(out, j, v)


@cached_njit(parallel=True, nogil=True)
def _im2col_parts(x, cols, table, parts):
    n = x.shape[0]
    for p in numba.prange(parts):
        a, b = n * p // parts, n * (p + 1) // parts
        conv_im2col(x[a:b], cols[a:b], table)


@cached_njit(nogil=True)
def conv_im2col_split(x, cols, table):
    """`blas.conv_im2col` with the samples cut in SAMPLE_PARTS over Numba's threads when
    the columns are laid out sample-major (mode 0: a part's columns are a slice); the
    kernel-offset-major layout stays one call."""
    parts = _sample_parts(x.shape[0], cols.size * SPLIT_FLOPS // (1 << 16))
    if parts == 1 or table[10] != 0:
        conv_im2col(x, cols, table)
    else:
        _im2col_parts(x, cols, table, parts)


@cached_njit(parallel=True, nogil=True)
def _col2im_parts(cols, res, table, parts):
    n = res.shape[0]
    for p in numba.prange(parts):
        a, b = n * p // parts, n * (p + 1) // parts
        conv_col2im(cols[a:b], res[a:b], table)


@cached_njit(nogil=True)
def conv_col2im_split(cols, res, table):
    """`blas.conv_col2im` with the samples cut in SAMPLE_PARTS over Numba's threads."""
    parts = _sample_parts(res.shape[0], cols.size * SPLIT_FLOPS // (1 << 16))
    if parts == 1:
        conv_col2im(cols, res, table)
    else:
        _col2im_parts(cols, res, table, parts)


# The names generated code calls (one C function per dtype in `blas`).
conv_conv2d_float32 = conv_conv2d_float64 = conv_conv2d_split
conv_dgrad_float32 = conv_dgrad_float64 = conv_dgrad_split
conv_wgrad_float32 = conv_wgrad_float64 = conv_wgrad_split
conv_im2col_float32 = conv_im2col_float64 = conv_im2col_split
conv_col2im_float32 = conv_col2im_float64 = conv_col2im_split
