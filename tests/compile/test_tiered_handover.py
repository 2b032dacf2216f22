"""How tiered mode hands the compile over: tier 0 yields the CPU while its kernels compile,
this process builds the kernels while the worker compiles them (so the worker's reply leaves
only machine code to load), and a large job's compile helpers start before the worker lowers
its graphs. The swap stays exact: tier 1 gives the blocking compile's numbers.
"""

from __future__ import annotations

import os
import signal
import threading
import types

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import jobs
from dualgraph.backend import numba as backend
from dualgraph.backend.numba import cache as kernel_cache
from dualgraph.backend.numba import worker
from dualgraph.compile import tiered
from dualgraph.ir.interpret import interpret

TIMEOUT = 300.0  # bound on waiting for the worker (a loaded machine compiles slowly)


class _Clock:
    """Stands in for the `time` module in `tiered` (each reading advances 10 ms) and for a
    pending job (its pauses are recorded instead of slept)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self.done = False
        self.processes = 2  # compiling on both cores
        self.polls = 2  # a call after the first

    def perf_counter(self) -> float:
        self.now += 0.010
        return self.now

    def pause(self, seconds: float) -> None:
        self.slept.append(seconds)


def _graph():
    f = dg.compile(lambda x: dg.tanh(x * 1.5) + x, tiered=False)
    x = dg.tensor(np.linspace(-2.0, 2.0, 6))
    f(x)
    return f.entries()[0].optimized, x.numpy()


def test_tier0_yields_while_its_kernels_compile(monkeypatch):
    graph, x = _graph()
    clock = _Clock()
    monkeypatch.setattr(tiered, "time", clock)
    monkeypatch.setattr(tiered, "cores", lambda: 2)
    job = clock
    k = tiered.InterpretedKernel(graph, {}, job)
    expected = interpret(graph, x)[0]

    def run() -> np.ndarray:
        outs = k.new_outputs()
        k.run([x], outs)
        return outs[0]

    for share, slept in (("1", [0.010]), ("2.5", [0.025]), ("0", [])):
        monkeypatch.setenv(tiered.YIELD_ENV, share)
        clock.slept.clear()
        dg.testing.assert_close(run(), expected, rtol=0, atol=0)
        dg.testing.assert_close(np.array(clock.slept), np.array(slept), rtol=1e-9, atol=0)
    monkeypatch.delenv(tiered.YIELD_ENV)
    clock.slept.clear()
    run()
    assert len(clock.slept) == 1  # on by default
    job.processes = 1  # a core is free for the loop: no need to yield
    clock.slept.clear()
    run()
    assert clock.slept == []
    job.processes, job.polls = 2, 1  # the first call's result comes first
    run()
    assert clock.slept == []
    job.polls = 2
    job.done = True  # compiled (or failed): tier 0 no longer yields
    clock.slept.clear()
    dg.testing.assert_close(run(), expected, rtol=0, atol=0)
    assert clock.slept == []
    assert tiered.InterpretedKernel(graph, {}).job is None  # no job: never yields


def test_bad_yield_setting_falls_back(monkeypatch):
    monkeypatch.setenv(tiered.YIELD_ENV, "lots")
    assert tiered.yield_share() == tiered.DEFAULT_YIELD
    monkeypatch.setenv(tiered.YIELD_ENV, "-3")
    assert tiered.yield_share() == 0.0


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALGRAPH_TIERED", "1")
    with kernel_cache.isolated(str(tmp_path / "kernels")):
        yield
        tiered.shutdown()


def test_kernels_are_built_here_while_the_worker_compiles(cold_cache):
    """From the second tier-0 call, this process lowers the kernels while the worker
    compiles; it compiles nothing itself, and the swap takes the kernels it built."""
    w = dg.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4))

    def fn(x):
        return (dg.tanh(x @ w) * 2.0 - x.sum()).sum(0)

    f = dg.compile(fn)
    x = dg.tensor(np.arange(6.0).reshape(2, 3) / 7)
    expected = fn(x).numpy()
    dg.testing.assert_close(f(x).numpy(), expected, rtol=0, atol=0)
    (entry,) = f.entries()
    job = entry.pending
    assert entry.tier0 and job is not None
    pid = tiered.worker_pid()
    assert pid is not None
    # The worker waits (stopped) until this process has built its side: its reply cannot
    # come first, whatever the machine's load.
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(2):
            dg.testing.assert_close(f(x).numpy(), expected, rtol=0, atol=0)
        assert not job.done and job._preparing is not None
        job._preparing.join(TIMEOUT)
        built = job._built
        assert built is not None and [attr for attr, _, _ in built] == ["kernel"]
        (_, kernel, sig), = built
        assert not kernel.on_disk(sig)  # built, not compiled: the worker's code is not there
    finally:
        os.kill(pid, signal.SIGCONT)
    assert tiered.wait(f, TIMEOUT), f.stats.tier_failure
    assert job.processes == 1  # a small job: the worker compiles it alone
    assert entry.kernel is kernel and not entry.tier0
    assert f.stats.numba_seconds > 0  # the build and the load, this process's share
    blocking = dg.compile(fn, tiered=False)
    want = blocking(x).numpy()
    for _ in range(2):
        dg.testing.assert_close(f(x).numpy(), want, rtol=0, atol=0)
    dg.testing.assert_close(want, expected, rtol=1e-10, atol=0)


def _fake_graph(nodes: int, fused_inner: int = 0):
    inner = types.SimpleNamespace(nodes=[types.SimpleNamespace(op="add", attrs={})
                                         for _ in range(fused_inner)])
    ops = [types.SimpleNamespace(op="mul", attrs={}) for _ in range(nodes)]
    if fused_inner:
        ops.append(types.SimpleNamespace(op="fused", attrs={"body": inner}))
    return types.SimpleNamespace(nodes=ops)


def test_graph_nodes_counts_fused_bodies():
    assert jobs.graph_nodes(_fake_graph(5)) == 5
    assert jobs.graph_nodes(_fake_graph(5, fused_inner=7)) == 5 + 1 + 7


def test_processes_for_a_job(monkeypatch):
    large, small = _fake_graph(jobs.LARGE_JOB_NODES), _fake_graph(jobs.LARGE_JOB_NODES - 1)
    monkeypatch.setenv(jobs.JOBS_ENV, "3")
    assert jobs.processes_for([large]) == 3
    assert jobs.processes_for([small, _fake_graph(1)]) == 3  # the job's graphs together
    assert jobs.processes_for([small]) == 1
    monkeypatch.setenv(jobs.JOBS_ENV, "1")
    assert jobs.processes_for([large]) == 1
    monkeypatch.delenv(jobs.JOBS_ENV)
    assert jobs.processes_for([large]) == jobs.cores()


class _StopError(Exception):
    pass


@pytest.mark.parametrize("nodes, count, early", [
    (jobs.LARGE_JOB_NODES, "2", True),
    (jobs.LARGE_JOB_NODES - 1, "2", False),
    (jobs.LARGE_JOB_NODES, "1", False),
])
def test_large_jobs_start_helpers_before_lowering(monkeypatch, nodes, count, early):
    calls: list = []
    monkeypatch.setenv(jobs.JOBS_ENV, count)
    monkeypatch.setattr(worker, "_helpers", lambda n: calls.append(("helpers", n)))

    def build(*args, **kwargs):
        calls.append(("build",))
        raise _StopError

    monkeypatch.setattr(backend, "build", build)
    spec = (_fake_graph(nodes - 3, fused_inner=2), "kernel", False, {}, [])
    with pytest.raises(_StopError):
        worker.compile_graphs([spec])
    assert calls == ([("helpers", int(count) - 1), ("build",)] if early else [("build",)])


def test_a_pause_ends_when_the_job_does():
    job = tiered._Job([])
    threading.Timer(0.05, job.finish, (None,)).start()
    job.pause(TIMEOUT)  # returns once finished, long before the timeout
    assert job.done and job.error is None


def test_prepare_is_skipped_once_done():
    job = tiered._Job([])
    job.done = True
    job.prepare_soon()
    assert job._preparing is None
    job.load()  # nothing to build or load
    assert job.kernels == []
