"""A float32 sum under ``parallel=True``: each chunk of the ``prange`` folds its values into
lanes of its own through `kernels.fold_lanes` (as the one-thread kernel does), so the
chunked loop is not slower than the serial one; the additions keep their order, so the
sum is the lane-by-lane, chunk-by-chunk sum, whatever the number of threads."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba.codegen import LANES, chunking


def _chunked_sum(values: np.ndarray) -> np.float32:
    """The parallel kernel's order of additions, in float64: per chunk a row of LANES
    partials added block after block, the tail into the accumulator, then the rows."""
    v = values.astype(np.float64)
    blocks = len(v) // LANES
    chunks, per = chunking(blocks)
    acc = 0.0
    for x in v[blocks * LANES:]:
        acc += x
    for c in range(chunks):
        lanes = np.zeros(LANES)
        for b in range(c * per, min(c * per + per, blocks)):
            lanes += v[b * LANES:(b + 1) * LANES]
        for s in lanes:
            acc += s
    return np.float32(acc)


@pytest.fixture(scope="module")
def square_sum():
    return dg.compile(lambda x: (x * x + 0.5).sum(), tiered=False, parallel=True)


# 100_003: a tail and a short last chunk whose second buffer is partly filled; 40_000: a
# last chunk with no values at all.
@pytest.mark.parametrize("n", [100_003, 40_000])
def test_parallel_float32_sum_folds_lanes_in_order(square_sum, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    got = {}
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        got[threads] = square_sum(dg.tensor(x)).numpy()
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    values = x * x + np.float32(0.5)
    assert all(v.tobytes() == _chunked_sum(values).tobytes() for v in got.values()), got
    src = square_sum.entries()[-1].kernel.source
    chunk_loop = src[src.index("numba.prange"):]
    assert "dgk.fold_lanes(" in chunk_loop and "np.empty" in chunk_loop, src
