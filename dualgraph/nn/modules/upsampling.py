"""`Upsample`: `F.interpolate` as a module."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]


class Upsample(Module):
    """`F.interpolate` as a module. ``nn.Upsample(scale_factor=2, mode="bilinear")``"""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size = size
        self.scale_factor = (float(scale_factor) if isinstance(scale_factor, (int, float))
                             else scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Any) -> Any:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self) -> str:
        head = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return f"{head}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """`Upsample` with ``mode='nearest'``. ``nn.UpsamplingNearest2d(scale_factor=2)``"""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """`Upsample` with ``mode='bilinear'`` and ``align_corners=True``."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
