"""``dg.distributions.transforms`` and `TransformedDistribution`: log_prob against goldens
recorded from PyTorch (tests/distributions/record_transform_goldens.py), shapes, inverses,
float64 gradient checks, a compiled log_prob and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.distributions as D
from dualgraph.distributions import transforms as T
from tests.distributions.transform_cases import LOC, SCALE, VALUE, run

GOLD = np.load(Path(__file__).with_name("transform_goldens.npz"))


def test_log_prob_matches_torch():
    got = run(dg, D)
    assert sorted(got) == sorted(GOLD.files)
    for k, v in got.items():
        dg.testing.assert_close(v.numpy(), GOLD[k], rtol=1e-12, atol=1e-12, msg=k)


def test_shapes_samples_and_inverses():
    base = D.Normal(dg.zeros(3, dtype=dg.float64), dg.ones(3, dtype=dg.float64))
    d = D.TransformedDistribution(base, [T.AffineTransform(1.0, 2.0), T.TanhTransform()])
    assert d.batch_shape == (3,) and d.event_shape == () and d.has_rsample
    s = d.rsample((5,))
    assert tuple(s.shape) == (5, 3) and float(s.abs().max()) < 1.0
    ev = D.TransformedDistribution(base, T.AffineTransform(0.0, 2.0, event_dim=1))
    assert ev.batch_shape == () and ev.event_shape == (3,)
    x = dg.tensor(np.linspace(-2, 2, 5))
    for t in (T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(),
              T.AffineTransform(0.5, -3.0), T.ComposeTransform([T.ExpTransform(),
                                                                 T.AffineTransform(1.0, 2.0)])):
        dg.testing.assert_close(t.inv(t(x)).numpy(), x.numpy(), atol=1e-12, rtol=1e-7,
                                check_dtype=False)
        dg.testing.assert_close(t.inv.log_abs_det_jacobian(t(x), x).numpy(),
                                   -t.log_abs_det_jacobian(x, t(x)).numpy(),
                                   atol=1e-12, rtol=1e-7, check_dtype=False)
    assert T.AffineTransform(0.0, -2.0).sign == -1


def test_log_prob_gradients_float64():
    def f(loc, scale):
        return sum(v.sum() for v in run(dg, D, loc, scale).values())

    loc = dg.tensor(LOC).requires_grad_(True)
    scale = dg.tensor(SCALE).requires_grad_(True)
    assert dg.autograd.gradcheck(f, (loc, scale))


def test_compiled_log_prob_matches_eager():
    value = dg.tensor(VALUE)

    def lp(loc, scale):
        d = D.TransformedDistribution(D.Normal(loc, scale),
                                      [T.AffineTransform(0.5, -2.0), T.SigmoidTransform()])
        return d.log_prob(value).sum()

    args = (dg.tensor(LOC), dg.tensor(SCALE))
    dg.testing.assert_close(float(dg.compile(lp)(*args)), float(lp(*args)), rtol=1e-12, atol=0,
                            check_dtype=False)


def test_bad_input():
    base = D.Normal(0.0, 1.0)
    with pytest.raises(ValueError, match="Transform"):
        D.TransformedDistribution(base, [lambda x: x])
    with pytest.raises(TypeError, match="Distribution"):
        D.TransformedDistribution("normal", [T.ExpTransform()])
    with pytest.raises(TypeError, match="Transform objects"):
        T.ComposeTransform([T.ExpTransform(), 3])


def test_relaxed_bernoulli_matches_torch_and_differentiates():
    # torch 2.13: RelaxedBernoulli(0.7, probs=[0.3, 0.9]).log_prob([0.2, 0.95]) and
    # RelaxedBernoulli([0.5, 2.0], logits=[-1.0, 0.5]).log_prob([0.6, 0.1]) in float64.
    d = D.RelaxedBernoulli(dg.tensor(0.7, dtype=dg.float64),
                           probs=dg.tensor([0.3, 0.9], dtype=dg.float64))
    dg.testing.assert_close(d.log_prob(dg.tensor(np.array([0.2, 0.95]))).numpy(),
                               [0.08582564215194544, 1.299427855054356], rtol=1e-12,
                               atol=0, check_dtype=False)
    d = D.RelaxedBernoulli(dg.tensor(np.array([0.5, 2.0])), logits=dg.tensor(np.array([-1.0, 0.5])))
    dg.testing.assert_close(d.log_prob(dg.tensor(np.array([0.6, 0.1]))).numpy(),
                               [-0.994064604228976, -1.8082766388400273], rtol=1e-12,
                               atol=0, check_dtype=False)
    s = d.rsample((50,))
    assert tuple(s.shape) == (50, 2) and float(s.min()) > 0 and float(s.max()) < 1

    def lp(logits, temperature):
        value = dg.tensor(np.array([0.6, 0.1]))
        return D.RelaxedBernoulli(temperature, logits=logits).log_prob(value)

    args = (dg.tensor(np.array([-1.0, 0.5])).requires_grad_(True),
            dg.tensor(np.array([0.5, 2.0])).requires_grad_(True))
    assert dg.autograd.gradcheck(lp, args)
