"""Distributions built the same way with torch and dualgraph (``lib`` is either), for
test_distributions.py; record_goldens.py records torch's values and gradients.

A case is ``(name, make(lib, *params) -> distribution, params, value)``: ``params`` are
float64 arrays that require grad (or ``("const", array)``), ``value`` the argument of
``log_prob``. A KL case is ``(name, make_p, make_q, params)``.
"""

from __future__ import annotations

import numpy as np

R = np.random.default_rng(7)
PROBS = R.uniform(0.1, 1.0, (2, 3))
LOGITS = R.standard_normal((2, 3))
BIN = R.uniform(0.1, 0.9, (4,))
LOC, SCALE = R.standard_normal((3,)), R.uniform(0.5, 2.0, (3,))
LOW, HIGH = R.uniform(-2, -1, (3,)), R.uniform(1, 2, (3,))


def _D(lib):  # noqa: N802
    return lib.distributions


CASES = [
    ("categorical-probs", lambda lib, p: _D(lib).Categorical(probs=p), [PROBS],
     np.array([[0, 2], [1, 1], [2, 0]])),
    ("categorical-logits", lambda lib, lg: _D(lib).Categorical(logits=lg), [LOGITS],
     np.array([1, 0])),
    ("onehot-logits", lambda lib, lg: _D(lib).OneHotCategorical(logits=lg), [LOGITS],
     np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])),
    ("bernoulli-probs", lambda lib, p: _D(lib).Bernoulli(probs=p), [BIN],
     np.array([1.0, 0.0, 1.0, 1.0])),
    ("bernoulli-logits", lambda lib, lg: _D(lib).Bernoulli(logits=lg), [LOGITS],
     np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])),
    ("normal", lambda lib, m, s: _D(lib).Normal(m, s), [LOC, SCALE],
     R.standard_normal((2, 3))),
    ("normal-scalar-scale", lambda lib, m: _D(lib).Normal(m, 0.7), [LOC],
     R.standard_normal((3,))),
    ("uniform", lambda lib, lo, hi: _D(lib).Uniform(lo, hi), [LOW, HIGH],
     R.uniform(-0.9, 0.9, (2, 3))),
    ("independent-normal", lambda lib, m, s: _D(lib).Independent(_D(lib).Normal(m, s), 1),
     [LOC, SCALE], R.standard_normal((2, 3))),
]

KL = [
    ("categorical", lambda lib, a, b: _D(lib).Categorical(probs=a),
     lambda lib, a, b: _D(lib).Categorical(logits=b), [PROBS, LOGITS]),
    ("onehot", lambda lib, a, b: _D(lib).OneHotCategorical(probs=a),
     lambda lib, a, b: _D(lib).OneHotCategorical(probs=b), [PROBS, PROBS[::-1].copy()]),
    ("bernoulli", lambda lib, a, b: _D(lib).Bernoulli(probs=a),
     lambda lib, a, b: _D(lib).Bernoulli(logits=b), [BIN, R.standard_normal((4,))]),
    ("normal", lambda lib, a, b: _D(lib).Normal(a, b),
     lambda lib, a, b: _D(lib).Normal(b, a * a + 0.5), [LOC, SCALE]),
    ("uniform", lambda lib, a, b: _D(lib).Uniform(a, b),
     lambda lib, a, b: _D(lib).Uniform(a - 0.5, b + 1.0), [LOW, HIGH]),
    ("uniform-normal", lambda lib, a, b: _D(lib).Uniform(a, b),
     lambda lib, a, b: _D(lib).Normal(b, b - a), [LOW, HIGH]),
    ("independent", lambda lib, a, b: _D(lib).Independent(_D(lib).Bernoulli(probs=a), 1),
     lambda lib, a, b: _D(lib).Independent(_D(lib).Bernoulli(logits=b), 1),
     [BIN, R.standard_normal((4,))]),
]

PROPERTIES = ("mean", "variance", "stddev")


def run(lib, i: int) -> dict:
    """Case ``i``: log_prob, entropy, mean, variance (and cdf where defined), and the
    gradient of ``log_prob.sum() + entropy.sum()`` w.r.t. each parameter."""
    _, make, params, value = CASES[i]
    ts = [lib.tensor(p, requires_grad=True) for p in params]
    d = make(lib, *ts)
    out = {}
    lp = d.log_prob(lib.tensor(value))
    ent = d.entropy()
    out["log_prob"], out["entropy"] = lp.detach().numpy(), ent.detach().numpy()
    for name in PROPERTIES:
        out[name] = getattr(d, name).detach().numpy()
    if isinstance(d, (lib.distributions.Normal, lib.distributions.Uniform)):
        out["cdf"] = d.cdf(lib.tensor(value)).detach().numpy()
    (lp.sum() + ent.sum()).backward()
    for k, t in enumerate(ts):
        out[f"grad{k}"] = t.grad.numpy()
    return out


def run_kl(lib, i: int) -> dict:
    _, make_p, make_q, params = KL[i]
    ts = [lib.tensor(p, requires_grad=True) for p in params]
    kl = _D(lib).kl_divergence(make_p(lib, *ts), make_q(lib, *ts))
    (kl * lib.tensor(np.linspace(0.5, 1.5, kl.numel()).reshape(tuple(kl.shape)))).sum() \
        .backward()
    out = {"kl": kl.detach().numpy()}
    for k, t in enumerate(ts):
        out[f"grad{k}"] = t.grad.numpy()
    return out


# ------------------------------------------------------------ multivariate normal
# (their own generator, so the draws above keep their values)
_MVN = np.random.default_rng(11)
MLOC, MA, MB = (_MVN.standard_normal((2, 3)), _MVN.standard_normal((3, 3)),
                _MVN.standard_normal((2, 3, 3)))


