"""``parallel=True`` over items: item loops of lowered blocks (a grouped convolution's
products) and products small enough to stay one BLAS call on the calling thread. The
ungrouped convolutions' library routines cut their samples over the threads
(`test_parallel_conv_split.py`). The parallel build gives the bits of one thread on two,
and the serial build's values."""

from __future__ import annotations

import numba
import numpy as np

import dualgraph as dg
from dualgraph.backend.numba import blas_parallel

from .._support.compiled import on_one_and_two_threads


def _conv_grads(net, x: np.ndarray, parallel: bool) -> tuple[list, object]:
    """The compiled loss and gradients of ``net`` at ``x`` (a padded conv with bias,
    ReLU, a grouped conv without bias, batch 16: every conv output over 32K elements)
    and the compiled function."""
    params = list(net.parameters())

    def loss_and_grads(x):
        for p in params:
            p.grad = None
        loss = (net(x) ** 2).mean()
        loss.backward()
        return (loss, *(p.grad for p in params))

    f = dg.compile(loss_and_grads, tiered=False, parallel=parallel)
    return f, [r.numpy().copy() for r in f(x)]


def test_parallel_conv_step_is_the_same_on_one_and_two_threads():
    from dualgraph import nn

    dg.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(),
                        nn.Conv2d(6, 8, 3, groups=2, bias=False))
    x = dg.tensor(np.random.default_rng(1).standard_normal((16, 1, 28, 28), np.float32))
    f, _ = _conv_grads(net, x, True)
    runs = on_one_and_two_threads(lambda: [r.numpy().copy() for r in f(x)])
    g, serial = _conv_grads(net, x, False)
    assert "numba.prange" not in g.entries()[0].kernel.source
    for a, b, s in zip(*runs, serial):
        assert a.tobytes() == b.tobytes()
        dg.testing.assert_close(a, s, rtol=1e-4, atol=1e-5)


@numba.njit
def _batched(x, y, z):
    blas_parallel.gemm_batched(x, y, z)


def test_parallel_products_small_and_large_match_numpy():
    """`blas_parallel.gemm_call` below the split (one call on the calling thread) and
    above it (row or column blocks over the threads), each operand plain and transposed,
    with ``beta`` 0 and 1; `gemm_batched` below and above its split: NumPy's values, the same
    bits on one and two threads."""
    blas_parallel.need_batched("float32")
    rng = np.random.default_rng(0)
    # One call; row blocks; column blocks (fewer rows than columns), two of them.
    cases = [(6, 784, 25), (300, 200, 100), (3, 500, 900), (100, 400, 300)]
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        try:
            for m, n, k in cases:
                a = rng.standard_normal((k, m), np.float32)  # read transposed
                b = rng.standard_normal((k, n), np.float32)
                c0 = rng.standard_normal((m, n), np.float32)
                c = c0.copy()
                blas_parallel.gemm_call(112, 111, m, n, k, a, m, b, n, 1.0, c, n)
                dg.testing.assert_close(c, a.T @ b + c0, rtol=1e-4, atol=1e-3)
                c1 = np.empty((m, n), np.float32)
                blas_parallel.gemm_call(111, 111, m, n, k, np.ascontiguousarray(a.T), k, b,
                                        n, 0.0, c1, n)
                dg.testing.assert_close(c1, a.T @ b, rtol=1e-4, atol=1e-3)
                bt = np.ascontiguousarray(b.T)  # read transposed
                blas_parallel.gemm_call(112, 112, m, n, k, a, m, bt, k, 0.0, c1, n)
                dg.testing.assert_close(c1, a.T @ b, rtol=1e-4, atol=1e-3)
            for items, m, n, k in ((4, 8, 8, 8), (6, 64, 64, 64)):
                x = rng.standard_normal((items, m, k), np.float32)
                y = rng.standard_normal((items, k, n), np.float32)
                z = np.empty((items, m, n), np.float32)
                _batched(x, y, z)
                dg.testing.assert_close(z, x @ y, rtol=1e-4, atol=1e-3)
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
