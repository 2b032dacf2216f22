"""Special functions: the primitives ``lgamma``, ``polygamma`` (``digamma`` is its order
0), ``erfc``, ``erfinv`` and ``bessel_i`` (the modified Bessel functions ``i0``, ``i1`` and
their exponentially scaled forms ``i0e``, ``i1e``), and the ``torch.special``
compositions over them and the math ops (``expit``, ``logit``, ``ndtr``, ``ndtri``,
``log_ndtr``, ``entr``, ``multigammaln``, ...).

Each primitive's gradient is a dualgraph program: ``lgamma' = digamma``,
``polygamma(n)' = polygamma(n + 1)`` (so every order is differentiable again),
``erfc' = -2/sqrt(pi) exp(-x^2)``, ``erfinv' = sqrt(pi)/2 exp(erfinv(x)^2)``,
``i0' = i1``, ``i1' = i0 - i1/x`` (1/2 at 0; the scaled forms subtract ``sign(x)`` times
themselves). The NumPy kernels are SciPy's; the Numba lowerings are
``math.lgamma``/``math.erfc`` and dualgraph's scalar ``polygamma``, ``erfinv`` and
``bessel_i`` (``backend/numba/kernels.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..modes import bind
from . import elementwise as E
from . import math as M
from . import reduce as R
from . import shape as S
from .elementwise import _float_infer, _floatify
from .registry import OpDef, register

_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _scipy(name: str):
    """SciPy's ufunc ``name`` on floats; SciPy is imported on first use (it costs ~0.2 s)."""
    def impl(x: np.ndarray) -> np.ndarray:
        import scipy.special

        return _floatify(getattr(scipy.special, name))(x)
    impl.__name__ = f"_{name}_impl"
    return impl


def _lgamma_vjp(ctx, g):
    (x,) = ctx.args
    return (E.mul(g, digamma(x)),)


def _erfc_vjp(ctx, g):
    (x,) = ctx.args
    return (E.mul(g, E.mul(E.exp(E.neg(E.mul(x, x))), -_TWO_OVER_SQRT_PI)),)


def _erfinv_vjp(ctx, g):
    y = ctx.out
    return (E.mul(g, E.mul(E.exp(E.mul(y, y)), _SQRT_PI_OVER_2)),)


def _polygamma_impl(n: int, x: np.ndarray) -> np.ndarray:
    import scipy.special

    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    with np.errstate(all="ignore"):
        if n == 0:
            out = scipy.special.psi(x.astype(np.float64))
            # SciPy gives nan at 0; PyTorch's digamma(±0) is ∓inf.
            out = np.where(x == 0, np.copysign(np.inf, -np.copysign(1.0, x)), out)
        else:
            out = scipy.special.polygamma(n, x.astype(np.float64))
    return np.asarray(out, dtype)


def _polygamma_infer(n: Any, x: Any) -> tuple:
    return _float_infer(x)


def _polygamma_vjp(ctx, g):
    n, x = ctx.args
    return None, E.mul(g, polygamma(n + 1, x))


def _polygamma_name(node: Any) -> str:
    return "DigammaBackward0" if node.inputs[0] == 0 else "PolygammaBackward0"


def _bessel_impl(n: int, scaled: int, x: np.ndarray) -> np.ndarray:
    import scipy.special

    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    fn = getattr(scipy.special, f"i{n}{'e' if scaled else ''}")
    return np.asarray(fn(x.astype(np.float64)), dtype)


def _bessel_infer(n: Any, scaled: Any, x: Any) -> tuple:
    return _float_infer(x)


def _bessel_vjp(ctx, g):
    n, scaled, x = ctx.args
    other = bind(BESSEL_I, 1 - n, scaled, x)
    if n == 0:
        d = other
    else:
        # i1' = i0 - i1/x, whose limit at 0 is 1/2.
        zero = E.eq(x, 0.0)
        safe = E.where(zero, 1.0, x)
        d = E.where(zero, 0.5, E.sub(other, E.div(ctx.out, safe)))
    if scaled:
        d = E.sub(d, E.mul(E.sign(x), ctx.out))
    return None, None, E.mul(g, d)


def _bessel_name(node: Any) -> str:
    n, scaled = node.inputs[0], node.inputs[1]
    if n == 0 and not scaled:
        return "I0Backward0"
    return f"SpecialI{n}{'E' if scaled else ''}Backward0"


def _unary(name: str, impl, vjp, torch_name: str, **kw: Any) -> OpDef:
    return register(OpDef(name, impl, _float_infer, vjp, torch_name, elementwise=True, **kw))


LGAMMA = _unary("lgamma", _scipy("gammaln"), _lgamma_vjp, "LgammaBackward0", saves=(0,))
ERFC = _unary("erfc", _scipy("erfc"), _erfc_vjp, "ErfcBackward0", saves=(0,))
ERFINV = _unary("erfinv", _scipy("erfinv"), _erfinv_vjp, "ErfinvBackward0", saves_out=True)
POLYGAMMA = register(OpDef(
    "polygamma", _polygamma_impl, _polygamma_infer, _polygamma_vjp, _polygamma_name,
    saves=(1,), elementwise=True,
))
BESSEL_I = register(OpDef(
    "bessel_i", _bessel_impl, _bessel_infer, _bessel_vjp, _bessel_name,
    saves=(2,), saves_out=True, elementwise=True,
))


