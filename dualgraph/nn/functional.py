"""`dg.nn.functional`: compositions of registry ops (``dropout`` binds its own op)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..eager.internal import array_of
from ..eager.tensor import Tensor, random_key
from ..errors import ShapeError
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import math as M
from ..ops import nnops as N
from ..ops import random as RND
from ..ops import reduce as R
from ..ops import shape as S
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
    input: Any, target: Any, reduction: str = "mean"  # noqa: A002
) -> Any:
    """``max(x, 0) - x * y + log(1 + exp(-|x|))``: stable for any logit."""
    target = _as_operand(target)
    _same_shape("binary_cross_entropy_with_logits", input, target)
    soft = E.log(E.add(E.exp(E.neg(E.abs(input))), 1.0))
    return _reduce(E.add(E.sub(E.relu(input), E.mul(input, target)), soft), reduction)


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
    if inplace:
        raise NotImplementedError("dropout(inplace=True) is not supported; use inplace=False")
    if not training or p == 0.0:
        return input
    if not isinstance(input, TensorOps):
        raise TypeError(f"dropout: input must be a tensor, got {type(input).__name__}")
    key, stream = random_key()
    return RND.dropout(input, key, p, stream)


# ============================================================================ issue 12
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
    soft = M.log1p(E.exp(bx))
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
    """``x / max(||x||_p, eps)`` along ``dim``."""
    if p == 2:
        norm = E.sqrt(R.sum(E.mul(x, x), dim, keepdims=True))
    elif p == 1:
        norm = R.sum(E.abs(x), dim, keepdims=True)
    else:
        norm = E.pow(R.sum(E.pow(E.abs(x), p), dim, keepdims=True), 1.0 / p)
    return E.div(x, E.maximum(norm, eps))


__all__ += [
    "celu", "elu", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "logsigmoid",
    "mish", "normalize", "relu6", "selu", "silu", "softmin", "softplus", "softsign",
]


# ============================================================================ issue 12
# Losses and attention. softmax, log_softmax and nll_loss are primitives (ops/nnops.py):
# cross_entropy with integer targets is two ops forward and two backward, as in PyTorch.


def softmax(input: Any, dim: Any = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``dim`` (PyTorch's ``F.softmax``)."""
    return N.softmax(input, dim, dtype)


def log_softmax(input: Any, dim: Any = None, _stacklevel: int = 3,  # noqa: A002
                dtype: Any = None) -> Any:
    """``x - logsumexp(x)`` along ``dim`` (PyTorch's ``F.log_softmax``)."""
    return N.log_softmax(input, dim, dtype)


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
    if data.min() >= 0 and data.max() < c:
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
    logp = N.log_softmax(input, class_dim)
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
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa is not supported")
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
        attn = E.where(dead, 0.0, N.softmax(E.where(dead, 0.0, scores), -1))
    else:
        attn = N.softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return L.matmul(attn, value)


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
