"""`TransformedDistribution`: a base distribution pushed through `transforms`, as
``torch.distributions.TransformedDistribution``.

>>> from dualgraph.distributions.transforms import ExpTransform
>>> d = TransformedDistribution(dg.distributions.Normal(0.0, 1.0), [ExpTransform()])
>>> float(d.log_prob(dg.tensor(1.0)))  # a LogNormal(0, 1) at 1
-0.9189385...
"""

from __future__ import annotations

from typing import Any

from ..eager.grad_mode import no_grad
from .distribution import Distribution
from .transforms import ComposeTransform, Transform, _sum_rightmost

__all__ = ["TransformedDistribution"]


class TransformedDistribution(Distribution):
    """Samples are ``t_n(...t_1(base.sample()))``; ``log_prob`` subtracts each transform's
    log |det J| (change of variables)."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, transforms: Any,
                 validate_args: bool | None = None) -> None:
        if isinstance(transforms, Transform):
            transforms = [transforms]
        if not isinstance(transforms, (list, tuple)) or not all(
                isinstance(t, Transform) for t in transforms):
            raise ValueError("transforms must be a Transform or a list of Transforms, got "
                             f"{type(transforms).__name__}")
        if not isinstance(base_distribution, Distribution):
            raise TypeError("base_distribution must be a Distribution, got "
                            f"{type(base_distribution).__name__}")
        self.base_dist = base_distribution
        self.transforms = list(transforms)
        event_dim = max([len(base_distribution.event_shape)]
                        + [t.event_dim for t in self.transforms])
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=False)
        self._validate_args = (Distribution._validate_default if validate_args is None
                               else validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def support(self) -> Any:  # type: ignore[override]
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def rsample(self, sample_shape: Any = ()) -> Any:
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def sample(self, sample_shape: Any = ()) -> Any:
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def log_prob(self, value: Any) -> Any:
        event_dim = len(self.event_shape)
        y = value
        lp: Any = 0
        for t in reversed(self.transforms):
            x = t.inv(y)
            lp = lp - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.event_dim)
            y = x
        base = _sum_rightmost(self.base_dist.log_prob(y),
                              event_dim - len(self.base_dist.event_shape))
        return lp + base

    def cdf(self, value: Any) -> Any:
        for t in reversed(self.transforms):
            if t.sign not in (1, -1):
                raise NotImplementedError("cdf needs transforms of known monotone sign")
        sign = ComposeTransform(self.transforms).sign
        for t in reversed(self.transforms):
            value = t.inv(value)
        c = self.base_dist.cdf(value)
        return c if sign == 1 else 1 - c


class RelaxedParameters:
    """``temperature``, ``logits`` and ``probs`` read from ``base_dist``: the parameters
    of a relaxed distribution that transforms a base one (`RelaxedBernoulli`,
    `RelaxedOneHotCategorical`)."""

    base_dist: Any

    @property
    def temperature(self) -> Any:
        return self.base_dist.temperature

    @property
    def logits(self) -> Any:
        return self.base_dist.logits

    @property
    def probs(self) -> Any:
        return self.base_dist.probs
