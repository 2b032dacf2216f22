"""Adam's eager update computes its bias corrections once for the parameters that share a
step count, learning rate, betas and dtype, and gives the bits of the update written
with tensor ops for every mix of groups, hyperparameters and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager import internal
from dualgraph.optim import adam as adam_module
from dualgraph.testing import assert_close

_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _params():
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (4,), (5,), (2, 3)]
    dtypes = [np.float32, np.float32, np.float64, np.float32]
    return [dg.tensor(rng.standard_normal(s).astype(d), requires_grad=True)
            for s, d in zip(shapes, dtypes)]


def _train(fast: bool, cls, steps: int = 4) -> list:
    ps = _params()
    groups = [{"params": ps[:2]},
              {"params": ps[2:3], "lr": 0.05, "betas": (0.8, 0.99)},
              {"params": ps[3:], "lr": 0.05}]  # the first group's betas, another lr
    opt = cls(groups, lr=0.01)
    real = adam_module.adam_update_
    if not fast:
        adam_module.adam_update_ = lambda *a, **k: False
    try:
        for i in range(steps):
            opt.zero_grad()
            loss = sum(((p * (i + 1.5)) ** 2).sum().double() for p in ps)
            loss.backward()
            opt.step()
    finally:
        adam_module.adam_update_ = real
    return [p.detach().numpy().copy() for p in ps]


@pytest.mark.parametrize("cls", [dg.optim.Adam, dg.optim.AdamW])
def test_shared_corrections_give_the_op_forms_bits(cls):
    fast = _train(True, cls)
    slow = _train(False, cls)
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype
        assert_close(a.view(_INT[a.itemsize]), b.view(_INT[b.itemsize]))


def test_corrections_are_computed_once_per_shared_step(monkeypatch):
    calls = []
    real = np.power

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    ps = [dg.tensor(np.ones(3, np.float32), requires_grad=True) for _ in range(5)]
    opt = dg.optim.Adam(ps, lr=0.1)
    for p in ps:
        p.grad = dg.tensor(np.full(3, 0.5, np.float32))
    monkeypatch.setattr(internal.np, "power", counted)
    opt.step()
    assert len(calls) == 2  # beta1 ** step and beta2 ** step, once for the five
