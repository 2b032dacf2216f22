"""`PixelShuffle` and `PixelUnshuffle`: depth to space and back."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["ChannelShuffle", "PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """`F.pixel_shuffle` as a module. ``nn.PixelShuffle(2)``"""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Any) -> Any:
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """`F.pixel_unshuffle` as a module. ``nn.PixelUnshuffle(2)``"""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Any) -> Any:
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """`F.channel_shuffle` as a module. ``nn.ChannelShuffle(2)``"""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, x: Any) -> Any:
        return F.channel_shuffle(x, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
