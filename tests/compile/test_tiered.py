"""Tiered execution: tier 0 (the optimized graph in NumPy) while a worker process compiles,
then tier 1 (the compiled kernels), and what happens when the worker fails.

The suite compiles blocking (``tests/conftest.py``); these tests opt in, with a private
empty kernel cache per module so the worker really compiles (a warm cache would go to
tier 1 at once). Compiles cost seconds each: one step function and one train-mode
function are compiled once and shared by the checks.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import cache as kernel_cache
from dualgraph.compile import tiered
from dualgraph.explain import tier_of
from dualgraph.workloads import train_step

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300.0  # bound on waiting for the worker (a loaded machine compiles slowly)


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory: pytest.TempPathFactory):
    """Tiering on, and an empty kernel cache, for the whole module: none of the kernels an
    earlier test in this worker process loaded is found either."""
    saved = os.environ.get("DUALGRAPH_TIERED")
    os.environ["DUALGRAPH_TIERED"] = "1"
    with kernel_cache.isolated(str(tmp_path_factory.mktemp("tiered-kernels"))):
        yield
        tiered.shutdown()
    if saved is None:
        os.environ.pop("DUALGRAPH_TIERED", None)
    else:
        os.environ["DUALGRAPH_TIERED"] = saved


@pytest.fixture(scope="module")
def step_run(cold_cache):
    """A whole SGD step (TinyNet) compiled tiered next to the same step run eagerly: the
    losses of three calls at tier 0, and the compiled function."""
    eager, eargs = train_step("tinynet")
    step, args = train_step("tinynet")
    f = dg.compile(step)
    fresh = tier_of(f)
    before = _blas_threads()
    tier0 = [(f(*args).item(), eager(*eargs).item()) for _ in range(3)]
    entry = f.entries()[0]
    deadline = time.monotonic() + 10
    while (not tiered.BLAS_SHARE.limited and entry.pending is not None
           and not entry.pending.done and time.monotonic() < deadline):
        time.sleep(0.01)
    during = _blas_threads() if entry.pending is not None and not entry.pending.done else None
    return {"f": f, "args": args, "eager": eager, "eargs": eargs, "tier0": tier0,
            "entry": entry, "was_tier0": entry.tier0 and tiered.worker_pid() is not None,
            "tier_fresh": fresh, "tier_text": tier_of(f), "blas": (before, during)}


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    return min((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"),
               default=1)


def test_blas_shares_the_cores_while_compiling(step_run):
    """Tier 0's BLAS gives the worker a core while it compiles, and gets it back."""
    before, during = step_run["blas"]
    cores = len(os.sched_getaffinity(0))
    if during is not None and before > max(1, cores - 1):
        assert during == max(1, cores - 1)
    assert tiered.wait(step_run["f"], TIMEOUT)
    assert not tiered.BLAS_SHARE.limited
    assert _blas_threads() == before


def test_explain_says_the_tier(step_run):
    assert step_run["tier_fresh"] == "tiered, not called yet"
    if step_run["was_tier0"]:
        assert step_run["tier_text"].startswith("tier 0 (NumPy interpreter; the worker")
        assert "3 call(s) at tier 0" in step_run["tier_text"]
    f = dg.compile(lambda x: x * 2, tiered=False)
    x = dg.ones(3)
    f(x)
    report = str(dg.explain(f, x))
    assert report.startswith("== tier: blocking")


def test_first_calls_are_tier0_with_eager_values(step_run):
    assert step_run["was_tier0"]
    for compiled, eager in step_run["tier0"]:
        assert compiled == eager  # the same NumPy kernels, in the same order: exact


