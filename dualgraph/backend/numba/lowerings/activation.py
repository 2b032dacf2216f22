"""GELU and its backward as scalar expressions (`SCALAR` rows): each is one expression in
a fused loop.

float64 loops use ``erf`` and ``exp`` (`kir.Call`). float32 loops write the normal CDF
through its upper tail, ``Q(a) = t * exp(-a*a/2) * R(t)`` with ``a = |x|`` and
``t = 1 / (1 + 0.35 a)``, ``R`` a degree-8 polynomial fitted here for relative accuracy
(3.6e-8 in exact arithmetic over ``0 <= a <= 14``). It costs one ``exp`` (the vectorizable
polynomial one, `printer.MATH`), one division and nine multiply-adds, where ``erf`` costs
two polynomials and an ``exp``; the backward shares that ``exp`` with the density
``exp(-x*x/2) / sqrt(2 pi)``. And it keeps relative accuracy in the lower tail, where
``erf(x) + 1`` cancels: measured against a 30-digit reference, the CDF is within 6 ulp
for ``x >= -3``, 16 ulp down to -6 and 64 ulp down to -13 (there the rounding of
``x*x``, amplified by ``exp``, dominates)."""

from __future__ import annotations

import math

import numpy as np

from ... import kir
from . import SCALAR, _k

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

_TAIL_SCALE = 0.35
# R(t), highest power first.
_TAIL = (-0.02910464070737362, 0.14377892017364502, -0.25533369183540344,
         0.15876078605651855, -0.022840658202767372, 0.10540085285902023,
         0.11985822767019272, 0.13985861837863922, 0.1396215707063675)


def _single(t: np.dtype) -> bool:
    return np.dtype(t) == np.float32


def _cdf(x: kir.Expr, t: np.dtype) -> kir.Expr:
    """``erf(x * sqrt(1/2)) + 1``, twice the normal CDF (float64 loops)."""
    return kir.Call("erf", (x * _k(_SQRT_HALF, t),), t) + _k(1.0, t)


def _gauss(x: kir.Expr, t: np.dtype) -> kir.Expr:
    """``exp(-x*x/2)``."""
    return kir.Call("exp", ((x * x) * _k(-0.5, t),), t)


def _phi(x: kir.Expr, gauss: kir.Expr, t: np.dtype) -> kir.Expr:
    """The normal CDF at ``x`` from its upper tail (float32 loops); ``gauss`` is
    ``exp(-x*x/2)``."""
    a = kir.Select(kir.Bin("<", x, _k(0.0, t)), -x, x)
    s = _k(1.0, t) / (_k(1.0, t) + a * _k(_TAIL_SCALE, t))
    r: kir.Expr = _k(_TAIL[0], t)
    for c in _TAIL[1:]:
        r = r * s + _k(c, t)
    q = (s * gauss) * r
    return kir.Select(kir.Bin("<", x, _k(0.0, t)), q, _k(1.0, t) - q)


def _gelu(a: list, t: np.dtype) -> kir.Expr:
    x = a[0]
    if _single(t):
        return x * _phi(x, _gauss(x, t), t)
    # The eager kernel's order: (x * 0.5) * (erf(x * sqrt(1/2)) + 1).
    return (x * _k(0.5, t)) * _cdf(x, t)


def _gelu_backward(a: list, t: np.dtype) -> kir.Expr:
    g, x = a[0], a[1]
    gauss = _gauss(x, t)
    pdf = gauss * _k(_INV_SQRT_2PI, t)
    if _single(t):
        return g * (_phi(x, gauss, t) + pdf * x)
    return g * (_cdf(x, t) * _k(0.5, t) + pdf * x)


SCALAR.update({"gelu": _gelu, "gelu_backward": _gelu_backward})
