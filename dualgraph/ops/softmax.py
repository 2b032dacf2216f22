"""Softmax and log-softmax: primitives whose forward and gradient are one op each.

As compositions they were about five small ops forward and as many backward; eager mode
pays ~5 us of Python per op. Their backward ops (``log_softmax_backward``,
``softmax_backward``, as in PyTorch) are primitives too, with VJPs written in dualgraph
ops, so double backward works: ``softmax_backward`` is its own adjoint in ``g``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..dtypes import default_float
from ..errors import ShapeError
from ..modes import bind
from . import elementwise as E
from . import reduce as R
from .broadcast import float_dtype, normalize_dim
from .registry import OpDef, register


def _softmax_infer(x: Any, axis: int = 0) -> tuple:
    return tuple(x.shape), float_dtype(np.dtype(x.dtype))


def _as_float(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(default_float())


def _sum(x: np.ndarray, axis: int) -> np.ndarray:
    """The kept sum along ``axis`` (`R.row_sums` along the last)."""
    if axis == x.ndim - 1:
        return R.row_sums(x)
    return np.add.reduce(x, axis=axis, keepdims=True)


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    """``x - max(x)`` along ``axis``: exp of it never overflows."""
    return x - np.maximum.reduce(x, axis=axis, keepdims=True)


def _log_softmax_impl(x: np.ndarray, axis: int = 0) -> np.ndarray:
    x = _as_float(x)
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    if x.ndim == 0:
        return np.zeros((), x.dtype)  # one element: log(1)
    s = _shifted(x, axis)
    s -= np.log(_sum(np.exp(s), axis))
    return s


def _softmax_impl(x: np.ndarray, axis: int = 0) -> np.ndarray:
    x = _as_float(x)
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    if x.ndim == 0:
        return np.ones((), x.dtype)
    e = _shifted(x, axis)
    np.exp(e, out=e)
    e /= _sum(e, axis)
    return e


def _grad_infer(name: str):
    def infer(g: Any, out: Any, axis: int = 0) -> tuple:
        if tuple(g.shape) != tuple(out.shape):
            raise ShapeError(f"{name}: gradient of shape {tuple(g.shape)} does not match the "
                             f"output of shape {tuple(out.shape)}")
        return tuple(out.shape), np.promote_types(g.dtype, out.dtype)

    return infer


def _keep_sum(a: np.ndarray, axis: int) -> np.ndarray:
    return _sum(a, axis) if a.ndim else np.add.reduce(a, axis=None, keepdims=True)


def _log_softmax_backward_impl(g: np.ndarray, out: np.ndarray, axis: int = 0) -> np.ndarray:
    if g.dtype != out.dtype or out.ndim == 0:  # mixed dtypes promote step by step
        return g - np.exp(out) * _keep_sum(g, axis)
    # The same operations in one temporary.
    t = np.exp(out)
    np.multiply(t, _keep_sum(g, axis), out=t)
    return np.subtract(g, t, out=t)


def _softmax_backward_impl(g: np.ndarray, out: np.ndarray, axis: int = 0) -> np.ndarray:
    if g.dtype != out.dtype or out.ndim == 0:
        return out * (g - _keep_sum(g * out, axis))
    t = np.multiply(g, out)
    s = _keep_sum(t, axis)
    np.subtract(g, s, out=t)
    return np.multiply(out, t, out=t)


def _sum_keep(x: Any, axis: int, ndim: int) -> Any:
    return R.sum(x, axis if ndim else None, keepdims=True)


def _log_softmax_vjp(ctx, g):
    return (bind(LOG_SOFTMAX_BACKWARD, g, ctx.out, axis=ctx.attrs["axis"]),)


def _softmax_vjp(ctx, g):
    return (bind(SOFTMAX_BACKWARD, g, ctx.out, axis=ctx.attrs["axis"]),)


def _log_softmax_vjp_arrays(ctx, args, out, g):
    return (_log_softmax_backward_impl(g, out, ctx.attrs["axis"]),)


def _softmax_vjp_arrays(ctx, args, out, g):
    return (_softmax_backward_impl(g, out, ctx.attrs["axis"]),)


def _log_softmax_backward_vjp(ctx, h):
    # y = g - p * S(g), p = exp(out), S = sum along the axis (kept):
    # dL/dg = h - S(h * p); dL/dout = -h * p * S(g).
    g, out = ctx.args
    axis, ndim = ctx.attrs["axis"], len(ctx.inputs[1].shape)
    ng, no = ctx.needs_input_grad
    hp = E.mul(h, E.exp(out))
    gg = E.sub(h, _sum_keep(hp, axis, ndim)) if ng else None
    go = E.neg(E.mul(hp, _sum_keep(g, axis, ndim))) if no else None
    return gg, go


def _softmax_backward_vjp(ctx, h):
    # y = out * (g - S(g * out)): linear and self-adjoint in g; for out,
    # dL/dout = h * (g - S(g * out)) - g * S(h * out).
    g, out = ctx.args
    axis, ndim = ctx.attrs["axis"], len(ctx.inputs[1].shape)
    ng, no = ctx.needs_input_grad
    gg = bind(SOFTMAX_BACKWARD, h, out, axis=axis) if ng else None
    go = None
    if no:
        go = E.sub(E.mul(h, E.sub(g, _sum_keep(E.mul(g, out), axis, ndim))),
                   E.mul(g, _sum_keep(E.mul(h, out), axis, ndim)))
    return gg, go


LOG_SOFTMAX = register(OpDef(
    "log_softmax", _log_softmax_impl, _softmax_infer, _log_softmax_vjp, "LogSoftmaxBackward0",
    saves_out=True, vjp_arrays=_log_softmax_vjp_arrays,
))
SOFTMAX = register(OpDef(
    "softmax", _softmax_impl, _softmax_infer, _softmax_vjp, "SoftmaxBackward0",
    saves_out=True, vjp_arrays=_softmax_vjp_arrays,
))
LOG_SOFTMAX_BACKWARD = register(OpDef(
    "log_softmax_backward", _log_softmax_backward_impl, _grad_infer("log_softmax_backward"),
    _log_softmax_backward_vjp, "LogSoftmaxBackwardDataBackward0", saves=(0, 1),
))
SOFTMAX_BACKWARD = register(OpDef(
    "softmax_backward", _softmax_backward_impl, _grad_infer("softmax_backward"),
    _softmax_backward_vjp, "SoftmaxBackwardDataBackward0", saves=(0, 1),
))


def _softmax_dim(name: str, x: Any, dim: Any, axis: Any, stacklevel: int = 3) -> int:
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{name}: pass either axis= or its alias dim=, not both")
        dim = axis
    ndim = len(x.shape)
    if dim is None:
        # PyTorch's deprecated implicit choice (nn.functional._get_softmax_dim).
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the "
                      "call to include dim=X as an argument.", UserWarning,
                      stacklevel=stacklevel + 1)
        dim = 0 if ndim in (0, 1, 3) else 1
    return normalize_dim(name, dim, ndim)


def _cast(x: Any, dtype: Any) -> Any:
    if dtype is None:
        return x
    from .shape import astype

    return astype(x, dtype)


def log_softmax(x: Any, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Any:
    """``x - logsumexp(x)`` along ``dim``, in one op (``LogSoftmaxBackward0``); ``dtype=``
    casts the input first. ``dg.log_softmax(logits, dim=1)``"""
    x = _cast(x, dtype)
    return bind(LOG_SOFTMAX, x, axis=_softmax_dim("log_softmax", x, dim, axis))


def softmax(x: Any, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``dim``, shifted by the max so it never overflows, in
    one op (``SoftmaxBackward0``). ``dg.softmax(x, dim=-1)``"""
    x = _cast(x, dtype)
    return bind(SOFTMAX, x, axis=_softmax_dim("softmax", x, dim, axis))

