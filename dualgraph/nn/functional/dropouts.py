"""Dropout: elementwise, per channel, and SELU's alpha dropout (``dropout`` binds its
own op)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ...eager.creation import rand
from ...eager.tensor import Tensor, random_key
from ...ops import elementwise as E
from ...ops import random as RND
from ...ops import shape as S
from ...ops.mixin import TensorOps
from .activation import _SELU_ALPHA, _SELU_SCALE, _inplace

__all__ = [
    "alpha_dropout", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "feature_alpha_dropout",
]


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
    return _inplace(input, lambda x: RND.dropout(x, key, p, stream), inplace)


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
        return _inplace(x, lambda x: E.mul(x, 0.0), inplace)
    if feature and x.ndim < 2:
        raise RuntimeError(f"{name}: Feature dropout requires at least 2 dimensions in the "
                           "input")
    shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2) if feature else tuple(x.shape)
    keep = S.astype(E.ge(rand(*shape, dtype=x.dtype), p), x.dtype)
    a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    b = E.add(E.mul(E.sub(keep, 1.0), _ALPHA_PRIME * a), _ALPHA_PRIME * a * p)
    return _inplace(x, lambda x: E.add(E.mul(x, E.mul(keep, a)), b), inplace)


def alpha_dropout(input: Any, p: float = 0.5, training: bool = False,  # noqa: A002
                  inplace: bool = False) -> Any:
    """Alpha dropout of each element (PyTorch's ``F.alpha_dropout``; off unless
    ``training``)."""
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, False)


def feature_alpha_dropout(input: Any, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False) -> Any:
    """Alpha dropout of whole channels (every element of a (batch, channel) pair)."""
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, True)

