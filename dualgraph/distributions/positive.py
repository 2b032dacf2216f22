"""`HalfCauchy`, `Weibull` and `Pareto`: distributions on the positive reals, with
PyTorch's parameters and formulas (reparameterised samples by the inverse CDF).

>>> Weibull(dg.tensor(2.0), dg.tensor(1.5)).log_prob(dg.tensor(1.0)).shape
()
"""

from __future__ import annotations

import math
from typing import Any

from ..eager.creation import rand
from ..ops import special as SP
from . import constraints
from .distribution import Distribution, broadcast_all, clamp_probs

__all__ = ["HalfCauchy", "Pareto", "Weibull"]

_EULER = 0.57721566490153286060


def _uniform(shape: tuple, like: Any) -> Any:
    """Uniform draws in (0, 1), both ends excluded (the inverse CDFs diverge there)."""
    return clamp_probs(rand(*shape, dtype=like.dtype))


class HalfCauchy(Distribution):
    """``|X|`` for ``X`` a zero-centred Cauchy with ``scale``."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        (self.scale,) = broadcast_all(scale)
        super().__init__(tuple(self.scale.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return self.scale * math.inf

    @property
    def mode(self) -> Any:
        return self.scale * 0

    @property
    def variance(self) -> Any:
        return self.scale * math.inf

    def rsample(self, sample_shape: Any = ()) -> Any:
        u = _uniform(self._extended_shape(sample_shape), self.scale)
        return self.scale * (u * (math.pi / 2)).tan()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        value = broadcast_all(value, self.scale)[0]
        lp = (math.log(2 / math.pi) - self.scale.log()
              - (value / self.scale).pow(2).log1p())
        return lp.masked_fill(value < 0, -math.inf)

    def cdf(self, value: Any) -> Any:
        return (value / self.scale).atan() * (2 / math.pi)

    def icdf(self, prob: Any) -> Any:
        return self.scale * (prob * (math.pi / 2)).tan()

    def entropy(self) -> Any:
        return (self.scale * (2 * math.pi)).log()


class Weibull(Distribution):
    """Weibull with ``scale`` (lambda) and ``concentration`` (k): density
    ``k / lambda (x / lambda)^(k - 1) exp(-(x / lambda)^k)``."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, scale: Any, concentration: Any,
                 validate_args: bool | None = None) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration)
        super().__init__(tuple(self.scale.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return self.scale * SP.lgamma(1 + self.concentration.reciprocal()).exp()

    @property
    def mode(self) -> Any:
        k = self.concentration
        return self.scale * ((k - 1) / k).pow(k.reciprocal())

    @property
    def variance(self) -> Any:
        inv = self.concentration.reciprocal()
        return self.scale.pow(2) * (SP.lgamma(1 + 2 * inv).exp()
                                    - SP.lgamma(1 + inv).exp().pow(2))

    def rsample(self, sample_shape: Any = ()) -> Any:
        u = _uniform(self._extended_shape(sample_shape), self.scale)
        return self.scale * (-(u.log())).pow(self.concentration.reciprocal())

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        z = value / self.scale
        k = self.concentration
        return (k / self.scale).log() + (k - 1) * z.log() - z.pow(k)

    def cdf(self, value: Any) -> Any:
        return 1 - (-(value / self.scale).pow(self.concentration)).exp()

    def entropy(self) -> Any:
        k = self.concentration
        return _EULER * (1 - k.reciprocal()) + (self.scale / k).log() + 1


class Pareto(Distribution):
    """Pareto (type I) with ``scale`` (the least value) and ``alpha`` (the tail index)."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    has_rsample = True

    def __init__(self, scale: Any, alpha: Any, validate_args: bool | None = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(tuple(self.scale.shape), (), validate_args)

    @property
    def support(self) -> Any:  # type: ignore[override]
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self) -> Any:
        a = self.alpha.clamp(min=1)
        return (a * self.scale / (a - 1)).masked_fill(self.alpha <= 1, math.inf)

    @property
    def mode(self) -> Any:
        return self.scale

    @property
    def variance(self) -> Any:
        a = self.alpha.clamp(min=2)
        v = self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))
        return v.masked_fill(self.alpha <= 2, math.inf)

    def rsample(self, sample_shape: Any = ()) -> Any:
        u = _uniform(self._extended_shape(sample_shape), self.scale)
        return self.scale * u.pow(-self.alpha.reciprocal())

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        return self.alpha.log() + self.alpha * self.scale.log() - (self.alpha + 1) * value.log()

    def cdf(self, value: Any) -> Any:
        return 1 - (self.scale / value).pow(self.alpha)

    def icdf(self, prob: Any) -> Any:
        return self.scale * (1 - prob).pow(-self.alpha.reciprocal())

    def entropy(self) -> Any:
        return (self.scale / self.alpha).log() + self.alpha.reciprocal() + 1
