"""Normalisation primitives.

``layer_norm`` is a primitive: the transformer workload calls it on every block, and one
kernel (one NumPy pass per statistic eagerly, one loop nest compiled) beats the nine ops of
its composition; it also gives PyTorch's node name, ``NativeLayerNormBackward0``. Its
backward is two row ops, ``layer_norm_backward`` (the input's gradient) and
``layer_norm_weight_backward`` (the weight's), each recomputing the row statistics from the
saved input: compiled, each is one pass over the rows instead of seven loops writing four
intermediates. Their VJPs are written in dualgraph ops, so double backward works.

Batch, group and instance normalisation are compositions in `dualgraph.nn.functional`
(group and instance norm normalise through ``layer_norm`` on a reshaped input).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from . import elementwise as E
from . import reduce as R
from .broadcast import shape_of
from .registry import OpDef, register


def _axes(ndim: int, k: int) -> tuple:
    return tuple(range(ndim - k, ndim))


def _is_tensor(v: Any) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype")


# Inputs are always (x, weight, bias): an absent weight is the literal 1.0 and an absent bias
# the literal 0.0, so the op has one arity and the formula one form.


def _ln_infer(x: Any, weight: Any, bias: Any, *, ndim: int, eps: float) -> tuple:
    shape = tuple(x.shape)
    dtype = np.dtype(x.dtype)
    if dtype.kind != "f":
        raise TypeError(f"layer_norm: expected a floating-point input, got {dtype}")
    norm = shape[len(shape) - ndim:]
    for p, what in ((weight, "weight"), (bias, "bias")):
        if _is_tensor(p) and tuple(p.shape) != norm:
            raise ShapeError(f"layer_norm: expected {what} to be of same shape as "
                             f"normalized_shape, but got {what} of shape {list(p.shape)} "
                             f"and normalized_shape = {list(norm)}")
    return shape, dtype


def _ln_impl(x: np.ndarray, weight: Any, bias: Any, *, ndim: int, eps: float) -> np.ndarray:
    axes = _axes(x.ndim, ndim)
    mean = x.mean(axes, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axes, keepdims=True)
    out = xc * (1.0 / np.sqrt(var + x.dtype.type(eps)))
    if _is_tensor(weight):
        out *= weight.astype(x.dtype, copy=False)
    if _is_tensor(bias):
        out += bias.astype(x.dtype, copy=False)
    return out.astype(x.dtype, copy=False)


def _ln_vjp(ctx, g):
    x, w, _ = ctx.args
    ndim, eps = ctx.attrs["ndim"], ctx.attrs["eps"]
    lead = tuple(range(len(ctx.inputs[0].shape) - ndim))
    need_x, need_w, need_b = ctx.needs_input_grad
    gx = bind(LAYER_NORM_BACKWARD, g, x, w, ndim=ndim, eps=eps) if need_x else None
    gweight = bind(LAYER_NORM_WEIGHT_BACKWARD, g, x, ndim=ndim, eps=eps) if need_w else None
    gbias = R.sum(g, lead) if need_b else None
    return gx, gweight, gbias


def _stats(x: np.ndarray, ndim: int, eps: float) -> tuple:
    """``(x - mean) * rstd`` and ``rstd`` (kept dims) of the rows: the forward's statistics
    in `_ln_vjp_arrays`'s operations (the same bits)."""
    axes = _axes(x.ndim, ndim)
    n = math.prod(x.shape[x.ndim - ndim:]) or np.nan
    xhat = np.subtract(x, np.true_divide(np.add.reduce(x, axes, keepdims=True), n))
    var = np.true_divide(np.add.reduce(np.multiply(xhat, xhat), axes, keepdims=True), n)
    rstd = np.true_divide(1.0, np.sqrt(np.add(var, eps)))
    np.multiply(xhat, rstd, out=xhat)
    return xhat, rstd


def _lnb_infer(g: Any, x: Any, weight: Any, *, ndim: int, eps: float) -> tuple:
    if tuple(g.shape) != tuple(x.shape):
        raise ShapeError(f"layer_norm_backward: gradient of shape {tuple(g.shape)} does not "
                         f"match the input of shape {tuple(x.shape)}")
    shape, dtype = _ln_infer(x, weight, 0.0, ndim=ndim, eps=eps)
    return shape, np.promote_types(dtype, g.dtype)


