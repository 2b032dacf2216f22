"""The kernel cache runs no one else's code, and evicted kernels are freed.

Each attack plants a file (or a directory) the way someone with write access to the cache
directory could, then compiles the matching graph and checks that nothing planted ran, the
result is right, and the cache heals. Every test has its own cache directory (``tmp_path``)
and a graph no other test compiles (a unique baked constant); to make a second compile in
this process go to the disk, a test "forgets" the kernel (drops it from the in-memory cache
and its module from ``sys.modules``).
"""

from __future__ import annotations

import gc
import importlib._bootstrap_external as bootstrap
import importlib.util
import os
import pickle
import stat
import sys
import uuid
import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import cache as kernel_cache

from .._support.compiled import compile_and_check, forget_kernel

X = np.linspace(-1.0, 1.0, 6)


def _fresh_fn():
    """A function with a graph nobody compiled yet, and its expected result on X."""
    c = 1.0 + uuid.uuid4().int % 10**6 / 10**7

    def f(x):
        return dg.tanh(x * c) - 0.5

    return f, np.tanh(X * c) - 0.5


def _forget(path: str) -> None:
    forget_kernel(path)


def _compile(f, expected: np.ndarray) -> tuple:
    return compile_and_check(f, X, expected)


def _numba_hits(kernel) -> int:
    return sum(kernel.fn.stats.cache_hits.values())


def _numba_files(d: Path) -> list[Path]:
    return sorted(p for p in (d / "__pycache__").iterdir() if p.suffix in (".nbi", ".nbc"))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(d))
    monkeypatch.delenv("DUALGRAPH_DISABLE_DISK_CACHE", raising=False)
    return d


def test_cache_is_created_private(cache_dir):
    f, expected = _fresh_fn()
    kernel, msgs = _compile(f, expected)
    assert not msgs
    assert Path(kernel.path).parent == cache_dir
    for d in (cache_dir, cache_dir / "__pycache__"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    files = [p for p in cache_dir.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} >= {".py", ".nbi", ".nbc"}
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def _timestamp_pyc(code_text: str, source: Path) -> bytes:
    """Bytecode whose header matches ``source`` (its mtime and size) but runs ``code_text``:
    what Python's import system would accept in place of the source."""
    st = source.stat()
    code = compile(code_text, str(source), "exec")
    return bytes(bootstrap._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size))


def test_planted_pyc_never_runs(cache_dir):
    f, expected = _fresh_fn()
    kernel, _ = _compile(f, expected)
    marker = cache_dir.parent / "pwned"
    pyc = Path(importlib.util.cache_from_source(kernel.path))
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(_timestamp_pyc(
        f"open({str(marker)!r}, 'w').write('planted bytecode ran')\n"
        "def kernel(*args):\n    pass\n", Path(kernel.path)))
    _forget(kernel.path)
    kernel2, msgs = _compile(f, expected)
    assert not marker.exists(), "a planted .pyc ran"
    assert not pyc.exists()
    assert any("removed the bytecode file" in m for m in msgs), msgs
    assert _numba_hits(kernel2) == 1  # the machine code cache is still good


def test_damaged_pyc_is_dropped_with_a_warning(cache_dir):
    f, expected = _fresh_fn()
    kernel, _ = _compile(f, expected)
    pyc = Path(importlib.util.cache_from_source(kernel.path))
    pyc.parent.mkdir(exist_ok=True)
    good = _timestamp_pyc("x = 1\n", Path(kernel.path))
    pyc.write_bytes(good[:16] + b"\xff\x00 not marshal data")  # right header, bad body
    _forget(kernel.path)
    _, msgs = _compile(f, expected)
    assert not pyc.exists()
    assert any("removed the bytecode file" in m for m in msgs), msgs
    _forget(kernel.path)
    _, msgs = _compile(f, expected)  # healed: no warning the next time
    assert not msgs


class _Plant:
    """Unpickling this runs ``open(marker, 'w')``: what a malicious cache file would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_planted_numba_pickle_is_never_unpickled(cache_dir, suffix):
    f, expected = _fresh_fn()
    kernel, _ = _compile(f, expected)
    marker = cache_dir.parent / "pwned"
    (target,) = [p for p in _numba_files(cache_dir) if p.suffix == suffix]
    # Numba's own formats: the index starts with a pickled version, the data is a pickle.
    target.write_bytes(pickle.dumps(_Plant(marker)) + pickle.dumps(("stamp", {})))
    _forget(kernel.path)
    kernel2, msgs = _compile(f, expected)
    assert not marker.exists(), f"a planted {suffix} was unpickled"
    assert any("failed its integrity check" in m and "removed it" in m for m in msgs), msgs
    assert _numba_hits(kernel2) == 0  # compiled again
    _forget(kernel.path)
    kernel3, msgs = _compile(f, expected)  # the rebuilt files are signed and used
    assert not msgs and _numba_hits(kernel3) == 1


def test_genuine_numba_file_under_another_name_is_refused(cache_dir):
    """The MAC covers the file's name: one kernel's signed machine code copied over
    another's would otherwise run as the wrong function."""
    f, expected = _fresh_fn()
    g, g_expected = _fresh_fn()
    kf, _ = _compile(f, expected)
    kg, _ = _compile(g, g_expected)
    data_f = [p for p in _numba_files(cache_dir) if p.name.startswith(Path(kf.path).stem)]
    data_g = [p for p in _numba_files(cache_dir) if p.name.startswith(Path(kg.path).stem)]
    for src, dst in zip(sorted(data_f), sorted(data_g)):
        dst.write_bytes(src.read_bytes())
    _forget(kg.path)
    kg2, msgs = _compile(g, g_expected)  # checks g's result, not f's
    assert any("failed its integrity check" in m for m in msgs), msgs
    assert _numba_hits(kg2) == 0


