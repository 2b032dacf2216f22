"""`Independent`: some of a distribution's batch dims read as event dims."""

from __future__ import annotations

from typing import Any

from .distribution import Distribution

__all__ = ["Independent"]


def _sum_rightmost(value: Any, n: int) -> Any:
    return value.sum(tuple(range(-n, 0))) if n > 0 else value


class Independent(Distribution):
    """``base_distribution`` whose rightmost ``reinterpreted_batch_ndims`` batch dims are
    one event: ``log_prob`` and ``entropy`` sum over them. A diagonal Gaussian is
    ``Independent(Normal(loc, scale), 1)``."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int,
                 validate_args: bool | None = None) -> None:
        batch = tuple(base_distribution.batch_shape)
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution"
                             f".batch_shape), actual {reinterpreted_batch_ndims} vs "
                             f"{len(batch)}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        cut = len(batch) - reinterpreted_batch_ndims
        super().__init__(batch[:cut], batch[cut:] + tuple(base_distribution.event_shape),
                         validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def support(self) -> Any:  # type: ignore[override]
        return self.base_dist.support

    @property
    def mean(self) -> Any:
        return self.base_dist.mean

    @property
    def mode(self) -> Any:
        return self.base_dist.mode

    @property
    def variance(self) -> Any:
        return self.base_dist.variance

    def sample(self, sample_shape: Any = ()) -> Any:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Any:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Any) -> Any:
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self) -> Any:
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


