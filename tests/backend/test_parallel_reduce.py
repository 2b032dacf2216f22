"""Whole-array reductions under ``parallel=True``: a ``prange``
over fixed chunks, each folding its own row of partials, so the result is right, does not
depend on the number of threads, and the reduction is not left serial."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.workloads import chain_data, elementwise_chain


@pytest.mark.parametrize("n", [40_000, 100_003])
def test_parallel_sum_matches_serial_and_is_a_prange(n):
    x = chain_data(n)
    got = {}
    for par in (False, True):
        t = dg.tensor(x, requires_grad=True)
        f = dg.compile(elementwise_chain, tiered=False, parallel=par)
        v = f(t)
        v.backward()
        got[par] = (float(v.numpy()), t.grad.numpy().copy())
        src = f.entries()[0].kernel.source
        assert ("parts" in src and "numba.prange" in src) == par, src
        if par:  # W3's step on one thread: the same bits as on all of them
            dg.set_num_threads(1)
            try:
                t1 = dg.tensor(x, requires_grad=True)
                v1 = f(t1)
                v1.backward()
            finally:
                dg.set_num_threads(numba.config.NUMBA_NUM_THREADS)
            assert v1.numpy().tobytes() == v.numpy().tobytes()
            assert t1.grad.numpy().tobytes() == t.grad.numpy().tobytes()
    xd = x.astype(np.float64)
    ref = (np.tanh(xd * 0.5 + 1) / (1 + np.exp(-xd)) + 0.1 * xd ** 2).sum()
    assert got[True][0] == pytest.approx(ref, rel=1e-6)
    assert got[True][0] == pytest.approx(got[False][0], rel=1e-6)
    dg.testing.assert_close(got[True][1], got[False][1], rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_parallel_max_propagates_nan_and_finds_the_maximum():
    x = np.random.default_rng(0).standard_normal(50_000).astype(np.float32)
    f = dg.compile(lambda t: (t * 2.0).max(), tiered=False, parallel=True)
    assert float(f(dg.tensor(x)).numpy()) == pytest.approx(2 * x.max())
    x[31_111] = np.nan
    assert np.isnan(float(f(dg.tensor(x)).numpy()))


_POOL_CHILD = """
import os, sys
import numba
import dualgraph as dg
from dualgraph import settings
if sys.argv[1] == "numba":
    numba.get_num_threads()  # the user's code starts Numba's pool first
elif sys.argv[1] == "compile":
    f = dg.compile(lambda t: (t * 2.0).sum(), tiered=False, parallel=True)
    f(dg.ones(40_000))
else:
    dg.set_num_threads(1)
