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
from .relaxed import LogitRelaxedBernoulli, RelaxedBernoulli
from .transformed import TransformedDistribution

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet",
           "Distribution", "Exponential", "Gamma", "Geometric", "Gumbel", "HalfNormal",
           "Independent", "Laplace", "LogNormal", "LogitRelaxedBernoulli", "MixtureSameFamily",
           "Multinomial", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson",
           "RelaxedBernoulli", "StudentT",
           "TransformedDistribution", "Uniform", "constraints", "kl", "kl_divergence",
           "register_kl", "transforms"]