@pytest.mark.parametrize("how", ["group_writable", "other_writable", "foreign_owner"])
def test_untrusted_directory_is_refused_with_one_warning(cache_dir, monkeypatch, how):
    cache_dir.mkdir(mode=0o700)
    if how == "foreign_owner":
        # Owned by someone else: simulated by being someone else.
        real_uid = os.getuid()
        monkeypatch.setattr(kernel_cache.os, "getuid", lambda: real_uid + 1)
        reason = "owned by uid"
    else:
        cache_dir.chmod(0o770 if how == "group_writable" else 0o707)
        reason = "writable by group or others"
    planted = cache_dir / "planted.txt"
    planted.write_text("")
    f, expected = _fresh_fn()
    kernel, msgs = _compile(f, expected)
    assert kernel.path is None  # compiled in memory
    refusals = [m for m in msgs if "refusing the kernel cache directory" in m]
    assert len(refusals) == 1 and str(cache_dir) in refusals[0] and reason in refusals[0]
    assert sorted(p.name for p in cache_dir.iterdir()) == ["planted.txt"]  # nothing written
    g, g_expected = _fresh_fn()
    kernel, msgs = _compile(g, g_expected)
    assert kernel.path is None
    assert not [m for m in msgs if "refusing" in m]  # once per directory and reason


def test_untrusted_key_file_is_refused(cache_dir):
    cache_dir.mkdir(mode=0o700)
    key = cache_dir / "cache-key"
    key.write_bytes(os.urandom(32))  # a key others could read (0644): maybe theirs
    key.chmod(0o644)
    f, expected = _fresh_fn()
    kernel, msgs = _compile(f, expected)
    assert kernel.path is None
    assert any("refusing" in m and "key file" in m for m in msgs), msgs


def test_damaged_key_is_replaced_and_files_rebuilt(cache_dir):
    f, expected = _fresh_fn()
    kernel, _ = _compile(f, expected)
    key = cache_dir / "cache-key"
    old = key.read_bytes()
    key.write_bytes(b"short")
    _forget(kernel.path)
    kernel2, msgs = _compile(f, expected)
    assert any("cache key" in m and "damaged" in m for m in msgs), msgs
    assert len(key.read_bytes()) == 32 and key.read_bytes() != old
    assert _numba_hits(kernel2) == 0  # signed with the old key: rejected, compiled again


def _tmp_files(d: Path) -> list[str]:
    return [p.name for p in d.rglob("*") if ".tmp" in p.name]


def test_failed_kernel_write_leaves_no_temporary(cache_dir, monkeypatch):
    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kernel_cache.os, "replace", fail)
    f, expected = _fresh_fn()
    kernel, msgs = _compile(f, expected)
    assert kernel.path is None
    assert any("disk cache unavailable" in m for m in msgs), msgs
    assert _tmp_files(cache_dir) == []


def test_failed_numba_write_leaves_no_temporary(cache_dir, monkeypatch):
    real_replace = os.replace

    def fail_in_pycache(src, dst):
        if "__pycache__" in os.fspath(dst):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(kernel_cache.os, "replace", fail_in_pycache)
    f, expected = _fresh_fn()
    kernel, msgs = _compile(f, expected)
    assert kernel.path is not None  # the source was written; only Numba's files failed
    assert any("could not save Numba's cache" in m for m in msgs), msgs
    assert _tmp_files(cache_dir) == []
    assert _numba_files(cache_dir) == []


def _times(c: float):
    # ``c`` from a closure is a constant of the graph, so each value is a graph of its own
    # (a float argument, or a default, would be one input of one shared kernel).
    return lambda x: dg.tanh(x) * c


@pytest.mark.parametrize("disk", [True, False])
def test_evicted_kernels_are_freed(cache_dir, monkeypatch, disk):
    """With an in-memory limit of 4, compiling 12 graphs keeps at most 4 kernels alive: an
    evicted dispatcher, its compiled code library and its module are freed once no compiled
    function uses them (a 1,000-graph loop grew ~1.5 MB per graph without bound). Twice
    the limit evicted is enough to tell freed from kept, and each graph is a cold compile.
    Numba's own native memory per fresh compile is not ours to free: see docs/compile.md."""
    from numba.core.registry import cpu_target

    if not disk:
        monkeypatch.setenv("DUALGRAPH_DISABLE_DISK_CACHE", "1")
    monkeypatch.setattr(kernel_cache, "_KERNELS", OrderedDict())
    limit, graphs = 4, 12
    monkeypatch.setattr(kernel_cache, "MAX_KERNELS", limit)
    defns = cpu_target.target_context._defns  # Numba's registry of compiled functions
    gc.collect()
    defns_before = len(defns)
    alive: list[weakref.ref] = []
    base = 1.0 + uuid.uuid4().int % 10**6 / 10**7
    for k in range(graphs):
        c = base + k
        f = dg.compile(_times(c))
        dg.testing.assert_close(f(dg.tensor(X)).numpy(), np.tanh(X) * c, rtol=1e-12, atol=0,
                                equal_nan=True, check_dtype=False)
        alive.append(weakref.ref(f.entries()[0].kernel.fn))
        del f
    gc.collect()
    live = sum(r() is not None for r in alive)
    assert live <= limit, f"{live} of {graphs} kernels still alive with a limit of {limit}"
    assert len(defns) - defns_before <= limit
    modules = [m for m in sys.modules if m.startswith("dualgraph_kernels.")]
    assert sum(m.split("dg_")[-1] in kernel_cache._KERNELS for m in modules) <= limit
