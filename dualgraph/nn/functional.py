"""`dg.nn.functional`: compositions of registry ops (``dropout`` binds its own op)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..eager.internal import array_of
from ..eager.tensor import Tensor, random_key
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import random as RND
from ..ops import reduce as R
from ..ops import shape as S
from ..ops.composite import log_softmax, softmax
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


def cross_entropy(input: Any, target: Any, reduction: str = "mean") -> Any:  # noqa: A002
    """Cross-entropy of logits ``input`` (N, C) against integer class ``target`` (N,).

    The one-hot mask is built with registry ops (``eq`` against ``arange``), so a target
    passed to a compiled step is a graph input, not a baked constant.
    """
    if not hasattr(target, "shape"):
        target = np.asarray(target)
    if input.ndim != 2:
        raise ValueError(f"cross_entropy: logits must be (N, C), got shape {tuple(input.shape)}")
    n, c = input.shape
    if tuple(target.shape) != (n,):
        raise ValueError(
            f"cross_entropy: target shape {tuple(target.shape)} does not match logits shape "
            f"{(n, c)}"
        )
    if target.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: target must hold integer classes, got {target.dtype}")
    # A tracer's values are unknown: only arrays and eager tensors are checked.
    data = target if isinstance(target, np.ndarray) else (
        array_of(target) if isinstance(target, Tensor) else None)
    if data is not None and data.size and (data.min() < 0 or data.max() >= c):
        raise ValueError(
            f"cross_entropy: target classes must be in [0, {c}), got {data.min()}..{data.max()}"
        )
    hit = E.eq(S.reshape(target, (n, 1)), np.arange(c, dtype=target.dtype)[None, :])
    picked = R.sum(E.mul(log_softmax(input, 1), S.astype(hit, input.dtype)), 1)
    return _reduce(E.neg(picked), reduction)


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
