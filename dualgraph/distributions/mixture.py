"""`StudentT`, `Binomial` and `MixtureSameFamily`, with PyTorch's formulas."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor, numpy_generator
from . import constraints
from .distribution import Distribution, broadcast_all, logits_to_probs, probs_to_logits
from .gamma import Chi2, _no_trace

__all__ = ["Binomial", "MixtureSameFamily", "StudentT"]


class StudentT(Distribution):
    """Student's t with ``df`` degrees of freedom, ``loc`` and ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df: Any, loc: Any = 0.0, scale: Any = 1.0,
                 validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(tuple(self.df.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return self.loc.masked_fill(self.df <= 1, math.nan)

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def variance(self) -> Any:
        df = self.df
        var = self.scale.pow(2) * df / (df - 2)
        var = var.masked_fill((df <= 2) & (df > 1), math.inf)
        return var.masked_fill(df <= 1, math.nan)

    def rsample(self, sample_shape: Any = ()) -> Any:
        from ..eager.creation import randn

        shape = self._extended_shape(sample_shape)
        x = randn(*shape, dtype=self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi)
             + (0.5 * df).lgamma() - (0.5 * (df + 1.0)).lgamma())
        return -0.5 * (df + 1.0) * (y.pow(2) / df).log1p() - z

    def entropy(self) -> Any:
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        return (self.scale.log() + 0.5 * (df + 1) * ((0.5 * (df + 1)).digamma()
                                                     - (0.5 * df).digamma())
                + 0.5 * df.log() + lbeta)


class Binomial(Distribution):
    """The number of successes in ``total_count`` trials with success ``probs`` (or
    ``logits``)."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}

    def __init__(self, total_count: Any = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
            self.logits = probs_to_logits(self.probs, is_binary=True)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
            self.probs = logits_to_probs(self.logits, is_binary=True)
        super().__init__(tuple(self.probs.shape), (), validate_args)

    @property
    def support(self) -> Any:  # type: ignore[override]
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Any:
        return self.total_count * self.probs

    @property
    def mode(self) -> Any:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Any:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Any:
        _no_trace("Binomial.sample")
        shape = self._extended_shape(sample_shape)
        with no_grad():
            n = np.broadcast_to(self.total_count.detach().numpy().astype(np.int64), shape)
            p = np.broadcast_to(self.probs.detach().numpy().astype(np.float64), shape)
        draws = numpy_generator(None).binomial(n, p)
        return Tensor(draws.astype(np.dtype(self.probs.dtype)))

    def entropy(self) -> Any:
        """The sum over the support ``0..total_count`` (one total count for all)."""
        from ..eager.creation import arange

        total = int(self.total_count.max())
        if int(self.total_count.min()) != total:
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        values = arange(total + 1, dtype=self.probs.dtype).reshape(
            (-1,) + (1,) * len(self.batch_shape))
        lp = self.log_prob(values)
        return -(lp.exp() * lp).sum(0)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        n, lg = self.total_count, self.logits
        clamped = (lg.clamp(min=0) + lg - lg.clamp(max=0)) / 2  # max(lg, 0), smooth at 0
        normalize = n * clamped + n * (-lg.abs()).exp().log1p() - (n + 1).lgamma()
        return value * lg - normalize - (value + 1).lgamma() - (n - value + 1).lgamma()


class MixtureSameFamily(Distribution):
    """A mixture whose components are the last batch dimension of
    ``component_distribution``, weighted by the `Categorical` ``mixture_distribution``."""

    has_rsample = False

    def __init__(self, mixture_distribution: Any, component_distribution: Any,
                 validate_args: bool | None = None) -> None:
        from .categorical import Categorical

        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("The Mixture distribution needs to be an instance of "
                             "torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of "
                             "torch.distributions.Distribution")
        cb = tuple(component_distribution.batch_shape)
        mb = tuple(mixture_distribution.batch_shape)
        k = mixture_distribution.logits.shape[-1]
        if not cb or cb[-1] != k:
            raise ValueError(f"`mixture_distribution component` ({k}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({cb[-1:]})")
        if mb != cb[:-1][len(cb) - 1 - len(mb):]:
            raise ValueError(f"`mixture_distribution.batch_shape` ({mb}) is not compatible "
                             f"with `component_distribution.batch_shape`({cb})")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cb[:-1], tuple(component_distribution.event_shape), validate_args)

    @property
    def mixture_distribution(self) -> Any:
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Any:
        return self._component_distribution

    def _pad(self, x: Any) -> Any:
        for _ in range(self._event_ndims):
            x = x.unsqueeze(-1)
        return x

    @property
    def mean(self) -> Any:
        probs = self._pad(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Any:
        d = -1 - self._event_ndims
        probs = self._pad(self.mixture_distribution.probs)
        comp = self.component_distribution
        mean_cond_var = (probs * comp.variance).sum(d)
        var_cond_mean = (probs * (comp.mean - self.mean.unsqueeze(d)).pow(2)).sum(d)
        return mean_cond_var + var_cond_mean

    def log_prob(self, value: Any) -> Any:
        x = value.unsqueeze(-1 - self._event_ndims)
        lp_x = self.component_distribution.log_prob(x)
        lp_mix = self.mixture_distribution.logits.log_softmax(-1)
        return (lp_x + lp_mix).logsumexp(-1)

    def sample(self, sample_shape: Any = ()) -> Any:
        with no_grad():
            shape = tuple(sample_shape) if isinstance(sample_shape, (tuple, list)) else \
                (int(sample_shape),) if sample_shape != () else ()
            idx = self.mixture_distribution.sample(shape)
            comp = self.component_distribution.sample(shape)
            index = self._pad(idx.unsqueeze(-1))
            index = index.expand(*(tuple(idx.shape) + (1,) + tuple(self.event_shape)))
            return comp.gather(len(shape) + len(self.batch_shape), index).squeeze(
                len(shape) + len(self.batch_shape))
