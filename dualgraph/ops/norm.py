"""Normalisation primitives.

``layer_norm`` is a primitive: the transformer workload calls it on every block, and one
kernel (one NumPy pass per statistic eagerly, one loop nest compiled) beats the nine ops of
its composition; it also gives PyTorch's node name, ``NativeLayerNormBackward0``. Its VJP
is two ops, ``layer_norm_backward`` (the input's gradient) and ``layer_norm_weight_grad``
(the weight's), plus a sum for the bias: each backward op is one pass over each row
compiled, where the composition was a dozen ops that recomputed the statistics in
several kernels. Their VJPs are written in dualgraph ops, so double backward works.

Training batch norm is a primitive too, ``batch_norm``, with its input gradient
``batch_norm_backward``, its parameters' gradients ``batch_norm_param_grads`` (one (2, C)
value: the weight's and the bias's) and the statistics its running averages take,
``batch_norm_stats``: compiled, each is one call of a routine that takes the channel count
as an argument. Evaluation batch norm, group and instance normalisation are compositions
in `dualgraph.nn.functional` (group and instance norm normalise through ``layer_norm`` on
a reshaped input).
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
    if x.dtype == np.float32 or x.dtype == np.float64:
        # np.mean's operations, the sums as row sums (another dtype's mean accumulates
        # in a wider type).
        n = math.prod(x.shape[x.ndim - ndim:]) or np.nan
        xc = np.subtract(x, np.true_divide(_kept_sum(x, axes), n))
        xhat = np.multiply(xc, xc)
        var = np.true_divide(_kept_sum(xhat, axes), n)
    else:
        xc = x - x.mean(axes, keepdims=True)
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
    lead = tuple(range(len(ctx.inputs[0].shape) - ndim))
    need_x, need_w, need_b = ctx.needs_input_grad
    gx = bind(LAYER_NORM_BACKWARD, g, x, w, ndim=ndim, eps=eps) if need_x else None
    gweight = bind(LAYER_NORM_WEIGHT_GRAD, g, x, ndim=ndim, eps=eps) if need_w else None
    gbias = R.sum(g, lead) if need_b else None
    return gx, gweight, gbias


def _kept_sum(a: np.ndarray, axes: tuple) -> np.ndarray:
    """``a`` summed over ``axes``, kept: row sums when they are the trailing ones."""
    if axes and axes[-1] == a.ndim - 1 and axes[0] == a.ndim - len(axes):
        return R.row_sums(a, len(axes))
    return np.add.reduce(a, axes, keepdims=True)


def _stats(x: np.ndarray, axes: tuple, n: float, eps: float) -> tuple:
    """``xhat``, ``rstd`` and a temporary of ``x``'s shape, by the forward's operations."""
    xhat = np.subtract(x, np.true_divide(_kept_sum(x, axes), n))
    t = np.multiply(xhat, xhat)
    var = np.true_divide(_kept_sum(t, axes), n)
    rstd = np.true_divide(1.0, np.sqrt(np.add(var, eps)))
    np.multiply(xhat, rstd, out=xhat)
    return xhat, rstd, t


def _grad_input(gw: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, t: np.ndarray,
                axes: tuple, n: float, owned: bool) -> np.ndarray:
    """``rstd * (gw - mean(gw) - xhat * mean(gw * xhat))`` over the rows; ``t`` is
    overwritten, and ``gw`` too when ``owned``."""
    mean_gw = np.true_divide(_kept_sum(gw, axes), n)
    np.multiply(gw, xhat, out=t)
    mean_gwx = np.true_divide(_kept_sum(t, axes), n)
    gx = np.subtract(gw, mean_gw, out=gw if owned and gw.shape == t.shape else None)
    np.multiply(xhat, mean_gwx, out=t)
    np.subtract(gx, t, out=gx)
    return np.multiply(gx, rstd, out=gx)


def _ln_vjp_arrays(ctx: Any, args: list, out: Any, g: np.ndarray) -> tuple | None:
    """`_ln_vjp` on arrays: the NumPy kernels of its ops (the same bits), sharing the
    forward's kept ``xhat`` and ``rstd`` and reusing temporaries in place."""
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
        xhat, rstd, t = _stats(x, axes, n, eps)
    gx = None
    if need_x:
        owned = isinstance(w, np.ndarray)
        gx = _grad_input(np.multiply(g, w) if owned else g, xhat, rstd, t, axes, n, owned)
    gweight = None
    if need_w:
        np.multiply(g, xhat, out=t)
        gweight = np.add.reduce(t, lead)
    gbias = np.add.reduce(g, lead) if need_b else None
    return gx, gweight, gbias


