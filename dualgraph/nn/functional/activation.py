"""Activations: compositions of registry ops (ops/elementwise.py, ops/math.py), so they
need no lowering of their own and fuse into one loop when compiled (exact GELU is one op,
ops/activation.py). Where PyTorch's gradient
at a kink is a convention, the `where` branches pick the same side as PyTorch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...eager import fused
from ...eager.creation import rand
from ...ops import activation as A
from ...ops import elementwise as E
from ...ops import index as I
from ...ops import reduce as R
from ...ops import shape as S
from ...ops import softmax as SM
from ...ops.broadcast import axis_alias
from ...ops.surface import hardshrink, prelu
from ._args import _check_input

__all__ = [
    "celu", "celu_", "elu", "elu_", "gelu", "glu", "gumbel_softmax", "hardshrink",
    "hardsigmoid", "hardswish", "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_",
    "log_softmax", "logsigmoid", "mish", "prelu", "relu", "relu6", "relu_", "rrelu",
    "rrelu_", "selu", "selu_", "sigmoid", "silu", "softmax", "softmax2d", "softmin",
    "softplus", "softshrink", "softsign", "tanh", "tanhshrink", "threshold", "threshold_",
]


def relu(x: Any) -> Any:
    out = fused.relu(x)
    return out if out is not None else E.relu(x)


def sigmoid(x: Any) -> Any:
    return E.sigmoid(x)


def tanh(x: Any) -> Any:
    return E.tanh(x)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


_SELU_ALPHA = 1.6732632423543772848170429916717


_SELU_SCALE = 1.0507009873554804934193349852946


def _inplace(x: Any, fn: Any, inplace: bool) -> Any:
    """``fn(x)``; with ``inplace=True`` written into ``x`` (PyTorch's in-place activations).

    In place, ``fn`` reads a copy of an ``x`` that requires grad: the ops of ``fn`` may save
    their input for backward, and writing into ``x`` would change that saved value (PyTorch's
    in-place derivatives keep the original ``self`` the same way)."""
    if not inplace:
        return fn(x)
    return x.copy_(fn(x.clone() if getattr(x, "requires_grad", False) else x))


def _below(x: Any, bound: float) -> Any:
    """``x`` where ``x <= bound`` (or NaN), else ``bound``: the input of a branch taken only
    there, whose gradient elsewhere is then zero, never 0 * inf."""
    return E.where(E.gt(x, bound), bound, x)


def _nan_stops(x: Any) -> Any:
    """``x``, but a NaN passes no gradient (PyTorch's rule for the clipping activations:
    NaN is in no range)."""
    return E.where(E.eq(x, x), x, math.nan)


def gelu(x: Any, approximate: str = "none") -> Any:
    """``x * Phi(x)``: exact through ``erf``, or PyTorch's ``approximate='tanh'`` form."""
    if approximate == "none":
        return A.gelu(x)
    if approximate == "tanh":
        inner = E.mul(E.add(x, E.mul(E.mul(E.mul(x, x), x), 0.044715)), _SQRT_2_OVER_PI)
        return E.mul(E.mul(x, 0.5), E.add(E.tanh(inner), 1.0))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x: Any, inplace: bool = False) -> Any:
    """``x * sigmoid(x)`` (swish)."""
    return _inplace(x, lambda x: E.mul(x, E.sigmoid(x)), inplace)


