"""`dg.optim.swa_utils`: the averages `AveragedModel` keeps, SWALR's schedule and
`update_bn`'s statistics (the program comparison with torch is
tests/programs/written/swa.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.optim.swa_utils import (
    SWALR,
    AveragedModel,
    get_ema_avg_fn,
    get_ema_multi_avg_fn,
    update_bn,
)
from dualgraph.testing import assert_close


def _snapshots(model: dg.nn.Module, n: int) -> list:
    out = []
    for k in range(n):
        with dg.no_grad():
            for p in model.parameters():
                p.add_(0.5 * (k + 1))
        out.append([p.detach().clone() for p in model.parameters()])
    return out


def test_averaged_model_keeps_the_running_mean_and_emas() -> None:
    dg.manual_seed(0)
    model = dg.nn.Linear(3, 2)
    swa = AveragedModel(model)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.8))
    ema1 = AveragedModel(model, avg_fn=get_ema_avg_fn(0.8))
    snaps = []
    for s in _snapshots(model, 4):
        with dg.no_grad():
            for p, v in zip(model.parameters(), s):
                p.copy_(v)
        for m in (swa, ema, ema1):
            m.update_parameters(model)
        snaps.append(s)
    assert int(swa.n_averaged) == 4
    for i, p in enumerate(swa.module.parameters()):
        assert_close(p, sum(s[i] for s in snaps) / 4, rtol=1e-6, atol=1e-6)
    for i, (p, q) in enumerate(zip(ema.module.parameters(), ema1.module.parameters())):
        want = snaps[0][i]
        for s in snaps[1:]:
            want = 0.8 * want + 0.2 * s[i]
        assert_close(p, want, rtol=1e-6, atol=1e-6)
        assert_close(q, want, rtol=1e-6, atol=1e-6)
    assert_close(swa(dg.ones(1, 3)), swa.module(dg.ones(1, 3)))
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        AveragedModel(model, avg_fn=get_ema_avg_fn(), multi_avg_fn=get_ema_multi_avg_fn())
    with pytest.raises(ValueError, match="Invalid decay value"):
        get_ema_multi_avg_fn(1.5)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_swalr_anneals_to_swa_lr(strategy: str) -> None:
    p = dg.nn.Parameter(dg.zeros(1))
    opt = dg.optim.SGD([p], lr=1.0)
    sched = SWALR(opt, swa_lr=0.1, anneal_epochs=4, anneal_strategy=strategy)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(6):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])

    def f(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2 if strategy == "cos" else t

    want = [1.0]
    for step in range(1, 7):
        t = min(1, step / 4)
        want.append(0.1 * f(t) + 1.0 * (1 - f(t)))
    assert np.allclose(lrs, want)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        SWALR(opt, swa_lr=0.1, anneal_strategy="step")


def test_update_bn_recomputes_the_statistics() -> None:
    model = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.BatchNorm1d(3))
    rng = np.random.default_rng(0)
    data = [dg.tensor(rng.standard_normal((4, 2)).astype(np.float32)) for _ in range(3)]
    model.eval()
    update_bn([(d, 0) for d in data], model)
    assert not model.training
    bn = model[1]
    assert bn.momentum == 0.1
    with dg.no_grad():
        h = [model[0](d) for d in data]
    assert_close(bn.running_mean, sum(x.mean(0) for x in h) / 3, rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, sum(x.var(0) for x in h) / 3, rtol=1e-5, atol=1e-6)
