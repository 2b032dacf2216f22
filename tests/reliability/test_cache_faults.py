"""Kernel caches under faults: damaged files, stale versions, no disk, two processes at once,
a bounded in-memory cache and calls from several threads.

Every test uses its own cache directory (``tmp_path``) and a graph no other test compiles
(a unique baked constant). To make a second compile in this process go to the disk, a test
"forgets" the kernel: drops it from the in-memory cache and its module from ``sys.modules``.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import uuid
import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.backend.numba import cache as kernel_cache

from .._support.compiled import compile_and_check, forget_kernel

X = np.linspace(-1.0, 1.0, 6)


def _fresh_fn():
    """A function with a graph nobody compiled yet, and its expected result on X."""
    c = 1.0 + uuid.uuid4().int % 10**6 / 10**7

    def f(x):
        return dg.tanh(x * c) + 1.0

    return f, np.tanh(X * c) + 1.0


def _forget(path: str) -> None:
    forget_kernel(path)


def _compile_and_check(f, expected: np.ndarray) -> tuple:
    return compile_and_check(f, X, expected)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "binary"])
def test_damaged_kernel_file_is_rewritten_with_a_warning(cache_dir, damage):
    f, expected = _fresh_fn()
    kernel, msgs = _compile_and_check(f, expected)
    assert not msgs
    path = Path(kernel.path)
    good = path.read_text()
    if damage == "truncated":
        path.write_text(good[: len(good) // 2])
    elif damage == "garbage":
        path.write_text("raise SystemExit('a damaged kernel file was imported')\n")
    elif damage == "empty":
        path.write_text("")
    else:
        path.write_bytes(b"\xff\xfe\x00\x81garbage")
    _forget(kernel.path)
    kernel2, msgs = _compile_and_check(f, expected)
    assert kernel2.path == kernel.path
    assert path.read_text() == good
    assert any("damaged" in m or "unreadable" in m for m in msgs), msgs


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_numba_cache_is_dropped_and_rebuilt(cache_dir, damage):
    f, expected = _fresh_fn()
    kernel, _ = _compile_and_check(f, expected)
    numba_files = sorted((cache_dir / "__pycache__").iterdir())
    assert {p.suffix for p in numba_files} == {".nbi", ".nbc"}
    for p in numba_files:
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2] if damage == "truncated" else os.urandom(64))
    _forget(kernel.path)
    kernel2, msgs = _compile_and_check(f, expected)
    assert any("Numba's cache" in m and "removed it" in m for m in msgs), msgs
    # The rebuilt cache is good again: a third load hits it without warnings.
    _forget(kernel2.path)
    kernel3, msgs = _compile_and_check(f, expected)
    assert not msgs
    assert sum(kernel3.fn.stats.cache_hits.values()) == 1


def test_stale_version_never_loads_old_code(cache_dir, monkeypatch):
    """The file name is a digest of the source and the versions: a file written by another
    dualgraph version is a different file, never imported for this one."""
    f, expected = _fresh_fn()
    kernel, _ = _compile_and_check(f, expected)
    old_path = Path(kernel.path)
    old_path.write_text(old_path.read_text().replace("dg.tanh", "garbage"))  # poison it
    _forget(kernel.path)
    monkeypatch.setattr(dg, "__version__", "0.0.1-other")
    kernel2, _ = _compile_and_check(f, expected)
    assert kernel2.path != kernel.path
    assert "dualgraph 0.0.1-other" in Path(kernel2.path).read_text()


@pytest.mark.parametrize("how", ["path_is_a_file", "read_only"])
def test_unwritable_cache_dir_runs_in_memory_with_a_warning(tmp_path, monkeypatch, how):
    if how == "path_is_a_file":
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("")
        target = blocker / "cache"
    else:
        if os.geteuid() == 0:
            pytest.skip("root ignores directory permissions")
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(0o500)
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(target))
    f, expected = _fresh_fn()
    kernel, msgs = _compile_and_check(f, expected)
    assert kernel.path is None
    assert any("disk cache unavailable" in m for m in msgs), msgs
    if how == "read_only":
        target.chmod(0o700)


# Compiles one fixed function (the same graph in every process) and prints its result.
CHILD = """
import json, sys, time
import numpy as np
import dualgraph as dg

start = float(sys.argv[1])
time.sleep(max(0.0, start - time.time()))  # start compiling together
f = dg.compile(lambda x: dg.sigmoid(x * 1.2345678) - x * 0.5)
out = f(dg.tensor(np.linspace(-1.0, 1.0, 6)))
(entry,) = f.entries()
print(json.dumps({"out": out.numpy().tolist(), "path": entry.kernel.path,
                  "hits": sum(entry.kernel.fn.stats.cache_hits.values())}))