def _spd(lib, a):
    return a @ a.mT + 0.5 * lib.eye(3, dtype=a.dtype)


def _tril(lib, a):
    return a.tril(-1) + lib.diag_embed(a.diagonal(0, -2, -1).exp())


CASES += [
    ("mvn-covariance", lambda lib, m, a: _D(lib).MultivariateNormal(
        m, covariance_matrix=_spd(lib, a)), [MLOC, MA], _MVN.standard_normal((4, 2, 3))),
    ("mvn-scale-tril", lambda lib, m, b: _D(lib).MultivariateNormal(
        m, scale_tril=_tril(lib, b)), [MLOC, MB], _MVN.standard_normal((2, 3))),
    ("mvn-precision", lambda lib, m, a: _D(lib).MultivariateNormal(
        m[0], precision_matrix=_spd(lib, a)), [MLOC, MA], _MVN.standard_normal((3,))),
]
KL += [
    ("mvn", lambda lib, m, a, b: _D(lib).MultivariateNormal(m, covariance_matrix=_spd(lib, a)),
     lambda lib, m, a, b: _D(lib).MultivariateNormal(m.flip(0) * 0.5, scale_tril=_tril(lib, b)),
     [MLOC, MA, MB]),
]


# ------------------------------------------------------------ the gamma family and others
# (their own generator, so the draws above keep their values)
_G = np.random.default_rng(13)
CONC, RATE = _G.uniform(0.5, 3.0, (2, 3)), _G.uniform(0.5, 2.0, (2, 3))
UNIT = _G.uniform(0.05, 0.95, (2, 3))
POS = _G.uniform(0.1, 3.0, (2, 3))
SIMPLEX = _G.dirichlet(np.ones(4), 2)
CASES += [
    ("gamma", lambda lib, c, r: _D(lib).Gamma(c, r), [CONC, RATE], POS),
    ("chi2", lambda lib, c: _D(lib).Chi2(c), [CONC], POS),
    ("exponential", lambda lib, r: _D(lib).Exponential(r), [RATE], POS),
    ("beta", lambda lib, a, b: _D(lib).Beta(a, b), [CONC, RATE], UNIT),
    ("dirichlet", lambda lib, c: _D(lib).Dirichlet(c), [_G.uniform(0.5, 3.0, (2, 4))],
     SIMPLEX),
    ("laplace", lambda lib, m, s: _D(lib).Laplace(m, s), [LOC, SCALE],
     _G.standard_normal((2, 3))),
    ("lognormal", lambda lib, m, s: _D(lib).LogNormal(m, s), [LOC, SCALE], POS),
    ("halfnormal", lambda lib, s: _D(lib).HalfNormal(s), [SCALE], POS),
    ("gumbel", lambda lib, m, s: _D(lib).Gumbel(m, s), [LOC, SCALE],
     _G.standard_normal((2, 3))),
    ("geometric-probs", lambda lib, p: _D(lib).Geometric(probs=p), [UNIT],
     np.floor(POS * 2)),
    ("geometric-logits", lambda lib, lg: _D(lib).Geometric(logits=lg), [LOGITS],
     np.floor(POS * 2)),
]
KL += [
    ("gamma", lambda lib, a, b: _D(lib).Gamma(a, b),
     lambda lib, a, b: _D(lib).Gamma(b, a + 0.5), [CONC, RATE]),
    ("beta", lambda lib, a, b: _D(lib).Beta(a, b),
     lambda lib, a, b: _D(lib).Beta(b + 0.2, a), [CONC, RATE]),
    ("dirichlet", lambda lib, a, b: _D(lib).Dirichlet(a),
     lambda lib, a, b: _D(lib).Dirichlet(b), [CONC, RATE]),
    ("exponential", lambda lib, a, b: _D(lib).Exponential(a),
     lambda lib, a, b: _D(lib).Exponential(b), [CONC, RATE]),
    ("laplace", lambda lib, a, b: _D(lib).Laplace(a, b),
     lambda lib, a, b: _D(lib).Laplace(b, a), [CONC, RATE]),
]

_M = np.random.default_rng(17)
CASES += [
    ("studentt", lambda lib, d, m, s: _D(lib).StudentT(d, m, s),
     [_M.uniform(2.5, 6.0, (3,)), LOC, SCALE], _M.standard_normal((2, 3))),
    ("binomial-probs", lambda lib, p: _D(lib).Binomial(5, probs=p), [BIN],
     np.array([0.0, 2.0, 5.0, 3.0])),
]
KL += []
MIX_LOGITS, MIX_LOC, MIX_SCALE = (_M.standard_normal((2, 3)), _M.standard_normal((2, 3)),
                                  _M.uniform(0.5, 1.5, (2, 3)))
MIX_VALUE = _M.standard_normal((4, 2))


def run_mixture(lib) -> dict:
    """A Gaussian mixture (the mixture density network's head): log_prob, mean, variance
    and the gradient of the log-likelihood w.r.t. each parameter."""
    ts = [lib.tensor(p, requires_grad=True) for p in (MIX_LOGITS, MIX_LOC, MIX_SCALE)]
    d = _D(lib).MixtureSameFamily(_D(lib).Categorical(logits=ts[0]),
                                  _D(lib).Normal(ts[1], ts[2]))
    lp = d.log_prob(lib.tensor(MIX_VALUE))
    out = {"log_prob": lp.detach().numpy(), "mean": d.mean.detach().numpy(),
           "variance": d.variance.detach().numpy()}
    lp.sum().backward()
    for k, t in enumerate(ts):
        out[f"grad{k}"] = t.grad.numpy()
    return out