print(settings.start_thread_pool()["wait"], "|", "OMP_WAIT_POLICY" in os.environ)
"""


def _pool_child(start: str, **env: str) -> tuple[str, str]:
    """Start Numba's pool in a fresh process (libgomp reads its wait policy once, when it
    loads): ``(libgomp's spin count as it reports it, the child's stdout)``."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    environ.update(env, OMP_DISPLAY_ENV="VERBOSE")
    proc = subprocess.run([sys.executable, "-c", _POOL_CHILD, start], env=environ,
                          capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.returncode == 0, proc.stderr
    spins = re.findall(r"GOMP_SPINCOUNT = '(\d+)'", proc.stderr)
    if not spins:
        pytest.skip("Numba's threading layer here is not GNU OpenMP")
    return spins[-1], proc.stdout.strip()


def test_numba_pool_starts_with_passive_waiting_and_leaves_the_environment_alone():
    """Spinning OpenMP workers took the cores OpenBLAS's threads needed (the batch-1024
    MLP step ran twice as slow on two threads as on one): dualgraph starts Numba's pool
    with a spin count of 0, whether a parallel build or `dg.set_num_threads` starts it,
    and the variable does not stay in the environment (later libraries, child processes)."""
    for start in ("compile", "threads"):
        spins, out = _pool_child(start)
        assert spins == "0", (start, out)
        assert out == "passive | False", (start, out)


def test_numba_pool_keeps_a_users_wait_policy():
    spins, out = _pool_child("threads", OMP_WAIT_POLICY="ACTIVE")
    assert int(spins) > 300_000 and out.startswith("set by the user: OMP_WAIT_POLICY=ACTIVE")
    spins, out = _pool_child("threads", GOMP_SPINCOUNT="1000")
    assert spins == "1000" and out.startswith("set by the user: GOMP_SPINCOUNT=1000")
    # A pool the user's code started first keeps libgomp's default (what it would be
    # without dualgraph), and dualgraph says so.
    spins, out = _pool_child("numba")
    assert spins == "300000" and out.startswith("as started before dualgraph"), out


def _mlp_steps(parallel: bool, threads: int, steps: int = 3) -> list[np.ndarray]:
    """Three SGD steps of the 784-256-10 MLP at batch 256 (its hidden layer and weight
    updates are over 32K elements: parallel loops), from the same seeded start: the
    losses, then the parameters."""
    from dualgraph.optim import SGD
    from dualgraph.workloads import mlp_data, mlp_model

    sizes = (784, 256, 10)
    net, loss_fn = mlp_model(sizes, "ce")
    opt = SGD(net.parameters(), lr=0.1)
    x, t = (dg.tensor(a) for a in mlp_data(sizes, 256, "ce"))

    def train(x, t):
        opt.zero_grad()
        out = loss_fn(net(x), t)
        out.backward()
        opt.step()
        return out

    f = dg.compile(train, tiered=False, parallel=parallel)
    dg.set_num_threads(threads)
    try:
        losses = [f(x, t).numpy().copy() for _ in range(steps)]
    finally:
        dg.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    src = f.entries()[0].kernel.source
    assert ("numba.prange" in src) == parallel
    return losses + [p.detach().numpy().copy() for p in net.parameters()]


def test_parallel_mlp_step_is_the_same_on_one_and_two_threads():
    """Each element of a parallel loop is computed by one thread, and the reductions'
    partials have a fixed order: the bits do not depend on the thread count, and match
    the serial build's values."""
    one = _mlp_steps(True, 1)
    two = _mlp_steps(True, min(2, numba.config.NUMBA_NUM_THREADS))
    serial = _mlp_steps(False, 1)
    for a, b, s in zip(one, two, serial):
        assert a.tobytes() == b.tobytes()
        dg.testing.assert_close(a, s, rtol=1e-5, atol=1e-6, check_dtype=False)


def test_parallel_products_run_over_numbas_threads_with_one_blas_thread():
    """A parallel kernel's products are cut into row blocks (a transposed left operand
    too) and batch items over Numba's threads, each one single-threaded BLAS call: the
    values of the serial build, the same bits on one and two threads, and BLAS's thread
    count is one during the call and what it was after."""
    from dualgraph.backend.numba import blas

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((200, 300), np.float32), rng.standard_normal((200, 100),
                                                                            np.float32)
    z, w = rng.standard_normal((6, 48, 32), np.float32), rng.standard_normal((6, 32, 40),
                                                                             np.float32)
    args = [dg.tensor(a) for a in (x, y, z, w)]

    def fn(x, y, z, w):
        return (x.T @ y) + 1.0, (z @ w) * 2.0

    f = dg.compile(fn, tiered=False, parallel=True)
    src = f.entries()[0].kernel.source if f(*args) else ""
    assert "import blas_parallel as dgb" in src and "dgb.gemm_batched" in src, src
    runs = {}
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        dg.set_num_threads(threads)
        runs[threads] = [r.numpy().copy() for r in f(*args)]
    dg.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    serial = [r.numpy() for r in dg.compile(fn, tiered=False)(*args)]
    for a, b, s in zip(*runs.values(), serial):
        assert a.tobytes() == b.tobytes()
        dg.testing.assert_close(a, s, rtol=1e-5, atol=1e-5)
    if blas._THREADS is None:
        pytest.skip("NumPy's OpenBLAS thread count cannot be set here")
    get, put = blas._THREADS
    before = get()
    put(2)
    try:
        assert blas.run_single_threaded(lambda: get())() == 1
        assert get() == 2
    finally:
        put(before)
