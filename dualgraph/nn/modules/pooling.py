"""Pooling layers: max, average and adaptive pooling, and max unpooling."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "LPPool1d",
    "LPPool2d", "LPPool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d",
    "MaxUnpool3d", "FractionalMaxPool2d",
]


class _MaxPoolNd(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    """`F.max_pool2d` as a module. ``nn.MaxPool2d(2)``"""

    def forward(self, x: Any) -> Any:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class MaxPool1d(_MaxPoolNd):
    """`F.max_pool1d` as a module. ``nn.MaxPool1d(3, stride=2)``"""

    def forward(self, x: Any) -> Any:
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class _AvgPoolNd(Module):
    """The hyperparameters that `AvgPool2d` and `AvgPool3d` share (PyTorch's
    ``_AvgPoolNd``); subclasses give ``forward``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """`F.avg_pool2d` as a module. ``nn.AvgPool2d(3, stride=1, padding=1)``"""

    def forward(self, x: Any) -> Any:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool1d(Module):
    """`F.avg_pool1d` as a module. ``nn.AvgPool1d(3)``"""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        one = (lambda v: (v,) if isinstance(v, int) else tuple(v))  # noqa: E731
        self.kernel_size = one(kernel_size)
        self.stride = one(stride if stride is not None else kernel_size)
        self.padding = one(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, x: Any) -> Any:
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    _fn = ""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, x: Any) -> Any:
        if self._fn.startswith("adaptive_max"):
            return getattr(F, self._fn)(x, self.output_size, self.return_indices)
        return getattr(F, self._fn)(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(_AdaptivePool):
    """`F.adaptive_avg_pool2d` as a module. ``nn.AdaptiveAvgPool2d((1, 1))``"""

    _fn = "adaptive_avg_pool2d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool1d(_AdaptivePool):
    """`F.adaptive_avg_pool1d` as a module."""

    _fn = "adaptive_avg_pool1d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveMaxPool2d(_AdaptivePool):
    """`F.adaptive_max_pool2d` as a module. ``nn.AdaptiveMaxPool2d(2)``"""

    _fn = "adaptive_max_pool2d"


class AdaptiveMaxPool1d(_AdaptivePool):
    """`F.adaptive_max_pool1d` as a module."""

    _fn = "adaptive_max_pool1d"


class MaxPool3d(_MaxPoolNd):
    """`F.max_pool3d` as a module. ``nn.MaxPool3d(2)``"""

    def forward(self, x: Any) -> Any:
        return F.max_pool3d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool3d(_AvgPoolNd):
    """`F.avg_pool3d` as a module. ``nn.AvgPool3d(2)``"""

    def forward(self, x: Any) -> Any:
        return F.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _MaxUnpoolNd(Module):
    """What the unpooling modules share: ``unpool(*pool(x))`` with ``pool =
    nn.MaxPool2d(2, return_indices=True)`` and ``unpool = nn.MaxUnpool2d(2)``."""

    _fn = ""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, x: Any, indices: Any, output_size: Any = None) -> Any:
        return getattr(F, self._fn)(x, indices, self.kernel_size, self.stride, self.padding,
                                    output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """`F.max_unpool1d` as a module. ``nn.MaxUnpool1d(2)``"""

    _fn = "max_unpool1d"


class MaxUnpool2d(_MaxUnpoolNd):
    """`F.max_unpool2d` as a module. ``nn.MaxUnpool2d(2)``"""

    _fn = "max_unpool2d"


class MaxUnpool3d(_MaxUnpoolNd):
    """`F.max_unpool3d` as a module. ``nn.MaxUnpool3d(2)``"""

    _fn = "max_unpool3d"


class AdaptiveAvgPool3d(_AdaptivePool):
    """`F.adaptive_avg_pool3d` as a module."""

    _fn = "adaptive_avg_pool3d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveMaxPool3d(_AdaptivePool):
    """`F.adaptive_max_pool3d` as a module."""

    _fn = "adaptive_max_pool3d"


class _LPPoolNd(Module):
    _fn = ""

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, x: Any) -> Any:
        return getattr(F, self._fn)(x, float(self.norm_type), self.kernel_size, self.stride,
                                    self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """`F.lp_pool1d` as a module: power-average pooling. ``nn.LPPool1d(2, 3)``"""

    _fn = "lp_pool1d"


class LPPool2d(_LPPoolNd):
    """`F.lp_pool2d` as a module."""

    _fn = "lp_pool2d"


class LPPool3d(_LPPoolNd):
    """`F.lp_pool3d` as a module."""

    _fn = "lp_pool3d"


class FractionalMaxPool2d(Module):
    """`F.fractional_max_pool2d` as a module, with fresh random windows on every call.
    ``nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5))``"""

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Any = None) -> None:
        super().__init__()
        if output_size is None and output_ratio is None:
            raise ValueError("FractionalMaxPool2d requires specifying either an output size, "
                             "or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        self.kernel_size = kernel_size
        self.output_size = output_size
        self.output_ratio = output_ratio
        self.return_indices = return_indices
        self._random_samples = _random_samples

    def forward(self, input: Any) -> Any:  # noqa: A002
        return F.fractional_max_pool2d(input, self.kernel_size, self.output_size,
                                       self.output_ratio, self.return_indices,
                                       _random_samples=self._random_samples)