# ---- the backward ops
# ``layer_norm_backward(g, x, w)``: the input's gradient (PyTorch's
# ``native_layer_norm_backward``'s first output); ``layer_norm_weight_grad(g, x)``: the
# weight's, ``sum(g * xhat)`` over the leading dims. Each recomputes the row statistics
# from ``x`` (the graph has one value per node, so the forward's mean and rstd are not
# values of it), which a row kernel does in the pass that reads the row anyway.


def _ln_backward_infer(g: Any, x: Any, w: Any, *, ndim: int, eps: float) -> tuple:
    xshape = tuple(x.shape)
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"layer_norm_backward: expected a floating-point input, got {x.dtype}")
    if tuple(g.shape) != xshape:
        raise ShapeError(f"layer_norm_backward: gradient of shape {tuple(g.shape)} does not "
                         f"match the input of shape {xshape}")
    norm = xshape[len(xshape) - ndim:]
    if _is_tensor(w) and tuple(w.shape) != norm:
        raise ShapeError(f"layer_norm_backward: weight of shape {tuple(w.shape)} does not "
                         f"match normalized_shape {norm}")
    dtype = np.promote_types(g.dtype, x.dtype)
    if _is_tensor(w):
        dtype = np.promote_types(dtype, w.dtype)
    return xshape, dtype


def _ln_backward_impl(g: np.ndarray, x: np.ndarray, w: Any, *, ndim: int,
                      eps: float) -> np.ndarray:
    dtype = np.promote_types(g.dtype, x.dtype)
    if isinstance(w, np.ndarray):
        dtype = np.promote_types(dtype, w.dtype)
        w = w.astype(dtype, copy=False)
    g, x = g.astype(dtype, copy=False), x.astype(dtype, copy=False)
    axes = _axes(x.ndim, ndim)
    n = math.prod(x.shape[x.ndim - ndim:]) or np.nan
    xhat, rstd, t = _stats(x, axes, n, eps)
    owned = isinstance(w, np.ndarray)
    return _grad_input(np.multiply(g, w) if owned else g.copy(), xhat, rstd, t, axes, n, True)


def _normalized(x: Any, axes: tuple, eps: float) -> tuple:
    """``xhat`` and ``rstd`` of ``x`` in dualgraph ops (for second derivatives)."""
    xc = E.sub(x, R.mean(x, axes, keepdims=True))
    rstd = E.div(1.0, E.sqrt(E.add(R.mean(E.mul(xc, xc), axes, keepdims=True), eps)))
    return E.mul(xc, rstd), rstd


def _ln_backward_vjp(ctx, h):
    # gx = r * P(a), a = g * w, P(a) = a - mean(a) - xhat * mean(a * xhat) per row: r * P
    # is self-adjoint, so the gradients of a (hence of g and w) are layer_norm_backward of
    # h with no weight. For x (r and xhat depend on it), with c = mean(a * xhat) and
    # d = mean(h * xhat):
    # -r^2 * (xhat * (mean(h * a) - mean(a) * mean(h) - 3 c d) + d (a - mean(a))
    #         + c (h - mean(h))).
    g, x, w = ctx.args
    ndim, eps = ctx.attrs["ndim"], ctx.attrs["eps"]
    rank = len(ctx.inputs[1].shape)
    axes, lead = _axes(rank, ndim), tuple(range(rank - ndim))
    need_g, need_x, need_w = ctx.needs_input_grad
    weighted = _is_tensor(w)
    gg = gw = gx = None
    if need_g or (need_w and weighted):
        q = bind(LAYER_NORM_BACKWARD, h, x, 1.0, ndim=ndim, eps=eps)
        gg = E.mul(q, w) if need_g and weighted else q if need_g else None
        gw = R.sum(E.mul(q, g), lead) if need_w and weighted else None
    if need_x:
        xhat, rstd = _normalized(x, axes, eps)
        a = E.mul(g, w) if weighted else g

        def mean(v: Any) -> Any:
            return R.mean(v, axes, keepdims=True)

        ma, mh = mean(a), mean(h)
        c, d = mean(E.mul(a, xhat)), mean(E.mul(h, xhat))
        k = E.sub(E.sub(mean(E.mul(h, a)), E.mul(ma, mh)), E.mul(3.0, E.mul(c, d)))
        inner = E.add(E.add(E.mul(xhat, k), E.mul(d, E.sub(a, ma))), E.mul(c, E.sub(h, mh)))
        gx = E.neg(E.mul(E.mul(rstd, rstd), inner))
    return gg, gx, gw


