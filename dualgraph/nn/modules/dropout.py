"""Dropout: elementwise (`Dropout`) and whole channels (`Dropout1d/2d/3d`)."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["AlphaDropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout"]


class Dropout(Module):
    """``F.dropout`` with probability ``p`` in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p = float(p)
        self.inplace = inplace

    def forward(self, x: Any) -> Any:
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _DropoutNd(Module):
    _fn = ""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p, self.inplace = float(p), inplace

    def forward(self, x: Any) -> Any:
        return getattr(F, self._fn)(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """`dropout1d` in training mode, the identity in eval mode. ``nn.Dropout1d(0.2)``"""

    _fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """`dropout2d` in training mode, the identity in eval mode. ``nn.Dropout2d(0.25)``"""

    _fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """`dropout3d` in training mode, the identity in eval mode."""

    _fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    """`alpha_dropout` in training mode (keeps SELU's mean and variance), the identity in
    eval mode."""

    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    """`feature_alpha_dropout`: alpha dropout of whole channels, in training mode."""

    _fn = "feature_alpha_dropout"
