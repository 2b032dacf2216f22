"""`RelaxedOneHotCategorical`, `ExpRelaxedCategorical`, `OneHotCategoricalStraightThrough`,
`HalfCauchy`, `Weibull` and `Pareto`: values and parameter gradients equal torch's (float64
goldens from record_porting_goldens.py); draws have the right shapes, support and
reparameterised gradients; they run inside `dg.compile`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from .._support.recording import assert_case_matches
from .porting_cases import CASES, run

GOLD = np.load(Path(__file__).with_name("porting_goldens.npz"))
NAMES = [c[0] for c in CASES]
D = dg.distributions


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_matches_torch(i: int) -> None:
    name = NAMES[i]
    assert_case_matches(run(dg, i), GOLD, name, rtol=1e-9, atol=1e-11, equal_nan=True)


def test_draws_have_shapes_support_and_gradients():
    dg.manual_seed(0)
    logits = dg.tensor([[0.3, -1.2, 0.8], [1.5, 0.2, -0.4]], requires_grad=True)
    r = D.RelaxedOneHotCategorical(dg.tensor(0.5), logits=logits).rsample((5,))
    assert r.shape == (5, 2, 3) and (r > 0).all().item()
    assert_close(r.sum(-1), dg.ones(5, 2), rtol=1e-6, atol=1e-6)
    r.pow(2).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum().item() > 0
    logits.grad = None
    st = D.OneHotCategoricalStraightThrough(logits=logits).rsample((4,))
    assert st.shape == (4, 2, 3) and set(st.detach().numpy().ravel().tolist()) <= {0.0, 1.0}
    (st * dg.tensor([1.0, 2.0, 3.0])).sum().backward()
    probs = dg.softmax(logits.detach(), -1)
    # the gradient is the probabilities' (draws count 4 times, one row of weights)
    expect = 4 * probs * (dg.tensor([1.0, 2.0, 3.0]) - (probs * dg.tensor([1.0, 2.0, 3.0]))
                          .sum(-1, keepdim=True))
    assert_close(logits.grad, expect, rtol=1e-5, atol=1e-6)
    scale = dg.tensor([0.5, 2.0], requires_grad=True)
    for d, low in [(D.HalfCauchy(scale), 0.0), (D.Weibull(scale, dg.tensor([1.5, 0.8])), 0.0),
                   (D.Pareto(scale, dg.tensor([2.0, 3.0])), None)]:
        x = d.rsample((1000,))
        assert x.shape == (1000, 2)
        lo = scale.detach() if low is None else dg.zeros(2)
        assert (x >= lo).all().item()
        x.mean().backward()
        assert scale.grad.abs().sum().item() > 0
        scale.grad = None


def test_weibull_sample_mean_and_top_level_transforms():
    dg.manual_seed(1)
    d = D.Weibull(dg.tensor(2.0), dg.tensor(1.5))
    assert abs(d.sample((20000,)).mean().item() - d.mean.item()) < 0.05
    t = D.ComposeTransform([D.AffineTransform(1.0, 2.0), D.TanhTransform()])
    base = D.Normal(dg.zeros(2), dg.ones(2))
    squashed = D.TransformedDistribution(base, t)
    assert squashed.rsample((3,)).abs().max().item() < 1.0
    assert D.relaxed_categorical.RelaxedOneHotCategorical is D.RelaxedOneHotCategorical


def test_log_probs_compile():
    def f(logits, scale, x):
        return (D.RelaxedOneHotCategorical(dg.tensor(0.7), logits=logits).log_prob(x).sum()
                + D.Weibull(scale, scale + 1).log_prob(x[0]).sum()
                + D.Pareto(scale, scale * 2).log_prob(x[0] + 3).sum()
                + D.HalfCauchy(scale).log_prob(x[0]).sum())

    c = dg.compile(f, tiered=False)
    args = (dg.tensor([[0.3, -1.2, 0.8], [1.5, 0.2, -0.4]], requires_grad=True),
            dg.tensor([0.5, 1.0, 2.0], requires_grad=True),
            dg.tensor([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]]))
    e, k = f(*args), c(*args)
    assert_close(k, e, rtol=1e-5, atol=1e-5)
    ge = dg.grad(e, args[:2])
    gk = dg.grad(k, args[:2])
    for a, b in zip(gk, ge):
        assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert c.stats.traces == 1
