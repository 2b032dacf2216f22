"""Memory: 10,000 training steps, eager and compiled, do not grow memory.

A TinyNet (2-3-1, batch 10) trains with SGD and momentum. After a warm-up (first-call
allocations, compilation, caches), 10,000 steps must not grow the resident set size
(``/proc/self/statm``; loose, the allocator keeps freed pages) nor the count of live Python
allocations (``sys.getallocatedblocks``, free to read); then ``tracemalloc``, which slows
every allocation, bounds the bytes that survive 2,000 more. A leaked tape (saved tensors
kept alive), a kernel or trace cached per call, or stats that grow per call would show up
as megabytes. The figures are printed.
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

import dualgraph as dg

STEPS = 10_000
TRACED_STEPS = 2_000  # tracemalloc slows every allocation ~5x: a shorter traced window
WARMUP = 300
# Growth allowed after warm-up. A leak of even one small object per step (a tape node is
# ~1 KB with its arrays) would exceed these many times over.
BLOCKS_BOUND = 2_000  # pymalloc blocks over STEPS (a leaked object is one or more)
TRACED_BOUND = 128 * 1024  # bytes over TRACED_STEPS
RSS_BOUND = 16 * 1024 * 1024  # the allocator keeps freed pages: loose


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _tiny_net() -> tuple:
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.Tanh(), dg.nn.Linear(3, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((10, 2)).astype(np.float32))
    y = dg.tensor((x.numpy()[:, :1] * 0.5 - x.numpy()[:, 1:] * 0.25).astype(np.float32))
    loss_fn = dg.nn.MSELoss()

    def step(xb, yb):
        opt.zero_grad()
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        return loss

    return net, step, x, y


def _measure(step: Callable, x, y) -> dict:
    losses = [step(x, y).item() for _ in range(WARMUP)]
    gc.collect()
    rss0, blocks0 = _rss(), sys.getallocatedblocks()
    for _ in range(STEPS):
        loss = step(x, y)
    del loss
    gc.collect()
    rss1, blocks1 = _rss(), sys.getallocatedblocks()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        for _ in range(TRACED_STEPS):
            loss = step(x, y)
        del loss
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"traced_growth": current - base, "traced_peak": peak - base,
            "blocks_growth": blocks1 - blocks0, "rss_before": rss0, "rss_after": rss1,
            "first_loss": losses[0], "last_loss": step(x, y).item()}


def _report(name: str, m: dict) -> str:
    return (f"{name}: {STEPS} steps: RSS {m['rss_before'] / 2**20:.1f} -> "
            f"{m['rss_after'] / 2**20:.1f} MiB, {m['blocks_growth']:+d} allocated blocks; "
            f"next {TRACED_STEPS} steps under tracemalloc: growth "
            f"{m['traced_growth'] / 1024:.1f} KiB (peak {m['traced_peak'] / 1024:.1f} KiB)")


def _check(name: str, m: dict) -> None:
    assert m["last_loss"] < m["first_loss"]  # it trained
    assert m["blocks_growth"] < BLOCKS_BOUND, _report(name, m)
    assert m["traced_growth"] < TRACED_BOUND, _report(name, m)
    assert m["rss_after"] - m["rss_before"] < RSS_BOUND, _report(name, m)


def test_eager_training_does_not_grow_memory(capsys):
    net, step, x, y = _tiny_net()
    m = _measure(step, x, y)
    with capsys.disabled():
        print("\n" + _report("eager", m))
    _check("eager", m)
    assert all(p.grad_fn is None for p in net.parameters())


@pytest.mark.parametrize("how", ["whole_step", "forward_only"])
def test_compiled_training_does_not_grow_memory(capsys, how):
    net, step, x, y = _tiny_net()
    if how == "whole_step":
        compiled = dg.compile(step)  # one compiled call per step, optimizer included
        run = compiled
    else:
        fwd = dg.compile(net)  # compiled forward and backward, eager loss and optimizer
        opt = dg.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        loss_fn = dg.nn.MSELoss()

        def run(xb, yb):
            opt.zero_grad()
            loss = loss_fn(fwd(xb), yb)
            loss.backward()
            opt.step()
            return loss

        compiled = fwd
    m = _measure(run, x, y)
    with capsys.disabled():
        print("\n" + _report(f"compiled ({how})", m))
    _check(f"compiled ({how})", m)
    stats = compiled.stats
    assert stats.traces == 1 and stats.cache_hits == stats.calls - 1  # no cache growth
    assert len(compiled.entries() if hasattr(compiled, "entries")
               else compiled.compiled.entries()) == 1
