"""The compile worker starts when `dg.compile` wraps a function that will compile tiered, so
its imports run before the first call; never for a blocking compile; stopped at exit.

One small function is compiled by the worker (a second or two of Numba) and serves the
value checks; the other tests only start and stop processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import cache as kernel_cache
from dualgraph.backend.numba.worker import EVENTS_ENV
from dualgraph.compile import tiered

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300.0  # bound on waiting for the worker (a loaded machine compiles slowly)


@pytest.fixture
def cold(tmp_path, monkeypatch):
    """Tiering on, an empty kernel cache, no worker before or after the test."""
    tiered.shutdown()
    monkeypatch.setenv("DUALGRAPH_TIERED", "1")
    monkeypatch.setenv(EVENTS_ENV, str(tmp_path / "events"))
    with kernel_cache.isolated(str(tmp_path / "kernels")):
        yield tmp_path / "events"
        tiered.shutdown()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _events(path: Path, pid: int) -> list[str]:
    if not path.exists():
        return []
    return [line.split(" ", 2)[2].strip() for line in path.read_text().splitlines()
            if line.split(" ", 2)[1] == str(pid)]


def test_wrapping_starts_the_worker_and_its_imports(cold):
    f = dg.compile(lambda x: dg.tanh(x) * 1.5 - x)
    pid = tiered.worker_pid()
    assert pid is not None and _alive(pid)
    assert f.stats.calls == 0 and not f.entries()
    # The worker imports dualgraph and Numba with no job sent: it then waits for one.
    deadline = time.monotonic() + TIMEOUT
    while "imported" not in _events(cold, pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _events(cold, pid) == ["imported"]
    # Another wrap reuses it; the first call sends its job to it.
    g = dg.compile(lambda x: x * 2.0)
    assert tiered.worker_pid() == pid
    x = dg.tensor(np.linspace(-2.0, 2.0, 7))
    expected = np.tanh(x.numpy()) * 1.5 - x.numpy()
    np.testing.assert_array_equal(f(x).numpy(), expected)  # tier 0: eager's kernels
    assert f.entries()[0].tier0
    assert tiered.wait(f, TIMEOUT), f.stats.tier_failure
    assert tiered.worker_pid() == pid
    phases = _events(cold, pid)
    assert phases[0] == "imported" and phases[1].startswith("job ") and "compiled" in phases
    dg.testing.assert_close(f(x).numpy(), expected, rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    assert f.stats.tier0_calls == 1 and f.stats.tier1_calls == 1
    del g


@pytest.mark.parametrize("opts, env", [({"tiered": False}, "1"), ({}, "0"),
                                       ({"cache": False}, "1")],
                         ids=["tiered=False", "DUALGRAPH_TIERED=0", "cache=False"])
def test_blocking_compiles_start_no_worker(cold, monkeypatch, opts, env):
    monkeypatch.setenv("DUALGRAPH_TIERED", env)
    f = dg.compile(lambda x: x + 1.0, **opts)
    dg.compile(dg.nn.Linear(2, 2), **opts)
    assert tiered.worker_pid() is None
    assert f.stats.calls == 0


def test_disable_starts_no_worker(cold):
    dg.compile(lambda x: x, disable=True)
    assert tiered.worker_pid() is None


def test_module_wrap_starts_the_worker(cold):
    dg.compile(dg.nn.Linear(3, 2))
    assert tiered.worker_pid() is not None


def test_worker_started_at_wrap_stops_at_exit(tmp_path):
    """A program that wraps a function and never calls it leaves no process behind, even
    when it exits while the worker is still importing."""
    script = textwrap.dedent("""
        import dualgraph as dg
        from dualgraph.compile import tiered
        f = dg.compile(lambda x: (x * 1.75).sum())
        print(tiered.worker_pid(), flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), DUALGRAPH_TIERED="1",
               DUALGRAPH_CACHE_DIR=str(tmp_path / "kernels"))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), f"the compile worker {pid} outlived its interpreter"
