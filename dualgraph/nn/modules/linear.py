"""Affine layers: `Linear` and `Identity`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import functional as F
from .module import Module, Parameter, _uniform

__all__ = ["Identity", "Linear"]


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight ``(out_features, in_features)``.

    Initialised like PyTorch: uniform in ``±1/sqrt(in_features)`` for weight and bias.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        for name, n in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                raise ValueError(f"Linear: {name} must be a non-negative int, got {n!r}")
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(_uniform((out_features, in_features), bound))
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments (PyTorch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x
