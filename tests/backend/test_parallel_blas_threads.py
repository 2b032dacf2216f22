"""NumPy's OpenBLAS runs one thread inside every call of a ``parallel=True`` kernel that
makes products, whichever way the kernel is called (the generated call path, the backward
node, a split kernel's parts): the kernel cuts its products over Numba's threads itself,
and OpenBLAS's own threads would fight them for the cores. The count is set and put back
once per call, never per product, and not at all for a kernel without products. Counted
through the thread-control hook, not timed."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import blas


@pytest.fixture
def switches(monkeypatch):
    """The counts the kernels set NumPy's OpenBLAS to, in order, with BLAS at two
    threads outside the calls."""
    if blas._THREADS is None:
        pytest.skip("NumPy's OpenBLAS thread count cannot be set here")
    get, put = blas._THREADS
    seen: list[int] = []

    def counted(n: int) -> None:
        seen.append(n)
        put(n)

    before = get()
    put(2)
    monkeypatch.setattr(blas, "_THREADS", (get, counted))
    try:
        yield seen
    finally:
        put(before)


def _data():
    rng = np.random.default_rng(0)
    w = dg.tensor(rng.standard_normal((64, 32), np.float32), requires_grad=True)
    x = dg.tensor(rng.standard_normal((256, 64), np.float32))
    return w, x


def _loss(w, x):
    return ((x @ w).relu() ** 2).mean()


def test_a_parallel_product_runs_blas_on_one_thread_set_once_per_call(switches):
    w, x = _data()
    f = dg.compile(_loss, tiered=False, parallel=True)
    ref = dg.compile(_loss, tiered=False)
    f(w, x)  # compiles
    switches.clear()
    for _ in range(3):
        f(w, x)
    # One switch to one thread and one back per call (through the generated call path),
    # none per product: the kernel makes two (the forward one and the gradient's).
    assert switches == [1, 2] * 3
    assert blas._THREADS[0]() == 2
    kernel = f.entries()[0].kernel
    assert kernel.blas_one_thread and kernel.direct_call() is None
    switches.clear()
    loss = f(w, x)
    loss.backward()
    w2 = dg.tensor(w.detach().numpy(), requires_grad=True)
    loss2 = ref(w2, x)
    loss2.backward()
    assert switches in ([1, 2], [1, 2, 1, 2])  # a backward kernel's call switches too
    assert float(loss) == pytest.approx(float(loss2), rel=1e-6)
    dg.testing.assert_close(w.grad, w2.grad, rtol=1e-5, atol=1e-6)


def test_the_serial_build_and_a_kernel_without_products_leave_blas_alone(switches):
    w, x = _data()
    serial = dg.compile(_loss, tiered=False)
    elementwise = dg.compile(lambda x: (x.tanh() * 2.0).sum(), tiered=False, parallel=True)
    for _ in range(2):
        serial(w, x)
        elementwise(x)
    assert not elementwise.entries()[0].kernel.blas_one_thread
    assert switches == []


def test_with_blas_on_one_thread_nothing_is_switched(switches):
    w, x = _data()
    f = dg.compile(_loss, tiered=False, parallel=True)
    blas._THREADS[1](1)
    switches.clear()
    f(w, x)
    f(w, x)
    assert switches == []


def test_calls_blas_reads_the_kernel_ir():
    from dualgraph.backend import kir

    a = kir.Buffer("a", (4, 4), "float32")
    i = kir.Var("i")
    store = kir.Store(a, (i, i), kir.Const(0.0, np.dtype("float32")))
    product = kir.Gemm(4, 4, 4, *(kir.Operand(a, 4) for _ in range(3)))
    assert blas.calls_blas([kir.Loop(i, 4, (kir.Loop(i, 4, (product,)),))])
    assert blas.calls_blas([kir.LibCall("cholesky", (a,), (a,))])
    assert not blas.calls_blas([kir.Loop(i, 4, (store,), parallel=True),
                                kir.LibCall("pool_gather", (a, a), (a,))])
