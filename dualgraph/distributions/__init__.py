"""`dg.distributions`: probability distributions with PyTorch's API (``sample``,
``rsample``, ``log_prob``, ``entropy``, ``mean``, ``variance``) and `kl_divergence`.

Everything is written with tensor ops, so ``log_prob``, ``entropy``, ``rsample`` and the KL
divergences differentiate, and run inside `dg.compile`. Draws come from dualgraph's
generator: `dg.manual_seed` makes them reproducible.
"""

from . import constraints, kl, transforms
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .continuous import Cauchy, Geometric, Gumbel, HalfNormal, Laplace, LogNormal, Poisson
from .distribution import Distribution
from .gamma import Beta, Chi2, Dirichlet, Exponential, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .mixture import Binomial, MixtureSameFamily, StudentT
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .normal import Normal, Uniform
from .positive import HalfCauchy, Pareto, Weibull
from .relaxed import LogitRelaxedBernoulli, RelaxedBernoulli
from .relaxed_categorical import (
    ExpRelaxedCategorical,
    OneHotCategoricalStraightThrough,
    RelaxedOneHotCategorical,
)
from .transformed import TransformedDistribution
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
    identity_transform,
)

__all__ = ["AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy",
           "Chi2", "ComposeTransform", "Dirichlet", "Distribution", "ExpRelaxedCategorical",
           "ExpTransform", "Exponential", "Gamma", "Geometric", "Gumbel", "HalfCauchy",
           "HalfNormal", "Independent", "Laplace", "LogNormal", "LogitRelaxedBernoulli",
           "MixtureSameFamily", "Multinomial", "MultivariateNormal", "Normal",
           "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "SigmoidTransform", "StudentT",
           "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "Weibull",
           "constraints", "identity_transform", "kl", "kl_divergence", "register_kl",
           "transforms"]