def _ln_weight_grad_infer(g: Any, x: Any, *, ndim: int, eps: float) -> tuple:
    xshape = tuple(x.shape)
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"layer_norm_weight_grad: expected a floating-point input, got "
                        f"{x.dtype}")
    if tuple(g.shape) != xshape:
        raise ShapeError(f"layer_norm_weight_grad: gradient of shape {tuple(g.shape)} does "
                         f"not match the input of shape {xshape}")
    return xshape[len(xshape) - ndim:], np.promote_types(g.dtype, x.dtype)


def _ln_weight_grad_impl(g: np.ndarray, x: np.ndarray, *, ndim: int,
                         eps: float) -> np.ndarray:
    dtype = np.promote_types(g.dtype, x.dtype)
    g, x = g.astype(dtype, copy=False), x.astype(dtype, copy=False)
    n = math.prod(x.shape[x.ndim - ndim:]) or np.nan
    xhat, _, t = _stats(x, _axes(x.ndim, ndim), n, eps)
    np.multiply(g, xhat, out=t)
    return np.add.reduce(t, tuple(range(x.ndim - ndim)))


def _ln_weight_grad_vjp(ctx, k):
    # sum over rows of g * xhat: k * xhat for g; for x, the row map xhat's adjoint
    # applied to g * k, which is layer_norm_backward with k as the weight.
    g, x = ctx.args
    ndim, eps = ctx.attrs["ndim"], ctx.attrs["eps"]
    need_g, need_x = ctx.needs_input_grad
    gg = E.mul(k, _normalized(x, _axes(len(ctx.inputs[1].shape), ndim), eps)[0]) \
        if need_g else None
    gx = bind(LAYER_NORM_BACKWARD, g, x, k, ndim=ndim, eps=eps) if need_x else None
    return gg, gx


