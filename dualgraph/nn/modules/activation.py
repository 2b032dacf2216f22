"""Activation modules: each holds its hyperparameters and calls `functional`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import default_float
from .. import functional as F
from .attention import MultiheadAttention  # noqa: F401 - torch.nn.modules.activation has it
from .module import Module, Parameter

__all__ = [
    "CELU", "ELU", "GELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh",
    "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "PReLU", "RReLU", "ReLU", "ReLU6", "SELU",
    "SiLU", "Sigmoid", "Softmax", "Softmax2d", "Softmin", "Softplus", "Softshrink", "Softsign",
    "Tanh", "Tanhshrink", "Threshold",
]


class ReLU(Module):
    """``max(x, 0)``; ``ReLU(True)`` (``inplace``) writes the result into ``x``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Any) -> Any:
        return x.relu_() if self.inplace else F.relu(x)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    def forward(self, x: Any) -> Any:
        return F.sigmoid(x)


class Tanh(Module):
    def forward(self, x: Any) -> Any:
        return F.tanh(x)


class _Activation(Module):
    """A module calling ``F.<fn>(x, **hyperparameters)``; ``extra_repr`` lists them."""

    _fn: str = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._kwargs = kwargs
        for k, v in kwargs.items():
            setattr(self, k, v)

    def forward(self, x: Any) -> Any:
        return getattr(F, self._fn)(x, **{k: getattr(self, k) for k in self._kwargs})

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._kwargs)


class GELU(_Activation):
    _fn = "gelu"

    def __init__(self, approximate: str = "none") -> None:
        super().__init__(approximate=approximate)


class SiLU(_Activation):
    _fn = "silu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class ELU(_Activation):
    _fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class CELU(_Activation):
    _fn = "celu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class SELU(_Activation):
    _fn = "selu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Softplus(_Activation):
    _fn = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class Softsign(_Activation):
    _fn = "softsign"


class Hardtanh(_Activation):
    _fn = "hardtanh"

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class ReLU6(_Activation):
    _fn = "relu6"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardsigmoid(_Activation):
    _fn = "hardsigmoid"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardswish(_Activation):
    _fn = "hardswish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class LeakyReLU(_Activation):
    _fn = "leaky_relu"

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class Mish(_Activation):
    _fn = "mish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class LogSigmoid(_Activation):
    _fn = "logsigmoid"


class Softmax(_Activation):
    _fn = "softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class LogSoftmax(_Activation):
    _fn = "log_softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class Softmin(_Activation):
    _fn = "softmin"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class GLU(Module):
    """`F.glu` as a module. ``nn.GLU(dim=-1)``"""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Any) -> Any:
        return F.glu(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """``PReLU(num_parameters=1, init=0.25)``: a learned negative slope, one or one per
    channel."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        dt = default_float() if dtype is None else np.dtype(dtype)
        self.init = init
        self.weight = Parameter(np.full((num_parameters,), init, dt))

    def reset_parameters(self) -> None:
        """Every slope back to ``init``."""
        from .. import init

        init.constant_(self.weight, self.init)

    def forward(self, x: Any) -> Any:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Threshold(Module):
    """`threshold` as a module. ``nn.Threshold(0.1, 20.0)``"""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, x: Any) -> Any:
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class Hardshrink(Module):
    """`hardshrink` as a module."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, x: Any) -> Any:
        return F.hardshrink(x, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """`softshrink` as a module."""

    def forward(self, x: Any) -> Any:
        return F.softshrink(x, self.lambd)


class Tanhshrink(Module):
    """`tanhshrink` as a module."""

    def forward(self, x: Any) -> Any:
        return F.tanhshrink(x)


class Softmax2d(Module):
    """``softmax`` over the channels of (N, C, H, W) or (C, H, W) input."""

    def forward(self, x: Any) -> Any:
        return F.softmax2d(x)


class RReLU(Module):
    """Randomized leaky ReLU: in training each negative input is scaled by a slope drawn
    from ``U(lower, upper)``; in eval mode by their mean."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x: Any) -> Any:
        return F.rrelu(x, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                            else "")
