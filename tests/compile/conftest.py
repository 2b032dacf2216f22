"""Running one scenario eagerly, compiled blocking and compiled tiered (`runner`)."""

from __future__ import annotations

import os

import pytest

import dualgraph as dg
from dualgraph.compile import tiered as tiering

TIMEOUT = 300.0  # bound on waiting for the worker (a loaded machine compiles slowly)
MODES = ["eager", "blocking", "tiered"]


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory):
    """A kernel cache of the module's own, so tiered entries really go through tier 0."""
    saved = os.environ.get("DUALGRAPH_CACHE_DIR")
    os.environ["DUALGRAPH_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    yield
    tiering.shutdown()
    if saved is None:
        os.environ.pop("DUALGRAPH_CACHE_DIR", None)
    else:
        os.environ["DUALGRAPH_CACHE_DIR"] = saved


class Runner:
    """Calls ``fn`` in one of the three modes. The tiered one waits after each call until
    the entry's kernels have swapped in, so later calls of a signature run compiled."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __call__(self, fn):
        if self.mode == "eager":
            return fn
        f = dg.compile(fn, tiered=self.mode == "tiered")
        if self.mode == "blocking":
            return f
        stats = f.stats

        def call(*args):
            out = f(*args)
            assert tiering.wait(f, TIMEOUT), stats.tier_failure
            return out

        call.stats = stats
        return call

    def twice(self, fn, *args):
        """``fn(*args)`` run twice through `__call__` (tiered: at tier 0, then at tier 1)."""
        f = self(fn)
        return f(*args), f(*args)


@pytest.fixture(params=MODES)
def runner(request, private_cache, monkeypatch):
    monkeypatch.setenv("DUALGRAPH_TIERED", "1" if request.param == "tiered" else "0")
    return Runner(request.param)


def traces(f) -> int:
    return getattr(getattr(f, "stats", None), "traces", 0)
