"""GELU and its backward as scalar expressions (`SCALAR` rows): each is one expression in
a fused loop. ``erf`` and ``exp`` are `kir.Call`s, so float32 loops get the vectorizable
polynomial versions (`printer.MATH`)."""

from __future__ import annotations

import math

import numpy as np

from ... import kir
from . import SCALAR, _k

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _cdf(x: kir.Expr, t: np.dtype) -> kir.Expr:
    """``0.5 * (erf(x * sqrt(1/2)) + 1)``, the normal CDF, without the 0.5."""
    return kir.Call("erf", (x * _k(_SQRT_HALF, t),), t) + _k(1.0, t)


def _gelu(a: list, t: np.dtype) -> kir.Expr:
    # The eager kernel's order: (x * 0.5) * (erf(x * sqrt(1/2)) + 1).
    x = a[0]
    return (x * _k(0.5, t)) * _cdf(x, t)


def _gelu_backward(a: list, t: np.dtype) -> kir.Expr:
    g, x = a[0], a[1]
    pdf = kir.Call("exp", ((x * x) * _k(-0.5, t),), t) * _k(_INV_SQRT_2PI, t)
    return g * (_cdf(x, t) * _k(0.5, t) + pdf * x)


SCALAR.update({"gelu": _gelu, "gelu_backward": _gelu_backward})
