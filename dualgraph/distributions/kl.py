"""`kl_divergence(p, q)`: closed forms for pairs of distributions, found by type, and
`register_kl` to add one, as ``torch.distributions.kl``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..nn.functional import softplus
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .continuous import Laplace
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Exponential, Gamma
from .independent import Independent, _sum_rightmost
from .multivariate_normal import MultivariateNormal, kl_mvn_mvn
from .normal import Normal, Uniform

__all__ = ["kl_divergence", "register_kl"]

_KL: dict[tuple[type, type], Callable] = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """Decorator: ``@register_kl(P, Q)`` makes the function ``kl_divergence``'s rule for
    a ``P`` against a ``Q`` (and their subclasses, the most specific rule winning)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)
            and isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_p and type_q to be subclasses of Distribution, but "
                        f"got {type_p} and {type_q}")

    def decorator(fn: Callable) -> Callable:
        _KL[type_p, type_q] = fn
        return fn

    return decorator


def _dispatch(type_p: type, type_q: type) -> Callable | None:
    best, rank = None, None
    for (p, q), fn in _KL.items():
        if issubclass(type_p, p) and issubclass(type_q, q):
            r = (type_p.__mro__.index(p), type_q.__mro__.index(q))
            if rank is None or r < rank:
                best, rank = fn, r
    return best


def kl_divergence(p: Distribution, q: Distribution) -> Any:
    """``KL(p || q)``, batched over the distributions' batch shapes.

    >>> p = dg.distributions.Normal(0.0, 1.0); q = dg.distributions.Normal(1.0, 2.0)
    >>> round(dg.distributions.kl_divergence(p, q).item(), 4)
    0.4431
    """
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


_INF = math.inf


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Any:
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill((q.probs == 0).expand_as(t), _INF)
    t = t.masked_fill((p.probs == 0).expand_as(t), 0.0)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p: OneHotCategorical, q: OneHotCategorical) -> Any:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Any:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = t1.masked_fill((q.probs == 0).expand_as(t1), _INF)
    t1 = t1.masked_fill((p.probs == 0).expand_as(t1), 0.0)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = t2.masked_fill((q.probs == 1).expand_as(t2), _INF)
    t2 = t2.masked_fill((p.probs == 1).expand_as(t2), 0.0)
    return t1 + t2


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Any:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Any:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low).logical_or(q.high < p.high)
    return result.masked_fill(outside, _INF)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> Any:
    width = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / width).log()
    t2 = width.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Any:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


register_kl(MultivariateNormal, MultivariateNormal)(kl_mvn_mvn)


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Any:
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    t5 = (sum_q - sum_p) * sum_p.digamma()
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Any:
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Any:
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Any:
    ratio = q.rate / p.rate
    return -ratio.log() + ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Any:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1
