"""Padding modules (`ZeroPad2d`, `ReflectionPad1d`, ... in 1, 2 and 3 dims) over `F.pad`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import functional as F
from .module import Module

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


def _pairs(padding: Any, dims: int, name: str) -> tuple:
    """PyTorch's padding argument: one int for every side, or ``2 * dims`` ints."""
    if isinstance(padding, (int, np.integer)):
        return (int(padding),) * (2 * dims)
    pads = tuple(int(p) for p in padding)
    if len(pads) != 2 * dims:
        raise ValueError(f"{name}: padding must be an int or a {2 * dims}-tuple, got {padding}")
    return pads


class _PadNd(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        self.padding = _pairs(padding, self._dims, type(self).__name__)
        self.value = value

    def forward(self, x: Any) -> Any:
        if self._mode == "constant":
            return F.pad(x, self.padding, "constant", self.value)
        return F.pad(x, self.padding, self._mode)

    def extra_repr(self) -> str:
        if self._mode == "constant" and type(self).__name__.startswith("Constant"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name: str, mode: str, dims: int, zero: bool = False) -> type:
    doc = f"`F.pad` of the last {dims} dim(s), mode ``{mode}``. ``nn.{name}(1)``"
    if zero:
        def __init__(self: Any, padding: Any) -> None:  # noqa: N807 - a method
            _PadNd.__init__(self, padding, 0.0)
        attrs = {"_mode": mode, "_dims": dims, "__doc__": doc, "__init__": __init__}
    elif mode == "constant":
        attrs = {"_mode": mode, "_dims": dims, "__doc__": doc}
    else:
        def __init__(self: Any, padding: Any) -> None:  # noqa: N807 - a method
            _PadNd.__init__(self, padding)
        attrs = {"_mode": mode, "_dims": dims, "__doc__": doc, "__init__": __init__}
    return type(name, (_PadNd,), {"__module__": __name__, **attrs})

ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1, zero=True)

ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2, zero=True)

ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3, zero=True)

ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1)

ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2)

ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3)

ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1)

ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2)

ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3)

ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1)

ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2)

ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3)

CircularPad1d = _pad_class("CircularPad1d", "circular", 1)

CircularPad2d = _pad_class("CircularPad2d", "circular", 2)

CircularPad3d = _pad_class("CircularPad3d", "circular", 3)
