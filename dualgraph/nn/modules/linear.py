"""Affine layers: `Linear` and `Identity`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...dtypes import as_dtype, check_device, default_float
from ...eager.grad_mode import no_grad
from ...eager.internal import set_array
from .. import functional as F
from .module import Module, Parameter, _uniform

__all__ = ["Bilinear", "Identity", "LazyLinear", "Linear"]


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight ``(out_features, in_features)``.

    Initialised like PyTorch: uniform in ``±1/sqrt(in_features)`` for weight and bias.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        check_device(device, "Linear()")
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
        if dtype is not None:
            self._cast(as_dtype(dtype))

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does."""
        _reset_uniform(self, self.in_features)

    def forward(self, x: Any) -> Any:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _reset_uniform(module: Module, fan_in: int) -> None:
    """PyTorch's default layer init, in place: weight and bias uniform in
    ``±1/sqrt(fan_in)`` (kaiming_uniform_ with ``a=sqrt(5)`` gives the weight that bound)."""
    from .. import init

    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    init.uniform_(module.weight, -bound, bound)
    if module.bias is not None:
        init.uniform_(module.bias, -bound, bound)


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments (PyTorch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class Bilinear(Module):
    """``y = x1 @ weight[k] @ x2 + bias[k]`` with weight ``(out_features, in1_features,
    in2_features)``, both initialised uniform in ``±1/sqrt(in1_features)`` as PyTorch.
    ``nn.Bilinear(20, 30, 40)(x1, x2)``"""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features) if in1_features > 0 else 0.0
        dt = default_float() if dtype is None else as_dtype(dtype)
        self.weight = Parameter(
            _uniform((out_features, in1_features, in2_features), bound).astype(dt))
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound).astype(dt))
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does."""
        _reset_uniform(self, self.in1_features)

    def forward(self, input1: Any, input2: Any) -> Any:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class LazyLinear(Linear):
    """A `Linear` whose ``in_features`` is read from its first input: until then its
    parameters are empty; the first call fills them in place (PyTorch's initialisation)
    and the module becomes a `Linear`. ``nn.LazyLinear(10)``"""

    def __init__(self, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, out_features, bias)
        self._dtype = default_float() if dtype is None else as_dtype(dtype)

    def initialize_parameters(self, x: Any) -> None:
        """Shape and initialise the parameters for input ``x`` (the first call does it)."""
        self.in_features = int(x.shape[-1])
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        dt = self._dtype
        with no_grad():
            # In place: an optimizer built before the first call holds these objects.
            set_array(self.weight, _uniform((self.out_features, self.in_features), bound)
                      .astype(dt))
            if self.bias is not None:
                set_array(self.bias, _uniform((self.out_features,), bound).astype(dt))
        del self._dtype
        self.__class__ = Linear

    def forward(self, x: Any) -> Any:
        self.initialize_parameters(x)
        return F.linear(x, self.weight, self.bias)
