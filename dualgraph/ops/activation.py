"""GELU as one elementwise primitive, with its backward as another (PyTorch's ``gelu`` and
``gelu_backward``).

As a composition, exact GELU was five elementwise ops forward and, differentiated, about
ten backward, whose fused loop read three saved intermediates (``x / sqrt(2)``, ``x / 2``
and ``erf(x / sqrt(2)) + 1``). As primitives the forward saves only ``x``, and the backward
is one expression of ``g`` and ``x``: one loop that reads two arrays. Eagerly, the forward
also keeps ``erf(x / sqrt(2)) + 1`` for the array-form backward, which then computes no
``erf`` (the same bits). Both are elementwise,
so they still fuse with their neighbours when compiled. The ``tanh`` approximation stays a
composition (`dualgraph.nn.functional.gelu`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..modes import bind
from . import elementwise as E
from . import routines
from .broadcast import broadcast_shapes, float_dtype, result_dtype, shape_of
from .erf32 import erf_f32
from .registry import OpDef, register

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _erf(x: np.ndarray) -> np.ndarray:
    """``erf`` as dualgraph's ``erf`` op computes it (float32 polynomial fits, float64
    SciPy), so ``gelu`` has the bits of its old composition."""
    if x.dtype.itemsize <= 4:
        return erf_f32(x.astype(np.float32, copy=False)).astype(x.dtype, copy=False)
    from scipy.special import erf  # lazily: ~0.2 s to import

    return erf(x)


def _routines(x: np.ndarray) -> Any:
    """The installed compiled routines (`routines`) if ``x`` is a C-ordered float32 array
    large enough for them, else None."""
    if x.dtype == np.float32 and x.flags.c_contiguous:
        return routines.for_size(x.size)
    return None


def _floated(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(float_dtype(x.dtype))


def _gelu_infer(x: Any) -> tuple:
    return tuple(x.shape), float_dtype(np.dtype(x.dtype))


def _gelu_impl(x: np.ndarray) -> np.ndarray:
    return _gelu_keep(x)[0]


def _gelu_keep(x: np.ndarray) -> tuple:
    """GELU and ``erf(x / sqrt(2)) + 1``, which the backward would compute again with the
    same operations: eagerly, the backward then runs no ``erf``."""
    # The composition's operations in its order: (x * 0.5) * (erf(x * sqrt(1/2)) + 1).
    x = _floated(x)
    fast = _routines(x)
    if fast is not None:
        return fast.gelu_keep(x)
    cdf = _erf(np.multiply(x, _SQRT_HALF))
    np.add(cdf, 1.0, out=cdf)
    out = np.multiply(x, 0.5)
    return np.multiply(out, cdf, out=out), cdf


def _gelu_backward_infer(g: Any, x: Any) -> tuple:
    shape = broadcast_shapes("gelu_backward", shape_of(g), shape_of(x))
    return shape, float_dtype(np.dtype(result_dtype(g, x)))


def _gelu_backward_impl(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``g * (Phi(x) + x phi(x))``: ``Phi`` the normal CDF, ``phi`` its density."""
    return _gelu_grad(g, x, None)


def _gelu_grad(g: np.ndarray, x: np.ndarray, erf1: np.ndarray | None) -> np.ndarray:
    """`_gelu_backward_impl`, given ``erf1 = erf(x / sqrt(2)) + 1`` as the forward computed
    it (`_gelu_keep`), or ``None``."""
    x = _floated(np.asarray(x))
    g = np.asarray(g)
    fast = _routines(x)
    if (fast is not None and g.dtype == x.dtype and g.shape == x.shape
            and g.flags.c_contiguous and (erf1 is None or erf1.flags.c_contiguous)):
        if erf1 is None:
            erf1 = fast.gelu_keep(x)[1]
        return fast.gelu_grad(g, x, erf1)
    if erf1 is None:
        cdf = _erf(np.multiply(x, _SQRT_HALF))
        np.add(cdf, 1.0, out=cdf)
        np.multiply(cdf, 0.5, out=cdf)
    else:  # the kept array may serve another backward (retain_graph): not in place
        cdf = np.multiply(erf1, 0.5)
    pdf = np.multiply(x, x)
    np.multiply(pdf, -0.5, out=pdf)
    np.exp(pdf, out=pdf)
    np.multiply(pdf, _INV_SQRT_2PI, out=pdf)
    np.multiply(pdf, x, out=pdf)
    np.add(cdf, pdf, out=cdf)
    if g.shape == cdf.shape and np.result_type(g, cdf) == cdf.dtype:
        return np.multiply(g, cdf, out=cdf)  # a fresh array of the result's layout
    return np.multiply(g, cdf)


def _gelu_vjp(ctx, g):
    (x,) = ctx.args
    return (bind(GELU_BACKWARD, g, x),)


def _gelu_vjp_arrays(ctx: Any, args: list, out: Any, g: np.ndarray) -> tuple:
    return (_gelu_grad(g, args[0], ctx._kept),)


def _gelu_backward_vjp(ctx, h):
    # y = g * gelu'(x): linear in g; gelu''(x) = phi(x) * (2 - x^2).
    g, x = ctx.args
    ng, nx = ctx.needs_input_grad
    gg = bind(GELU_BACKWARD, h, x) if ng else None
    gx = None
    if nx:
        pdf = E.mul(E.exp(E.mul(E.mul(x, x), -0.5)), _INV_SQRT_2PI)
        gx = E.mul(E.mul(h, g), E.mul(pdf, E.sub(2.0, E.mul(x, x))))
    return gg, gx


GELU = register(OpDef(
    "gelu", _gelu_impl, _gelu_infer, _gelu_vjp, "GeluBackward0", saves=(0,),
    elementwise=True, vjp_arrays=_gelu_vjp_arrays, impl_keep=_gelu_keep, keeps_for=0,
))
GELU_BACKWARD = register(OpDef(
    "gelu_backward", _gelu_backward_impl, _gelu_backward_infer, _gelu_backward_vjp,
    "GeluBackwardBackward0", saves=(0, 1), saves_for=(1, None), elementwise=True,
))


def gelu(x: Any) -> Any:
    """``x * Phi(x)``, ``Phi`` the standard normal CDF, elementwise (exact GELU).
    ``dg.ops.activation.gelu(x)``"""
    return bind(GELU, x)


def gelu_backward(g: Any, x: Any) -> Any:
    """The gradient of exact GELU at ``x`` times ``g``: ``g * (Phi(x) + x phi(x))``."""
    return bind(GELU_BACKWARD, g, x)
