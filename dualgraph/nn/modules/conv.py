"""Convolution layers in 1, 2 and 3 dims, direct and transposed, with PyTorch's init and
``padding_mode``s."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ops.shape import concatenate as _concatenate
from .. import functional as F
from ..functional.conv import _conv_padding, _ints
from .module import Module, Parameter, _uniform, accepts_device_dtype

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _pad_last(x: Any, before: int, after: int, mode: str, axis: int) -> Any:
    """``x`` padded along ``axis`` (-1 or -2) by the non-zero ``padding_mode``s of PyTorch's
    conv modules, from slices and a concatenation (differentiable, and they compile)."""
    if not before and not after:
        return x
    n = x.shape[axis]
    if mode == "reflect" and max(before, after) >= n:
        raise RuntimeError(f"Padding size should be less than the corresponding input "
                           f"dimension, but got: padding ({before}, {after}) at dimension "
                           f"{x.ndim + axis} of input {list(x.shape)}")
    if mode == "circular" and max(before, after) > n:
        raise RuntimeError(f"Padding value causes wrapping around more than once: padding "
                           f"({before}, {after}) at dimension {x.ndim + axis} of input "
                           f"{list(x.shape)}")

    def take(sl: slice) -> Any:
        return x[(Ellipsis, sl) + (slice(None),) * (-axis - 1)]

    def edge(i: int, k: int) -> Any:  # replicate: the edge element k times
        e = take(slice(i, i + 1 if i != -1 else None))
        shape = list(e.shape)
        shape[axis] = k
        return e.expand(*shape)

    if mode == "circular":
        parts = [take(slice(n - before, n)), x, take(slice(0, after))]
    elif mode == "replicate":
        parts = [edge(0, before), x, edge(-1, after)]
    else:  # reflect: the edge itself is not repeated
        parts = [take(slice(before, 0, -1)), x,
                 take(slice(n - 2, n - 2 - after if n - 2 - after >= 0 else None, -1))]
    return _concatenate([p for p in parts if p.shape[axis]], axis=axis)


def _check_conv_args(name: str, in_channels: int, out_channels: int, groups: int,
                     padding: Any, stride: tuple, padding_mode: str) -> None:
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups:
        raise ValueError("out_channels must be divisible by groups")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             f"{{'same', 'valid'}}")
        if padding == "same" and any(s != 1 for s in stride):
            raise ValueError("padding='same' is not supported for strided convolutions")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                         f"padding_mode={padding_mode!r}")


class _ConvNd(Module):
    """Shared by the convolution layers: PyTorch's parameters, init and repr."""

    _n = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", output_padding: Any = 0) -> None:
        super().__init__()
        n = self._n
        name = type(self).__name__
        self.kernel_size = _ints("kernel_size", kernel_size, n)
        self.stride = _ints("stride", stride, n)
        self.dilation = _ints("dilation", dilation, n)
        self.output_padding = _ints("output_padding", output_padding, n)
        _check_conv_args(name, in_channels, out_channels, groups, padding, self.stride,
                         padding_mode)
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.padding = padding if isinstance(padding, str) else _ints("padding", padding, n)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.groups, self.padding_mode = groups, padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        # PyTorch's kaiming_uniform_(a=sqrt(5)): uniform(+-1/sqrt(fan_in)), fan_in from
        # dimension 1 of the weight (in/groups, or out/groups when transposed).
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = Parameter(_uniform(shape, bound))
        if bias:
            self.bias = Parameter(_uniform((out_channels,), bound))
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """Draw the weight and bias again, as the constructor does."""
        from .linear import _reset_uniform

        _reset_uniform(self, self.weight.shape[1] * math.prod(self.kernel_size))

    def _padded(self, x: Any) -> tuple[Any, Any]:
        """``(input, padding)`` for the functional call: a non-zero padding mode pads the
        input here and convolves without padding (as PyTorch's modules do)."""
        if self.padding_mode == "zeros":
            return x, self.padding
        pads = _conv_padding(self.padding, self.kernel_size, self.stride, self.dilation)
        for k, (before, after) in enumerate(pads):
            x = _pad_last(x, before, after, self.padding_mode, k - len(pads))
        return x, 0

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        n = self._n
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """The direct convolutions' constructor."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode)


class _ConvTranspose(_ConvNd):
    """The transposed convolutions' constructor; only ``padding_mode='zeros'`` (as
    PyTorch)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding)


