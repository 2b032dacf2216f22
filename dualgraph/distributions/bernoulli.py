"""`Bernoulli`: 0 or 1, with ``probs`` or ``logits`` of a 1."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ..eager.creation import rand
from ..eager.grad_mode import no_grad
from ..nn.functional import binary_cross_entropy_with_logits
from . import constraints
from .categorical import _one_param
from .distribution import Distribution, broadcast_all, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli"]


class Bernoulli(Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0.

    >>> dg.distributions.Bernoulli(probs=dg.tensor([0.3])).sample().shape
    (1,)
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        _one_param("Bernoulli", probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        self._param = param
        super().__init__(tuple(param.shape), (), validate_args)

    @cached_property
    def logits(self) -> Any:  # noqa: F811 - computed from probs when not given
        return probs_to_logits(self.probs, is_binary=True)

    @cached_property
    def probs(self) -> Any:  # noqa: F811
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> tuple:
        return tuple(self._param.shape)

    @property
    def mean(self) -> Any:
        return self.probs

    @property
    def mode(self) -> Any:
        p = self.probs
        m = (p >= 0.5).astype(p.dtype)
        return m.masked_fill(p == 0.5, float("nan"))

    @property
    def variance(self) -> Any:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            p = self.probs.expand(shape)
            return (rand(*shape, dtype=p.dtype) < p).astype(p.dtype)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Any:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Any:
        from ..eager.creation import arange

        values = arange(2, dtype=self._param.dtype).reshape((-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + self.batch_shape) if expand else values
