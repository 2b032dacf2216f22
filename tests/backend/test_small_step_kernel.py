"""A small training step's call: its kernel allocates its small work arrays itself
(`codegen.LOCAL_WORK_BYTES`, through `kernels.empty`, with no NumPy function compiled),
since each array argument costs a call more than a small allocation in compiled code,
while larger ones stay work arrays the caller allocates once and passes; and the call
path writes the gradients back with no call of its own.

One compiled training step serves every check; the threshold's other side is checked by
lowering the same graph again (source only, no Numba compile).
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import codegen

from ..compile.test_step_call_counts import _calls


def _make():
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.Sigmoid(), dg.nn.Linear(3, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.1)

    def step(x, t):
        opt.zero_grad()
        loss = ((net(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return net, step


@pytest.fixture(scope="module")
def trained():
    (net_e, eager), (net_c, step) = _make(), _make()
    compiled = dg.compile(step, tiered=False)
    x = dg.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(10, 2))
    t = dg.tensor(np.linspace(0, 1, 10, dtype=np.float32).reshape(10, 1))
    losses = [(eager(x, t).item(), compiled(x, t).item()) for _ in range(4)]
    calls = _calls(lambda: compiled(x, t))
    eager(x, t)  # the same steps on both
    losses.append((eager(x, t).item(), compiled(x, t).item()))
    return compiled, losses, net_e, net_c, calls


def test_small_work_arrays_are_allocated_by_the_kernel(trained):
    compiled, _, _, _, _ = trained
    (entry,) = compiled.entries()
    kernel = entry.kernel
    assert kernel.lowered.scratch == []
    assert kernel.direct_call()[3] is None  # no pool of work arrays to take a set from
    assert "dgk.empty((10, 3), np.float32)" in kernel.source
    assert compiled.stats.traces == 1


def test_a_step_whose_kernel_allocates_its_work_arrays_matches_eager(trained):
    _, losses, net_e, net_c, _ = trained
    for e, c in losses:
        assert c == pytest.approx(e, rel=1e-5)
    for pe, pc in zip(net_e.parameters(), net_c.parameters()):
        dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-5, atol=1e-6)


def test_larger_work_arrays_are_still_passed_in(trained, monkeypatch):
    compiled, _, _, _, _ = trained
    (entry,) = compiled.entries()
    # 40 bytes: the (10, 1) and smaller buffers stay in the kernel, the (10, 3) ones not.
    monkeypatch.setattr(codegen, "LOCAL_WORK_BYTES", 40)
    low = codegen.lower(entry.kernel.graph)
    assert low.scratch and all(np.prod(s) * np.dtype(d).itemsize > 40 for s, d in low.scratch)
    assert "dgk.empty((10, 1), np.float32)" in low.source
    assert "dgk.empty((10, 3), np.float32)" not in low.source


def test_the_gradients_are_written_back_without_a_call(trained):
    calls = trained[4]
    # Four gradient tensors and the loss made inline (`object.__new__`), none through a
    # helper.
    assert "_set_new_grads" not in calls and "_make" not in calls, calls
    assert calls["object.__new__"] == 5, calls  # the four gradients and the loss