LAYER_NORM = register(OpDef(
    "layer_norm", _ln_impl, _ln_infer, _ln_vjp, "NativeLayerNormBackward0",
    saves=(0, 1), saves_for=(None, 0), vjp_arrays=_ln_vjp_arrays,
    impl_keep=_ln_keep, keeps_for=None,
))
LAYER_NORM_BACKWARD = register(OpDef(
    "layer_norm_backward", _ln_backward_impl, _ln_backward_infer, _ln_backward_vjp,
    "NativeLayerNormBackwardBackward0", saves=(0, 1, 2),
))
LAYER_NORM_WEIGHT_GRAD = register(OpDef(
    "layer_norm_weight_grad", _ln_weight_grad_impl, _ln_weight_grad_infer,
    _ln_weight_grad_vjp, "LayerNormWeightGradBackward0", saves=(0, 1),
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


# ---- training batch norm
# Each channel (dim 1) normalised over every other dim. ``batch_norm`` (training mode,
# inputs (x, weight, bias) as layer_norm's), its input gradient ``batch_norm_backward``,
# the parameters' gradients ``batch_norm_param_grads`` and the statistics
# ``batch_norm_stats`` are primitives so that a compiled step calls one routine per op that
# takes the channel count as an argument, instead of loops generated again for each
# channel count (a network's layers have many). The arithmetic is layer_norm's: the mean,
# the mean squared deviation, the deviation times ``1 / sqrt(var + eps)``.


def _bn_axes(rank: int) -> tuple:
    return (0,) + tuple(range(2, rank))


def _bn_shape(rank: int, c: int) -> tuple:
    """The per-channel shape broadcast against the input: ``(1, C, 1, ...)``."""
    return (1, c) + (1,) * (rank - 2)


def _bn_check(op: str, x: Any, *params: tuple) -> tuple:
    shape = tuple(x.shape)
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype}")
    if len(shape) < 2:
        raise ShapeError(f"{op}: expected an input of at least 2 dims (N, C, ...), got "
                         f"{list(shape)}")
    for p, what in params:
        if _is_tensor(p) and tuple(p.shape) != shape[1:2]:
            raise ShapeError(f"{op}: expected {what} of shape [{shape[1]}], got "
                             f"{list(p.shape)}")
    return shape


def _bn_rows(x: Any) -> Any:
    """The channel-first view ``movedim(x, 1, 0)``: a channel's values are one row."""
    from .shape import movedim

    return movedim(x, 1, 0)


def _bn_infer(x: Any, weight: Any, bias: Any, *, eps: float) -> tuple:
    shape = _bn_check("batch_norm", x, (weight, "weight"), (bias, "bias"))
    return shape, np.dtype(x.dtype)


def _bn_param(p: Any, rank: int, dtype: Any) -> Any:
    return p.astype(dtype, copy=False).reshape(_bn_shape(rank, p.size)) \
        if isinstance(p, np.ndarray) else p


def _bn_impl(x: np.ndarray, weight: Any, bias: Any, *, eps: float) -> np.ndarray:
    axes = _bn_axes(x.ndim)
    n = math.prod(x.shape[a] for a in axes) or np.nan
    xhat = _stats(x, axes, n, x.dtype.type(eps))[0]
    if isinstance(weight, np.ndarray):
        xhat = np.multiply(xhat, _bn_param(weight, x.ndim, x.dtype), out=xhat)
    if isinstance(bias, np.ndarray):
        xhat = np.add(xhat, _bn_param(bias, x.ndim, x.dtype), out=xhat)
    return xhat.astype(x.dtype, copy=False)


def _bn_vjp(ctx, g):
    x, w, _ = ctx.args
    eps = ctx.attrs["eps"]
    need_x, need_w, need_b = ctx.needs_input_grad
    gx = bind(BATCH_NORM_BACKWARD, g, x, w, eps=eps) if need_x else None
    gw = gb = None
    if need_w or need_b:
        both = bind(BATCH_NORM_PARAM_GRADS, g, x, eps=eps)
        gw = both[0] if need_w else None
        gb = both[1] if need_b else None
    return gx, gw, gb


def _bn_backward_infer(g: Any, x: Any, w: Any, *, eps: float) -> tuple:
    shape = _bn_check("batch_norm_backward", x, (w, "weight"))
    if tuple(g.shape) != shape:
        raise ShapeError(f"batch_norm_backward: gradient of shape {tuple(g.shape)} does not "
                         f"match the input of shape {shape}")
    dtype = np.promote_types(g.dtype, x.dtype)
    return shape, np.promote_types(dtype, w.dtype) if _is_tensor(w) else dtype


def _bn_backward_impl(g: np.ndarray, x: np.ndarray, w: Any, *, eps: float) -> np.ndarray:
    dtype = np.promote_types(g.dtype, x.dtype)
    if isinstance(w, np.ndarray):
        dtype = np.promote_types(dtype, w.dtype)
    g, x = g.astype(dtype, copy=False), x.astype(dtype, copy=False)
    axes = _bn_axes(x.ndim)
    n = math.prod(x.shape[a] for a in axes) or np.nan
    xhat, rstd, t = _stats(x, axes, n, eps)
    a = np.multiply(g, _bn_param(w, x.ndim, dtype)) if isinstance(w, np.ndarray) else g.copy()
    return _grad_input(a, xhat, rstd, t, axes, n, True)


def _bn_backward_vjp(ctx, h):
    # batch_norm_backward(g, x, w) is layer_norm_backward of the channel-first views with
    # ``g * w`` as its gradient: its derivatives are layer_norm_backward's.
    g, x, w = ctx.args
    eps = ctx.attrs["eps"]
    rank = len(ctx.inputs[1].shape)
    need_g, need_x, need_w = ctx.needs_input_grad
    weighted = _is_tensor(w)
    wb = w.reshape(_bn_shape(rank, ctx.inputs[1].shape[1])) if weighted else None
    a = E.mul(g, wb) if weighted else g
    rows = _LnCtx((_bn_rows(a), _bn_rows(x), 1.0), rank - 1, eps,
                  (need_g or (need_w and weighted), need_x, False))
    from .shape import movedim

    ga, gx_rows, _ = _ln_backward_vjp(rows, _bn_rows(h))
    gx = movedim(gx_rows, 0, 1) if need_x else None
    gg = gw = None
    if ga is not None:
        ga = movedim(ga, 0, 1)
        gg = (E.mul(ga, wb) if weighted else ga) if need_g else None
        gw = R.sum(E.mul(ga, g), _bn_axes(rank)) if need_w and weighted else None
    return gg, gx, gw


class _LnCtx:
    """The part of a VJP context `_ln_backward_vjp` reads, for a layer_norm_backward that
    is not a node of the tape (batch norm's, on channel-first views)."""

    def __init__(self, args: tuple, ndim: int, eps: float, needs: tuple) -> None:
        self.args, self.needs_input_grad = args, needs
        self.attrs = {"ndim": ndim, "eps": eps}
        self.inputs = args


def _bn_param_grads_infer(g: Any, x: Any, *, eps: float) -> tuple:
    shape = _bn_check("batch_norm_param_grads", x)
    if tuple(g.shape) != shape:
        raise ShapeError(f"batch_norm_param_grads: gradient of shape {tuple(g.shape)} does "
                         f"not match the input of shape {shape}")
    return (2, shape[1]), np.promote_types(g.dtype, x.dtype)


def _bn_param_grads_impl(g: np.ndarray, x: np.ndarray, *, eps: float) -> np.ndarray:
    dtype = np.promote_types(g.dtype, x.dtype)
    g, x = g.astype(dtype, copy=False), x.astype(dtype, copy=False)
    axes = _bn_axes(x.ndim)
    n = math.prod(x.shape[a] for a in axes) or np.nan
    xhat, _, t = _stats(x, axes, n, eps)
    np.multiply(g, xhat, out=t)
    return np.stack([np.add.reduce(t, axes), np.add.reduce(g, axes)]).astype(dtype,
                                                                              copy=False)


def _bn_param_grads_vjp(ctx, k):
    # Rows (sum(g * xhat), sum(g)): for g, k[0] * xhat + k[1]; for x, xhat's adjoint on
    # g * k[0], which is batch_norm_backward with k[0] as the weight.
    g, x = ctx.args
    eps = ctx.attrs["eps"]
    rank = len(ctx.inputs[1].shape)
    bshape = _bn_shape(rank, ctx.inputs[1].shape[1])
    need_g, need_x = ctx.needs_input_grad
    kw, kb = k[0], k[1]
    gg = E.add(E.mul(kw.reshape(bshape), _normalized(x, _bn_axes(rank), eps)[0]),
               kb.reshape(bshape)) if need_g else None
    gx = bind(BATCH_NORM_BACKWARD, g, x, kw, eps=eps) if need_x else None
    return gg, gx


def _bn_stats_infer(x: Any) -> tuple:
    shape = _bn_check("batch_norm_stats", x)
    return (2, shape[1]), np.dtype(x.dtype)


def _bn_stats_impl(x: np.ndarray) -> np.ndarray:
    axes = _bn_axes(x.ndim)
    mean = x.mean(axes, keepdims=True)
    xc = x - mean
    var = np.mean(np.multiply(xc, xc, out=xc), axes)
    return np.stack([mean.reshape(var.shape), var]).astype(x.dtype, copy=False)


def _bn_stats_vjp(ctx, k):
    # mean: 1 / n each; biased variance: 2 (x - mean) / n.
    (x,) = ctx.args
    shape = tuple(ctx.inputs[0].shape)
    axes = _bn_axes(len(shape))
    n = math.prod(shape[a] for a in axes)
    bshape = _bn_shape(len(shape), shape[1])
    xc = E.sub(x, R.mean(x, axes, keepdims=True))
    inner = E.add(k[0].reshape(bshape), E.mul(E.mul(k[1].reshape(bshape), 2.0), xc))
    return (E.div(inner, float(n)),)


BATCH_NORM = register(OpDef(
    "batch_norm", _bn_impl, _bn_infer, _bn_vjp, "NativeBatchNormBackward0", saves=(0, 1),
))
BATCH_NORM_BACKWARD = register(OpDef(
    "batch_norm_backward", _bn_backward_impl, _bn_backward_infer, _bn_backward_vjp,
    "NativeBatchNormBackwardBackward0", saves=(0, 1, 2),
))
BATCH_NORM_PARAM_GRADS = register(OpDef(
    "batch_norm_param_grads", _bn_param_grads_impl, _bn_param_grads_infer,
    _bn_param_grads_vjp, "BatchNormParamGradsBackward0", saves=(0, 1),
))
BATCH_NORM_STATS = register(OpDef(
    "batch_norm_stats", _bn_stats_impl, _bn_stats_infer, _bn_stats_vjp,
    "BatchNormStatsBackward0", saves=(0,),
))
