"""`Normal` and `Uniform`: continuous distributions with reparameterised samples."""

from __future__ import annotations

import math
from typing import Any

from ..eager.creation import rand, randn
from ..ops import elementwise as E
from . import constraints
from .distribution import _HALF_LOG_2PI, Distribution, broadcast_all

__all__ = ["Normal", "Uniform"]


class LocScale(Distribution):
    """A real-valued family with a real ``loc`` and a positive ``scale``, broadcast
    together, and reparameterised samples."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)


class Normal(LocScale):
    """The normal distribution with mean ``loc`` and standard deviation ``scale``;
    ``rsample`` is ``loc + scale * eps`` (differentiable in both).

    >>> m = dg.distributions.Normal(dg.zeros(3), dg.ones(3))
    >>> m.rsample((5,)).shape
    (5, 3)
    """

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def stddev(self) -> Any:
        return self.scale

    @property
    def variance(self) -> Any:
        return self.scale.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        eps = randn(*shape, dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - _HALF_LOG_2PI

    def cdf(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + E.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def entropy(self) -> Any:
        return 0.5 + _HALF_LOG_2PI + self.scale.log()


class Uniform(Distribution):
    """Uniform on ``[low, high)``; ``rsample`` is ``low + u * (high - low)``."""

    arg_constraints = {"low": constraints.real, "high": constraints.real}
    has_rsample = True

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        super().__init__(tuple(self.low.shape), (), validate_args)
        if self._validate_args and not _less(self.low, self.high):
            raise ValueError(
                f"Expected parameter low ({type(self.low).__name__} of shape "
                f"{tuple(self.low.shape)}) of distribution {self!r} to satisfy the constraint "
                f"LessThan(upper_bound={self.high}), but found invalid values:\n{self.low}")

    @property
    def support(self) -> Any:  # type: ignore[override]
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Any:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Any:
        return self.high * float("nan")

    @property
    def stddev(self) -> Any:
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self) -> Any:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        u = rand(*shape, dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        lb = (self.low <= value).astype(self.low.dtype)
        ub = (self.high > value).astype(self.low.dtype)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def entropy(self) -> Any:
        return (self.high - self.low).log()


def _less(a: Any, b: Any) -> bool:
    from .distribution import _holds

    return _holds(constraints.greater_than(0.0), b - a)