def lgamma(input: Any) -> Any:  # noqa: A002
    """``log|Gamma(x)|`` elementwise."""
    return bind(LGAMMA, input)


def digamma(input: Any) -> Any:  # noqa: A002
    """The logarithmic derivative of Gamma, ``Gamma'(x) / Gamma(x)`` (``-inf`` at ``+0``)."""
    return bind(POLYGAMMA, 0, input)


def polygamma(n: int, input: Any) -> Any:  # noqa: A002
    """The ``n``-th derivative of `digamma` (``n = 0`` is digamma itself)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n, got n={n!r}")
    return bind(POLYGAMMA, int(n), input)


def erfc(input: Any) -> Any:  # noqa: A002
    """``1 - erf(x)``, accurate where ``erf(x)`` is close to 1."""
    return bind(ERFC, input)


def erfinv(input: Any) -> Any:  # noqa: A002
    """The inverse of `erf` on ``(-1, 1)``: ``±inf`` at ``±1``, NaN outside."""
    return bind(ERFINV, input)


def i0(input: Any) -> Any:  # noqa: A002
    """The modified Bessel function of the first kind of order 0."""
    return bind(BESSEL_I, 0, 0, input)


def i0e(input: Any) -> Any:  # noqa: A002
    """``exp(-|x|) * i0(x)``, finite where `i0` overflows."""
    return bind(BESSEL_I, 0, 1, input)


def i1(input: Any) -> Any:  # noqa: A002
    """The modified Bessel function of the first kind of order 1."""
    return bind(BESSEL_I, 1, 0, input)


def i1e(input: Any) -> Any:  # noqa: A002
    """``exp(-|x|) * i1(x)``, finite where `i1` overflows."""
    return bind(BESSEL_I, 1, 1, input)


def multigammaln(input: Any, p: int) -> Any:  # noqa: A002
    """The multivariate log-gamma of dimension ``p``: ``sum_i lgamma(x - i/2)`` plus
    ``p(p-1)/4 log(pi)``; every element must exceed ``(p - 1) / 2``."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    const = p * (p - 1) / 4.0 * math.log(math.pi)
    terms = [lgamma(E.sub(input, i / 2.0)) for i in range(p)]
    out = terms[0]
    for t in terms[1:]:
        out = E.add(out, t)
    return E.add(out, const)


# ------------------------------------------------------------------- compositions


def expit(input: Any) -> Any:  # noqa: A002
    """The logistic sigmoid."""
    return E.sigmoid(input)


def logit(input: Any, eps: float | None = None) -> Any:  # noqa: A002
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given
    (the gradient is then 0 outside that range; without ``eps`` it is NaN outside [0, 1],
    as PyTorch's)."""
    x = input
    if np.dtype(x.dtype).kind != "f":
        x = S.astype(x, np.dtype(np.float32))
    if eps is not None:
        x = M.clamp(x, eps, 1.0 - eps)
    else:
        outside = M.logical_or(E.lt(x, 0.0), E.gt(x, 1.0))
        x = E.add(x, E.where(outside, math.nan, 0.0))
    return E.log(E.div(x, E.sub(1.0, x)))


def ndtr(input: Any) -> Any:  # noqa: A002
    """The standard normal CDF."""
    return E.mul(erfc(E.mul(input, -1.0 / math.sqrt(2.0))), 0.5)


def ndtri(input: Any) -> Any:  # noqa: A002
    """The inverse of `ndtr`."""
    return E.mul(erfinv(E.sub(E.mul(input, 2.0), 1.0)), math.sqrt(2.0))


def log_ndtr(input: Any) -> Any:  # noqa: A002
    """``log(ndtr(x))``."""
    return E.log(ndtr(input))


def entr(input: Any) -> Any:  # noqa: A002
    """``-x log(x)``: 0 at 0, ``-inf`` for negative ``x``."""
    x = input
    neg = E.lt(x, 0.0)
    zero = E.eq(x, 0.0)
    safe = E.where(E.gt(x, 0.0), x, 1.0)
    out = E.neg(E.mul(x, E.log(safe)))
    return E.where(neg, -math.inf, E.where(zero, 0.0, out))


def sinc(input: Any) -> Any:  # noqa: A002
    return M.sinc(input)


def softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    from .softmax import softmax as softmax_

    return softmax_(input, dim, dtype)


def log_softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    from .softmax import log_softmax as log_softmax_

    return log_softmax_(input, dim, dtype)


def round(input: Any, decimals: int = 0) -> Any:  # noqa: A001, A002
    """Rounds half to even, after scaling by ``10**decimals``."""
    return E.round(input, decimals=decimals)


def logsumexp(input: Any, dim: Any, keepdim: bool = False) -> Any:  # noqa: A002
    return R.logsumexp(input, dim, keepdim)
