"""The on-disk kernel cache: reused by a second process, self-healing, and switchable off.

These tests use their own cache directories (pytest's ``tmp_path``), never the shared test
cache, and separate processes where the in-memory cache would hide the disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import cache as kernel_cache

# Compiles one small function and reports what the kernel cache did, as JSON.
CHILD = """
import json, sys
import numpy as np
import dualgraph as dg

f = dg.compile(lambda x, y: dg.tanh(x * y + 0.25).sum(axis=0))
x = dg.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4))
y = dg.tensor(np.linspace(0.5, 2.0, 12).reshape(3, 4))
out = f(x, y)
(entry,) = f.entries()
stats = entry.kernel.fn.stats
print(json.dumps({
    "path": entry.kernel.path,
    "numba_seconds": f.stats.numba_seconds,
    "numba_cache_hits": sum(stats.cache_hits.values()),
    "numba_cache_misses": sum(stats.cache_misses.values()),
    "out": out.numpy().tolist(),
}))
"""


def _expected() -> np.ndarray:
    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    y = np.linspace(0.5, 2.0, 12).reshape(3, 4)
    return np.tanh(x * y + 0.25).sum(axis=0)


def _child(cache_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DUALGRAPH_DISABLE_DISK_CACHE"}
    env["DUALGRAPH_CACHE_DIR"] = str(cache_dir)
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    dg.testing.assert_close(report["out"], _expected(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    return report


def _kernel_files(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("dg_*.py"))


def test_second_process_reuses_the_disk_cache(tmp_path):
    first = _child(tmp_path)
    path = Path(first["path"])
    assert path.parent == tmp_path and path.name.startswith("dg_")
    assert _kernel_files(tmp_path) == [path]
    assert first["numba_cache_misses"] == 1 and first["numba_cache_hits"] == 0
    # Numba stored the machine code beside the module (index + data files).
    cached = {p.suffix for p in (tmp_path / "__pycache__").iterdir()}
    assert {".nbi", ".nbc"} <= cached, cached
    source = path.read_text()

    second = _child(tmp_path)
    assert second["path"] == first["path"]
    assert second["numba_cache_hits"] == 1 and second["numba_cache_misses"] == 0
    assert path.read_text() == source  # not rewritten


def test_corrupted_cache_file_is_rewritten_not_imported(tmp_path):
    first = _child(tmp_path)
    path = Path(first["path"])
    good = path.read_text()
    marker = tmp_path / "imported.txt"
    # Valid Python, so that importing it would succeed and leave a trace.
    path.write_text(f"open({str(marker)!r}, 'w').write('imported')\n"
                    "def forward(*args):\n    return 0\ndef kernel(*args):\n    return 0\n")
    _child(tmp_path)  # checks the result too
    assert not marker.exists(), "the corrupted kernel file was imported"
    assert path.read_text() == good
    # Unreadable bytes are handled the same way.
    path.write_bytes(b"\xff\xfe\x00garbage")
    _child(tmp_path)
    assert path.read_text() == good


@pytest.fixture
def fresh_graph_fn():
    """A function whose graph no test has compiled in this process (a unique baked
    constant), so that the in-memory kernel cache cannot answer for the disk."""
    c = 1.0 + uuid.uuid4().int % 10**6 / 10**7

    def f(x):
        return x * c + 1.0

    return f, c


def test_disable_env_writes_no_file(tmp_path, monkeypatch, fresh_graph_fn):
    f, c = fresh_graph_fn
    x = dg.tensor(np.arange(4.0))
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DUALGRAPH_DISABLE_DISK_CACHE", "1")
    assert not kernel_cache.disk_cache_enabled()
    compiled = dg.compile(f)
    dg.testing.assert_close(compiled(x).numpy(), np.arange(4.0) * c + 1.0, rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    assert compiled.stats.kernels == 1
    assert compiled.entries()[0].kernel.path is None
    assert "cache=False" in compiled.entries()[0].kernel.source
    assert list(tmp_path.iterdir()) == []
    # The control: the same function with the disk cache on writes its file here.
    monkeypatch.delenv("DUALGRAPH_DISABLE_DISK_CACHE")
    on = dg.compile(f)
    on(x)
    assert len(_kernel_files(tmp_path)) == 1
    assert on.entries()[0].kernel.path == str(_kernel_files(tmp_path)[0])


def test_cache_false_writes_no_file(tmp_path, monkeypatch, fresh_graph_fn):
    f, c = fresh_graph_fn
    x = dg.tensor(np.arange(4.0))
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    compiled = dg.compile(f, cache=False)
    dg.testing.assert_close(compiled(x).numpy(), np.arange(4.0) * c + 1.0, rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    assert compiled.stats.kernels == 1
    assert compiled.entries()[0].kernel.path is None
    assert list(tmp_path.iterdir()) == []
