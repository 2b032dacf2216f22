"""Kernels compiled at a chosen LLVM optimisation level: the level is part of the kernel's
module (its own source file and disk cache entry, so code made at one level is never
loaded for another), Numba compiles at it, and the answers are the same."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import DEFAULT_OPT, build, cache, llvm_opt
from dualgraph.ir.interpret import interpret
from dualgraph.passes import optimize


def _graph():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7))

    def f(x):
        return (dg.tanh(x * 2.0 + 1.0) * x).sum(axis=1)

    return optimize(dg.trace(f, dg.tensor(x))), x


def test_optimisation_sets_numbas_level_only_inside_the_block():
    from numba.core import config

    before = int(config.OPT)
    with cache.optimisation(1):
        assert int(config.OPT) == 1
    assert int(config.OPT) == before
    with cache.optimisation(None):
        assert int(config.OPT) == before


def test_a_level_is_its_own_module_and_compiles_at_that_level(tmp_path, monkeypatch):
    g, x = _graph()
    levels = []
    real = cache.optimisation

    def spy(level):
        levels.append(level)
        return real(level)

    monkeypatch.setattr(cache, "optimisation", spy)
    with cache.isolated(str(tmp_path)):
        full = build(g)
        quick = build(g, opt=1)
        assert quick.source != full.source and quick.path != full.path
        assert "# LLVM optimisation level 1" in quick.source
        assert quick.fn is not full.fn
        quick.compile([x])
        full.compile([x])
        (want,) = interpret(g, x)
        dg.testing.assert_close(quick(x)[0], want, rtol=1e-12, atol=0,
                                equal_nan=True, check_dtype=False)
        dg.testing.assert_close(full(x)[0], want, rtol=1e-12, atol=0,
                                equal_nan=True, check_dtype=False)
    # Compiling the level-1 kernel asked for level 1, the other for the default level.
    assert 1 in levels and llvm_opt() in levels


@pytest.mark.parametrize("value, numba_opt, level", [
    ("1", "", 1), ("3", "", 3), ("0", "", DEFAULT_OPT), ("", "", DEFAULT_OPT),
    ("fast", "", DEFAULT_OPT), ("", "3", None), ("1", "3", 1)])
def test_the_level_comes_from_dualgraph_llvm_opt(tmp_path, monkeypatch, value, numba_opt,
                                                 level):
    monkeypatch.setenv("DUALGRAPH_LLVM_OPT", value)
    if numba_opt:
        monkeypatch.setenv("NUMBA_OPT", numba_opt)  # the user chose Numba's level
    else:
        monkeypatch.delenv("NUMBA_OPT", raising=False)
    assert llvm_opt() == level
    g, _ = _graph()
    with cache.isolated(str(tmp_path)):
        k = build(g)
    assert k.fn._dg_opt == level
    assert ("# LLVM optimisation level" in k.source) == (level is not None)


def test_the_tiered_worker_compiles_at_the_callers_level(tiered, monkeypatch, tmp_path):
    from dualgraph.compile import tiered as tiers

    # Set after the worker may have started: the job carries it.
    monkeypatch.setenv("DUALGRAPH_LLVM_OPT", "1")
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    x = dg.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4))
    f = dg.compile(lambda x: (dg.tanh(x * 3.0) * x).sum(axis=0), tiered=True)
    want = (np.tanh(x.numpy() * 3.0) * x.numpy()).sum(axis=0)
    dg.testing.assert_close(f(x).numpy(), want, rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
    assert tiers.wait(f, 600), f.stats.tier_failure
    (entry,) = f.entries()
    assert not entry.tier0
    # The caller loaded the worker's level-1 code from the disk cache.
    assert entry.kernel.fn._dg_opt == 1 and "# LLVM optimisation level 1" in entry.kernel.source
    assert cache.hits_misses(entry.kernel.fn)[0] >= 1
    dg.testing.assert_close(f(x).numpy(), want, rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
