"""Shared setup for the whole suite: one kernel cache directory for the run.

Numba compiles cost about a second each, so the kernels the tests build go to a directory
that survives between runs (``.pytest_cache/dualgraph-kernels`` in the repository): a rerun
loads them from Numba's on-disk cache instead of compiling again. Set
``DUALGRAPH_TEST_CACHE_DIR`` to use another directory (an empty one measures a cold run).
The variable is set in the environment, so subprocesses started by tests use it too.

Compiles are blocking (``DUALGRAPH_TIERED=0``): a test that counts kernels or times calls
must not depend on when a background worker finishes. Tests of tiered execution opt in
with the ``tiered`` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(
    os.environ.get("DUALGRAPH_TEST_CACHE_DIR") or ROOT / ".pytest_cache" / "dualgraph-kernels"
)


@pytest.fixture(scope="session", autouse=True)
def kernel_cache_dir() -> Iterator[Path]:
    """Point the kernel cache at the persistent test directory; a user's
    ``DUALGRAPH_DISABLE_DISK_CACHE`` or ``DUALGRAPH_VERIFY`` must not change what the
    tests measure."""
    keys = ("DUALGRAPH_CACHE_DIR", "DUALGRAPH_DISABLE_DISK_CACHE", "DUALGRAPH_VERIFY",
            "DUALGRAPH_TIERED")
    saved = {k: os.environ.get(k) for k in keys}
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["DUALGRAPH_CACHE_DIR"] = str(CACHE_DIR)
    os.environ["DUALGRAPH_TIERED"] = "0"
    os.environ.pop("DUALGRAPH_DISABLE_DISK_CACHE", None)
    os.environ.pop("DUALGRAPH_VERIFY", None)
    yield CACHE_DIR
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def tiered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Opt in to tiered compiles (the suite compiles blocking)."""
    monkeypatch.setenv("DUALGRAPH_TIERED", "1")
    yield
