"""Tiered compiles of a step split into parts: the worker compiles the parts (in
parallel, in helper processes, when allowed two jobs) and the caller loads them."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.compile import tiered as tiers

from .._support.compiled import adam_mlp_step


def test_worker_compiles_a_split_step_and_the_caller_loads_its_parts(tiered, monkeypatch,
                                                                    tmp_path):
    from dualgraph.backend.numba import cache, worker

    # Set after the worker may have started: the job carries them.
    monkeypatch.setenv("DUALGRAPH_SEGMENT_LINES", "30")
    monkeypatch.setenv("DUALGRAPH_COMPILE_JOBS", "2")
    monkeypatch.setattr(worker, "PARALLEL_MIN_LINES", 0)  # this process's blocking side
    # As a fresh process: parts identical to another test's (every flat optimizer
    # update prints the same source) are then not found compiled in this one.
    with cache.isolated(str(tmp_path)):
        rng = np.random.default_rng(1)
        x = dg.tensor(rng.standard_normal((10, 8)).astype(np.float32))
        t = dg.tensor(rng.integers(0, 3, 10))
        net_e, step_e = adam_mlp_step()
        net_c, step_c = adam_mlp_step()
        f = dg.compile(step_c, tiered=True)
        dg.testing.assert_close(f(x, t).numpy(), step_e(x, t).numpy(), rtol=1e-5, atol=0,
                                equal_nan=True, check_dtype=False)
        assert tiers.wait(f, 600), f.stats.tier_failure
        (entry,) = f.entries()
        assert not entry.tier0 and len(entry.kernel.parts) > 1
        # Every part came from the disk cache the worker (and its helper) filled.
        assert entry.kernel.loaded_parts == len({d for d, _ in entry.kernel.dispatchers()})
        for _ in range(2):
            dg.testing.assert_close(f(x, t).numpy(), step_e(x, t).numpy(), rtol=1e-5, atol=0,
                                    equal_nan=True, check_dtype=False)
        for pe, pc in zip(net_e.parameters(), net_c.parameters()):
            dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-4, atol=1e-6,
                                    equal_nan=True, check_dtype=False)
