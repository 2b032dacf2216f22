"""``torch.cpu.amp``: `dg.amp`'s gradient scaler and CPU autocast, with the argument order
of ``torch.cpu.amp.autocast(enabled, dtype, cache_enabled)``."""

from __future__ import annotations

from typing import Any

from .. import amp
from ..amp import GradScaler
from ..dtypes import bfloat16


class autocast(amp.autocast):  # noqa: N801 - PyTorch's name
    """``dg.autocast("cpu", dtype, enabled)``."""

    def __init__(self, enabled: bool = True, dtype: Any = bfloat16,
                 cache_enabled: bool = True) -> None:
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


__all__ = ["GradScaler", "autocast"]