def _lnb_impl(g: np.ndarray, x: np.ndarray, weight: Any, *, ndim: int, eps: float) -> np.ndarray:
    """``rstd * (gw - mean(gw) - xhat * mean(gw * xhat))`` per row, ``gw = g * weight``."""
    dtype = np.result_type(x.dtype, np.asarray(g).dtype)
    x, g = x.astype(dtype, copy=False), np.asarray(g).astype(dtype, copy=False)
    axes = _axes(x.ndim, ndim)
    n = math.prod(x.shape[x.ndim - ndim:]) or np.nan
    xhat, rstd = _stats(x, ndim, eps)
    gw = np.multiply(g, weight.astype(dtype, copy=False)) if _is_tensor(weight) else g
    mean_gw = np.true_divide(np.add.reduce(gw, axes, keepdims=True), n)
    t = np.multiply(gw, xhat)
    mean_gwx = np.true_divide(np.add.reduce(t, axes, keepdims=True), n)
    gx = np.subtract(gw, mean_gw)
    np.multiply(xhat, mean_gwx, out=t)
    np.subtract(gx, t, out=gx)
    np.multiply(gx, rstd, out=gx)
    return gx


def _lnb_vjp(ctx, h):
    # y = rstd * P(a), a = g * w, P(a) = a - mean(a) - xhat * mean(a * xhat): P is
    # self-adjoint, so dL/da is this op again at (h, x, 1); dL/dx differentiates rstd and
    # xhat: rstd^2 * (3 B Hx xhat - xhat Ha - B (h - H) - (a - A) Hx), with the row means
    # A = mean(a), H = mean(h), B = mean(a xhat), Hx = mean(h xhat), Ha = mean(h a) - H A.
    g, x, w = ctx.args
    ndim, eps = ctx.attrs["ndim"], ctx.attrs["eps"]
    rank = len(ctx.inputs[1].shape)
    axes, lead = _axes(rank, ndim), tuple(range(rank - ndim))
    ng, nx, nw = ctx.needs_input_grad
    da = bind(LAYER_NORM_BACKWARD, h, x, 1.0, ndim=ndim, eps=eps) if ng or nw else None
    gg = (E.mul(da, w) if _is_tensor(w) else da) if ng else None
    gw = R.sum(E.mul(da, g), lead) if nw else None
    gx = None
    if nx:
        def mean(v: Any) -> Any:
            return R.mean(v, axes, keepdims=True)

        xc = E.sub(x, mean(x))
        rstd = E.div(1.0, E.sqrt(E.add(mean(E.mul(xc, xc)), eps)))
        xhat = E.mul(xc, rstd)
        a = E.mul(g, w) if _is_tensor(w) else g
        ma, mh = mean(a), mean(h)
        b, hx = mean(E.mul(a, xhat)), mean(E.mul(h, xhat))
        ha = E.sub(mean(E.mul(h, a)), E.mul(mh, ma))
        inner = E.sub(E.sub(E.mul(xhat, E.sub(E.mul(E.mul(b, hx), 3.0), ha)),
                            E.mul(b, E.sub(h, mh))),
                      E.mul(E.sub(a, ma), hx))
        gx = E.mul(inner, E.mul(rstd, rstd))
    return gg, gx, gw


def _lnwb_infer(g: Any, x: Any, *, ndim: int, eps: float) -> tuple:
    if tuple(g.shape) != tuple(x.shape):
        raise ShapeError(f"layer_norm_weight_backward: gradient of shape {tuple(g.shape)} "
                         f"does not match the input of shape {tuple(x.shape)}")
    shape, dtype = _ln_infer(x, 1.0, 0.0, ndim=ndim, eps=eps)
    return shape[len(shape) - ndim:], np.promote_types(dtype, g.dtype)


def _lnwb_impl(g: np.ndarray, x: np.ndarray, *, ndim: int, eps: float) -> np.ndarray:
    """``sum(g * xhat)`` over the leading dims: the weight's gradient."""
    dtype = np.result_type(x.dtype, np.asarray(g).dtype)
    x, g = x.astype(dtype, copy=False), np.asarray(g).astype(dtype, copy=False)
    xhat, _ = _stats(x, ndim, eps)
    np.multiply(g, xhat, out=xhat)
    return np.add.reduce(xhat, tuple(range(x.ndim - ndim)))


