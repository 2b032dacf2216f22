"""`dg.nn.functional`: compositions of registry ops (``dropout`` binds its own op)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..eager.creation import rand
from ..eager.internal import array_of
from ..eager.tensor import Tensor, random_key
from ..errors import ShapeError
from ..modes import bind
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import loss as N
from ..ops import math as M
from ..ops import random as RND
from ..ops import reduce as R
from ..ops import shape as S
from ..ops import softmax as SM
from ..ops.broadcast import add_axis_aliases
from ..ops.mixin import TensorOps

__all__ = [
    "binary_cross_entropy_with_logits", "cross_entropy", "dropout", "linear", "log_softmax",
    "mse_loss", "relu", "sigmoid", "softmax", "tanh",
]


def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """``x @ weight.T + bias``; on 2-D input with a bias one ``addmm`` (``AddmmBackward0``)."""
    if not isinstance(x, TensorOps):
        raise TypeError(f"linear: input must be a tensor, got {type(x).__name__}")
    if x.ndim < 1:
        raise ValueError(f"linear: input must have at least 1 dimension, got shape {x.shape}")
    if x.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"linear: input of shape {tuple(x.shape)} does not match weight of shape "
            f"{tuple(weight.shape)} (in_features {weight.shape[-1]})"
        )
    if bias is not None and x.ndim == 2:
        return L.addmm(bias, x, S.transpose(weight))
    if bias is not None and x.ndim > 2 and weight.ndim == 2:
        # As PyTorch's linear: the leading dimensions fold into one, so the product is one
        # GEMM (addmm) and so is the weight's gradient (not a batch of them summed).
        lead = tuple(x.shape[:-1])
        rows = math.prod(lead)
        out = L.addmm(bias, S.reshape(x, (rows, x.shape[-1])), S.transpose(weight))
        return S.reshape(out, lead + (weight.shape[0],))
    out = L.matmul(x, S.transpose(weight))
    return out if bias is None else E.add(out, bias)


def relu(x: Any) -> Any:
    return E.relu(x)


def sigmoid(x: Any) -> Any:
    return E.sigmoid(x)


def tanh(x: Any) -> Any:
    return E.tanh(x)


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return R.mean(loss)
    if reduction == "sum":
        return R.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _same_shape(name: str, a: Any, b: Any) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"{name}: input shape {tuple(a.shape)} and target shape {tuple(b.shape)} differ"
        )


def mse_loss(input: Any, target: Any, reduction: str = "mean") -> Any:  # noqa: A002
    """Mean squared error ``(input - target) ** 2``, reduced."""
    target = _as_operand(target)
    _same_shape("mse_loss", input, target)
    # pow(d, 2), not d * d: d has one consumer, so backward needs no accumulation.
    return _reduce(E.pow(E.sub(input, target), 2), reduction)


def binary_cross_entropy_with_logits(
    input: Any, target: Any, weight: Any = None, size_average: Any = None,  # noqa: A002
    reduce: Any = None, reduction: str = "mean", pos_weight: Any = None,
) -> Any:
    """``max(x, 0) - x * y + log(1 + exp(-|x|))``: stable for any logit. ``weight``
    scales each element's loss; ``pos_weight`` (broadcast along the last dim, one per
    class) scales the positive term: ``(1 - y) x + (1 + (p - 1) y) (log(1 + exp(-|x|)) +
    max(-x, 0))``, as PyTorch."""
    target = _as_operand(target)
    _same_shape("binary_cross_entropy_with_logits", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    soft = E.log(E.add(E.exp(E.neg(E.abs(input))), 1.0))
    if pos_weight is None:
        loss = E.add(E.sub(E.relu(input), E.mul(input, target)), soft)
    else:
        scale = E.add(E.mul(E.sub(_as_operand(pos_weight), 1.0), target), 1.0)
        loss = E.add(E.mul(E.sub(1.0, target), input),
                     E.mul(scale, E.add(soft, E.relu(E.neg(input)))))
    if weight is not None:
        loss = E.mul(loss, _as_operand(weight))
    return _reduce(loss, reduction)


def _as_operand(x: Any) -> Any:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    return np.asarray(x, dtype=np.float32)


def dropout(input: Any, p: float = 0.5, training: bool = True,  # noqa: A002
            inplace: bool = False) -> Any:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``, in
    training; the input itself otherwise (as PyTorch).

    Eagerly the mask comes from dualgraph's generator (`dg.manual_seed`); backward uses the
    same mask. Compiled, each call draws a new mask (see docs/compile.md, "Random numbers").

    >>> y = dg.nn.functional.dropout(dg.ones(4), p=0.5)   # elements are 0. or 2.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not training or p == 0.0:
        return input
    if not isinstance(input, TensorOps):
        raise TypeError(f"dropout: input must be a tensor, got {type(input).__name__}")
    key, stream = random_key()
    # inplace=True writes the result into ``input`` (its gradient regenerates the mask from
    # the key, so the overwritten input is never needed).
    return _inplace(input, RND.dropout(input, key, p, stream), inplace)


# =====================================================================================
# Activations, all compositions of registry ops (ops/elementwise.py, ops/math.py): they need
# no lowering of their own and fuse into one loop when compiled. Where PyTorch's gradient at
# a kink is a convention, the `where` branches pick the same side as PyTorch.

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _inplace(x: Any, out: Any, inplace: bool) -> Any:
    """``inplace=True``: write the result into ``x`` (PyTorch's in-place activations)."""
    return x.copy_(out) if inplace else out


def gelu(x: Any, approximate: str = "none") -> Any:
    """``x * Phi(x)``: exact through ``erf``, or PyTorch's ``approximate='tanh'`` form."""
    if approximate == "none":
        return E.mul(E.mul(x, 0.5), E.add(M.erf(E.mul(x, _SQRT_HALF)), 1.0))
    if approximate == "tanh":
        inner = E.mul(E.add(x, E.mul(E.mul(E.mul(x, x), x), 0.044715)), _SQRT_2_OVER_PI)
        return E.mul(E.mul(x, 0.5), E.add(E.tanh(inner), 1.0))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x: Any, inplace: bool = False) -> Any:
    """``x * sigmoid(x)`` (swish)."""
    return _inplace(x, E.mul(x, E.sigmoid(x)), inplace)


