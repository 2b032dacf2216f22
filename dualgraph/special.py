"""``torch.special``: special functions under PyTorch's names.

    >>> dg.special.erfinv(dg.tensor([0.0, 0.5]))
    tensor([0.0000, 0.4769])
"""

from __future__ import annotations

from .ops.elementwise import erf, expm1, log1p
from .ops.elementwise import exp as _exp
from .ops.math import exp2, sinc, xlog1py, xlogy
from .ops.special import (
    digamma,
    entr,
    erfc,
    erfinv,
    expit,
    i0,
    i0e,
    i1,
    i1e,
    lgamma,
    log_ndtr,
    log_softmax,
    logit,
    logsumexp,
    multigammaln,
    ndtr,
    ndtri,
    polygamma,
    round,  # noqa: A004 - torch.special.round
    softmax,
)

gammaln = lgamma
psi = digamma


def modified_bessel_i0(input):  # noqa: A002, ANN001, ANN201
    """`i0` without a gradient: PyTorch defines none for this spelling, and its result does
    not require grad."""
    return i0(input.detach())


def modified_bessel_i1(input):  # noqa: A002, ANN001, ANN201
    """`i1` without a gradient, as PyTorch's."""
    return i1(input.detach())


def erfcx(input):  # noqa: A002, ANN001, ANN201
    """The scaled complementary error function ``exp(x**2) * erfc(x)``."""
    return _exp(input * input) * erfc(input)


__all__ = [
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammaln",
    "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "modified_bessel_i0", "modified_bessel_i1", "multigammaln", "ndtr", "ndtri", "polygamma",
    "psi", "round", "sinc", "softmax", "xlog1py", "xlogy",
]
