"""Bijective transforms, as ``torch.distributions.transforms``: each maps ``x`` to
``y = t(x)``, has an inverse ``t.inv`` and ``log_abs_det_jacobian(x, y)``, written with
tensor ops so they differentiate and trace.

>>> t = ComposeTransform([AffineTransform(0.0, 2.0), ExpTransform()])
>>> t(dg.tensor([0.0])), t.inv(dg.tensor([1.0]))
(tensor([1.]), tensor([0.]))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..eager.tensor import Tensor
from ..nn.functional import softplus
from . import constraints
from .distribution import broadcast_all

__all__ = ["AffineTransform", "ComposeTransform", "ExpTransform", "SigmoidTransform",
           "TanhTransform", "Transform", "identity_transform"]


def _sum_rightmost(value: Any, dims: int) -> Any:
    return value.sum(tuple(range(-dims, 0))) if dims > 0 else value


class Transform:
    """Base: subclasses give ``_call``, ``_inverse`` and ``log_abs_det_jacobian``."""

    bijective = True
    sign: int = 1
    domain: Any = constraints.real
    codomain: Any = constraints.real

    @property
    def event_dim(self) -> int:
        return self.domain.event_dim

    @property
    def inv(self) -> "Transform":
        return _InverseTransform(self)

    def __call__(self, x: Any) -> Any:
        return self._call(x)

    def _call(self, x: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement its forward map")

    def _inverse(self, y: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} is not invertible")

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no log_abs_det_jacobian")

    def forward_shape(self, shape: Any) -> tuple:
        return tuple(shape)

    def inverse_shape(self, shape: Any) -> tuple:
        return tuple(shape)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    def __init__(self, t: Transform) -> None:
        self._inv = t
        self.domain, self.codomain, self.sign = t.codomain, t.domain, t.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def __call__(self, x: Any) -> Any:
        return self._inv._inverse(x)

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    """``parts`` applied in order: ``ComposeTransform([f, g])(x) == g(f(x))``."""

    def __init__(self, parts: Sequence[Transform], cache_size: int = 0) -> None:
        self.parts = list(parts)
        if not all(isinstance(p, Transform) for p in self.parts):
            raise TypeError("ComposeTransform expects a list of Transform objects")
        self.domain = self.parts[0].domain if self.parts else constraints.real
        self.codomain = self.parts[-1].codomain if self.parts else constraints.real
        self.sign = math.prod(p.sign for p in self.parts)

    @property
    def event_dim(self) -> int:
        return max((p.event_dim for p in self.parts), default=0)

    def _call(self, x: Any) -> Any:
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y: Any) -> Any:
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        if not self.parts:
            return x * 0
        total: Any = 0
        for p in self.parts:
            y_p = p(x)
            total = total + _sum_rightmost(p.log_abs_det_jacobian(x, y_p),
                                           self.event_dim - p.event_dim)
            x = y_p
        return total


identity_transform = ComposeTransform([])


class ExpTransform(Transform):
    """``y = exp(x)``."""

    codomain = constraints.positive

    def _call(self, x: Any) -> Any:
        return x.exp()

    def _inverse(self, y: Any) -> Any:
        return y.log()

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return x


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``."""

    codomain = constraints.unit_interval

    def _call(self, x: Any) -> Any:
        return x.sigmoid()

    def _inverse(self, y: Any) -> Any:
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    """``y = tanh(x)``; the Jacobian term uses the stable form ``2 (log 2 - x -
    softplus(-2x))``."""

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x: Any) -> Any:
        return x.tanh()

    def _inverse(self, y: Any) -> Any:
        return y.atanh()

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AffineTransform(Transform):
    """``y = loc + scale * x``; ``event_dim`` rightmost dims form one event."""

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        self.loc, self.scale, self._event_dim = loc, scale, event_dim
        if isinstance(scale, (int, float)):
            self.sign = 1 if scale > 0 else -1 if scale < 0 else 0

    @property
    def event_dim(self) -> int:
        return self._event_dim

    def _call(self, x: Any) -> Any:
        return self.loc + self.scale * x

    def _inverse(self, y: Any) -> Any:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        scale = self.scale if isinstance(self.scale, Tensor) else broadcast_all(self.scale, x)[0]
        shape = tuple(x.shape)
        result = scale.abs().log()
        if tuple(result.shape) != shape:
            result = result.expand(*shape) if result.ndim <= len(shape) else result
        return _sum_rightmost(result, self._event_dim)