def elu(x: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    return _inplace(x, E.where(E.gt(x, 0), x, E.mul(M.expm1(x), alpha)), inplace)


def celu(x: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``."""
    return _inplace(x, E.where(E.gt(x, 0), x, E.mul(M.expm1(E.div(x, alpha)), alpha)), inplace)


def selu(x: Any, inplace: bool = False) -> Any:
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    return _inplace(x, E.mul(elu(x, _SELU_ALPHA), _SELU_SCALE), inplace)


def softplus(x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    bx = E.mul(x, beta) if beta != 1 else x
    # The soft branch sees 0 where it is not taken: its gradient there is zero, never
    # 0 * (inf / inf) = NaN from an exp that overflowed.
    soft = M.log1p(E.exp(E.where(E.gt(bx, threshold), 0.0, bx)))
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
    out = E.where(E.le(x, min_val), min_val, E.where(E.ge(x, max_val), max_val, x))
    return _inplace(x, out, inplace)


def relu6(x: Any, inplace: bool = False) -> Any:
    """``hardtanh(x, 0, 6)``."""
    return hardtanh(x, 0.0, 6.0, inplace)


def hardsigmoid(x: Any, inplace: bool = False) -> Any:
    """0 below -3, 1 above 3, ``x / 6 + 1 / 2`` between."""
    mid = E.add(E.div(x, 6.0), 0.5)
    return _inplace(x, E.where(E.le(x, -3.0), 0.0, E.where(E.ge(x, 3.0), 1.0, mid)), inplace)


def hardswish(x: Any, inplace: bool = False) -> Any:
    """``x * hardsigmoid(x)``: 0 below -3, ``x`` above 3, ``x (x + 3) / 6`` between."""
    # x * relu6(x + 3) / 6, as PyTorch writes it: -0.0 below -3 for negative x.
    return _inplace(x, E.div(E.mul(x, hardtanh(E.add(x, 3.0), 0.0, 6.0)), 6.0), inplace)


def leaky_relu(x: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """``x`` where positive, else ``negative_slope * x``."""
    return _inplace(x, E.where(E.gt(x, 0), x, E.mul(x, negative_slope)), inplace)


def mish(x: Any, inplace: bool = False) -> Any:
    """``x * tanh(softplus(x))``."""
    return _inplace(x, E.mul(x, E.tanh(softplus(x))), inplace)


def logsigmoid(x: Any) -> Any:
    """``log(sigmoid(x))`` without overflow: ``min(x, 0) - log1p(exp(-|x|))``."""
    return E.sub(E.minimum(x, 0.0), M.log1p(E.exp(E.neg(E.abs(x)))))


def softmin(x: Any, dim: Any = None) -> Any:
    """``softmax(-x)`` along ``dim``."""
    return softmax(E.neg(x), dim=dim)


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


__all__ += [
    "celu", "elu", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "logsigmoid",
    "mish", "normalize", "relu6", "selu", "silu", "softmin", "softplus", "softsign",
]


# ---- normalisation and modules
# `layer_norm` is a registry primitive (ops/norm.py); batch, group and instance norm are
# compositions. Running statistics are updated in place under `no_grad`, so a compiled call
# writes them back exactly as an eager call changes them (see `Module.register_buffer`).

from ..eager.grad_mode import no_grad  # noqa: E402
from ..ops.norm import layer_norm  # noqa: E402


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
    axes = (0,) + tuple(range(2, len(shape)))
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if training:
        n = math.prod(shape) // c if c else 0
        if n <= 1:
            raise ValueError("Expected more than 1 value per channel when training, got "
                             f"input size {shape}")
        mean = R.mean(input, axes, keepdims=True)
        centred = E.sub(input, mean)
        var = R.mean(E.mul(centred, centred), axes, keepdims=True)
        if running_mean is not None:
            _update_running(running_mean, S.reshape(mean, (c,)), momentum)
        if running_var is not None:
            _update_running(running_var, E.mul(S.reshape(var, (c,)), n / (n - 1)), momentum)
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


__all__ += ["batch_norm", "group_norm", "instance_norm", "layer_norm"]
# ============================================================== convolution
# conv2d is one primitive (ops/conv.py, PyTorch's ConvolutionBackward0); conv1d runs it with
# a unit height; conv_transpose2d, unfold and fold are matrix products and im2col / col2im.
# Arguments are checked here with PyTorch's messages, then made canonical: pairs, and
# padding as ((top, bottom), (left, right)).
from ..ops import conv as C  # noqa: E402


def _ints(name: str, value: Any, n: int, what: str = "convolution") -> tuple:
    """``value`` (an int or a sequence of one or ``n`` ints) as an ``n``-tuple."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    if isinstance(value, (tuple, list)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return (int(value[0]),) * n
        if len(value) == n:
            return tuple(int(v) for v in value)
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {n} values to match "
            f"the {what} dimensions, but got {name}={list(value)}")
    raise TypeError(f"{name} must be an int or a tuple of {n} ints, got "
                    f"{type(value).__name__} {value!r}")


def _positive(stride: tuple, dilation: tuple, groups: Any) -> None:
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("non-positive dilation is not supported")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError(f"non-positive groups is not supported (groups={groups!r})")


def _conv_padding(padding: Any, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """PyTorch's padding argument (ints, 'valid', 'same') as ((before, after), ...)."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: {padding!r}")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        # The total d*(k-1) split with the extra one at the end (PyTorch's rule).
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    pads = _ints("padding", padding, n)
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    return tuple((p, p) for p in pads)


def _batched(name: str, x: Any, spatial: int) -> tuple[Any, bool]:
    """``x`` with a batch dimension (added for unbatched input), and whether it was added."""
    if not isinstance(x, TensorOps):
        raise TypeError(f"{name}: input must be a tensor, got {type(x).__name__}")
    if x.ndim == spatial + 2:
        return x, False
    if x.ndim == spatial + 1:
        return S.reshape(x, (1,) + tuple(x.shape)), True
    raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input "
                       f"to {name}, but got input of size: {list(x.shape)}")


def _unbatched(out: Any, added: bool) -> Any:
    return S.reshape(out, tuple(out.shape[1:])) if added else out


def _weight(name: str, w: Any, ndim: int) -> None:
    if not isinstance(w, TensorOps):
        raise TypeError(f"{name}: weight must be a tensor, got {type(w).__name__}")
    if w.ndim != ndim:
        raise RuntimeError(f"{name}: expected a {ndim}-D weight, got weight of size "
                           f"{list(w.shape)}")


def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """2-D convolution (cross-correlation, as PyTorch) of (N, C, H, W) or (C, H, W) input
    with weight (out_channels, C/groups, kH, kW); ``padding`` may be ints, 'valid' or 'same'.

    >>> y = F.conv2d(dg.randn(1, 3, 8, 8), dg.randn(4, 3, 3, 3), padding=1)  # (1, 4, 8, 8)
    """
    x, added = _batched("conv2d", input, 2)
    _weight("conv2d", weight, 4)
    stride, dilation = _ints("stride", stride, 2), _ints("dilation", dilation, 2)
    _positive(stride, dilation, groups)
    pads = _conv_padding(padding, tuple(weight.shape[2:]), stride, dilation)
    return _unbatched(C.conv2d(x, weight, bias, stride, pads, dilation, groups), added)


def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """1-D convolution of (N, C, L) or (C, L) input with weight (out_channels, C/groups, k):
    the 2-D primitive on a unit height."""
    x, added = _batched("conv1d", input, 1)
    _weight("conv1d", weight, 3)
    (s,), (d,) = _ints("stride", stride, 1), _ints("dilation", dilation, 1)
    _positive((s,), (d,), groups)
    (pad,) = _conv_padding(padding, tuple(weight.shape[2:]), (s,), (d,))
    n, c, length = x.shape
    o, cg, k = weight.shape
    out = C.conv2d(S.reshape(x, (n, c, 1, length)), S.reshape(weight, (o, cg, 1, k)), bias,
                   (1, s), ((0, 0), pad), (1, d), groups)
    return _unbatched(S.reshape(out, (n, o, out.shape[3])), added)


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 2-D convolution (the gradient of `conv2d` with respect to its input) of
    (N, C_in, H, W) input with weight (C_in, C_out/groups, kH, kW): each group's columns
    ``weight^T @ x`` summed into the output by ``col2im``."""
    x, added = _batched("conv_transpose2d", input, 2)
    _weight("conv_transpose2d", weight, 4)
    if isinstance(padding, str):
        raise TypeError("conv_transpose2d(): argument 'padding' must be tuple of ints, not str")
    stride, dilation = _ints("stride", stride, 2), _ints("dilation", dilation, 2)
    _positive(stride, dilation, groups)
    pads = _ints("padding", padding, 2)
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    opad = _ints("output_padding", output_padding, 2)
    if any(op >= max(s, d) or op < 0 for op, s, d in zip(opad, stride, dilation)):
        raise RuntimeError(
            f"output padding must be smaller than either stride or dilation, but got "
            f"output_padding_height: {opad[0]} output_padding_width: {opad[1]} stride_height: "
            f"{stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
            f"dilation_width: {dilation[1]}")
    n, cin, h, w = x.shape
    wc, cog, kh, kw = weight.shape
    if wc % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
            f"0, but got weight of size {list(weight.shape)} instead")
    if cin != wc:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
            f"{list(x.shape)} to have {wc} channels, but got {cin} channels instead")
    if x.dtype != weight.dtype:
        raise RuntimeError(f"conv_transpose2d: input type ({x.dtype}) and weight type "
                           f"({weight.dtype}) should be the same")
    cout = cog * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected bias to be "
            f"1-dimensional with {cout} elements, but got bias of size {list(bias.shape)} "
            f"instead")
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                 zip((h, w), stride, pads, dilation, (kh, kw), opad))
    if min(size) < 1:
        raise RuntimeError(f"conv_transpose2d: the output size {size} of input "
                           f"{list(x.shape)} is too small")
    cin_g, k = cin // groups, cog * kh * kw
    # The output's end padding shrinks by output_padding, so col2im's windows number (H, W).
    canon = tuple((p, p - op) for p, op in zip(pads, opad))
    wt = S.transpose(S.reshape(weight, (groups, cin_g, k)), (0, 2, 1))  # (G, K, Cin_g)
    cols = L.matmul(wt, S.reshape(x, (n, groups, cin_g, h * w)))  # (N, G, K, H*W)
    out = C.col2im(S.reshape(cols, (n, groups * k, h * w)), size, (kh, kw), dilation, canon,
                   stride)
    if bias is not None:
        out = E.add(out, S.reshape(bias, (cout, 1, 1)))
    return _unbatched(out, added)


def _fold_args(kernel_size: Any, dilation: Any, padding: Any, stride: Any, name: str) -> tuple:
    kernel = _ints("kernel_size", kernel_size, 2, name)
    dilation, stride = _ints("dilation", dilation, 2, name), _ints("stride", stride, 2, name)
    pads = _ints("padding", padding, 2, name)
    if min(kernel) <= 0 or min(dilation) <= 0 or min(stride) <= 0 or min(pads) < 0:
        raise RuntimeError(
            f"{name}: kernel_size, dilation and stride must be positive and padding "
            f"non-negative, got kernel_size={kernel}, dilation={dilation}, padding={pads}, "
            f"stride={stride}")
    return kernel, dilation, tuple((p, p) for p in pads), stride


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,  # noqa: A002
           stride: Any = 1) -> Any:
    """Sliding blocks of (N, C, H, W) or (C, H, W) input as columns, (N, C*kH*kW, L)
    (im2col); `fold` sums them back.

    >>> F.unfold(dg.ones(1, 2, 4, 4), 3).shape
    (1, 18, 4)
    """
    x, added = _batched("unfold", input, 2)
    geometry = _fold_args(kernel_size, dilation, padding, stride, "unfold")
    return _unbatched(C.im2col(x, *geometry), added)


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1,  # noqa: A002
         padding: Any = 0, stride: Any = 1) -> Any:
    """Sum columns (N, C*kH*kW, L) or (C*kH*kW, L) of sliding blocks into an image of
    ``output_size`` (col2im): the adjoint of `unfold`."""
    if not isinstance(input, TensorOps):
        raise TypeError(f"fold: input must be a tensor, got {type(input).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    added = input.ndim == 2
    x = S.reshape(input, (1,) + tuple(input.shape)) if added else input
    size = _ints("output_size", output_size, 2, "fold")
    geometry = _fold_args(kernel_size, dilation, padding, stride, "fold")
    return _unbatched(C.col2im(x, size, *geometry), added)


__all__ += ["conv1d", "conv2d", "conv_transpose2d", "fold", "unfold"]
# ---- indexing (dualgraph/ops/index.py)
def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """int64 one-hot encoding, ``tensor.shape + (num_classes,)``; the default
    ``num_classes=-1`` (``max + 1``) depends on the data, so it runs eagerly only."""
    from ..ops.index import one_hot as _one_hot

    return _one_hot(tensor, num_classes)


def embedding(input: Any, weight: Any, padding_idx: int | None = None,  # noqa: A002
              max_norm: Any = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Any:
    """Rows of ``weight`` picked by int ``input``: ``weight[input]``. The gradient
    scatter-adds into the rows; row ``padding_idx`` gets none. With ``max_norm``, each
    looked-up row whose ``norm_type``-norm exceeds it is first scaled in place (under
    ``no_grad``) by ``max_norm / (norm + 1e-7)``, as PyTorch's ``embedding_renorm_``."""
    from ..ops.index import embedding as _embedding

    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are "
                                  "not supported")
    if max_norm is not None:
        with no_grad():
            idx = S.reshape(input, (-1,))
            rows = _embedding(idx, weight)
            a = E.abs(rows)
            p = float(norm_type)
            norm = (R.amax(a, 1) if p == math.inf else R.sum(E.ne(a, 0.0), 1) if p == 0
                    else R.sum(a, 1) if p == 1 else E.sqrt(R.sum(E.mul(a, a), 1)) if p == 2
                    else E.pow(R.sum(E.pow(a, p), 1), 1.0 / p))
            scale = E.where(E.gt(norm, max_norm), E.div(max_norm, E.add(norm, 1e-7)), 1.0)
            weight[idx] = E.mul(rows, S.reshape(scale.astype(rows.dtype), (-1, 1)))
    return _embedding(input, weight, padding_idx)


__all__ += ["embedding", "one_hot"]
# ============================================================ pooling and padding
# Pooling, padding and resampling live in `dualgraph.ops.pool` (primitives and the argument
# rules); these are PyTorch's functional spellings of them.
from ..ops.pool import (  # noqa: E402
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    interpolate,
    max_pool1d,
    max_pool2d,
    pad,
)


def upsample(input: Any, size: Any = None, scale_factor: Any = None,  # noqa: A002
             mode: str = "nearest", align_corners: bool | None = None) -> Any:
    """The deprecated spelling of `interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


__all__ += [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "avg_pool1d", "avg_pool2d", "interpolate", "max_pool1d", "max_pool2d", "pad", "upsample",
]
# =====================================================================================
# Losses and attention. softmax, log_softmax and nll_loss are primitives (ops/softmax.py,
# ops/loss.py): cross_entropy with integer targets is two ops forward and two backward, as
# in PyTorch.


def softmax(input: Any, dim: Any = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``dim`` (PyTorch's ``F.softmax``)."""
    return SM.softmax(input, dim, dtype)


def log_softmax(input: Any, dim: Any = None, _stacklevel: int = 3,  # noqa: A002
                dtype: Any = None) -> Any:
    """``x - logsumexp(x)`` along ``dim`` (PyTorch's ``F.log_softmax``)."""
    return SM.log_softmax(input, dim, dtype)


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """PyTorch's deprecated ``size_average``/``reduce`` flags, when given, decide."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _check_input(name: str, x: Any) -> None:
    if not isinstance(x, TensorOps):
        raise TypeError(f"{name}: input must be a tensor, got {type(x).__name__}")


def _target(target: Any) -> Any:
    return target if hasattr(target, "shape") else np.asarray(target)


def _class_shape(x: Any, class_dim: int) -> tuple:
    """``(1, ..., C, ..., 1)``: a (C,) weight viewed to broadcast along ``class_dim``."""
    return tuple(x.shape[class_dim] if i == class_dim else 1 for i in range(x.ndim))


def _check_classes(x: Any, target: Any, ignore_index: int) -> None:
    """PyTorch's IndexError for a class target out of range, eagerly (a tracer's values
    are unknown: compiled kernels check as they read)."""
    data = target if isinstance(target, np.ndarray) else (
        array_of(target) if isinstance(target, Tensor) else None)
    if data is None or not data.size or data.dtype.kind not in "iu":
        return
    c = x.shape[0 if x.ndim == 1 else 1] if x.ndim else 0
    if N.classes_in_range(data, c):
        return
    bad = data[(data != ignore_index) & ((data < 0) | (data >= c))]
    if bad.size:
        raise IndexError(f"Target {bad.flat[0]} is out of bounds.")


def _weight_as(weight: Any, dtype: Any) -> Any:
    """A class weight in the loss's dtype (PyTorch requires them equal; we cast)."""
    if weight is None or weight.dtype == dtype:
        return weight
    if isinstance(weight, np.ndarray):
        return np.asarray(weight, dtype)
    return S.astype(weight, dtype)