@accepts_device_dtype
class Conv2d(_Conv):
    """2-D convolution layer: weight ``(out_channels, in_channels/groups, kH, kW)``, bias
    ``(out_channels,)``, both uniform in ``±1/sqrt(fan_in)`` as in PyTorch.

    >>> conv = dg.nn.Conv2d(3, 8, 3, padding=1)   # (N, 3, H, W) -> (N, 8, H, W)
    """

    def forward(self, x: Any) -> Any:
        x, padding = self._padded(x)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


@accepts_device_dtype
class Conv1d(_Conv):
    """1-D convolution layer: weight ``(out_channels, in_channels/groups, k)``."""

    _n = 1

    def forward(self, x: Any) -> Any:
        x, padding = self._padded(x)
        return F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


@accepts_device_dtype
class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution layer: weight ``(in_channels, out_channels/groups, kH,
    kW)``; only ``padding_mode='zeros'`` (as PyTorch)."""

    def forward(self, x: Any, output_size: Any = None) -> Any:
        opad = self.output_padding
        if output_size is not None:
            opad = self._output_padding(tuple(x.shape[-2:]), tuple(output_size)[-2:])
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, opad,
                                  self.groups, self.dilation)

    def _output_padding(self, size: tuple, wanted: tuple) -> tuple:
        """The output_padding giving ``wanted`` spatial size (PyTorch's ``output_size=``):
        any size from the smallest output up to ``stride - 1`` more."""
        out = []
        for i in range(2):
            low = ((size[i] - 1) * self.stride[i] - 2 * self.padding[i]
                   + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not low <= wanted[i] < low + self.stride[i]:
                raise ValueError(f"requested an output size of {list(wanted)}, but valid sizes "
                                 f"range from {low} to {low + self.stride[i] - 1} (for an "
                                 f"input of {list(size)})")
            out.append(wanted[i] - low)
        return tuple(out)


@accepts_device_dtype
class Conv3d(_Conv):
    """3-D convolution layer: weight ``(out_channels, in_channels/groups, kD, kH, kW)``,
    PyTorch's init. ``nn.Conv3d(1, 4, 3, padding=1)``"""

    _n = 3

    def forward(self, x: Any) -> Any:
        x, padding = self._padded(x)
        return F.conv3d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


@accepts_device_dtype
class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution layer: weight ``(in_channels, out_channels/groups, kD, kH,
    kW)``; only ``padding_mode='zeros'`` (as PyTorch)."""

    _n = 3

    def forward(self, x: Any) -> Any:
        return F.conv_transpose3d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class ConvTranspose1d(ConvTranspose2d):
    """``ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1)``: weight (in, out/groups, k)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any,
                 stride: Any = 1, padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                 bias: bool = True, dilation: Any = 1, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        def one(v: Any) -> int:
            return int(v[0] if isinstance(v, (tuple, list)) else v)

        super().__init__(in_channels, out_channels, (1, one(kernel_size)), (1, one(stride)),
                         (0, one(padding)), (0, one(output_padding)), groups, bias,
                         (1, one(dilation)), padding_mode)
        w = self.weight.numpy()
        dt = w.dtype if dtype is None else np.dtype(dtype)
        self.weight = Parameter(w.reshape(w.shape[:2] + (w.shape[3],)).astype(dt))
        if self.bias is not None:
            self.bias = Parameter(self.bias.numpy().astype(dt))
        self.kernel_size, self.stride = (one(kernel_size),), (one(stride),)
        self.padding, self.output_padding = (one(padding),), (one(output_padding),)
        self.dilation = (one(dilation),)

    def forward(self, x: Any, output_size: Any = None) -> Any:
        opad = self.output_padding
        if output_size is not None:
            low = ((x.shape[-1] - 1) * self.stride[0] - 2 * self.padding[0]
                   + self.dilation[0] * (self.kernel_size[0] - 1) + 1)
            wanted = int(tuple(output_size)[-1])
            if not low <= wanted < low + self.stride[0]:
                raise ValueError(f"requested an output size of {[wanted]}, but valid sizes "
                                 f"range from {low} to {low + self.stride[0] - 1} (for an "
                                 f"input of {[x.shape[-1]]})")
            opad = (wanted - low,)
        return F.conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding, opad,
                                  self.groups, self.dilation)
