"""Cases of `tests/distributions/test_porting_distributions.py`, written once for torch and
dualgraph (``lib`` is either module): each returns named float64 values that do not depend
on the random stream (log-probabilities, entropies, moments, CDFs) and whose gradients with
respect to the parameters are recorded too. `record_porting_goldens.py` records torch's."""

from __future__ import annotations

import numpy as np

_LOGITS = np.array([[0.3, -1.2, 0.8, 0.1], [1.5, 0.2, -0.4, -2.0]])
_SIMPLEX = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.15, 0.05]])
_POS = np.array([0.4, 1.3, 2.2, 5.0])


def _relaxed(lib, logits, temp):
    D = lib.distributions
    d = D.RelaxedOneHotCategorical(temp, logits=logits)
    e = D.relaxed_categorical.ExpRelaxedCategorical(temp, logits=logits)
    x = lib.tensor(_SIMPLEX)
    return {"log_prob": d.log_prob(x), "exp_log_prob": e.log_prob(x.log()),
            "probs": d.probs}


def _straight_through(lib, logits):
    d = lib.distributions.OneHotCategoricalStraightThrough(logits=logits)
    v = lib.tensor(np.eye(4)[[2, 0]])
    return {"log_prob": d.log_prob(v), "entropy": d.entropy(), "mean": d.mean}


def _half_cauchy(lib, scale):
    d = lib.distributions.HalfCauchy(scale)
    v = lib.tensor(_POS)
    return {"log_prob": d.log_prob(v), "cdf": d.cdf(v), "entropy": d.entropy(),
            "icdf": d.icdf(lib.tensor(np.array([0.1, 0.5, 0.7, 0.95])))}


def _weibull(lib, scale, k):
    d = lib.distributions.Weibull(scale, k)
    v = lib.tensor(_POS)
    return {"log_prob": d.log_prob(v), "cdf": d.cdf(v), "entropy": d.entropy(),
            "mean": d.mean, "variance": d.variance, "mode": d.mode}


def _pareto(lib, scale, alpha):
    d = lib.distributions.Pareto(scale, alpha)
    v = lib.tensor(_POS) + 1.0
    return {"log_prob": d.log_prob(v), "cdf": d.cdf(v), "entropy": d.entropy(),
            "mean": d.mean, "variance": d.variance,
            "icdf": d.icdf(lib.tensor(np.array([0.1, 0.5, 0.7, 0.95])))}


CASES = [
    ("relaxed_one_hot", _relaxed, [_LOGITS, np.array(0.7)]),
    ("relaxed_one_hot-hot", _relaxed, [_LOGITS * 3, np.array(2.5)]),
    ("one_hot_straight_through", _straight_through, [_LOGITS]),
    ("half_cauchy", _half_cauchy, [np.array([0.5, 1.0, 2.0, 3.0])]),
    ("weibull", _weibull, [np.array([0.8, 1.0, 2.0, 3.0]), np.array([0.7, 1.5, 2.0, 3.5])]),
    ("pareto", _pareto, [np.array([0.5, 1.0, 1.2, 2.0]), np.array([0.8, 1.5, 2.5, 4.0])]),
]


def run(lib, i: int) -> dict:
    """Case ``i``'s values and the gradient of their weighted sum for each parameter."""
    _, fn, params = CASES[i]
    args = [lib.tensor(p.copy(), requires_grad=True) for p in params]
    values = fn(lib, *args)
    total = 0
    for k, name in enumerate(sorted(values)):
        v = values[name]
        finite = v.detach().isfinite()
        total = total + (lib.where(finite, v, 0.0) * (k + 1.5)).sum()
    total.backward()
    out = {name: v.detach().numpy() for name, v in values.items()}
    for k, a in enumerate(args):
        out[f"grad{k}"] = np.zeros(a.shape) if a.grad is None else a.grad.numpy()
    return out