"""


def _expected_child() -> np.ndarray:
    x = np.linspace(-1.0, 1.0, 6)
    return 1 / (1 + np.exp(-x * 1.2345678)) - x * 0.5


def test_processes_compiling_the_same_graph_at_once(tmp_path):
    import time

    env = {k: v for k, v in os.environ.items() if k != "DUALGRAPH_DISABLE_DISK_CACHE"}
    env["DUALGRAPH_CACHE_DIR"] = str(tmp_path)
    start = time.time() + 2.5  # after every child has imported Numba
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(start)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    for r in reports:
        dg.testing.assert_close(r["out"], _expected_child(), rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)
    assert len({r["path"] for r in reports}) == 1
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []  # no leftovers
    # What they left behind is a good cache: a later process loads it.
    after = subprocess.run([sys.executable, "-c", CHILD, "0"], env=env, capture_output=True,
                           text=True, timeout=180)
    assert after.returncode == 0, after.stderr
    report = json.loads(after.stdout.strip().splitlines()[-1])
    dg.testing.assert_close(report["out"], _expected_child(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    assert report["hits"] == 1
    assert "Warning" not in after.stderr, after.stderr


def test_in_memory_cache_is_a_bounded_lru(monkeypatch):
    monkeypatch.setattr(kernel_cache, "_KERNELS", OrderedDict())
    monkeypatch.setattr(kernel_cache, "MAX_KERNELS", 3)
    monkeypatch.setenv("DUALGRAPH_DISABLE_DISK_CACHE", "1")  # lowering only: no Numba compile
    consts = [1.0 + uuid.uuid4().int % 10**6 / 10**7 + k for k in range(5)]
    graphs = [dg.trace(lambda x, c=c: x * c, dg.tensor(X)) for c in consts]
    kernels = [build(g) for g in graphs[:3]]
    assert len(kernel_cache._KERNELS) == 3
    assert build(graphs[0]).fn is kernels[0].fn  # a hit, and now the most recent
    dead = weakref.ref(kernels[1].fn)
    del kernels[1]
    build(graphs[3])
    build(graphs[4])
    assert len(kernel_cache._KERNELS) == 3
    assert build(graphs[0]).fn is kernels[0].fn  # recently used: kept
    gc.collect()  # a kernel module and its function form a reference cycle
    assert dead() is None  # evicted and unreferenced: freed (not held by sys.modules)
    # Kernels still in use keep working after their cache entry was evicted.
    k2 = kernels[1]  # graph 2, evicted by now
    k2.compile([X])
    dg.testing.assert_close(k2(X)[0], X * consts[2], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)


def test_compiled_function_called_from_several_threads():
    c = 1.0 + uuid.uuid4().int % 10**6 / 10**7

    def f(x, y):
        return (dg.tanh(x * c) * y).sum(axis=1)

    compiled = dg.compile(f)
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((8, 5)), rng.standard_normal(5)) for _ in range(8)]
    errors: list = []
    barrier = threading.Barrier(4)

    def worker(k: int) -> None:
        try:
            barrier.wait()  # the first calls race: one compiles, the others wait for it
            for i in range(50):
                x, y = data[(k + i) % len(data)]
                out = compiled(dg.tensor(x), dg.tensor(y)).numpy()
                dg.testing.assert_close(out, (np.tanh(x * c) * y).sum(axis=1), rtol=1e-12, atol=0,
                                        equal_nan=True, check_dtype=False)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert compiled.stats.traces == 1 and compiled.stats.kernels == 1


def test_gradients_from_several_threads():
    w = dg.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    compiled = dg.compile(lambda x: (dg.sigmoid(x * w) ** 2).sum())
    compiled(dg.tensor(np.ones(3), requires_grad=True))  # compile once
    results: dict = {}

    def worker(k: int) -> None:
        x = np.full(3, 0.1 * (k + 1))
        xt = dg.tensor(x, requires_grad=True)
        compiled(xt).backward()
        results[k] = xt.grad.numpy()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wv = w.numpy()
    for k, g in results.items():
        x = np.full(3, 0.1 * (k + 1))
        s = 1 / (1 + np.exp(-x * wv))
        dg.testing.assert_close(g, 2 * s * s * (1 - s) * wv, rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)
    assert len(results) == 6 and compiled.stats.traces == 1
    assert compiled.stats.cache_hits == 6


def test_tracing_in_one_thread_leaves_eager_ops_of_another_alone():
    """The mode stack and grad mode are per thread: ops another thread runs while a trace
    (or a ``no_grad`` block) is open stay eager and keep recording the tape."""
    import time

    inside = threading.Event()

    def slow(x):
        y = x * 2.0
        inside.set()
        time.sleep(0.3)  # the eager thread runs its ops now
        return y + 1.0

    graph: list = []
    tracer = threading.Thread(target=lambda: graph.append(dg.trace(slow, dg.tensor(X))))
    tracer.start()
    inside.wait(5)
    seen = []
    t = dg.tensor(X, requires_grad=True)
    while tracer.is_alive():
        y = (t * 3.0).sum()
        seen.append((type(y).__name__, y.requires_grad, y.item()))
    tracer.join()
    assert [n.op for n in graph[0].nodes] == ["mul", "add"]
    assert seen and all(s == ("Tensor", True, pytest.approx(3 * X.sum())) for s in seen)

    quiet = threading.Event()
    done = threading.Event()

    def no_grad_thread():
        with dg.no_grad():
            quiet.set()
            done.wait(5)

    other = threading.Thread(target=no_grad_thread)
    other.start()
    quiet.wait(5)
    try:
        assert dg.is_grad_enabled()
        assert (t * 2.0).requires_grad
    finally:
        done.set()
        other.join()