def nll_loss(input: Any, target: Any, weight: Any = None,  # noqa: A002
             size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
             reduction: str = "mean") -> Any:
    """Negative log-likelihood of log-probabilities ``input`` (C,), (N, C) or
    (N, C, d1, ...) at integer class ``target``; ``weight`` per class, targets equal to
    ``ignore_index`` count for nothing (PyTorch's ``F.nll_loss``)."""
    _check_input("nll_loss", input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = _target(target)
    _check_classes(input, target, ignore_index)
    return N.nll_loss(input, target, weight, ignore_index, reduction)


def cross_entropy(input: Any, target: Any, weight: Any = None,  # noqa: A002
                  size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Any:
    """Cross-entropy of logits ``input`` (C,), (N, C) or (N, C, d1, ...) against integer
    class ``target`` (``nll_loss(log_softmax(input, 1), ...)``) or class probabilities of
    the input's shape, with PyTorch's ``weight``, ``ignore_index``, ``reduction`` and
    ``label_smoothing``.

    The target stays an operand of the ops (never a Python constant), so a target passed
    to a compiled step is a runtime graph input.

    >>> loss = dg.nn.functional.cross_entropy(logits, labels, label_smoothing=0.1)
    """
    if (weight is None and label_smoothing == 0.0 and size_average is None and reduce is None
            and (reduction == "mean" or reduction == "sum")):
        loss = _plain_cross_entropy(input, target, ignore_index, reduction)
        if loss is not None:
            return loss
    _check_input("cross_entropy", input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    N.check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    target = _target(target)
    if input.ndim == 0:
        raise ShapeError("cross_entropy: input must have at least 1 dimension (the classes), "
                         "got a 0-d tensor")
    class_dim = 0 if input.ndim == 1 else 1
    logp = SM.log_softmax(input, class_dim)
    weight = _weight_as(weight, logp.dtype)
    if tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs(logp, target, weight, ignore_index, reduction,
                                    label_smoothing, class_dim)
    _check_classes(input, target, ignore_index)
    loss = N.nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return loss
    # PyTorch's smoothing: (1 - eps) * nll + eps / C * (the loss of a uniform target),
    # each weighted, ignored positions counting 0.
    c = input.shape[class_dim]
    wlogp = logp
    if weight is not None:
        wlogp = E.mul(logp, S.reshape(weight, _class_shape(input, class_dim)))
    smooth = E.where(E.eq(target, ignore_index), 0.0, E.neg(R.sum(wlogp, class_dim)))
    if reduction == "sum":
        smooth = R.sum(smooth)
    elif reduction == "mean":
        # The summed weights of the counted targets: nll_loss of -1 everywhere, summed.
        ones = S.broadcast_to(np.array(-1.0, dtype=logp.dtype), tuple(input.shape))
        total = N.nll_loss(ones, target, weight, ignore_index, "sum")
        smooth = E.div(R.sum(smooth), total)
    return E.add(E.mul(loss, 1.0 - label_smoothing), E.mul(smooth, label_smoothing / c))


def _plain_cross_entropy(input: Any, target: Any, ignore_index: int,  # noqa: A002
                         reduction: str) -> Any:
    """The training-loop case, float (N, C) logits against (N,) integer classes with no
    weights or smoothing: the same two binds as the general path, without re-checking
    what these conditions already settle (every step pays those checks, twice in-step
    what they cost alone). ``None`` when the case does not apply."""
    if not isinstance(input, TensorOps) or not hasattr(target, "shape"):
        return None
    shape, tshape = tuple(input.shape), tuple(target.shape)
    if (len(shape) != 2 or tshape != shape[:1] or not shape[0]
            or np.dtype(input.dtype).kind != "f" or np.dtype(target.dtype).kind not in "iu"):
        return None
    logp = bind(SM.LOG_SOFTMAX, input, axis=1)
    _check_classes(input, target, ignore_index)
    return bind(N.NLL_LOSS, logp, target, 1.0, ignore_index=int(ignore_index),
                reduction=reduction)


def _cross_entropy_probs(logp: Any, target: Any, weight: Any, ignore_index: int,
                         reduction: str, label_smoothing: float, class_dim: int) -> Any:
    if np.dtype(target.dtype).kind != "f":
        raise N.TargetDtypeError("Expected floating point type for target with class "
                                 f"probabilities, got {target.dtype}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    c = logp.shape[class_dim]
    if label_smoothing > 0.0:
        target = E.add(E.mul(target, 1.0 - label_smoothing), label_smoothing / c)
    prod = E.mul(logp, target)
    if weight is not None:
        prod = E.mul(prod, S.reshape(weight, _class_shape(logp, class_dim)))
    if reduction == "none":
        return E.neg(R.sum(prod, class_dim))
    total = E.neg(R.sum(prod))
    if reduction == "sum":
        return total
    n = math.prod(logp.shape) // c if c else 0
    # An empty batch: 0 / 0, nan (PyTorch).
    return E.div(total, n) if n else E.mul(total, math.nan)


__all__ += ["nll_loss"]


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Any:
    """``softmax(q @ k^T * scale + mask) @ v`` over (..., L, E) queries and (..., S, E) keys:
    PyTorch's ``F.scaled_dot_product_attention``. A bool ``attn_mask`` marks the pairs that
    take part (True), a float one is added to the scores; both broadcast over the batch and
    head dims. ``is_causal`` is the top-left causal mask (query i sees keys 0..i). A query
    row that every mask hides gives zeros, as PyTorch's math kernel does. A composition of
    matmul, where, softmax (and dropout): it traces, fuses and compiles.

    >>> out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_input("scaled_dot_product_attention", t)
        if t.ndim < 2:
            raise ShapeError(f"scaled_dot_product_attention: {name} must have at least 2 "
                             f"dimensions, got shape {tuple(t.shape)}")
    if enable_gqa:
        key, value = _repeat_kv_heads(query, key), _repeat_kv_heads(query, value)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: query {tuple(query.shape)}, key "
                         f"{tuple(key.shape)} and value {tuple(value.shape)} do not fit "
                         "(need query[-1] == key[-1] and key[-2] == value[-2])")
    n_q, n_k = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = E.mul(L.matmul(query, S.transpose(key, -2, -1)), scale)
    masked = is_causal or attn_mask is not None
    if is_causal:
        attn_mask = np.tril(np.ones((n_q, n_k), np.bool_))
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            scores = E.where(attn_mask, scores, -math.inf)
        else:
            scores = E.add(scores, attn_mask)
    if masked:
        # A row with no visible key: softmax of all -inf is nan; PyTorch gives zeros.
        dead = E.eq(R.amax(scores, -1, keepdims=True), -math.inf)
        attn = E.where(dead, 0.0, SM.softmax(E.where(dead, 0.0, scores), -1))
    else:
        attn = SM.softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return L.matmul(attn, value)


def _repeat_kv_heads(query: Any, kv: Any) -> Any:
    """Grouped-query attention: each of ``kv``'s heads (dim -3) serves ``Hq / Hkv``
    consecutive query heads (PyTorch's ``repeat_interleave``), by a broadcast view."""
    if query.ndim < 3 or kv.ndim < 3:
        return kv
    hq, hk = query.shape[-3], kv.shape[-3]
    if hq == hk:
        return kv
    if hk == 0 or hq % hk:
        raise RuntimeError(f"scaled_dot_product_attention: number of heads in key/value "
                           f"({hk}) must divide the number of heads in query ({hq})")
    lead, (s_len, e) = tuple(kv.shape[:-3]), tuple(kv.shape[-2:])
    wide = S.broadcast_to(S.reshape(kv, lead + (hk, 1, s_len, e)),
                          lead + (hk, hq // hk, s_len, e))
    return S.reshape(wide, lead + (hq, s_len, e))


__all__ += ["scaled_dot_product_attention"]


# Everyday losses, compositions of registry ops (they fuse into one loop when compiled).


def _pointwise(name: str, input: Any, target: Any, size_average: Any, reduce: Any,  # noqa: A002
               reduction: str) -> tuple[Any, str]:
    _check_input(name, input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    N.check_reduction(reduction)
    target = _as_operand(target)
    _same_shape(name, input, target)
    return target, reduction


def l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
            reduction: str = "mean") -> Any:
    """``|input - target|``, reduced."""
    target, reduction = _pointwise("l1_loss", input, target, size_average, reduce, reduction)
    return _reduce(E.abs(E.sub(input, target)), reduction)


def smooth_l1_loss(input: Any, target: Any, size_average: Any = None,  # noqa: A002
                   reduce: Any = None, reduction: str = "mean", beta: float = 1.0) -> Any:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input -
    target``); ``beta=0`` is the L1 loss."""
    target, reduction = _pointwise("smooth_l1_loss", input, target, size_average, reduce,
                                   reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = E.abs(E.sub(input, target))
    if beta == 0:
        return _reduce(d, reduction)
    quad = E.div(E.mul(E.mul(d, d), 0.5), beta)
    return _reduce(E.where(E.lt(d, beta), quad, E.sub(d, 0.5 * beta)), reduction)


def huber_loss(input: Any, target: Any, reduction: str = "mean",  # noqa: A002
               delta: float = 1.0, weight: Any = None) -> Any:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    target, reduction = _pointwise("huber_loss", input, target, None, None, reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = E.abs(E.sub(input, target))
    loss = E.where(E.lt(d, delta), E.mul(E.mul(d, d), 0.5), E.mul(E.sub(d, 0.5 * delta), delta))
    return _reduce(loss if weight is None else E.mul(loss, weight), reduction)


def binary_cross_entropy(input: Any, target: Any, weight: Any = None,  # noqa: A002
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Any:
    """``-(y log x + (1 - y) log(1 - x))`` of probabilities ``input``, each log clamped at
    -100 as PyTorch does (so ``x = 0`` or ``1`` gives a finite loss)."""
    target, reduction = _pointwise("binary_cross_entropy", input, target, size_average, reduce,
                                   reduction)
    lx, l1x = _clamped_log(input), _clamped_log(E.sub(1.0, input))
    loss = E.neg(E.add(E.mul(target, lx), E.mul(E.sub(1.0, target), l1x)))
    weight = _weight_as(weight, input.dtype)
    return _reduce(loss if weight is None else E.mul(loss, weight), reduction)


def _clamped_log(x: Any) -> Any:
    """``max(log x, -100)``, with no log of 0 evaluated (NumPy would warn)."""
    pos = E.gt(x, 0)
    return E.where(pos, E.maximum(E.log(E.where(pos, x, 1.0)), -100.0), -100.0)


def kl_div(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
           reduction: str = "mean", log_target: bool = False) -> Any:
    """``target * (log target - input)`` for log-probabilities ``input`` (``0`` where
    ``target == 0``); ``log_target=True`` takes log-probability targets.
    ``reduction='batchmean'`` divides the sum by the batch size."""
    _check_input("kl_div", input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    target = _as_operand(target)
    if log_target:
        loss = E.mul(E.exp(target), E.sub(target, input))
    else:
        pos = E.gt(target, 0)
        # log of a safe value: the branch `where` drops must not make nan gradients.
        xlogy = E.where(pos, E.mul(target, E.log(E.where(pos, target, 1.0))), 0.0)
        loss = E.sub(xlogy, E.mul(target, input))
    if reduction == "batchmean":
        total = R.sum(loss)
        return E.div(total, input.shape[0]) if input.ndim else total
    return _reduce(loss, reduction)


def soft_margin_loss(input: Any, target: Any, size_average: Any = None,  # noqa: A002
                     reduce: Any = None, reduction: str = "mean") -> Any:
    """``log(1 + exp(-target * input))`` for targets in {-1, 1}."""
    target, reduction = _pointwise("soft_margin_loss", input, target, size_average, reduce,
                                   reduction)
    return _reduce(M.log1p(E.exp(E.neg(E.mul(target, input)))), reduction)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """``x1 . x2 / sqrt(max(|x1|^2 |x2|^2, eps^2))`` along ``dim`` (PyTorch's formula)."""
    w12 = R.sum(E.mul(x1, x2), dim)
    w = E.mul(R.sum(E.mul(x1, x1), dim), R.sum(E.mul(x2, x2), dim))
    return E.div(w12, E.sqrt(E.maximum(w, eps * eps)))


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Any:
    """``||x1 - x2 + eps||_p`` along the last dim."""
    d = E.add(E.sub(x1, x2), eps)
    dim = max(max(x1.ndim, x2.ndim) - 1, 0)
    if p == 2:
        return E.sqrt(R.sum(E.mul(d, d), dim, keepdims=keepdim))
    if p == 1:
        return R.sum(E.abs(d), dim, keepdims=keepdim)
    return E.pow(R.sum(E.pow(E.abs(d), p), dim, keepdims=keepdim), 1.0 / p)


__all__ += ["binary_cross_entropy", "cosine_similarity", "huber_loss", "kl_div", "l1_loss",
            "pairwise_distance", "smooth_l1_loss", "soft_margin_loss"]

# ``axis=`` is ``dim=`` for every function that takes ``dim`` (PyTorch's parser).
add_axis_aliases(globals())

# Gated and rearranging layers: compositions of slicing, sigmoid, reshape and permute.


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


def _factor(name: str, r: Any) -> int:
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r <= 0:
        raise RuntimeError(f"{name}: factor must be a positive integer, but got {r!r}")
    return int(r)


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:  # noqa: A002
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r): sub-pixel convolution's rearrangement."""
    r = _factor("pixel_shuffle", upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    lead, k = tuple(lead), len(lead)
    x = S.reshape(input, lead + (c // (r * r), r, r, h, w))
    x = S.permute(x, *range(k), k, k + 3, k + 1, k + 4, k + 2)
    return S.reshape(x, lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:  # noqa: A002
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W): the inverse of `pixel_shuffle`."""
    r = _factor("pixel_unshuffle", downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, "
                           f"but got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor, but input.size(-2)={h}, input.size(-1)={w} and "
                           f"downscale_factor={r}")
    lead, k = tuple(lead), len(lead)
    x = S.reshape(input, lead + (c, h // r, r, w // r, r))
    x = S.permute(x, *range(k), k, k + 2, k + 4, k + 1, k + 3)
    return S.reshape(x, lead + (c * r * r, h // r, w // r))


__all__ += ["glu", "pixel_shuffle", "pixel_unshuffle"]


# Volumetric convolution and pooling, and max unpooling: compositions of the 2-D primitives
# (one 2-D op per kernel offset along the depth, summed or max-reduced), so they trace,
# differentiate and compile with no primitive of their own.
from ..ops import index as I  # noqa: E402
from ..ops import scan as SC  # noqa: E402
from ..ops.pool import pooled_size as _pooled_size  # noqa: E402


def _depth_slices(x: Any, k: int, s: int, d: int, n_out: int) -> list:
    """The ``k`` strided views of dim 2 that a depth window of size ``k`` (dilation ``d``,
    stride ``s``) reads at its ``n_out`` positions."""
    return [x[:, :, i * d:i * d + s * (n_out - 1) + 1:s] for i in range(k)]


def _planes(x: Any) -> tuple[Any, tuple]:
    """(N, C, D, H, W) as (N*D, C, H, W) (each depth slice an image), and (N, D)."""
    n, c, dd, h, w = x.shape
    return S.reshape(S.permute(x, 0, 2, 1, 3, 4), (n * dd, c, h, w)), (n, dd)


def _volumes(y: Any, nd: tuple) -> Any:
    """The inverse of `_planes`: (N*D, C, H, W) back to (N, C, D, H, W)."""
    _, c, h, w = y.shape
    return S.permute(S.reshape(y, nd + (c, h, w)), 0, 2, 1, 3, 4)


def conv3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """3-D convolution of (N, C, D, H, W) or (C, D, H, W) input with weight
    (out_channels, C/groups, kD, kH, kW): the sum over depth offsets of 2-D convolutions of
    the depth slices each offset reads. ``F.conv3d(x, w, padding=1)``"""
    x, added = _batched("conv3d", input, 3)
    _weight("conv3d", weight, 5)
    stride, dilation = _ints("stride", stride, 3), _ints("dilation", dilation, 3)
    _positive(stride, dilation, groups)
    kd = weight.shape[2]
    pads = _conv_padding(padding, tuple(weight.shape[2:]), stride, dilation)
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {weight.shape[1] * groups} "
                           f"channels, but got {x.shape[1]} channels instead")
    if any(pads[0]):
        x = pad(x, (0, 0, 0, 0) + tuple(pads[0]))
    n_out = (x.shape[2] - dilation[0] * (kd - 1) - 1) // stride[0] + 1
    if n_out < 1:
        raise RuntimeError(f"conv3d: the input's depth {x.shape[2]} (padded) is smaller than "
                           f"the kernel's {dilation[0] * (kd - 1) + 1}")
    total = None
    for i, part in enumerate(_depth_slices(x, kd, stride[0], dilation[0], n_out)):
        planes, nd = _planes(part)
        y = C.conv2d(planes, weight[:, :, i], None, stride[1:], pads[1:], dilation[1:], groups)
        total = y if total is None else E.add(total, y)
    out = _volumes(total, nd)
    if bias is not None:
        out = E.add(out, S.reshape(bias, (-1, 1, 1, 1)))
    return _unbatched(out, added)


def conv_transpose3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 3-D convolution of (N, C_in, D, H, W) input with weight
    (C_in, C_out/groups, kD, kH, kW): per depth offset, a transposed 2-D convolution of
    every depth slice, spread along the output depth by the stride and summed."""
    x, added = _batched("conv_transpose3d", input, 3)
    _weight("conv_transpose3d", weight, 5)
    if isinstance(padding, str):
        raise TypeError("conv_transpose3d(): argument 'padding' must be tuple of ints, not str")
    stride, dilation = _ints("stride", stride, 3), _ints("dilation", dilation, 3)
    pads, opad = _ints("padding", padding, 3), _ints("output_padding", output_padding, 3)
    _positive(stride, dilation, groups)
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    if any(op >= max(s, d) or op < 0 for op, s, d in zip(opad, stride, dilation)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, "
                           f"but got output_padding={opad}, stride={stride}, "
                           f"dilation={dilation}")
    kd = weight.shape[2]
    (sd, dd, pd, od), depth = (stride[0], dilation[0], pads[0], opad[0]), x.shape[2]
    full = (depth - 1) * sd + dd * (kd - 1) + 1 + od
    n_out = full - 2 * pd
    if n_out < 1:
        raise RuntimeError(f"conv_transpose3d: the output depth {n_out} of input "
                           f"{list(x.shape)} is too small")
    planes, nd = _planes(x)
    spread = (depth - 1) * sd + 1
    total = None
    for i in range(kd):
        y = conv_transpose2d(planes, weight[:, :, i], None, stride[1:], pads[1:], opad[1:],
                             groups, dilation[1:])  # (N*D, C_out, H', W')
        c, h, w = y.shape[1:]
        z = S.reshape(y, nd + (1, c * h * w))
        if sd > 1:  # the stride's gaps: zeros between the depth slices
            z = S.reshape(pad(z, (0, 0, 0, sd - 1)), (nd[0], depth * sd, c * h * w))
            z = z[:, :spread]
        else:
            z = S.reshape(z, (nd[0], depth, c * h * w))
        z = pad(z, (0, 0, i * dd, full - i * dd - spread))
        total = z if total is None else E.add(total, z)
    total = total[:, pd:pd + n_out]
    out = S.permute(S.reshape(total, (nd[0], n_out, c, h, w)), 0, 2, 1, 3, 4)
    if bias is not None:
        out = E.add(out, S.reshape(bias, (-1, 1, 1, 1)))
    return _unbatched(out, added)


def _pool3d_args(name: str, x: Any, kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any, ceil_mode: bool) -> tuple:
    if x.ndim not in (4, 5) or 0 in tuple(x.shape)[-4:]:
        raise RuntimeError(f"{name}: non-empty 4D or 5D (batch mode) tensor expected for input")
    k = _ints("kernel_size", kernel_size, 3, "pooling")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _ints("stride", stride, 3, "pooling")
    p, d = _ints("padding", padding, 3, "pooling"), _ints("dilation", dilation, 3, "pooling")
    if min(k) <= 0 or min(s) <= 0 or min(d) <= 0:
        raise RuntimeError(f"{name}: kernel_size, stride and dilation must be greater than "
                           f"zero, got {k}, {s}, {d}")
    for i in range(3):
        if p[i] < 0 or 2 * p[i] > (k[i] - 1) * d[i] + 1:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p[i]}, kernel_size={k[i]} and dilation={d[i]}")
    size = tuple(x.shape)[-3:]
    out = tuple(_pooled_size(size[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(3))
    if min(out) < 1:
        raise RuntimeError(f"{name}: given input size {size}, calculated output size {out} is "
                           "too small")
    return k, s, p, d, out


def _as5d(x: Any) -> tuple[Any, bool]:
    return (S.reshape(x, (1,) + tuple(x.shape)), True) if x.ndim == 4 else (x, False)


def _depth_padded(x: Any, before: int, n_needed: int, value: float) -> Any:
    """``x`` padded along dim 2 by ``before`` and at the end up to ``n_needed`` positions."""
    after = max(n_needed - x.shape[2] - before, 0)
    return pad(x, (0, 0, 0, 0, before, after), value=value) if before or after else x


def avg_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """3-D average pooling of (N, C, D, H, W) or (C, D, H, W) input, as PyTorch: window sums
    (2-D sum pooling, then sums over the depth offsets) over each window's divisor.
    ``F.avg_pool3d(x, 2)``"""
    _check_input("avg_pool3d", input)
    k, s, p, _, out = _pool3d_args("avg_pool3d", input, kernel_size, stride, padding, 1,
                                   ceil_mode)
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    x, added = _as5d(input)
    n, c, dd, h, w = x.shape
    sums = avg_pool2d(S.reshape(x, (n, c * dd, h, w)), k[1:], s[1:], p[1:], ceil_mode, True, 1)
    sums = S.reshape(sums, (n, c, dd) + out[1:])
    sums = _depth_padded(sums, p[0], (out[0] - 1) * s[0] + k[0], 0.0)
    total = None
    for part in _depth_slices(sums, k[0], s[0], 1, out[0]):
        total = part if total is None else E.add(total, part)
    if divisor_override is not None:
        res = E.div(total, float(divisor_override))
    else:
        counts = [_window_counts(size, kk, ss, pp, o, count_include_pad)
                  for size, kk, ss, pp, o in zip((dd, h, w), k, s, p, out)]
        div = counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]
        res = E.div(total, div.astype(np.dtype(x.dtype)))
    return S.reshape(res, tuple(res.shape[1:])) if added else res


def _window_counts(size: int, k: int, s: int, p: int, n_out: int, include_pad: bool
                   ) -> np.ndarray:
    """Per output position of one dim, how many elements its window averages (PyTorch's
    rule: padding counts, when included, but not beyond the padded end)."""
    start = np.arange(n_out) * s - p
    end = np.minimum(start + k, size + p)
    if include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def max_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """3-D max pooling of (N, C, D, H, W) or (C, D, H, W) input, as PyTorch: 2-D max
    pooling of each depth slice, then the max over each window's depth offsets.
    ``return_indices`` adds the int64 index of each max in the flattened ``D*H*W`` volume
    (ties: the first in depth, then row, then column order, as PyTorch's CPU kernel).
    ``F.max_pool3d(x, 2)``"""
    _check_input("max_pool3d", input)
    k, s, p, d, out = _pool3d_args("max_pool3d", input, kernel_size, stride, padding,
                                   dilation, ceil_mode)
    x, added = _as5d(input)
    n, c, dd, h, w = x.shape
    planes = max_pool2d(S.reshape(x, (n, c * dd, h, w)), k[1:], s[1:], p[1:], d[1:], ceil_mode,
                        return_indices)
    if return_indices:
        planes, where = planes
    span = (out[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1
    planes = _depth_padded(S.reshape(planes, (n, c, dd) + out[1:]), p[0], span, -math.inf)
    parts = _depth_slices(planes, k[0], s[0], d[0], out[0])
    if len(parts) == 1:
        res, offset = parts[0], None
    else:  # the max over the depth offsets, as one 2-D reduction
        shape = tuple(parts[0].shape)
        stacked = S.reshape(S.stack(parts, -1), (-1, len(parts)))
        res = S.reshape(R.amax(stacked, -1), shape)
        offset = S.reshape(R.argmax(stacked, -1), shape) if return_indices else None
    if not return_indices:
        return S.reshape(res, tuple(res.shape[1:])) if added else res
    where = _depth_padded(S.reshape(where, (n, c, dd) + out[1:]), p[0], span, 0)
    iparts = _depth_slices(where, k[0], s[0], d[0], out[0])
    first = np.arange(out[0], dtype=np.int64)[:, None, None] * s[0] - p[0]
    if offset is None:
        plane_index, depth = iparts[0], first
    else:  # the chosen offset's plane index, and its depth
        stacked = S.reshape(S.stack(iparts, -1), (-1, len(iparts)))
        pick = S.reshape(offset, (-1, 1))
        plane_index = S.reshape(I.gather(stacked, 1, pick), tuple(res.shape))
        depth = E.add(E.mul(offset, d[0]), first)
    index = E.add(E.mul(depth, h * w), plane_index)
    if added:
        return S.reshape(res, tuple(res.shape[1:])), S.reshape(index, tuple(index.shape[1:]))
    return res, index


def _max_unpool(name: str, input: Any, indices: Any, kernel_size: Any, stride: Any,  # noqa: A002
                padding: Any, output_size: Any, dims: int) -> Any:
    """Each value of ``input`` put at its index (as pooling returned it) in a zero tensor
    whose last ``dims`` dims are ``(n - 1) * stride - 2 * padding + kernel_size``, or
    ``output_size``."""
    _check_input(name, input)
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{name}: expected a {dims + 1}-D or {dims + 2}-D input, got "
                           f"shape {tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({tuple(input.shape)}) but got indices tensor with shape: "
                           f"{tuple(indices.shape)}")
    k = _ints("kernel_size", kernel_size, dims, "pooling")
    s = k if stride is None else _ints("stride", stride, dims, "pooling")
    p = _ints("padding", padding, dims, "pooling")
    spatial = tuple(input.shape[-dims:])
    size = tuple((n - 1) * ss - 2 * pp + kk for n, ss, pp, kk in zip(spatial, s, p, k))
    if output_size is not None:
        given = tuple(int(v) for v in tuple(output_size))
        if len(given) not in (dims, input.ndim):
            raise ValueError(f"output_size should be a sequence containing {dims} or "
                             f"{input.ndim} elements, but it has a length of '{len(given)}'")
        for i, (v, default, ss) in enumerate(zip(given[-dims:], size, s)):
            if not default - ss < v < default + ss:
                raise ValueError(f'invalid output_size "{given}" (dim {i} must be between '
                                 f'{default - ss} and {default + ss})')
        size = given[-dims:]
    lead = tuple(input.shape[:-dims])
    count = int(np.prod(spatial))
    if isinstance(indices, Tensor) and indices.numel():  # traced indices are not known here
        worst = array_of(indices)
        bad = worst[(worst < 0) | (worst >= int(np.prod(size)))]
        if bad.size:
            raise RuntimeError(f"Found an invalid max index: {int(bad.flat[0])} (output "
                               f"volumes are of size {'x'.join(map(str, size))})")
    flat_x = S.reshape(input, lead + (count,))
    flat_i = S.reshape(indices, lead + (count,))
    zeros = np.zeros(lead + (int(np.prod(size)),), np.dtype(input.dtype))
    out = I.scatter(zeros, -1, flat_i, flat_x)
    return S.reshape(out, lead + size)


def max_unpool2d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The inverse of `max_pool2d` with ``return_indices``: each value put back at its
    index in a zero (N, C, H_out, W_out) plane, ``H_out = (H - 1) * stride - 2 * padding +
    kernel_size`` unless ``output_size`` says otherwise.
    ``F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2)``"""
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding,
                       output_size, 2)


def max_unpool3d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The inverse of `max_pool3d` with ``return_indices``, over (N, C, D, H, W) or
    (C, D, H, W). ``F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2)``"""
    return _max_unpool("max_unpool3d", input, indices, kernel_size, stride, padding,
                       output_size, 3)


def max_unpool1d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The inverse of `max_pool1d` with ``return_indices``, over (N, C, L) or (C, L)."""
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding,
                       output_size, 1)


__all__ += ["avg_pool3d", "conv3d", "conv_transpose3d", "max_pool3d", "max_unpool1d",
            "max_unpool2d", "max_unpool3d"]


# Channel dropout, PReLU, the shrinking activations and the transposed 1-D convolution
# (their modules are in nn/modules/: dropout.py, activation.py, conv.py).


def _channel_dropout(name: str, x: Any, p: float, training: bool, inplace: bool,
                     dims: int) -> Any:
    """Zero whole channels (every element of a (batch, channel) pair, or of a channel for
    unbatched input) with probability ``p``, scaling the rest by ``1 / (1 - p)``."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    if x.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{name}: Expected {dims + 1}D or {dims + 2}D input, but received "
                           f"a {x.ndim}D input")
    if not training or p == 0.0:
        return x
    lead = tuple(x.shape[:x.ndim - dims])
    mask = dropout(Tensor(np.ones(lead, np.dtype(x.dtype))), p, True)
    out = E.mul(x, S.reshape(mask, lead + (1,) * dims))
    return x.copy_(out) if inplace else out


def dropout1d(input: Any, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False) -> Any:
    """Channel dropout of (N, C, L) or (C, L) input. ``F.dropout1d(x, 0.2)``"""
    return _channel_dropout("dropout1d", input, p, training, inplace, 1)


def dropout2d(input: Any, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False) -> Any:
    """Channel dropout of (N, C, H, W) input. ``F.dropout2d(x, 0.2)``

    As PyTorch's, it zeroes along the first two dimensions whatever the rank: a 3-D input
    is read as (N, C, L) and a 2-D one as (N, C) (element-wise), with a warning for ranks
    other than 4 (pytorch/examples mnist_rnn applies it to (N, C) features)."""
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated; use dropout instead", UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted "
                      "as shape (N, C, L)", UserWarning, stacklevel=2)
    if input.ndim < 2:
        raise RuntimeError(f"dropout2d: Feature dropout requires at least 2 dimensions in "
                           f"the input, but received a {input.ndim}D input")
    return _channel_dropout("dropout2d", input, p, training, inplace, input.ndim - 2)


def dropout3d(input: Any, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False) -> Any:
    """Channel dropout of (N, C, D, H, W) or (C, D, H, W) input."""
    return _channel_dropout("dropout3d", input, p, training, inplace, 3)


def prelu(input: Any, weight: Any) -> Any:  # noqa: A002
    """``x`` where positive, else ``weight * x``; a weight of ``C`` values applies per
    channel (dim 1). ``F.prelu(x, w)``"""
    w = weight
    if w.ndim != 1:
        raise RuntimeError(f"prelu: weight must be 1-D, got shape {tuple(w.shape)}")
    if w.shape[0] != 1:
        if input.ndim < 2 or input.shape[1] != w.shape[0]:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {w.shape[0]} and channel size = "
                               f"{input.shape[1] if input.ndim >= 2 else 1}.")
        w = S.reshape(w, (w.shape[0],) + (1,) * (input.ndim - 2))
    elif input.ndim:
        w = S.reshape(w, ())
    return E.where(E.gt(input, 0), input, E.mul(w, input))


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:  # noqa: A002
    """``x`` where ``x > threshold``, else ``value``."""
    out = E.where(E.gt(input, threshold), input, float(value))
    return input.copy_(out) if inplace else out


def hardshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0."""
    return E.where(E.gt(E.abs(input), lambd), input, 0.0)


def softshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return E.where(E.gt(input, lambd), E.sub(input, lambd),
                   E.where(E.lt(input, -lambd), E.add(input, lambd), 0.0))


def tanhshrink(input: Any) -> Any:  # noqa: A002
    """``x - tanh(x)``."""
    return E.sub(input, E.tanh(input))


def conv_transpose1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 1-D convolution of (N, C_in, L) or (C_in, L) input with weight
    (C_in, C_out/groups, k): the 2-D one over a height of 1."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"conv_transpose1d: expected 2D or 3D input, got {input.ndim}D")

    def one(v: Any) -> int:
        return int(v[0] if isinstance(v, (tuple, list)) else v)

    x = S.reshape(input, tuple(input.shape[:-1]) + (1, input.shape[-1]))
    w = S.reshape(weight, tuple(weight.shape[:2]) + (1, weight.shape[2]))
    y = conv_transpose2d(x, w, bias, (1, one(stride)), (0, one(padding)),
                           (0, one(output_padding)), groups, (1, one(dilation)))
    return S.reshape(y, tuple(y.shape[:-2]) + (y.shape[-1],))


__all__ += ["conv_transpose1d", "dropout1d", "dropout2d", "dropout3d", "hardshrink", "prelu",
            "softshrink", "tanhshrink", "threshold"]


def embedding_bag(input: Any, weight: Any, offsets: Any = None,  # noqa: A002
                  max_norm: float | None = None, norm_type: float = 2.0,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Any:
    """Sums, means or maxima of bags of embedding rows: a 2-D ``input`` (B, L) is B bags of
    L indices; a 1-D ``input`` with ``offsets`` (the start of each bag) is bags of any
    size. Empty bags give zeros; ``padding_idx`` entries are left out of their bag;
    ``per_sample_weights`` scale the rows (``mode='sum'`` only).
    ``F.embedding_bag(text, weight, offsets)``"""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: max_norm, scale_grad_by_freq and sparse "
                                  "gradients are not supported")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences.")
        n_bags, length = input.shape
        flat = S.reshape(input, (-1,))
        seg = np.repeat(np.arange(n_bags), length)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor but got None" if offsets is None
                             else f"offsets has to be a 1D Tensor, got {offsets.ndim}D")
        flat = input
        n_bags = offsets.shape[0] - (1 if include_last_offset else 0)
        # Bag of each index: how many offsets are at or before its position, minus one.
        pos = np.arange(input.shape[0])[:, None]
        seg = E.sub(R.sum(S.astype(E.ge(pos, S.reshape(offsets, (1, -1))[:, :n_bags]),
                                    np.int64), axis=1), 1)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    rows = embedding(flat, weight, padding_idx)  # (N, D); padding rows are zero
    member = E.eq(S.reshape(seg, (-1, 1)), np.arange(n_bags)[None, :])  # (N, bags)
    if padding_idx is not None:
        keep = E.ne(S.reshape(flat, (-1, 1)), padding_idx % weight.shape[0])
        member = M.logical_and(member, keep)
    if mode == "max":
        masked = E.where(S.reshape(member, member.shape + (1,)), S.reshape(
            rows, (rows.shape[0], 1, rows.shape[1])), -math.inf)
        best = R.amax(masked, 0) if rows.shape[0] else None
        empty = M.logical_not(M.any(member, 0)) if rows.shape[0] else None
        return E.where(S.reshape(empty, (-1, 1)), 0.0, best)
    weights = S.astype(member, weight.dtype)
    if per_sample_weights is not None:
        weights = E.mul(weights, S.reshape(per_sample_weights, (-1, 1)))
    total = L.matmul(S.transpose(weights), rows)  # (bags, D)
    if mode == "sum":
        return total
    count = R.sum(S.astype(member, weight.dtype), 0)
    return E.div(total, S.reshape(E.maximum(count, 1.0), (-1, 1)))


__all__ += ["embedding_bag"]


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
    return _inplace(input, E.where(E.ge(input, 0), input, E.mul(input, slope)), inplace)


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


__all__ += ["celu_", "elu_", "gumbel_softmax", "hardtanh_", "leaky_relu_", "relu_", "rrelu",
            "rrelu_", "selu_", "threshold_"]


# Dropout variants that keep SELU's self-normalisation: dropped elements take SELU's
# negative saturation value, and an affine map restores the mean and variance.

_ALPHA_PRIME = -_SELU_ALPHA * _SELU_SCALE


def _alpha_dropout(name: str, x: Any, p: float, training: bool, inplace: bool,
                   feature: bool) -> Any:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return _inplace(x, E.mul(x, 0.0), inplace)
    if feature and x.ndim < 2:
        raise RuntimeError(f"{name}: Feature dropout requires at least 2 dimensions in the "
                           "input")
    shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2) if feature else tuple(x.shape)
    keep = S.astype(E.ge(rand(*shape, dtype=x.dtype), p), x.dtype)
    a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    b = E.add(E.mul(E.sub(keep, 1.0), _ALPHA_PRIME * a), _ALPHA_PRIME * a * p)
    return _inplace(x, E.add(E.mul(x, E.mul(keep, a)), b), inplace)


def alpha_dropout(input: Any, p: float = 0.5, training: bool = False,  # noqa: A002
                  inplace: bool = False) -> Any:
    """Alpha dropout of each element (PyTorch's ``F.alpha_dropout``; off unless
    ``training``)."""
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, False)


def feature_alpha_dropout(input: Any, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False) -> Any:
    """Alpha dropout of whole channels (every element of a (batch, channel) pair)."""
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, True)


__all__ += ["alpha_dropout", "feature_alpha_dropout"]


# Normalisation over the feature dims and across channels, and channel rearranging.


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


def channel_shuffle(input: Any, groups: int) -> Any:  # noqa: A002
    """(N, C, *) with the channels of ``groups`` groups interleaved: viewed as (N, g, C/g,
    *), the two group dims swapped."""
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with sizes {list(input.shape)}")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value "
                           f"of groups:{groups}")
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} "
                           f"channels and {groups} groups.")
    x = S.reshape(input, (n, groups, c // groups, *rest))
    return S.reshape(S.transpose(x, 1, 2), tuple(input.shape))


native_channel_shuffle = channel_shuffle

__all__ += ["channel_shuffle", "local_response_norm", "native_channel_shuffle", "rms_norm",
            "softmax2d"]


def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Any:
    """``y_k = x1 @ weight[k] @ x2 + bias[k]`` over the last dims of ``input1`` (…, in1) and
    ``input2`` (…, in2), with weight (out, in1, in2)."""
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional, got shape "
                           f"{tuple(weight.shape)}")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input sizes {tuple(input1.shape)} and "
                           f"{tuple(input2.shape)} do not match weight of shape "
                           f"{tuple(weight.shape)}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    lead = tuple(input1.shape[:-1])
    x1 = S.reshape(input1, (-1, weight.shape[1]))
    x2 = S.reshape(input2, (-1, weight.shape[2]))
    o, i1, i2 = weight.shape
    # (B, in1) @ (in1, out*in2): one GEMM, then a row-wise product with x2.
    t = L.matmul(x1, S.reshape(S.permute(weight, 1, 0, 2), (i1, o * i2)))
    out = R.sum(E.mul(S.reshape(t, (-1, o, i2)), S.reshape(x2, (-1, 1, i2))), -1)
    if bias is not None:
        out = E.add(out, bias)
    return S.reshape(out, lead + (o,))


__all__ += ["bilinear"]


# Margin, ranking, embedding and likelihood losses: compositions of registry ops.


def _loss_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                        size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Any:
    """``max(0, -target * (input1 - input2) + margin)`` for targets in {1, -1}."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {tuple(input1.shape)}, input2: "
                           f"{tuple(input2.shape)}, target: {tuple(target.shape)} ")
    loss = E.relu(E.add(E.mul(E.neg(target), E.sub(input1, input2)), margin))
    return _reduce(loss, reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0,  # noqa: A002
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Any:
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1``."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    hinge = E.where(E.ne(target, 1), E.relu(E.sub(margin, input)), 0.0)
    return _reduce(E.add(hinge, E.where(E.ne(target, -1), input, 0.0)), reduction)


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None,  # noqa: A002
                                size_average: Any = None, reduce: Any = None,
                                reduction: str = "mean") -> Any:
    """One-versus-all logistic loss per class, averaged over the classes (the last dim)."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    loss = E.neg(E.add(E.mul(target, logsigmoid(input)),
                       E.mul(E.sub(1.0, target), logsigmoid(E.neg(input)))))
    if weight is not None:
        loss = E.mul(loss, weight)
    c = input.shape[-1] if input.ndim else 1
    loss = E.div(R.sum(loss, input.ndim - 1) if input.ndim else loss, c)
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                          size_average: Any = None, reduce: Any = None,
                          reduction: str = "mean") -> Any:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``target == -1``, the cosine along the last dim."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != input2.ndim or input1.ndim != target.ndim + 1:
        raise RuntimeError(f"cosine_embedding_loss: expected {target.ndim + 1}D inputs for a "
                           f"{target.ndim}D target, but got input1 {tuple(input1.shape)} and "
                           f"input2 {tuple(input2.shape)}")
    dim = input1.ndim - 1
    eps = 1e-12
    prod = R.sum(E.mul(input1, input2), dim)
    mag1 = E.add(R.sum(E.mul(input1, input1), dim), eps)
    mag2 = E.add(R.sum(E.mul(input2, input2), dim), eps)
    cos = E.div(prod, E.sqrt(E.mul(mag1, mag2)))
    pos = E.where(E.eq(target, 1), E.sub(1.0, cos), 0.0)
    neg = E.where(E.eq(target, -1), E.relu(E.sub(cos, margin)), 0.0)
    return _reduce(E.add(pos, neg), reduction)


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True,  # noqa: A002
                     full: bool = False, size_average: Any = None, eps: float = 1e-8,
                     reduce: Any = None, reduction: str = "mean") -> Any:
    """Poisson negative log-likelihood: ``exp(x) - target * x`` for log-rates (``log_input``),
    ``x - target * log(x + eps)`` for rates; ``full`` adds Stirling's term for targets above
    1."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    if log_input:
        loss = E.sub(E.exp(input), E.mul(target, input))
    else:
        loss = E.sub(input, E.mul(target, E.log(E.add(input, eps))))
    if full:
        big = E.gt(target, 1)
        t = E.where(big, target, 2.0)  # a safe value where the term is masked out
        stirling = E.add(E.sub(E.mul(t, E.log(t)), t), E.mul(E.log(E.mul(t, 2 * math.pi)), 0.5))
        loss = E.add(loss, E.where(big, stirling, 0.0))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False,  # noqa: A002
                      eps: float = 1e-6, reduction: str = "mean") -> Any:
    """Gaussian negative log-likelihood ``0.5 * (log(var) + (input - target) ** 2 / var)``,
    ``var`` clamped at ``eps`` (the clamp passes the gradient through, as PyTorch's in-place
    clamp under ``no_grad`` does); ``var`` may have one dim fewer, or one dim of size 1."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = E.add(E.mul(input, 0.0), float(var))
    elif isinstance(var, Tensor) and (array_of(var) < 0).any():
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = S.reshape(var, tuple(var.shape) + (1,))
        elif not (input.ndim == var.ndim and sum(
                y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = E.add(var, S.stop_gradient(E.sub(M.clamp(var, eps), var)))
    d = E.sub(input, target)
    loss = E.mul(E.add(E.log(var), E.div(E.mul(d, d), var)), 0.5)
    if full:
        loss = E.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Any:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the ``p``-norm `pairwise_distance`;
    ``swap`` uses ``min(d(a, n), d(p, n))``."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {anchor.ndim}D, "
                           f"positive {positive.ndim}D, and negative {negative.ndim}D inputs")
    return triplet_margin_with_distance_loss(
        anchor, positive, negative,
        distance_function=lambda x, y: pairwise_distance(x, y, p, eps), margin=margin,
        swap=swap, reduction=reduction)


def triplet_margin_with_distance_loss(anchor: Any, positive: Any, negative: Any, *,
                                      distance_function: Any = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Any:
    """`triplet_margin_loss` with any ``distance_function(x, y)`` (default
    `pairwise_distance`)."""
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                         f"than 0, got {margin} instead")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = E.minimum(d_neg, dist(positive, negative))
    return _reduce(E.relu(E.add(E.sub(d_pos, d_neg), margin)), reduction)


def _class_scores(name: str, input: Any, target: Any) -> tuple[Any, Any, bool]:  # noqa: A002
    """(N, C) scores and (N,)-shaped integer targets, and whether the input was 1-D."""
    if input.ndim not in (1, 2) or (input.ndim == 2 and input.shape[1] == 0):
        raise RuntimeError(f"{name}: Expected non-empty vector or matrix with optional "
                           f"0-dim batch size, but got: {list(input.shape)}")
    single = input.ndim == 1
    return (S.reshape(input, (1, -1)) if single else input), target, single


def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Any = None, size_average: Any = None, reduce: Any = None,
                      reduction: str = "mean") -> Any:
    """Multi-class hinge loss: ``sum_{j != y} max(0, margin - x[y] + x[j]) ** p / C`` per
    sample, ``weight[y]`` scaling each term."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x, target, single = _class_scores("multi_margin_loss", input, _target(target))
    n, c = x.shape
    t = S.reshape(target, (n, 1))
    _check_classes(x, S.reshape(target, (n,)) if isinstance(target, TensorOps) else
                   np.reshape(target, (n,)), -100)
    x_y = I.gather(x, 1, t)
    z = E.relu(E.add(E.sub(x, x_y), margin))
    if p == 2:
        z = E.mul(z, z)
    if weight is not None:
        z = E.mul(z, S.reshape(I.gather(weight, 0, S.reshape(t, (n,))), (n, 1)))
    is_y = E.eq(t, np.arange(c)[None, :])
    loss = E.div(R.sum(E.where(is_y, 0.0, z), 1), c)
    if single:
        loss = S.reshape(loss, ())
    return _reduce(loss, reduction)


def multilabel_margin_loss(input: Any, target: Any, size_average: Any = None,  # noqa: A002
                           reduce: Any = None, reduction: str = "mean") -> Any:
    """Multi-label hinge loss: ``target`` lists each sample's classes, ended by the first
    -1; ``sum over listed j and unlisted k of max(0, 1 - (x[j] - x[k])) / C``."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    x, target, single = _class_scores("multilabel_margin_loss", input, _target(target))
    n, c = x.shape
    t = S.reshape(target, (n, c))
    # Slots before the first -1 count; later slots are ignored whatever they hold.
    valid = E.eq(SC.cumsum(S.astype(E.eq(t, -1), np.int64), 1), 0)
    safe = E.where(valid, t, 0)
    listed = M.any(M.logical_and(E.eq(S.reshape(safe, (n, c, 1)), np.arange(c)[None, None, :]),
                                 S.reshape(valid, (n, c, 1))), 1)  # (N, C): class k listed
    x_j = I.gather(x, 1, safe)  # (N, slots)
    hinge = E.relu(E.add(E.sub(S.reshape(x, (n, 1, c)), S.reshape(x_j, (n, c, 1))), 1.0))
    pair = M.logical_and(S.reshape(valid, (n, c, 1)),
                         S.reshape(M.logical_not(listed), (n, 1, c)))
    loss = E.div(R.sum(E.where(pair, hinge, 0.0), (1, 2)), c)
    if single:
        loss = S.reshape(loss, ())
    return _reduce(loss, reduction)


def _logsumexp3(a: Any, b: Any, c: Any) -> Any:
    """``log(exp(a) + exp(b) + exp(c))`` where all three may be -inf, with finite
    gradients (zero where every term is -inf)."""
    m = S.stop_gradient(E.maximum(E.maximum(a, b), c))
    m = E.where(E.eq(m, -math.inf), 0.0, m)
    s = E.add(E.add(E.exp(E.sub(a, m)), E.exp(E.sub(b, m))), E.exp(E.sub(c, m)))
    pos = E.gt(s, 0.0)
    return E.where(pos, E.add(E.log(E.where(pos, s, 1.0)), m), -math.inf)


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Any:
    """Connectionist temporal classification loss of ``log_probs`` (T, N, C) or (T, C)
    (log-softmax outputs) against ``targets`` (N, S) padded, or 1-D concatenated, with
    per-sample ``input_lengths`` and ``target_lengths``. The forward (alpha) recursion
    runs in log space over the time steps; the gradient is its reverse. ``'mean'`` divides
    each loss by its target length, then averages over the batch, as PyTorch."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2D or 3D, got shape "
                           f"{tuple(log_probs.shape)}")
    lp = S.reshape(log_probs, (log_probs.shape[0], 1, -1)) if unbatched else log_probs
    n_t, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")

    def lengths(v: Any) -> Any:
        if isinstance(v, (int, np.integer)):
            v = [v]
        arr = v if isinstance(v, TensorOps) else np.asarray(v, np.int64)
        return S.reshape(S.astype(arr, np.int64), (n,))

    in_len, tgt_len = lengths(input_lengths), lengths(target_lengths)
    tg = _target(targets)
    if unbatched or tg.ndim == 1:
        if not unbatched:  # concatenated targets: split them by the (known) lengths
            tl = array_of(tgt_len) if isinstance(tgt_len, Tensor) else None
            if tl is None:
                raise RuntimeError("ctc_loss: 1-D concatenated targets need concrete "
                                   "target_lengths; pass (N, S) padded targets instead")
            width = int(tl.max()) if tl.size else 0
            starts = np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
            pos = np.minimum(starts[:, None] + np.arange(width)[None, :],
                             max(int(tg.shape[0]) - 1, 0))
            tg = I.gather(S.reshape(tg, (1, -1)), 1, pos.reshape(1, -1)) if width else \
                np.zeros((n, 0), np.int64)
            tg = S.reshape(tg, (n, width))
        else:
            tg = S.reshape(tg, (1, -1))
    s_max = tg.shape[1]
    width = 2 * s_max + 1
    # The extended label sequence: blank, l1, blank, l2, ..., blank.
    blanks = np.full((n, s_max), blank, np.int64)
    ext = S.reshape(S.stack([blanks, S.astype(tg, np.int64)], -1), (n, 2 * s_max)) \
        if s_max else np.zeros((n, 0), np.int64)
    ext = S.concatenate([ext, np.full((n, 1), blank, np.int64)], 1)
    # A label may follow the one two places back when it is not blank and differs from it.
    prev2 = S.concatenate([np.full((n, 2), blank, np.int64), ext[:, :-2]], 1)
    skip = M.logical_and(E.ne(ext, blank), E.ne(ext, prev2))
    neg_inf = np.full((n, 1), -math.inf, np.dtype(lp.dtype))
    neg_inf2 = np.full((n, 2), -math.inf, np.dtype(lp.dtype))
    start = np.full((n, width), -math.inf, np.dtype(lp.dtype))
    start[:, :2] = 0.0
    t_idx = np.arange(n_t)
    alpha, final = None, None
    for t in range(n_t):
        emit = I.gather(lp[t], 1, ext)
        if alpha is None:
            alpha = E.add(start, emit)
        else:
            a1 = S.concatenate([neg_inf, alpha[:, :-1]], 1)
            a2 = E.where(skip, S.concatenate([neg_inf2, alpha[:, :-2]], 1), -math.inf)
            alpha = E.add(_logsumexp3(alpha, a1, a2), emit)
        at_end = S.reshape(E.eq(E.sub(in_len, 1), int(t_idx[t])), (n, 1))
        final = E.where(at_end, alpha, -math.inf if final is None else final)
    # The paths end at the last label or the blank after it.
    last = S.reshape(E.mul(tgt_len, 2), (n, 1))
    end_blank = I.gather(final, 1, last)
    end_label = E.where(E.gt(last, 0), I.gather(final, 1, E.maximum(E.sub(last, 1), 0)),
                        -math.inf)
    loss = S.reshape(E.neg(_logsumexp3(end_blank, end_label, neg_inf)), (n,))
    if zero_infinity:
        loss = E.where(E.eq(loss, math.inf), 0.0, loss)
    if unbatched:
        loss = S.reshape(loss, ())
    if reduction == "mean":
        per = E.div(loss, S.astype(E.maximum(S.reshape(tgt_len, tuple(loss.shape)), 1),
                                   loss.dtype))
        return R.mean(per)
    return _reduce(loss, reduction)


__all__ += ["cosine_embedding_loss", "ctc_loss", "gaussian_nll_loss", "hinge_embedding_loss",
            "margin_ranking_loss", "multi_margin_loss", "multilabel_margin_loss",
            "multilabel_soft_margin_loss", "poisson_nll_loss", "triplet_margin_loss",
            "triplet_margin_with_distance_loss"]


# Distances between all pairs of rows.


def pdist(input: Any, p: float = 2.0) -> Any:  # noqa: A002
    """The ``p``-norm distances between the rows of (N, M) ``input``, pairs ``i < j`` in
    row-major order: ``N * (N - 1) / 2`` values. A zero distance has a zero gradient."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = np.triu_indices(input.shape[0], 1)
    d = E.abs(E.sub(input[i], input[j]))
    if p == 0:
        return R.sum(S.astype(E.ne(d, 0.0), input.dtype), 1)
    if p == math.inf:
        return R.amax(d, 1)
    if p == 1:
        return R.sum(d, 1)
    total = R.sum(E.mul(d, d) if p == 2 else E.pow(d, p), 1)
    nonzero = E.gt(total, 0.0)
    safe = E.where(nonzero, total, 1.0)
    return E.where(nonzero, E.sqrt(safe) if p == 2 else E.pow(safe, 1.0 / p), 0.0)


__all__ += ["pdist"]


# Power-average and volumetric adaptive pooling, and the fixed-mode resampling spellings.


def _lp_finish(out: Any, norm_type: float, window: int) -> Any:
    """``(sign(s) * relu(|s|) * window) ** (1 / p)`` of the averaged powers, as PyTorch."""
    return E.pow(E.mul(E.mul(M.sign(out), E.relu(E.abs(out))), float(window)), 1.0 / norm_type)


def lp_pool1d(input: Any, norm_type: float, kernel_size: int, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling ``(sum over the window of x ** p) ** (1 / p)`` over the last
    dim of (N, C, L) or (C, L) input."""
    k = _ints("kernel_size", kernel_size, 1, "pooling")[0]
    s = k if stride is None else _ints("stride", stride, 1, "pooling")[0]
    out = avg_pool1d(E.pow(input, norm_type), k, s, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


def lp_pool2d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling over the last two dims of (N, C, H, W) or (C, H, W) input."""
    kh, kw = _ints("kernel_size", kernel_size, 2, "pooling")
    s = (kh, kw) if stride is None else _ints("stride", stride, 2, "pooling")
    out = avg_pool2d(E.pow(input, norm_type), (kh, kw), s, 0, ceil_mode)
    return _lp_finish(out, norm_type, kh * kw)


def lp_pool3d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling over the last three dims of a 5-D or 4-D input."""
    k = _ints("kernel_size", kernel_size, 3, "pooling")
    s = k if stride is None else _ints("stride", stride, 3, "pooling")
    out = avg_pool3d(E.pow(input, norm_type), k, s, 0, ceil_mode)
    return _lp_finish(out, norm_type, k[0] * k[1] * k[2])


def _adaptive3d(name: str, input: Any, output_size: Any) -> tuple:  # noqa: A002
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got "
                           f"{list(input.shape)}")
    if 0 in tuple(input.shape[-3:]):
        raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(input.shape)}")
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * 3
    out = tuple(int(o) if o is not None else int(n)
                for o, n in zip(output_size, input.shape[-3:]))
    x, added = _as5d(input)
    return x, added, out


def _windows(size: int, n_out: int) -> list:
    """PyTorch's adaptive windows ``[floor(i * size / n), ceil((i + 1) * size / n))``."""
    return [(i * size // n_out, -(-(i + 1) * size // n_out)) for i in range(n_out)]


def adaptive_avg_pool3d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) input to ``output_size``: 2-D
    adaptive pooling of the depth slices, then the mean over each depth window."""
    x, added, (od, oh, ow) = _adaptive3d("adaptive_avg_pool3d", input, output_size)
    n, c, dd, h, w = x.shape
    planes = S.reshape(adaptive_avg_pool2d(S.reshape(x, (n, c * dd, h, w)), (oh, ow)),
                       (n, c, dd, oh, ow))
    parts = [R.mean(planes[:, :, a:b], 2) for a, b in _windows(dd, od)]
    out = S.stack(parts, 2)
    return S.reshape(out, tuple(out.shape[1:])) if added else out


def adaptive_max_pool3d(input: Any, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Any:
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) input to ``output_size``;
    ``return_indices`` adds each max's index in the flattened ``D*H*W`` volume."""
    x, added, (od, oh, ow) = _adaptive3d("adaptive_max_pool3d", input, output_size)
    n, c, dd, h, w = x.shape
    planes, where = adaptive_max_pool2d(S.reshape(x, (n, c * dd, h, w)), (oh, ow), True)
    planes = S.reshape(planes, (n, c, dd, oh, ow))
    where = S.reshape(where, (n, c, dd, oh, ow))
    values, indices = [], []
    for a, b in _windows(dd, od):
        win = planes[:, :, a:b]
        values.append(R.amax(win, 2))
        if return_indices:
            pick = R.argmax(win, 2, keepdim=True)  # the first max in depth, as PyTorch
            plane_index = S.reshape(I.gather(where[:, :, a:b], 2, pick), (n, c, oh, ow))
            depth = S.reshape(E.add(pick, a), (n, c, oh, ow))
            indices.append(E.add(E.mul(depth, h * w), plane_index))
    out = S.stack(values, 2)
    if added:
        out = S.reshape(out, tuple(out.shape[1:]))
    if not return_indices:
        return out
    idx = S.stack(indices, 2)
    return out, (S.reshape(idx, tuple(idx.shape[1:])) if added else idx)


def upsample_nearest(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """`interpolate` with ``mode='nearest'`` (the deprecated spelling)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """`interpolate` with ``mode='bilinear'`` and ``align_corners=True``."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


__all__ += ["adaptive_avg_pool3d", "adaptive_max_pool3d", "lp_pool1d", "lp_pool2d",
            "lp_pool3d", "upsample_bilinear", "upsample_nearest"]


# Spatial transformers: sampling grids from affine matrices, and sampling at them.


def _base_coords(n: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates in [-1, 1] of ``n`` pixel centres (or corners)."""
    if n <= 1:
        return np.zeros((max(n, 0),))
    c = np.linspace(-1.0, 1.0, n)
    return c if align_corners else c * (n - 1) / n


def affine_grid(theta: Any, size: Any, align_corners: bool | None = None) -> Any:
    """The (N, H, W, 2) sampling grid of 2-D affine matrices ``theta`` (N, 2, 3) for an
    output of ``size`` (N, C, H, W): ``theta @ (x, y, 1)`` at each output pixel."""
    align = bool(align_corners)
    size = tuple(int(v) for v in size)
    if len(size) != 4:
        raise NotImplementedError("affine_grid only supports 4D sizes, for 2D affine "
                                  f"transformations, got size {list(size)}")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{list(size)}. Got {list(theta.shape)}.")
    n, _, h, w = size
    if theta.shape[0] != n:
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{list(size)}. Got {list(theta.shape)}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {list(size)}")
    xs, ys = _base_coords(w, align), _base_coords(h, align)
    base = np.stack([np.broadcast_to(xs[None, :], (h, w)), np.broadcast_to(ys[:, None], (h, w)),
                     np.ones((h, w))], -1).reshape(1, h * w, 3).astype(np.dtype(theta.dtype))
    grid = L.matmul(base, S.transpose(theta, 1, 2))  # (N, H*W, 2)
    return S.reshape(grid, (n, h, w, 2))


def _unnormalize(coord: Any, size: int, align_corners: bool) -> Any:
    if align_corners:
        return E.mul(E.add(coord, 1.0), (size - 1) / 2)
    return E.div(E.sub(E.mul(E.add(coord, 1.0), size), 1.0), 2.0)


def grid_sample(input: Any, grid: Any, mode: str = "bilinear",  # noqa: A002
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Any:
    """Sample (N, C, H, W) ``input`` at the normalized (x, y) locations of ``grid``
    (N, Ho, Wo, 2), ``-1`` and ``1`` the edges (pixel centres with ``align_corners``):
    ``mode`` ``'bilinear'`` or ``'nearest'``; ``padding_mode`` ``'zeros'`` (outside reads 0)
    or ``'border'`` (clamped to the edge). Differentiable in ``input`` and, for bilinear,
    ``grid``."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if mode == "bicubic" or padding_mode == "reflection":
        raise NotImplementedError(f"grid_sample: mode={mode!r} with "
                                  f"padding_mode={padding_mode!r} is not supported (bilinear "
                                  "or nearest, zeros or border padding)")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sample(): expected 4D input and grid with last dimension 2 "
                           f"(2-D sampling), but got input of shape {list(input.shape)} and "
                           f"grid of shape {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch "
                           f"size, but got input with sizes {list(input.shape)} and grid with "
                           f"sizes {list(grid.shape)}")
    align = bool(align_corners)
    n, c, h, w = input.shape
    _, ho, wo, _ = grid.shape
    x = _unnormalize(grid[..., 0], w, align)
    y = _unnormalize(grid[..., 1], h, align)
    if padding_mode == "border":
        x = M.clamp(x, 0.0, float(w - 1))
        y = M.clamp(y, 0.0, float(h - 1))
    flat = S.reshape(input, (n, c, h * w))

    def tap(xi: Any, yi: Any) -> Any:
        """input[n, :, yi, xi] (N, C, Ho, Wo), 0 where (xi, yi) is outside."""
        inside = M.logical_and(M.logical_and(E.ge(xi, 0), E.le(xi, w - 1)),
                               M.logical_and(E.ge(yi, 0), E.le(yi, h - 1)))
        idx = E.add(E.mul(M.clamp(yi, 0, h - 1), w), M.clamp(xi, 0, w - 1))
        idx = S.broadcast_to(S.reshape(S.astype(idx, np.int64), (n, 1, ho * wo)),
                             (n, c, ho * wo))
        vals = S.reshape(I.gather(flat, 2, idx), (n, c, ho, wo))
        return E.where(S.reshape(inside, (n, 1, ho, wo)), vals, 0.0)

    if mode == "nearest":
        return tap(M.round(S.stop_gradient(x)), M.round(S.stop_gradient(y)))
    x0, y0 = M.floor(S.stop_gradient(x)), M.floor(S.stop_gradient(y))
    x1, y1 = E.add(x0, 1.0), E.add(y0, 1.0)
    wx1, wy1 = E.sub(x, x0), E.sub(y, y0)
    wx0, wy0 = E.sub(1.0, wx1), E.sub(1.0, wy1)

    def weight(a: Any, b: Any) -> Any:
        return S.reshape(E.mul(a, b), (n, 1, ho, wo))

    out = E.mul(tap(x0, y0), weight(wx0, wy0))
    out = E.add(out, E.mul(tap(x1, y0), weight(wx1, wy0)))
    out = E.add(out, E.mul(tap(x0, y1), weight(wx0, wy1)))
    return E.add(out, E.mul(tap(x1, y1), weight(wx1, wy1)))


__all__ += ["affine_grid", "grid_sample"]


# Multi-head attention: `nn.MultiheadAttention`'s computation on explicit weights.


def _additive_mask(mask: Any, dtype: Any) -> Any:
    """A bool mask (True: may not attend) as 0 / -inf; a float mask as it is."""
    if mask is None or mask.dtype != np.bool_:
        return mask
    return E.where(mask, -math.inf, np.zeros((), dtype))


def multi_head_attention_forward(
    query: Any, key: Any, value: Any, embed_dim_to_check: int, num_heads: int,
    in_proj_weight: Any, in_proj_bias: Any, bias_k: Any, bias_v: Any, add_zero_attn: bool,
    dropout_p: float, out_proj_weight: Any, out_proj_bias: Any, training: bool = True,
    key_padding_mask: Any = None, need_weights: bool = True, attn_mask: Any = None,
    use_separate_proj_weight: bool = False, q_proj_weight: Any = None,
    k_proj_weight: Any = None, v_proj_weight: Any = None, static_k: Any = None,
    static_v: Any = None, average_attn_weights: bool = True, is_causal: bool = False,
) -> tuple:
    """PyTorch's ``F.multi_head_attention_forward`` over (L, N, E) (or unbatched (L, E))
    inputs: the input projections (packed ``in_proj_weight`` (3E, E), or
    ``q/k/v_proj_weight`` with ``use_separate_proj_weight``), ``num_heads`` heads of
    scaled dot-product attention and the output projection. Returns ``(output, weights)``,
    the weights averaged over heads unless ``average_attn_weights=False`` (``None`` when
    ``need_weights=False``). A bool ``attn_mask`` or ``key_padding_mask`` marks the pairs
    that may NOT attend; a float one is added to the scores."""
    if bias_k is not None or bias_v is not None or add_zero_attn or static_k is not None \
            or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: bias_k/bias_v, "
                                  "add_zero_attn and static_k/static_v are not supported")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                           "the Transformer module method `generate_square_subsequent_mask`"
                           " to create this mask.")
    batched = query.ndim == 3
    if not batched:  # (L, E): one sequence
        query, key, value = (S.reshape(t, (t.shape[0], 1, t.shape[1]))
                             for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = S.reshape(key_padding_mask, (1, -1))
    e = query.shape[2]
    if e != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, "
                             f"but got {e}")
    h = num_heads
    d = e // h
    if d * h != e:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {h}")
    if use_separate_proj_weight:
        weights = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        weights = tuple(in_proj_weight[i * e:(i + 1) * e] for i in range(3))
    biases = (None,) * 3 if in_proj_bias is None else \
        tuple(in_proj_bias[i * e:(i + 1) * e] for i in range(3))
    parts = [linear(t, w, b) for t, w, b in zip((query, key, value), weights, biases)]
    n_l, n, n_s = query.shape[0], query.shape[1], key.shape[0]
    # (T, N, E) -> (N, H, T, D)
    q, k, v = (S.permute(S.reshape(p, (p.shape[0], n, h, d)), 1, 2, 0, 3) for p in parts)
    scores = E.mul(L.matmul(q, S.transpose(k, -2, -1)), 1.0 / math.sqrt(d))
    mask = _additive_mask(attn_mask, scores.dtype)
    if mask is not None:
        if mask.ndim == 3:  # (N * H, L, S)
            mask = S.reshape(mask, (n, h, n_l, n_s))
        scores = E.add(scores, mask)
    if key_padding_mask is not None:
        pad_mask = _additive_mask(key_padding_mask, scores.dtype)
        scores = E.add(scores, S.reshape(pad_mask, (n, 1, 1, n_s)))
    attn = SM.softmax(scores, -1)
    if training and dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    out = S.reshape(S.permute(L.matmul(attn, v), 2, 0, 1, 3), (n_l, n, e))
    out = linear(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = S.reshape(out, (n_l, e))
    if not need_weights:
        return out, None
    weights_out = R.mean(attn, 1) if average_attn_weights else attn
    if not batched:
        weights_out = S.reshape(weights_out, tuple(weights_out.shape[1:]))
    return out, weights_out


__all__ += ["multi_head_attention_forward"]


# PyTorch's ``*_with_indices`` spellings: the pools with ``return_indices=True``.


def max_pool1d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple:
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple:
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple:
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = True) -> tuple:
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = True) -> tuple:
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = True) -> tuple:
    return adaptive_max_pool3d(input, output_size, True)


__all__ += ["adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
            "adaptive_max_pool3d_with_indices", "max_pool1d_with_indices",
            "max_pool2d_with_indices", "max_pool3d_with_indices"]
