"""`Multinomial`: log_prob against values recorded from torch 2.13
(``torch.distributions.Multinomial(...).log_prob``), shapes, sampling, gradients (float64
finite differences), compiled log_prob and errors."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.distributions import Multinomial
from dualgraph.testing import assert_close

P = np.array([[0.2, 0.3, 0.5], [0.0, 0.4, 0.6]])
V = np.array([[1.0, 2.0, 1.0], [0.0, 3.0, 1.0]])
TORCH_PROBS = [-2.2256240518579173, -1.873403458268565]
TORCH_LOGITS = [-2.1119302999222014]


def test_log_prob_matches_torch():
    d = Multinomial(4, probs=dg.tensor(P))
    dg.testing.assert_close(d.log_prob(dg.tensor(V)).numpy(), TORCH_PROBS, rtol=1e-12, atol=0,
                            check_dtype=False)
    d = Multinomial(4, logits=dg.tensor(np.log(P[:1] + 0.1)))
    dg.testing.assert_close(d.log_prob(dg.tensor(V[:1])).numpy(), TORCH_LOGITS, rtol=1e-12, atol=0,
                            check_dtype=False)


def test_shapes_moments_and_samples():
    d = Multinomial(10, probs=dg.tensor(P))
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    assert_close(d.mean, dg.tensor(P * 10))
    assert_close(d.variance, dg.tensor(10 * P * (1 - P)))
    dg.manual_seed(0)
    s = d.sample((2000,)).numpy()
    assert s.shape == (2000, 2, 3) and (s.sum(-1) == 10).all() and (s[:, 1, 0] == 0).all()
    dg.testing.assert_close(s.mean(0), P * 10, atol=0.15, rtol=1e-7, check_dtype=False)


def test_log_prob_gradient_and_compiled():
    def f(logits):
        return Multinomial(4, logits=logits).log_prob(dg.tensor(V)).sum()

    x = dg.tensor(np.log(P + 0.1)).requires_grad_(True)
    assert dg.autograd.gradcheck(f, (x,))
    assert_close(dg.compile(f)(x.detach()), f(x.detach()))


def test_errors():
    with pytest.raises(NotImplementedError, match="total_count"):
        Multinomial(dg.tensor([2.0, 3.0]), probs=dg.tensor(P))
    with pytest.raises(ValueError, match="summing to total_count"):
        Multinomial(4, probs=dg.tensor(P)).log_prob(dg.tensor([[1.0, 1.0, 1.0]] * 2))
