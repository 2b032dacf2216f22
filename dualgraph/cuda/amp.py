"""``torch.cuda.amp``: `dg.amp`'s tools, disabled (there is no CUDA), with the argument
order of ``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)``."""

from __future__ import annotations

from typing import Any

from .. import amp
from ..amp import GradScaler


class autocast(amp.autocast):  # noqa: N801 - PyTorch's name
    """``dg.autocast("cuda", dtype, enabled)``: warns when enabled, and does nothing."""

    def __init__(self, enabled: bool = True, dtype: Any = None,
                 cache_enabled: bool = True) -> None:
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


__all__ = ["GradScaler", "autocast"]