def _lnwb_vjp(ctx, h):
    # y = sum_rows(g * xhat): dL/dg = h * xhat; dL/dx is layer_norm's input gradient of
    # the upstream g * h.
    g, x = ctx.args
    ndim, eps = ctx.attrs["ndim"], ctx.attrs["eps"]
    ng, nx = ctx.needs_input_grad
    gg = E.mul(h, bind(LAYER_NORM, x, 1.0, 0.0, ndim=ndim, eps=eps)) if ng else None
    gx = bind(LAYER_NORM_BACKWARD, E.mul(g, h), x, 1.0, ndim=ndim, eps=eps) if nx else None
    return gg, gx


def _ln_vjp_arrays(ctx: Any, args: list, out: Any, g: np.ndarray) -> tuple | None:
    """`_ln_vjp` on arrays: its NumPy operations in its order (the same bits), with the
    temporaries reused in place (PyTorch's ``native_layer_norm_backward``)."""
    x, w, _ = args
    dtype = x.dtype
    if g.dtype != dtype or (isinstance(w, np.ndarray) and w.dtype != dtype):
        return None  # mixed dtypes promote op by op: the op form casts as they do
    ndim, eps = ctx.attrs["ndim"], ctx.attrs["eps"]
    axes, lead = _axes(x.ndim, ndim), tuple(range(x.ndim - ndim))
    need_x, need_w, need_b = ctx.needs_input_grad
    n = math.prod(x.shape[x.ndim - ndim:]) or np.nan
    xhat = np.subtract(x, np.true_divide(np.add.reduce(x, axes, keepdims=True), n))
    t = np.multiply(xhat, xhat)
    var = np.true_divide(np.add.reduce(t, axes, keepdims=True), n)
    rstd = np.true_divide(1.0, np.sqrt(np.add(var, eps)))
    np.multiply(xhat, rstd, out=xhat)
    gx = None
    if need_x:
        gw = np.multiply(g, w) if isinstance(w, np.ndarray) else g
        mean_gw = np.true_divide(np.add.reduce(gw, axes, keepdims=True), n)
        np.multiply(gw, xhat, out=t)
        mean_gwx = np.true_divide(np.add.reduce(t, axes, keepdims=True), n)
        gx = np.subtract(gw, mean_gw)
        np.multiply(xhat, mean_gwx, out=t)
        np.subtract(gx, t, out=gx)
        np.multiply(gx, rstd, out=gx)
    gweight = None
    if need_w:
        np.multiply(g, xhat, out=t)
        gweight = np.add.reduce(t, lead)
    gbias = np.add.reduce(g, lead) if need_b else None
    return gx, gweight, gbias


LAYER_NORM = register(OpDef(
    "layer_norm", _ln_impl, _ln_infer, _ln_vjp, "NativeLayerNormBackward0",
    saves=(0, 1), saves_for=(None, 0), vjp_arrays=_ln_vjp_arrays,
))
# Its backward as two row ops (PyTorch's ``native_layer_norm_backward``, whose input and
# weight gradients are two outputs): each recomputes the row statistics from the saved
# input, so the forward saves nothing else, and compiled each is one pass over the rows.
LAYER_NORM_BACKWARD = register(OpDef(
    "layer_norm_backward", _lnb_impl, _lnb_infer, _lnb_vjp,
    "NativeLayerNormBackwardBackward0", saves=(0, 1, 2),
))
LAYER_NORM_WEIGHT_BACKWARD = register(OpDef(
    "layer_norm_weight_backward", _lnwb_impl, _lnwb_infer, _lnwb_vjp,
    "NativeLayerNormBackwardBackward0", saves=(0, 1),
))


def layer_norm(x: Any, normalized_shape: Any, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Any:
    """Normalise over the last ``len(normalized_shape)`` dims to zero mean and unit
    (biased) variance, then scale by ``weight`` and shift by ``bias`` (PyTorch's
    ``F.layer_norm``). ``F.layer_norm(x, (128,), w, b)``"""
    norm = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) \
        else tuple(int(d) for d in normalized_shape)
    shape = shape_of(x)
    if not norm or len(norm) > len(shape) or shape[len(shape) - len(norm):] != norm:
        raise ShapeError(f"Given normalized_shape={list(norm)}, expected input with shape "
                         f"[*, {', '.join(map(str, norm))}], but got input of size"
                         f"{list(shape)}")
    return bind(LAYER_NORM, x, 1.0 if weight is None else weight,
                0.0 if bias is None else bias, ndim=len(norm), eps=float(eps))
