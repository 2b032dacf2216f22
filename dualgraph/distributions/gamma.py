"""`Gamma`, `Chi2`, `Exponential`, `Beta` and `Dirichlet`: the gamma family.

Samples are drawn with NumPy's gamma sampler from dualgraph's generator (the values differ
from PyTorch's stream; the distributions are the same). ``rsample`` differentiates a gamma
draw in its concentration by implicit reparameterisation (the derivative of the draw that
keeps its CDF value fixed, ``-dF/dalpha / f``), as PyTorch does; Beta and Dirichlet
draws are normalised gamma draws. These draws run eagerly: inside `dg.compile` they make
the call run eagerly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..eager.tensor import Tensor, numpy_generator
from ..errors import EagerOnlyError
from ..modes import current_trace
from ..ops.shape import stack
from . import constraints
from .distribution import Distribution, broadcast_all

__all__ = ["Beta", "Chi2", "Dirichlet", "Exponential", "Gamma"]


def _no_trace(what: str) -> None:
    if current_trace() is not None:
        raise EagerOnlyError(f"{what} draws with NumPy's gamma sampler, which a compiled "
                             "graph cannot repeat: this call runs eagerly.")


def _tiny(dtype: Any) -> float:
    return float(np.finfo(np.dtype(dtype)).tiny)


def _standard_gamma(alpha: Any) -> Any:
    """A standard gamma draw per concentration; its gradient in ``alpha`` is the implicit
    one, ``dx/dalpha = -(dF/dalpha)(x) / f(x)`` (``F`` the regularised incomplete gamma
    function, differentiated numerically in float64), carried by ``x + (alpha -
    alpha.detach()) * dx/dalpha``, whose value is exactly the draw."""
    import scipy.special as sp

    _no_trace("Gamma.rsample")
    a = alpha.detach().numpy().astype(np.float64)
    x = np.maximum(numpy_generator(None).standard_gamma(a), _tiny(alpha.dtype))
    x = x.astype(np.dtype(alpha.dtype)).astype(np.float64)
    draw = Tensor(x.astype(np.dtype(alpha.dtype)))
    if not alpha.requires_grad:
        return draw
    h = 1e-5 * np.maximum(a, 1.0)
    dcdf = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    logpdf = (a - 1) * np.log(x) - x - sp.gammaln(a)
    dx = np.nan_to_num(-dcdf * np.exp(-logpdf), nan=0.0, posinf=0.0, neginf=0.0)
    return draw + (alpha - alpha.detach()) * Tensor(dx.astype(np.dtype(alpha.dtype)))


class Gamma(Distribution):
    """Gamma with shape ``concentration`` and inverse scale ``rate``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(tuple(self.concentration.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return self.concentration / self.rate

    @property
    def mode(self) -> Any:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Any:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        value = _standard_gamma(self.concentration.expand(*shape)) / self.rate.expand(*shape)
        return value.clamp(min=_tiny(value.dtype))

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        value = value if isinstance(value, Tensor) else broadcast_all(value, c)[0]
        return c.xlogy(r) + (c - 1).xlogy(value) - r * value - c.lgamma()

    def entropy(self) -> Any:
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()


class Chi2(Gamma):
    """Chi-squared with ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Any, validate_args: bool | None = None) -> None:
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5 * df.new_ones(()).expand(*df.shape), validate_args)

    @property
    def df(self) -> Any:
        return self.concentration * 2


class Exponential(Distribution):
    """Exponential with ``rate``; ``rsample`` is ``-log(u) / rate``."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    @property
    def mean(self) -> Any:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Any:
        return self.rate * 0

    @property
    def stddev(self) -> Any:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Any:
        return self.rate.pow(-2)

    def rsample(self, sample_shape: Any = ()) -> Any:
        from ..eager.creation import rand

        shape = self._extended_shape(sample_shape)
        u = rand(*shape, dtype=self.rate.dtype)
        return -(1 - u).log() / self.rate

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Any) -> Any:
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Any) -> Any:
        return -(1 - value).log() / self.rate

    def entropy(self) -> Any:
        return 1.0 - self.rate.log()


class Dirichlet(Distribution):
    """Dirichlet over the simplex of the last dimension of ``concentration``."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Any, validate_args: bool | None = None) -> None:
        (concentration,) = broadcast_all(concentration)
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args)

    @property
    def mean(self) -> Any:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Any:
        c = (self.concentration - 1).clamp(min=0.0)
        return c / c.sum(-1, keepdim=True)

    @property
    def variance(self) -> Any:
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        g = _standard_gamma(self.concentration.expand(*shape))
        return (g / g.sum(-1, keepdim=True)).clamp(min=_tiny(g.dtype), max=1 - 1e-7)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ((c - 1).xlogy(value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1))

    def entropy(self) -> Any:
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return (c.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma()
                - ((c - 1.0) * c.digamma()).sum(-1))


class Beta(Distribution):
    """Beta with ``concentration1`` (alpha) and ``concentration0`` (beta): the first
    coordinate of a two-category `Dirichlet`."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any,
                 validate_args: bool | None = None) -> None:
        c1, c0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(tuple(c1.shape), (), validate_args)

    @property
    def concentration1(self) -> Any:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Any:
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self) -> Any:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Any:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Any:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Any:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        value = value if isinstance(value, Tensor) else broadcast_all(
            value, self.concentration1)[0]
        heads_tails = stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self) -> Any:
        return self._dirichlet.entropy()
