"""Draws of the gamma family and the other new distributions (their log_prob, entropy,
moments and KL divergences are compared with torch in test_distributions.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from .cases import run_mixture
from .test_distributions import GOLD

D = dg.distributions


def test_gamma_rsample_has_the_implicit_gradient() -> None:
    dg.manual_seed(0)
    c = dg.tensor([2.0, 0.7], dtype=dg.float64, requires_grad=True)
    rate = dg.tensor([1.0, 2.0], dtype=dg.float64, requires_grad=True)
    x = D.Gamma(c, rate).rsample((40000,))
    x.mean(0).sum().backward()
    # E[x] = c / rate: d/dc = 1 / rate, d/drate = -c / rate**2
    assert_close(c.grad, 1 / rate.detach(), rtol=0.03, atol=0.0)
    assert_close(rate.grad, -c.detach() / rate.detach() ** 2, rtol=0.03, atol=0.0)
    assert_close(x.detach().mean(0), (c / rate).detach(), rtol=0.03, atol=0.0)


def test_dirichlet_and_beta_draws() -> None:
    dg.manual_seed(1)
    c = dg.tensor([2.0, 3.0, 1.0], dtype=dg.float64, requires_grad=True)
    s = D.Dirichlet(c).rsample((30000,))
    assert s.shape == (30000, 3)
    assert_close(s.detach().sum(-1), dg.ones(30000, dtype=dg.float64))
    s.mean(0)[0].backward()
    # E[s0] = c0 / sum(c)
    assert_close(c.grad, dg.tensor([4 / 36, -2 / 36, -2 / 36], dtype=dg.float64), atol=3e-3,
                 rtol=0.0)
    b = D.Beta(dg.tensor(2.0), dg.tensor(5.0)).sample((20000,))
    assert not b.requires_grad
    assert 0 < float(b.min()) and float(b.max()) < 1
    assert abs(float(b.mean()) - 2 / 7) < 0.01


@pytest.mark.parametrize("make, mean", [
    (lambda: D.Exponential(dg.tensor([2.0])), 0.5),
    (lambda: D.Laplace(dg.tensor([1.0]), dg.tensor([0.5])), 1.0),
    (lambda: D.LogNormal(dg.tensor([0.0]), dg.tensor([0.5])), float(np.exp(0.125))),
    (lambda: D.HalfNormal(dg.tensor([2.0])), 2.0 * float(np.sqrt(2 / np.pi))),
    (lambda: D.Gumbel(dg.tensor([1.0]), dg.tensor([2.0])), 1.0 + 2.0 * 0.5772156649),
    (lambda: D.Poisson(dg.tensor([3.0])), 3.0),
    (lambda: D.Geometric(probs=dg.tensor([0.25])), 3.0),
    (lambda: D.Chi2(dg.tensor([3.0])), 3.0),
])
def test_sample_means(make, mean: float) -> None:
    dg.manual_seed(2)
    x = make().sample((40000,))
    assert x.shape == (40000, 1)
    assert abs(float(x.mean()) - mean) < 0.05 * max(1.0, mean)


def test_gamma_draws_inside_compile_run_eagerly() -> None:
    def f(c):
        return D.Gamma(c, 1.0).rsample().sum()

    g = dg.compile(f)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = g(dg.tensor([2.0, 3.0]))
    assert any("gamma sampler" in str(x.message) for x in w)
    assert out.shape == () and float(out) > 0
    assert g.stats.traces == 0


def test_errors() -> None:
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(dg.tensor(1.0))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Geometric()
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Beta(dg.tensor(1.0), dg.tensor(1.0)), D.Gamma(dg.tensor(1.0),
                                                                       dg.tensor(1.0)))


def test_mixture_same_family_matches_torch() -> None:
    want = {k[len("mixture/"):]: GOLD[k] for k in GOLD.files if k.startswith("mixture/")}
    got = run_mixture(dg)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert_close(got[k], v, rtol=1e-10, atol=1e-12, msg=k)
    dg.manual_seed(0)
    m = D.MixtureSameFamily(D.Categorical(logits=dg.tensor([0.0, 0.0])),
                            D.Normal(dg.tensor([-5.0, 5.0]), dg.tensor([0.1, 0.1])))
    s = m.sample((2000,))
    assert s.shape == (2000,)
    assert float((s.abs() - 5).abs().max()) < 1.0
    assert abs(float(s.mean())) < 0.6
    with pytest.raises(ValueError, match="Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(dg.zeros(2), dg.ones(2)))


def test_student_t_and_binomial_draws() -> None:
    dg.manual_seed(4)
    t = D.StudentT(dg.tensor([5.0]), dg.tensor([1.0]), dg.tensor([2.0])).sample((40000,))
    assert abs(float(t.mean()) - 1.0) < 0.1
    b = D.Binomial(10, probs=dg.tensor([0.3])).sample((20000,))
    assert abs(float(b.mean()) - 3.0) < 0.1
    assert float(b.max()) <= 10