def test_swap_to_tier1_then_same_values(step_run):
    f, args, eager, eargs = step_run["f"], step_run["args"], step_run["eager"], step_run["eargs"]
    assert tiered.wait(f, TIMEOUT), f.stats.tier_failure
    entry = step_run["entry"]
    assert not entry.tier0 and entry.pending is None
    assert not isinstance(entry.kernel, tiered.InterpretedKernel)
    for _ in range(3):
        dg.testing.assert_close(f(*args).item(), eager(*eargs).item(), rtol=1e-5, atol=0,
                                equal_nan=True, check_dtype=False)
    st = f.stats
    assert st.tier0_calls >= 3 and st.swap_call is not None and st.swap_call > 3
    assert st.swap_seconds > 0 and st.worker_seconds > 0
    assert st.tier1_calls == st.calls - st.tier0_calls
    assert "tier0_calls=" in str(st) and "swap at call" in str(st)
    text = tier_of(f)
    assert text.startswith("tier 1 (Numba kernels)") and f"swapped at call {st.swap_call}" in text


@pytest.mark.parametrize("loss", ["scalar", "vector"])
def test_train_mode_backward_at_both_tiers(cold_cache, loss):
    """A vector output runs a backward kernel; a scalar loss gets its gradient from the
    forward's own kernel (`value_and_grad`). Both tiers give eager's numbers."""
    w = dg.tensor(np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float64), requires_grad=True)
    seed = None if loss == "scalar" else dg.tensor(np.array([1.0, -2.0, 0.5, 3.0]))

    def fn(x):
        y = dg.tanh(x @ w) * 3.0 + 1.0
        return y.sum() if loss == "scalar" else y.sum(0)

    f = dg.compile(fn)
    x = dg.tensor(np.arange(6.0).reshape(2, 3) / 7)

    def grads(g):
        w.grad = None
        out = g(x)
        out.backward(seed)
        return out.numpy().copy(), w.grad.numpy().copy()

    e_out, e_grad = grads(fn)
    c_out, c_grad = grads(f)
    (entry,) = f.entries()
    assert entry.tier0 and entry.joint == (loss == "scalar")
    tier0 = entry.kernel if loss == "scalar" else entry.bwd_kernel
    assert isinstance(tier0, tiered.InterpretedKernel)
    np.testing.assert_array_equal(c_out, e_out)
    np.testing.assert_array_equal(c_grad, e_grad)
    assert tiered.wait(f, TIMEOUT), f.stats.tier_failure
    c_out, c_grad = grads(f)
    assert f.stats.tier0_calls == 1 and f.stats.tier1_calls == 1
    dg.testing.assert_close(c_out, e_out, rtol=1e-10, atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(c_grad, e_grad, rtol=1e-10, atol=0, equal_nan=True, check_dtype=False)


def test_random_ops_draw_the_same_numbers_at_both_tiers(cold_cache):
    f = dg.compile(lambda x: x + dg.rand(5) * dg.randn(5))
    x = dg.zeros(5)
    dg.manual_seed(3)
    a = f(x).numpy()
    assert f.entries()[0].tier0
    assert tiered.wait(f, TIMEOUT), f.stats.tier_failure
    dg.manual_seed(3)
    b = f(x).numpy()
    assert f.stats.tier0_calls == 1
    dg.testing.assert_close(a, b, rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)


def test_blocking_when_asked(cold_cache, monkeypatch):
    for opts, env in (({"tiered": False}, "1"), ({}, "0"), ({"cache": False}, "1")):
        monkeypatch.setenv("DUALGRAPH_TIERED", env)
        f = dg.compile(lambda x: x * 2.5 + 1, **opts)
        f(dg.ones(3))
        e = f.entries()[0]
        assert not e.tier0 and e.pending is None and f.stats.tier0_calls == 0, (opts, env)
        assert f.stats.numba_seconds > 0
    with pytest.raises(TypeError, match="tiered"):
        dg.compile(lambda x: x, tiered="yes")


def _assert_stays_tier0(f, x, expected, match):
    deadline = time.monotonic() + TIMEOUT
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while f.entries()[0].pending is not None and time.monotonic() < deadline:
            np.testing.assert_array_equal(f(x).numpy(), expected)
            time.sleep(0.02)
        for _ in range(3):
            np.testing.assert_array_equal(f(x).numpy(), expected)
    msgs = [str(w.message) for w in caught if "tiered compile failed" in str(w.message)]
    assert len(msgs) == 1, msgs
    assert match in msgs[0]
    assert f.entries()[0].tier0 and f.stats.tier_failure is not None


def test_killed_worker_leaves_tier0_with_one_warning(cold_cache):
    f = dg.compile(lambda x: (dg.exp(x) * 1.25 - x).sum(axis=0))
    x = dg.tensor(np.arange(8.0).reshape(4, 2))
    expected = (np.exp(x.numpy()) * 1.25 - x.numpy()).sum(axis=0)
    np.testing.assert_array_equal(f(x).numpy(), expected)
    pid = tiered.worker_pid()
    assert pid is not None and f.entries()[0].pending is not None
    os.kill(pid, signal.SIGKILL)  # mid-job: it is importing or compiling
    _assert_stays_tier0(f, x, expected, "SIGKILL")
    # A later tiered compile starts a fresh worker.
    g = dg.compile(lambda x: x * 4.0 - 1.0)
    g(x)
    assert tiered.worker_pid() not in (None, pid)


def test_compile_failure_leaves_tier0_with_one_warning(cold_cache, monkeypatch):
    real = tiered._payload

    def broken(job):
        job_id, cache_dir, specs, settings = pickle.loads(real(job))
        specs[0][0].nodes[-1].op = "no_such_op_for_the_worker"  # LoweringError there
        return pickle.dumps((job_id, cache_dir, specs, settings))

    monkeypatch.setattr(tiered, "_payload", broken)
    f = dg.compile(lambda x: x * 3.0 + 0.5)
    x = dg.tensor(np.arange(4.0))
    np.testing.assert_array_equal(f(x).numpy(), np.arange(4.0) * 3.0 + 0.5)
    assert f.entries()[0].tier0
    _assert_stays_tier0(f, x, np.arange(4.0) * 3.0 + 0.5, "no_such_op_for_the_worker")


def test_worker_stops_at_interpreter_exit(cold_cache):
    script = textwrap.dedent("""
        import dualgraph as dg
        from dualgraph.compile import tiered
        f = dg.compile(lambda x: (x * 1.75).sum())
        f(dg.ones(3))
        assert f.entries()[0].tier0
        print(tiered.worker_pid(), flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"the compile worker {pid} outlived its interpreter")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc")
def test_memory_plateaus_over_many_distinct_graphs(cold_cache, monkeypatch):
    """A loop compiling many graphs (`dg.compile(lambda x, k=k: dg.tanh(x) * (1 + k / 64))`)
    with an in-memory limit of 4 kernels and a worker replaced every 3 jobs: this process
    only loads kernels (evicted ones are freed) and the worker, where Numba's per-compile
    memory stays, is recycled, so neither grows with the number of graphs."""
    from dualgraph.backend.numba import cache as kernel_cache

    monkeypatch.setattr(kernel_cache, "MAX_KERNELS", 4)
    monkeypatch.setenv(tiered.JOBS_ENV, "3")
    x = dg.tensor(np.linspace(-1, 1, 16))
    pids, rss = set(), []
    for k in range(14):
        c = 1.0 + k / 64
        # An int default is baked in on its first value (a float one would be an input):
        # each function is another graph.
        f = dg.compile(lambda x, k=k: dg.tanh(x) * (1.0 + k / 64))
        f(x)
        pids.add(tiered.worker_pid())
        assert tiered.wait(f, TIMEOUT), f.stats.tier_failure
        dg.testing.assert_close(f(x).numpy(), np.tanh(x.numpy()) * c, rtol=1e-12, atol=0,
                                equal_nan=True, check_dtype=False)
        del f
        rss.append(_rss())
    assert len(pids - {None}) >= 4  # replaced after every 3 jobs
    growth = rss[-1] - rss[5]
    assert growth < 4 * 2**20, [r // 1024 for r in rss]
