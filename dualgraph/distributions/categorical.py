"""`Categorical` and `OneHotCategorical`: distributions over ``K`` classes."""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any

import numpy as np

from ..eager.creation import multinomial
from ..ops import shape as S
from . import constraints
from .distribution import Distribution, logits_to_probs, probs_to_logits

__all__ = ["Categorical", "OneHotCategorical"]


def _one_param(name: str, probs: Any, logits: Any) -> None:
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class Categorical(Distribution):
    """Classes ``0 .. K-1`` with ``probs`` (normalised over the last dim) or ``logits``
    (unnormalised log-probabilities); the leading dims are the batch.

    >>> m = dg.distributions.Categorical(logits=dg.zeros(4))
    >>> m.sample((2,)).shape
    (2,)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        _one_param("Categorical", probs, logits)
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        param = self.probs if probs is not None else self.logits
        self._param = param
        self._num_events = param.shape[-1]
        super().__init__(tuple(param.shape[:-1]), (), validate_args)

    @cached_property
    def logits(self) -> Any:  # noqa: F811 - computed from probs when not given
        return probs_to_logits(self.probs)

    @cached_property
    def probs(self) -> Any:  # noqa: F811
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> tuple:
        return tuple(self._param.shape)

    @property
    def support(self) -> Any:  # type: ignore[override]
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self) -> Any:
        return S.broadcast_to(np.array(math.nan, np.dtype(self.probs.dtype)), self.batch_shape)

    @property
    def mode(self) -> Any:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Any:
        return self.mean

    def sample(self, sample_shape: Any = ()) -> Any:
        """int64 class indices of shape ``sample_shape + batch_shape``."""
        shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
        n = math.prod(shape)
        probs_2d = self.probs.detach().reshape(-1, self._num_events)
        draws = multinomial(probs_2d, n, True).T if n else probs_2d[:0].long().T
        return draws.reshape(shape + self.batch_shape)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = np.broadcast_shapes(tuple(value.shape), tuple(self.logits.shape))
        value = S.broadcast_to(value, shape[:-1] + (1,))
        log_pmf = S.broadcast_to(self.logits, shape)
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Any:
        min_real = float(np.finfo(np.dtype(self.logits.dtype)).min)
        p_log_p = self.logits.clamp(min=min_real) * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand: bool = True) -> Any:
        from ..eager.creation import arange

        values = arange(self._num_events).reshape((-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + self.batch_shape) if expand else values


class OneHotCategorical(Distribution):
    """`Categorical` whose draws are one-hot vectors of length ``K`` (the event)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        param = self._categorical._param
        super().__init__(tuple(param.shape[:-1]), tuple(param.shape[-1:]), validate_args)

    @property
    def probs(self) -> Any:
        return self._categorical.probs

    @property
    def logits(self) -> Any:
        return self._categorical.logits

    @property
    def param_shape(self) -> tuple:
        return self._categorical.param_shape

    @property
    def mean(self) -> Any:
        return self._categorical.probs

    @property
    def mode(self) -> Any:
        probs = self._categorical.probs
        from ..nn.functional import one_hot

        return one_hot(probs.argmax(-1), probs.shape[-1]).astype(probs.dtype)

    @property
    def variance(self) -> Any:
        p = self._categorical.probs
        return p * (1 - p)

    def sample(self, sample_shape: Any = ()) -> Any:
        from ..nn.functional import one_hot

        probs = self._categorical.probs
        return one_hot(self._categorical.sample(sample_shape),
                       probs.shape[-1]).astype(probs.dtype)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self) -> Any:
        return self._categorical.entropy()

    def __repr__(self) -> str:
        return repr(self._categorical).replace("Categorical", "OneHotCategorical", 1)
