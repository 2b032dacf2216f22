"""`Multinomial`: counts of ``total_count`` draws over the last dim's classes, as
``torch.distributions.Multinomial``.

>>> d = Multinomial(4, probs=dg.tensor([0.2, 0.3, 0.5]))
>>> d.sample().sum()
tensor(4.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor, numpy_generator
from ..modes import current_trace
from ..ops import special as SP
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .gamma import _no_trace

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """``total_count`` (an int) draws from `Categorical` ``probs`` or ``logits``; a sample
    is the count per class (event shape: the number of classes)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count: int = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, (int, np.integer)) or isinstance(total_count, bool):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = int(total_count)
        self._categorical = Categorical(probs=probs, logits=logits, validate_args=validate_args)
        shape = tuple(self._categorical.param_shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=False)
        self._validate_args = self._categorical._validate_args

    @property
    def probs(self) -> Any:
        return self._categorical.probs

    @property
    def logits(self) -> Any:
        return self._categorical.logits

    @property
    def mean(self) -> Any:
        return self.probs * self.total_count

    @property
    def variance(self) -> Any:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Any:
        _no_trace("Multinomial.sample")
        with no_grad():
            p = self.probs.detach().numpy().astype(np.float64)
        p = p / p.sum(-1, keepdims=True)
        shape = self._extended_shape(sample_shape)
        draws = numpy_generator(None).multinomial(
            self.total_count, np.broadcast_to(p, shape), size=shape[:-1])
        return Tensor(draws.astype(np.dtype(self.probs.dtype)))

    def log_prob(self, value: Any) -> Any:
        if self._validate_args and current_trace() is None:
            v = np.asarray(value.detach().numpy() if isinstance(value, Tensor) else value)
            if (v < 0).any() or (v != np.round(v)).any() or (
                    self.total_count > 0 and (v.sum(-1) != self.total_count).any()):
                raise ValueError("Expected value argument to be nonnegative integer counts "
                                 f"summing to total_count={self.total_count}, but found "
                                 f"invalid values:\n{value}")
        if not isinstance(value, Tensor):
            value = Tensor(np.asarray(value, dtype=np.dtype(self.logits.dtype)))
        logits = self.logits
        # 0 * log(0) is 0: a class of probability zero that is never drawn adds nothing.
        logits = logits.clamp(min=float(np.finfo(np.dtype(logits.dtype)).min)).where(
            value == 0, logits)
        log_powers = (logits * value).sum(-1)
        return SP.lgamma(value.sum(-1) + 1) - SP.lgamma(value + 1).sum(-1) + log_powers
