"""Normalisation primitives.

``layer_norm`` is a primitive: the transformer workload calls it on every block, and one
kernel (one NumPy pass per statistic eagerly, one loop nest compiled) beats the nine ops of
its composition; it also gives PyTorch's node name, ``NativeLayerNormBackward0``. Its VJP
is written in dualgraph ops (it recomputes the mean and ``rstd`` from the saved input), so
double backward works and the compiled backward fuses.

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
    return _ln_forward(x, weight, bias, ndim, eps, False)[0]


def _ln_keep(x: np.ndarray, weight: Any, bias: Any, *, ndim: int, eps: float) -> tuple:
    """The layer norm and, for float32 and float64 input, the normalised input ``xhat``
    and its per-row ``1 / sqrt(var + eps)`` (PyTorch's saved ``rstd``), which
    `_ln_vjp_arrays` would compute again with the same operations (``None`` for other
    dtypes, whose ``mean`` accumulates in a wider type than the backward's sums)."""
    keep = x.dtype == np.float32 or x.dtype == np.float64
    return _ln_forward(x, weight, bias, ndim, eps, keep)


def _ln_forward(x: np.ndarray, weight: Any, bias: Any, ndim: int, eps: float,
                keep: bool) -> tuple:
    axes = _axes(x.ndim, ndim)
    mean = x.mean(axes, keepdims=True)
    xc = x - mean
    xhat = xc * xc
    var = np.mean(xhat, axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    np.multiply(xc, rstd, out=xhat)
    if _is_tensor(weight):
        out = np.multiply(xhat, weight.astype(x.dtype, copy=False), out=xc)
    elif keep:  # not the kept array itself: the output may be changed in place
        out = xhat.copy()
    else:
        out = xhat
    if _is_tensor(bias):
        out += bias.astype(x.dtype, copy=False)
    return out.astype(x.dtype, copy=False), (xhat, rstd) if keep else None


def _ln_vjp(ctx, g):
    x, w, _ = ctx.args
    ndim, eps = ctx.attrs["ndim"], ctx.attrs["eps"]
    rank = len(ctx.inputs[0].shape)
    axes, lead = _axes(rank, ndim), tuple(range(rank - ndim))
    need_x, need_w, need_b = ctx.needs_input_grad
    xc = E.sub(x, R.mean(x, axes, keepdims=True))
    rstd = E.div(1.0, E.sqrt(E.add(R.mean(E.mul(xc, xc), axes, keepdims=True), eps)))
    xhat = E.mul(xc, rstd)
    gx = None
    if need_x:
        gw = E.mul(g, w) if _is_tensor(w) else g
        # d xhat / dx applied to gw: rstd * (gw - mean(gw) - xhat * mean(gw * xhat)).
        inner = E.sub(E.sub(gw, R.mean(gw, axes, keepdims=True)),
                      E.mul(xhat, R.mean(E.mul(gw, xhat), axes, keepdims=True)))
        gx = E.mul(inner, rstd)
    gweight = R.sum(E.mul(g, xhat), lead) if need_w else None
    gbias = R.sum(g, lead) if need_b else None
    return gx, gweight, gbias


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
    kept = ctx._kept
    if kept is not None:  # the forward's xhat and rstd: the same bits as computed here
        xhat, rstd = kept  # read only: another backward may read them (retain_graph)
        t = np.empty_like(xhat)
    else:
        xhat = np.subtract(x, np.true_divide(np.add.reduce(x, axes, keepdims=True), n))
        t = np.multiply(xhat, xhat)
        var = np.true_divide(np.add.reduce(t, axes, keepdims=True), n)
        rstd = np.true_divide(1.0, np.sqrt(np.add(var, eps)))
        np.multiply(xhat, rstd, out=xhat)
    gx = None
    if need_x:
        owned = isinstance(w, np.ndarray)
        gw = np.multiply(g, w) if owned else g
        mean_gw = np.true_divide(np.add.reduce(gw, axes, keepdims=True), n)
        np.multiply(gw, xhat, out=t)
        mean_gwx = np.true_divide(np.add.reduce(t, axes, keepdims=True), n)
        # gw is not needed past here: the difference overwrites it when it is ours.
        gx = np.subtract(gw, mean_gw, out=gw if owned and gw.shape == t.shape else None)
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
    impl_keep=_ln_keep, keeps_for=None,
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
