"""Shared setup for the comparison-product tests: one kernel cache directory for the run.

``dg.compare``, the ``dualgraph`` command and the pass ablation all compile with Numba
(about a second per kernel), so, as in ``tests/compile``, the kernels go to a directory that
survives between runs (``.pytest_cache/dualgraph-kernels`` in the repository) and a rerun
loads them from Numba's on-disk cache. ``DUALGRAPH_TEST_CACHE_DIR`` picks another directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(
    os.environ.get("DUALGRAPH_TEST_CACHE_DIR") or ROOT / ".pytest_cache" / "dualgraph-kernels"
)


@pytest.fixture(scope="package", autouse=True)
def kernel_cache_dir() -> Iterator[Path]:
    """Point the kernel cache (and subprocesses started by the tests) at the test directory."""
    keys = ("DUALGRAPH_CACHE_DIR", "DUALGRAPH_DISABLE_DISK_CACHE")
    saved = {k: os.environ.get(k) for k in keys}
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["DUALGRAPH_CACHE_DIR"] = str(CACHE_DIR)
    os.environ.pop("DUALGRAPH_DISABLE_DISK_CACHE", None)
    yield CACHE_DIR
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
