"""`ExpRelaxedCategorical`, `RelaxedOneHotCategorical` (the Concrete / Gumbel-softmax
distribution) and `OneHotCategoricalStraightThrough`, as PyTorch's: differentiable
stand-ins for one-hot categorical draws (discrete VAEs, world models).

>>> d = RelaxedOneHotCategorical(dg.tensor(0.5), logits=dg.zeros(3))
>>> d.rsample().shape
(3,)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..eager.creation import full, rand
from ..eager.tensor import Tensor
from ..ops import special as SP
from . import constraints
from .categorical import Categorical, OneHotCategorical
from .distribution import Distribution
from .transformed import RelaxedParameters, TransformedDistribution
from .transforms import ExpTransform

__all__ = ["ExpRelaxedCategorical", "OneHotCategoricalStraightThrough",
           "RelaxedOneHotCategorical"]


def _temperature(temperature: Any, like: Any) -> Any:
    if isinstance(temperature, Tensor):
        return temperature
    return full((), float(temperature), dtype=like.dtype)


class ExpRelaxedCategorical(Distribution):
    """The log of a `RelaxedOneHotCategorical` draw: ``log_softmax((logits + g) /
    temperature)`` with ``g`` standard Gumbel noise; the event is the last dim."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        param = self._categorical._param
        self.temperature = _temperature(temperature, param)
        super().__init__(tuple(param.shape[:-1]), tuple(param.shape[-1:]), validate_args)

    @property
    def logits(self) -> Any:
        return self._categorical.logits

    @property
    def probs(self) -> Any:
        return self._categorical.probs

    @property
    def param_shape(self) -> tuple:
        return self._categorical.param_shape

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        dtype = np.dtype(self.logits.dtype)
        info = np.finfo(dtype)
        u = rand(*shape, dtype=dtype).clamp(float(info.eps), 1 - float(info.eps))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        k = self._categorical._num_events
        log_scale = SP.lgamma(full((), float(k), dtype=self.logits.dtype)) + (
            k - 1) * self.temperature.log()
        score = self.logits - value * self.temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(RelaxedParameters, TransformedDistribution):
    """``exp`` of an `ExpRelaxedCategorical`: points of the simplex that approach one-hot
    vectors as ``temperature`` goes to 0."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """`OneHotCategorical` with ``rsample``: a one-hot draw whose gradient is that of the
    probabilities (the straight-through estimator)."""

    has_rsample = True

    def rsample(self, sample_shape: Any = ()) -> Any:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
