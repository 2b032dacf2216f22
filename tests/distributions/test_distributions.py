"""`dg.distributions` against torch.distributions: log_prob, entropy, moments, cdf, KL
divergences and their gradients equal torch's (float64 goldens from record_goldens.py);
samples have the right shapes and statistics, are reproducible with `dg.manual_seed`, and
``rsample`` differentiates; bad parameters and values raise torch's errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close, gradcheck

from .cases import CASES, KL, run, run_kl

GOLD = np.load(Path(__file__).with_name("goldens.npz"))
D = dg.distributions


def _want(prefix: str) -> dict:
    return {k[len(prefix) + 1:]: GOLD[k] for k in GOLD.files if k.startswith(prefix + "/")}


# The gamma family's gradients go through digamma's derivative (trigamma), which
# dualgraph and torch compute with different float64 approximations (~1e-8 apart).
TRIGAMMA = {"gamma", "chi2", "beta", "dirichlet", "studentt", "kl-gamma", "kl-beta",
            "kl-dirichlet"}


def _rtol(name: str, key: str) -> float:
    return 1e-7 if name in TRIGAMMA and key.startswith("grad") else 1e-10


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_matches_torch(i: int) -> None:
    want, got = _want(CASES[i][0]), run(dg, i)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert_close(got[k], v, rtol=_rtol(CASES[i][0], k), atol=1e-12, equal_nan=True, msg=k)


@pytest.mark.parametrize("i", range(len(KL)), ids=[c[0] for c in KL])
def test_kl_matches_torch(i: int) -> None:
    want, got = _want("kl-" + KL[i][0]), run_kl(dg, i)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert_close(got[k], v, rtol=_rtol("kl-" + KL[i][0], k), atol=1e-12, msg=k)


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_log_prob_and_entropy_gradients(i: int) -> None:
    _, make, params, value = CASES[i]

    def f(*ps):
        d = make(dg, *ps)
        return d.log_prob(dg.tensor(value)).sum() + d.entropy().sum()

    assert gradcheck(f, *params)


@pytest.mark.parametrize("i", range(len(KL)), ids=[c[0] for c in KL])
def test_kl_gradients(i: int) -> None:
    _, make_p, make_q, params = KL[i]
    assert gradcheck(lambda *ps: D.kl_divergence(make_p(dg, *ps), make_q(dg, *ps)), *params)


def test_sample_shapes_statistics_and_seeding() -> None:
    dg.manual_seed(0)
    cat = D.Categorical(probs=dg.tensor([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]))
    s = cat.sample((4000,))
    assert s.shape == (4000, 2) and s.dtype == dg.int64
    freq = np.stack([(s.numpy()[:, b, None] == np.arange(3)).mean(0) for b in range(2)])
    assert_close(freq, cat.probs.numpy(), atol=0.03, rtol=0, check_dtype=False)
    bern = D.Bernoulli(logits=dg.tensor([-1.0, 2.0]))
    assert_close(bern.sample((4000,)).mean(0), bern.probs, atol=0.03, rtol=0)
    normal = D.Normal(dg.tensor([1.0, -2.0]), dg.tensor([0.5, 2.0]))
    x = normal.sample((5000,)).numpy()
    assert x.shape == (5000, 2)
    assert_close(x.mean(0), np.array([1.0, -2.0]), atol=0.1, rtol=0, check_dtype=False)
    assert_close(x.std(0), np.array([0.5, 2.0]), atol=0.1, rtol=0, check_dtype=False)
    u = D.Uniform(dg.tensor(-1.0), dg.tensor(3.0)).sample((1000,)).numpy()
    assert u.min() >= -1 and u.max() < 3 and abs(u.mean() - 1) < 0.15
    onehot = D.OneHotCategorical(logits=dg.zeros(3, 4)).sample((5,))
    assert onehot.shape == (5, 3, 4) and (onehot.sum(-1).numpy() == 1).all()
    assert D.Categorical(logits=dg.zeros(4)).sample().shape == ()
    for make in (lambda: cat.sample((3,)), lambda: normal.sample((3,)),
                 lambda: bern.sample((3,))):
        dg.manual_seed(11)
        a = make()
        dg.manual_seed(11)
        assert_close(make(), a)


def test_rsample_differentiates_and_sample_does_not() -> None:
    loc = dg.tensor([0.5, -1.0], requires_grad=True)
    scale = dg.tensor([1.0, 2.0], requires_grad=True)
    d = D.Normal(loc, scale)
    dg.manual_seed(3)
    z = d.rsample((6,))
    z.sum().backward()
    assert_close(loc.grad, dg.full((2,), 6.0))
    dg.manual_seed(3)
    eps = (d.sample((6,)) - loc.detach()) / scale.detach()
    assert_close(scale.grad, eps.sum(0))
    assert not d.sample().requires_grad and D.Normal.has_rsample
    assert not D.Categorical.has_rsample
    with pytest.raises(NotImplementedError):
        D.Categorical(logits=dg.zeros(2)).rsample()


def test_errors_are_torchs() -> None:
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        D.Categorical()
    with pytest.raises(ValueError, match=r"Expected parameter scale .* GreaterThan"):
        D.Normal(dg.zeros(2), dg.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"Expected parameter probs .* Interval"):
        D.Bernoulli(probs=dg.tensor([1.5]))
    with pytest.raises(ValueError, match=r"within the support \(IntegerInterval"):
        D.Categorical(logits=dg.zeros(3)).log_prob(dg.tensor(3))
    with pytest.raises(ValueError, match="within the support"):
        D.Uniform(0.0, 1.0).log_prob(dg.tensor(2.0))
    with pytest.raises(ValueError, match="Value is not broadcastable"):
        D.Normal(dg.zeros(3), dg.ones(3)).log_prob(dg.zeros(2))
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(logits=dg.zeros(2)))
    # validate_args=False skips the checks, as in torch.
    assert D.Uniform(0.0, 1.0, validate_args=False).log_prob(dg.tensor(2.0)).item() == \
        -np.inf


def test_register_kl_adds_a_rule() -> None:
    class Wide(D.Normal):
        pass

    @D.register_kl(Wide, D.Normal)
    def _kl(p, q):
        return p.loc * 0 + 42.0

    assert D.kl_divergence(Wide(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 42.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0


def test_policy_gradient_step_compiles() -> None:
    """A REINFORCE-style loss (Categorical log_prob and entropy) plus a Normal's log_prob
    and a KL term, eager and compiled (compiled draws differ from eager ones, so no
    sampling here)."""
    dg.manual_seed(0)
    head = dg.nn.Linear(4, 3)
    x, actions, adv = dg.randn(5, 4), dg.tensor([0, 2, 1, 1, 0]), dg.randn(5)

    def step(x, actions, adv):
        logits = head(x)
        pi = D.Categorical(logits=logits)
        gauss = D.Normal(logits[:, 0], logits[:, 1].exp())
        prior = D.Normal(dg.zeros(5), dg.ones(5))
        loss = (-(pi.log_prob(actions) * adv).mean() - 0.01 * pi.entropy().mean()
                + D.kl_divergence(gauss, prior).mean() - gauss.log_prob(adv).mean())
        loss.backward()
        return loss

    def run(fn):
        dg.manual_seed(5)
        head.zero_grad()
        loss = fn(x, actions, adv)
        return loss, head.weight.grad.numpy().copy()

    want, gw = run(step)
    compiled = dg.compile(step, tiered=False)
    got, gc = run(compiled)
    assert compiled.stats.traces == 1
    assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_close(gc, gw, rtol=1e-4, atol=1e-5)
