"""`Laplace`, `LogNormal`, `HalfNormal`, `Cauchy`, `Gumbel` (reparameterised samples) and
the discrete `Poisson` and `Geometric`, with PyTorch's formulas."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..eager.creation import rand, randn
from ..eager.tensor import Tensor, numpy_generator
from . import constraints
from .distribution import (
    _HALF_LOG_2PI,
    Distribution,
    broadcast_all,
    clamp_probs,
    logits_to_probs,
    probs_to_logits,
)
from .gamma import _no_trace
from .normal import LocScale

__all__ = ["Cauchy", "Geometric", "Gumbel", "HalfNormal", "Laplace", "LogNormal", "Poisson"]

_EULER = 0.57721566490153286060


def _tensor(value: Any, like: Any) -> Any:
    return value if isinstance(value, Tensor) else broadcast_all(value, like)[0]


class Laplace(LocScale):
    """Laplace with ``loc`` and ``scale``."""

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def variance(self) -> Any:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Any:
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        eps = float(np.finfo(np.dtype(self.loc.dtype)).eps)
        u = rand(*shape, dtype=self.loc.dtype) * (2 - eps) - (1 - eps)  # in (-1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Any) -> Any:
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def entropy(self) -> Any:
        return 1 + (2 * self.scale).log()


class LogNormal(Distribution):
    """``exp`` of a `Normal` with ``loc`` and ``scale``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        from .normal import Normal

        self.base_dist = Normal(loc, scale, validate_args=validate_args)
        self.loc, self.scale = self.base_dist.loc, self.base_dist.scale
        super().__init__(tuple(self.loc.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Any:
        return (self.loc - self.scale.pow(2)).exp()

    @property
    def variance(self) -> Any:
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def rsample(self, sample_shape: Any = ()) -> Any:
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        y = _tensor(value, self.loc).log()
        return self.base_dist.log_prob(y) - y

    def entropy(self) -> Any:
        return self.base_dist.entropy() + self.loc


class HalfNormal(Distribution):
    """``|X|`` for ``X`` a zero-mean `Normal` with ``scale``."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        (self.scale,) = broadcast_all(scale)
        super().__init__(tuple(self.scale.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Any:
        return self.scale * 0

    @property
    def variance(self) -> Any:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        return (randn(*shape, dtype=self.scale.dtype) * self.scale).abs()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        value = _tensor(value, self.scale)
        lp = (-(value ** 2) / (2 * self.scale ** 2) - self.scale.log() - _HALF_LOG_2PI
              + math.log(2))
        return lp.masked_fill(value < 0, -math.inf)

    def entropy(self) -> Any:
        return 0.5 + _HALF_LOG_2PI + self.scale.log() - math.log(2)


class Cauchy(LocScale):
    """Cauchy with ``loc`` and ``scale`` (no mean or variance: they are NaN and inf)."""

    @property
    def mean(self) -> Any:
        return self.loc * math.nan

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def variance(self) -> Any:
        return self.loc * 0 + math.inf

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        u = rand(*shape, dtype=self.loc.dtype)
        return self.loc + self.scale * (math.pi * (u - 0.5)).tan()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value: Any) -> Any:
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def entropy(self) -> Any:
        return math.log(4 * math.pi) + self.scale.log()


class Gumbel(LocScale):
    """Gumbel (type-I extreme value) with ``loc`` and ``scale``."""

    @property
    def mean(self) -> Any:
        return self.loc + self.scale * _EULER

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def variance(self) -> Any:
        return self.scale.pow(2) * (math.pi ** 2 / 6)

    @property
    def stddev(self) -> Any:
        return self.scale * (math.pi / math.sqrt(6))

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(rand(*shape, dtype=self.loc.dtype))
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        z = (self.loc - value) / self.scale
        return z - z.exp() - self.scale.log()

    def entropy(self) -> Any:
        return self.scale.log() + (1 + _EULER)


class Poisson(Distribution):
    """Poisson counts with ``rate``."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return self.rate

    @property
    def mode(self) -> Any:
        return self.rate.floor()

    @property
    def variance(self) -> Any:
        return self.rate

    def sample(self, sample_shape: Any = ()) -> Any:
        _no_trace("Poisson.sample")
        shape = self._extended_shape(sample_shape)
        rate = np.broadcast_to(self.rate.detach().numpy().astype(np.float64), shape)
        draws = numpy_generator(None).poisson(rate)
        return Tensor(draws.astype(np.dtype(self.rate.dtype)))

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        value = _tensor(value, self.rate)
        return value.xlogy(self.rate) - self.rate - (value + 1).lgamma()


class Geometric(Distribution):
    """The number of failures before the first success, with success ``probs`` (or
    ``logits``)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self.logits = probs_to_logits(self.probs, is_binary=True)
        else:
            (self.logits,) = broadcast_all(logits)
            self.probs = logits_to_probs(self.logits, is_binary=True)
        super().__init__(tuple(self.probs.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Any:
        return self.probs * 0

    @property
    def variance(self) -> Any:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Any = ()) -> Any:
        from ..eager.grad_mode import no_grad

        shape = self._extended_shape(sample_shape)
        tiny = float(np.finfo(np.dtype(self.probs.dtype)).tiny)
        with no_grad():
            u = rand(*shape, dtype=self.probs.dtype).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        value = _tensor(value, self.probs)
        # P(0) = 1 when probs is 1: 0 * log(0) counts as 0
        probs = self.probs.masked_fill((self.probs == 1) & (value == 0), 0.0)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Any:
        from ..nn.functional import binary_cross_entropy_with_logits

        return binary_cross_entropy_with_logits(self.logits, self.probs,
                                                reduction="none") / self.probs
