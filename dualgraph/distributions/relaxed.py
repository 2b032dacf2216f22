"""`RelaxedBernoulli` (the binary Concrete / Gumbel-sigmoid distribution) and its logit
form `LogitRelaxedBernoulli`, as PyTorch's: differentiable draws in (0, 1) that approach
Bernoulli draws as ``temperature`` goes to 0.

>>> d = RelaxedBernoulli(dg.tensor(0.5), probs=dg.tensor([0.3, 0.9]))
>>> d.rsample().shape
(2,)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..eager.creation import rand
from ..nn.functional import softplus
from . import constraints
from .bernoulli import Bernoulli
from .distribution import Distribution, broadcast_all
from .transformed import RelaxedParameters, TransformedDistribution
from .transforms import SigmoidTransform

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(Distribution):
    """The logit of a `RelaxedBernoulli` draw: ``(logits + log u - log(1 - u)) /
    temperature`` with ``u`` uniform."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        self._bernoulli = Bernoulli(probs=probs, logits=logits, validate_args=validate_args)
        param = self._bernoulli._param
        (self.temperature,) = broadcast_all(temperature) if not hasattr(
            temperature, "shape") else (temperature,)
        super().__init__(tuple(param.shape), (), validate_args=False)
        self._validate_args = self._bernoulli._validate_args

    @property
    def logits(self) -> Any:
        return self._bernoulli.logits

    @property
    def probs(self) -> Any:
        return self._bernoulli.probs

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        tiny = float(np.finfo(np.dtype(self.logits.dtype)).tiny)
        u = rand(*shape, dtype=self.logits.dtype).clamp(tiny, 1 - tiny)
        return (self.logits + u.log() - (-u).log1p()) / self.temperature

    def log_prob(self, value: Any) -> Any:
        diff = self.logits - value * self.temperature
        return self.temperature.log() + diff - 2 * softplus(diff)


class RelaxedBernoulli(RelaxedParameters, TransformedDistribution):
    """``sigmoid`` of a `LogitRelaxedBernoulli`: values in (0, 1)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)