def elu(x: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    # The exponential sees 0 where it is not taken: its gradient there is zero, never
    # 0 * inf = NaN at x = inf.
    return _inplace(x, lambda x: E.where(E.gt(x, 0), x, E.mul(E.expm1(_below(x, 0)), alpha)),
                    inplace)


def celu(x: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``."""
    return _inplace(
        x, lambda x: E.where(E.gt(x, 0), x, E.mul(E.expm1(E.div(_below(x, 0), alpha)), alpha)),
        inplace)


def selu(x: Any, inplace: bool = False) -> Any:
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    return _inplace(x, lambda x: E.mul(elu(x, _SELU_ALPHA), _SELU_SCALE), inplace)


def softplus(x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    bx = E.mul(x, beta) if beta != 1 else x
    # The soft branch sees 0 where it is not taken: its gradient there is zero, never
    # 0 * (inf / inf) = NaN from an exp that overflowed.
    soft = E.log1p(E.exp(E.where(E.gt(bx, threshold), 0.0, bx)))
    if beta != 1:
        soft = E.div(soft, beta)
    return E.where(E.gt(bx, threshold), x, soft)


def softsign(x: Any) -> Any:
    """``x / (1 + |x|)``."""
    return E.div(x, E.add(E.abs(x), 1.0))


def hardtanh(x: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    """``x`` clipped to ``[min_val, max_val]``; the gradient is 0 at and beyond the bounds."""
    if min_val > max_val:
        raise ValueError("hardtanh: min_val cannot be greater than max_val")
    return _inplace(
        x, lambda x: E.where(E.le(x, min_val), min_val,
                             E.where(E.ge(x, max_val), max_val, _nan_stops(x))),
        inplace)


def relu6(x: Any, inplace: bool = False) -> Any:
    """``hardtanh(x, 0, 6)``."""
    return hardtanh(x, 0.0, 6.0, inplace)


def hardsigmoid(x: Any, inplace: bool = False) -> Any:
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, as PyTorch computes it; its gradient
    between is the output gradient times 1/6 rounded to float32, in every dtype, as
    PyTorch's backward multiplies by its float literal."""
    def f(x: Any) -> Any:
        h = hardtanh(E.add(x, 3.0), 0.0, 6.0)
        # The value h / 6, the gradient through h * ONE_SIXTH: h - h is exactly 0 (h is
        # finite or NaN), so the sum is the value.
        return E.add(S.stop_gradient(E.div(h, 6.0)),
                     E.mul(E.sub(h, S.stop_gradient(h)), _ONE_SIXTH))
    return _inplace(x, f, inplace)


_ONE_SIXTH = float(np.float32(1.0 / 6.0))


def hardswish(x: Any, inplace: bool = False) -> Any:
    """``x * hardsigmoid(x)``: 0 below -3, ``x`` above 3, ``x (x + 3) / 6`` between."""
    # x * relu6(x + 3) / 6, as PyTorch writes it: -0.0 below -3 for negative x.
    return _inplace(
        x, lambda x: E.div(E.mul(x, hardtanh(E.add(x, 3.0), 0.0, 6.0)), 6.0), inplace)


def leaky_relu(x: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """``x`` where positive, else ``negative_slope * x``."""
    return _inplace(x, lambda x: E.where(E.gt(x, 0), x, E.mul(x, negative_slope)), inplace)


def mish(x: Any, inplace: bool = False) -> Any:
    """``x * tanh(softplus(x))``."""
    return _inplace(x, lambda x: E.mul(x, E.tanh(softplus(x))), inplace)


def logsigmoid(x: Any) -> Any:
    """``log(sigmoid(x))`` without overflow: ``min(x, 0) - log1p(exp(-|x|))``."""
    return E.sub(E.minimum(x, 0.0), E.log1p(E.exp(E.neg(E.abs(x)))))


@axis_alias
def softmin(x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """``softmax(-x)`` along ``dim`` (computed in ``dtype`` when given)."""
    return softmax(E.neg(x), dim=dim, dtype=dtype)


# softmax and log_softmax are primitives (ops/softmax.py).
@axis_alias
def softmax(input: Any, dim: Any = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``dim`` (PyTorch's ``F.softmax``)."""
    return SM.softmax(input, dim, dtype)


@axis_alias
def log_softmax(input: Any, dim: Any = None, _stacklevel: int = 3,  # noqa: A002
                dtype: Any = None) -> Any:
    """``x - logsumexp(x)`` along ``dim`` (PyTorch's ``F.log_softmax``)."""
    return SM.log_softmax(input, dim, dtype)


# The gated linear unit: a composition of slicing and sigmoid.
def glu(input: Any, dim: int = -1) -> Any:  # noqa: A002
    """Gated linear unit: ``a * sigmoid(b)`` for the halves ``a``, ``b`` of ``input`` along
    ``dim`` (PyTorch's ``F.glu``)."""
    _check_input("glu", input)
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.ndim if -input.ndim <= dim < input.ndim else None
    if d is None:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-input.ndim}, {input.ndim - 1}], but got {dim})")
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    lead = (slice(None),) * d
    a = input[lead + (slice(0, n // 2),)]
    b = input[lead + (slice(n // 2, n),)]
    return E.mul(a, E.sigmoid(b))


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:  # noqa: A002
    """``value`` where ``x <= threshold``, else ``x`` (a NaN stays NaN, as in PyTorch)."""
    return _inplace(input, lambda x: E.where(E.le(x, threshold), float(value), x), inplace)


def softshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    # PyTorch's ``x * 0`` in the band: a NaN stays NaN, with no gradient.
    return E.where(E.gt(input, lambd), E.sub(input, lambd),
                   E.where(E.lt(input, -lambd), E.add(input, lambd),
                           E.mul(S.stop_gradient(input), 0.0)))


def tanhshrink(input: Any) -> Any:  # noqa: A002
    """``x - tanh(x)``."""
    return E.sub(input, E.tanh(input))


# In-place activations: PyTorch's ``F.relu_`` family, each the activation with
# ``inplace=True``.
def relu_(input: Any) -> Any:  # noqa: A002
    """``F.relu(input, inplace=True)``."""
    return input.relu_()


def elu_(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    return elu(input, alpha, inplace=True)


def celu_(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    return celu(input, alpha, inplace=True)


def selu_(input: Any) -> Any:  # noqa: A002
    return selu(input, inplace=True)


def leaky_relu_(input: Any, negative_slope: float = 0.01) -> Any:  # noqa: A002
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:  # noqa: A002
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Any, threshold: float, value: float) -> Any:  # noqa: A002
    return globals()["threshold"](input, threshold, value, inplace=True)


def rrelu(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False, inplace: bool = False) -> Any:
    """Randomized leaky ReLU: negative inputs scaled by a slope drawn from
    ``U(lower, upper)`` per element in training, by ``(lower + upper) / 2`` otherwise."""
    if training:
        u = rand(*tuple(input.shape), dtype=input.dtype)
        slope = E.add(E.mul(u, upper - lower), lower)
    else:
        slope = (lower + upper) / 2
    # A zero takes the slope's gradient, as in PyTorch (``x <= 0``).
    return _inplace(input, lambda x: E.where(E.gt(x, 0), x, E.mul(x, slope)), inplace)


def rrelu_(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
           training: bool = False) -> Any:
    return rrelu(input, lower, upper, training, inplace=True)


def gumbel_softmax(logits: Any, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Any:
    """Samples of the Gumbel-softmax distribution: ``softmax((logits + g) / tau)`` with
    ``g`` standard Gumbel noise; ``hard=True`` returns the one-hot of the argmax whose
    gradient is the soft sample's (straight-through)."""
    u = rand(*tuple(logits.shape), dtype=logits.dtype)
    # -log(Exp(1)) is Gumbel(0, 1); 1 - u is in (0, 1], so the exponential is finite.
    gumbels = E.neg(E.log(E.neg(E.log(E.sub(1.0, u)))))
    y_soft = SM.softmax(E.div(E.add(logits, gumbels), tau), dim)
    if not hard:
        return y_soft
    index = R.argmax(y_soft, dim, keepdim=True)
    y_hard = I.scatter(np.zeros(tuple(logits.shape), np.dtype(logits.dtype)), dim, index,
                       value=1.0)
    return E.add(E.sub(y_hard, S.stop_gradient(y_soft)), y_soft)


def softmax2d(input: Any) -> Any:  # noqa: A002
    """``softmax`` over the channels (dim -3) of (N, C, H, W) or (C, H, W) input."""
    if input.ndim not in (3, 4):
        raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
    return SM.softmax(input, -3)

