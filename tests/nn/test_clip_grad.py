"""`dg.nn.utils` gradient clipping against torch's numbers (surface_goldens.json), eager and
inside a compiled training step; parameters to and from one vector."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg

GOLD = json.loads(Path(__file__).with_name("surface_goldens.json").read_text())


def _params(grads: list) -> list:
    ps = [dg.nn.Parameter(dg.zeros(*np.shape(g))) for g in grads]
    for p, g in zip(ps, grads):
        p.grad = dg.tensor(np.asarray(g, np.float32))
    return ps


@pytest.mark.parametrize("case", GOLD["clip"], ids=lambda c: f"{c['max_norm']}-{c['norm_type']}")
def test_clip_grad_norm_equals_torch(case) -> None:
    ps = _params(case["grads"])
    total = dg.nn.utils.clip_grad_norm_(ps, case["max_norm"], float(case["norm_type"]))
    assert total.shape == () and total.dtype == np.float32
    dg.testing.assert_close(float(total), case["total"], rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    for p, want in zip(ps, case["clipped"]):
        dg.testing.assert_close(p.grad.numpy(), np.asarray(want, np.float32), rtol=1e-6, atol=0,
                                equal_nan=True, check_dtype=False)


def test_clip_grad_value_equals_torch() -> None:
    case = GOLD["clip_value"]
    ps = _params(case["grads"])
    assert dg.nn.utils.clip_grad_value_(ps, 0.5) is None
    for p, want in zip(ps, case["clipped"]):
        np.testing.assert_array_equal(p.grad.numpy(), np.asarray(want, np.float32))


def test_clip_skips_missing_grads_and_checks_finite() -> None:
    a, b = dg.nn.Parameter(dg.ones(2)), dg.nn.Parameter(dg.ones(2))
    a.grad = dg.tensor([3.0, 4.0])
    assert float(dg.nn.utils.clip_grad_norm_([a, b], 1.0)) == 5.0 and b.grad is None
    assert float(dg.nn.utils.clip_grad_norm_(b, 1.0)) == 0.0
    a.grad = dg.tensor([np.inf, 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        dg.nn.utils.clip_grad_norm_([a], 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_inside_a_compiled_training_step() -> None:
    """loss.backward(); clip_grad_norm_; opt.step() as one compiled call: one trace, the
    same parameters as eager over 5 steps, and the returned norm as eager's."""
    def make():
        dg.manual_seed(0)
        return dg.nn.Sequential(dg.nn.Linear(3, 8), dg.nn.Tanh(), dg.nn.Linear(8, 1))

    rng = np.random.default_rng(0)
    xs = [dg.tensor(rng.standard_normal((4, 3)).astype(np.float32)) for _ in range(5)]

    def train(compiled: bool) -> tuple:
        net = make()
        opt = dg.optim.SGD(net.parameters(), lr=0.5)

        def step(x):
            opt.zero_grad()
            loss = (net(x) ** 2).mean() * 50
            loss.backward()
            norm = dg.nn.utils.clip_grad_norm_(net.parameters(), 0.1)
            opt.step()
            return loss, norm

        run = dg.compile(step) if compiled else step
        norms = [float(run(x)[1]) for x in xs]
        if compiled:
            assert run.stats.traces == 1
        return norms, [p.numpy().copy() for p in net.parameters()]

    results = [train(False), train(True)]
    (en, ep), (cn, cp) = results
    dg.testing.assert_close(cn, en, rtol=1e-5, atol=0, equal_nan=True, check_dtype=False)
    assert max(en) > 0.1  # the clipping did something
    for a, b in zip(cp, ep):
        dg.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, equal_nan=True, check_dtype=False)


def test_parameters_to_vector_and_back() -> None:
    lin = dg.nn.Linear(3, 2)
    v = dg.nn.utils.parameters_to_vector(lin.parameters())
    np.testing.assert_array_equal(v.numpy(), np.concatenate([lin.weight.numpy().ravel(),
                                                             lin.bias.numpy()]))
    dg.nn.utils.vector_to_parameters(dg.arange(8.0), lin.parameters())
    np.testing.assert_array_equal(lin.bias.numpy(), [6.0, 7.0])
    with pytest.raises(RuntimeError, match="has 3 elements"):
        dg.nn.utils.vector_to_parameters(dg.ones(3), lin.parameters())
