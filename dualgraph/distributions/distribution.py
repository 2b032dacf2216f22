"""`Distribution`: the base of `dg.distributions`, with PyTorch's shapes and checks.

A distribution has a ``batch_shape`` (independent distributions side by side) and an
``event_shape`` (the shape of one draw). ``sample(sample_shape)`` returns
``sample_shape + batch_shape + event_shape``; ``rsample`` does too, differentiably, where the
distribution has a reparameterisation. Draws come from dualgraph's generator, so
`dg.manual_seed` makes them reproducible (they are not torch's numbers).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.internal import array_of
from ..eager.tensor import Tensor
from ..modes import current_trace
from ..ops import shape as S
from ..ops.mixin import TensorOps

__all__ = ["Distribution"]


def _size(shape: Any) -> tuple:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


class Distribution:
    """Base class: subclasses set ``arg_constraints``, ``support`` and implement
    ``log_prob``, ``sample`` or ``rsample``, ``entropy``, ``mean`` and ``variance``."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints: dict = {}
    support: Any = None
    _validate_default = True

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument and sample checks on or off by default (on, as PyTorch)."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_default = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (),
                 validate_args: bool | None = None) -> None:
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        self._validate_args = (Distribution._validate_default if validate_args is None
                               else validate_args)
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if name not in self.__dict__:
                    continue  # a parameter given in its other form (probs or logits)
                value = self.__dict__[name]
                if not _holds(constraint, value):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self) -> tuple:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        return self._event_shape

    @property
    def mean(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Any:
        return self.variance.sqrt()

    def _extended_shape(self, sample_shape: Any = ()) -> tuple:
        return _size(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape: Any = ()) -> Any:
        """Draws of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample")

    def sample_n(self, n: int) -> Any:
        return self.sample((n,))

    def log_prob(self, value: Any) -> Any:
        raise NotImplementedError

    def cdf(self, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def entropy(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Any:
        return self.entropy().exp()

    def _validate_sample(self, value: Any) -> None:
        """PyTorch's checks of a ``log_prob`` argument: a tensor whose shape broadcasts
        with the distribution's, inside the support (checked eagerly only: a traced value
        is unknown)."""
        if not isinstance(value, TensorOps):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        shape = tuple(value.shape)
        if shape[len(shape) - event_dim:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {shape} "
                             f"vs {self._event_shape}.")
        actual, expected = shape[:len(shape) - event_dim], self._batch_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{shape} vs {self._extended_shape()}.")
        if self.support is not None and not _holds(self.support, value):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {shape}) to be "
                f"within the support ({self.support!r}) of the distribution {self!r}, but "
                f"found invalid values:\n{value}")

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {_shape_text(self.__dict__[k])}" for k in names)
        return f"{type(self).__name__}({args})"


def _shape_text(value: Any) -> str:
    shape = tuple(value.shape) if hasattr(value, "shape") else ()
    return f"torch.Size({list(shape)})" if shape else repr(value)


def _holds(constraint: Any, value: Any) -> bool:
    """Whether ``value`` satisfies ``constraint`` everywhere; True while tracing (a traced
    value is not known)."""
    if current_trace() is not None or not isinstance(value, (Tensor, np.ndarray, float, int)):
        return True
    ok = constraint.check(value)
    return bool(np.all(array_of(ok) if isinstance(ok, Tensor) else ok))


def broadcast_all(*values: Any) -> tuple:
    """Tensors and numbers broadcast to one shape; numbers become float32 tensors (the
    tensors' dtype when there are any), as ``torch.distributions.utils.broadcast_all``."""
    tensors = [v for v in values if isinstance(v, TensorOps)]
    dtype = tensors[0].dtype if tensors else np.float32
    as_t = [v if isinstance(v, TensorOps) else Tensor(np.asarray(v, dtype)) for v in values]
    shape = np.broadcast_shapes(*[tuple(v.shape) for v in as_t])
    return tuple(v if tuple(v.shape) == shape else S.broadcast_to(v, shape) for v in as_t)


def clamp_probs(probs: Any) -> Any:
    """``probs`` clamped to ``[eps, 1 - eps]`` (the dtype's machine epsilon)."""
    eps = float(np.finfo(np.dtype(probs.dtype)).eps)
    return probs.clamp(eps, 1 - eps)


def probs_to_logits(probs: Any, is_binary: bool = False) -> Any:
    """Log-odds (``is_binary``) or log-probabilities of clamped ``probs``."""
    ps = clamp_probs(probs)
    return ps.log() - (-ps).log1p() if is_binary else ps.log()


def logits_to_probs(logits: Any, is_binary: bool = False) -> Any:
    """``sigmoid`` (``is_binary``) or ``softmax`` over the last dim."""
    return logits.sigmoid() if is_binary else logits.softmax(-1)


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
