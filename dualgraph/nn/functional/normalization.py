"""Normalisation. `layer_norm` is a registry primitive (ops/norm.py); batch, group,
instance, RMS and local response norm are compositions. Running statistics are updated in
place under `no_grad`, so a compiled call writes them back exactly as an eager call changes
them (see `Module.register_buffer`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...eager.grad_mode import no_grad
from ...errors import ShapeError
from ...modes import bind
from ...ops import elementwise as E
from ...ops import math as M
from ...ops import reduce as R
from ...ops import shape as S
from ...ops.broadcast import axis_alias
from ...ops.mixin import TensorOps
from ...ops.norm import BATCH_NORM, BATCH_NORM_STATS, layer_norm
from ...ops.pool import pad

__all__ = [
    "batch_norm", "group_norm", "instance_norm", "layer_norm", "local_response_norm", "normalize",
    "rms_norm",
]


@axis_alias
def normalize(x: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Any:
    """``x / max(||x||_p, eps)`` along ``dim``; ``p`` 0 counts the non-zeros and ``p``
    ``±inf`` takes the largest (smallest) magnitude, as ``torch.linalg.vector_norm``. An
    all-zero line gives zeros, and its gradient is ``1 / eps`` times the seed, as PyTorch's
    (the norm's root passes no gradient at zero instead of ``0 * inf``)."""
    if p == 1:
        norm = R.sum(E.abs(x), dim, keepdims=True)
    elif p == 0:
        norm = R.sum(E.ne(x, 0.0).astype(x.dtype), dim, keepdims=True)
    elif p == math.inf:
        norm = R.amax(E.abs(x), dim, keepdims=True)
    elif p == -math.inf:
        norm = R.amin(E.abs(x), dim, keepdims=True)
    else:
        total = R.sum(E.mul(x, x) if p == 2 else E.pow(E.abs(x), p), dim, keepdims=True)
        nonzero = E.gt(total, 0.0)
        # The root of 1 where the total is 0, then 0 put back: no inf in the gradient.
        safe = E.where(nonzero, total, 1.0)
        root = E.sqrt(safe) if p == 2 else E.pow(safe, 1.0 / p)
        norm = E.where(nonzero, root, 0.0)
    return E.div(x, E.maximum(norm, eps))


def _channel_param(name: str, t: Any, c: int) -> None:
    if t is not None and math.prod(t.shape) != c:
        raise ShapeError(f"{name} should contain {c} elements not {math.prod(t.shape)}")


def _affine(out: Any, weight: Any, bias: Any, bshape: tuple) -> Any:
    """``out * weight + bias`` with per-channel parameters broadcast along dim 1."""
    if weight is not None:
        out = E.mul(out, S.reshape(weight, bshape))
    if bias is not None:
        out = E.add(out, S.reshape(bias, bshape))
    return out


def _update_running(buf: Any, batch: Any, momentum: Any) -> None:
    """``buf := (1 - momentum) * buf + momentum * batch``, in place; ``momentum`` may be a
    0-d tensor (BatchNorm's cumulative average, ``1 / num_batches_tracked``)."""
    keep = E.sub(1.0, momentum) if isinstance(momentum, TensorOps) else 1.0 - momentum
    with no_grad():
        buf.copy_(E.add(E.mul(buf, keep), E.mul(batch, momentum)))


# The dtypes of batch norm's compiled routines.
_ROUTINE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def batch_norm(input: Any, running_mean: Any, running_var: Any,  # noqa: A002
               weight: Any = None, bias: Any = None, training: bool = False,
               momentum: Any = 0.1, eps: float = 1e-5) -> Any:
    """Normalise each channel (dim 1) over the batch and spatial dims.

    Training: with the batch's mean and biased variance, and ``running_mean`` /
    ``running_var`` (when given) updated in place with ``momentum`` and the *unbiased*
    variance, as PyTorch. Otherwise with the running statistics.

    >>> y = F.batch_norm(x, rm, rv, training=True)   # rm, rv change in place
    """
    shape = tuple(input.shape)
    c = shape[1] if len(shape) > 1 else 0
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _channel_param(name, t, c)
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if training:
        n = math.prod(shape) // c if c else 0
        if n <= 1:
            raise ValueError("Expected more than 1 value per channel when training, got "
                             f"input size {shape}")
        dtype = np.dtype(input.dtype)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if dtype in _ROUTINE_DTYPES:
                    stats = bind(BATCH_NORM_STATS, input)
                    mean, var = stats[0], stats[1]
                else:
                    axes = (0,) + tuple(range(2, len(shape)))
                    mean = R.mean(input, axes)
                    centred = E.sub(input, S.reshape(mean, bshape))
                    var = R.mean(E.mul(centred, centred), axes)
            if running_mean is not None:
                _update_running(running_mean, mean, momentum)
            if running_var is not None:
                _update_running(running_var, E.mul(var, n / (n - 1)), momentum)
        if dtype in _ROUTINE_DTYPES and all(p is None or np.dtype(p.dtype) == dtype
                                            for p in (weight, bias)):
            # One op each way, whose compiled routine takes the channel count as an
            # argument: the forward and the input's and parameters' gradients are not
            # generated again for each layer's channel count.
            w = 1.0 if weight is None else S.reshape(weight, (c,))
            b = 0.0 if bias is None else S.reshape(bias, (c,))
            return bind(BATCH_NORM, input, w, b, eps=float(eps))
        # Other dtypes (or parameters of another dtype): a channel's values are a row
        # of the channel-first input.
        rows = S.movedim(input, 1, 0)
        out = S.movedim(layer_norm(rows, tuple(rows.shape[1:]), eps=eps), 0, 1)
        return _affine(out, weight, bias, bshape)
    else:
        if running_mean is None or running_var is None:
            which = "running_mean" if running_mean is None else "running_var"
            raise RuntimeError(f"{which} must be defined in evaluation mode")
        var = S.reshape(running_var, bshape)
        centred = E.sub(input, S.reshape(running_mean, bshape))
    out = E.mul(centred, E.div(1.0, E.sqrt(E.add(var, eps))))
    return _affine(out, weight, bias, bshape)


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None,  # noqa: A002
               eps: float = 1e-5) -> Any:
    """Normalise each group of ``C // num_groups`` channels (with their spatial dims) per
    sample, then a per-channel affine. ``F.group_norm(x, 2, w, b)``"""
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise ValueError(f"Expected at least 2 dimensions for input tensor but received "
                         f"{len(shape)}")
    n, c = shape[0], shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ShapeError("Expected number of channels in input to be divisible by "
                         f"num_groups, but got input of shape {list(shape)} and "
                         f"num_groups={num_groups}")
    _channel_param("weight", weight, c)
    _channel_param("bias", bias, c)
    rest = math.prod(shape) // (n * num_groups) if n else 0
    grouped = S.reshape(input, (n, num_groups, rest))
    out = S.reshape(layer_norm(grouped, (rest,), eps=eps), shape)
    return _affine(out, weight, bias, (1, c) + (1,) * (len(shape) - 2))


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None,  # noqa: A002
                  weight: Any = None, bias: Any = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Normalise each channel of each sample over its spatial dims (running statistics,
    when given, are updated with the batch average of the per-sample ones)."""
    shape = tuple(input.shape)
    if len(shape) < 3:
        raise ValueError(f"instance_norm: expected an input of shape (N, C, *spatial), "
                         f"got {shape}")
    c = shape[1]
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    spatial = shape[2:]
    k = math.prod(spatial)
    if k <= 1:
        raise ValueError("Expected more than 1 spatial element when training, got input "
                         f"size {shape}")
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        _channel_param(name, t, c)
    if running_mean is not None or running_var is not None:
        axes = tuple(range(2, len(shape)))
        mean = R.mean(input, axes, keepdims=True)
        centred = E.sub(input, mean)
        if running_mean is not None:
            _update_running(running_mean, R.mean(S.reshape(mean, shape[:2]), 0), momentum)
        if running_var is not None:
            var = R.mean(E.mul(centred, centred), axes)
            _update_running(running_var, E.mul(R.mean(var, 0), k / (k - 1)), momentum)
    out = layer_norm(input, spatial, eps=eps)
    return _affine(out, weight, bias, bshape)


# Normalisation over the feature dims and across channels.
def rms_norm(input: Any, normalized_shape: Any, weight: Any = None,  # noqa: A002
             eps: float | None = None) -> Any:
    """``x / sqrt(mean(x ** 2) + eps) * weight`` over the last ``len(normalized_shape)``
    dims; ``eps`` defaults to the dtype's machine epsilon, as PyTorch's."""
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or input.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    if eps is None:
        eps = float(np.finfo(np.dtype(input.dtype)).eps)
    axes = tuple(range(input.ndim - k, input.ndim))
    out = E.mul(input, M.rsqrt(E.add(R.mean(E.mul(input, input), axes, keepdims=True), eps)))
    return out if weight is None else E.mul(out, weight)


def local_response_norm(input: Any, size: int, alpha: float = 1e-4,  # noqa: A002
                        beta: float = 0.75, k: float = 1.0) -> Any:
    """``x / (k + alpha * mean of x ** 2 over size neighbouring channels) ** beta``, the
    window centred as PyTorch's (``size // 2`` channels before, ``(size - 1) // 2``
    after, zero beyond the ends)."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         "dimensions)")
    if math.prod(input.shape) == 0:
        return input
    c = input.shape[1]
    sq = E.mul(input, input)
    before, after = size // 2, (size - 1) // 2
    spec = [(0, 0)] * input.ndim
    spec[1] = (before, after)
    flat = [p for pair in reversed(spec) for p in pair]
    padded = pad(sq, tuple(flat))
    total = None
    for i in range(size):
        part = padded[:, i:i + c]
        total = part if total is None else E.add(total, part)
    div = E.pow(E.add(E.mul(E.div(total, float(size)), alpha), k), beta)
    return E.div(input, div)

