"""`dg.amp`: mixed precision as a CPU-only build of PyTorch offers it, which is to say
switched off.

``GradScaler`` for CUDA is disabled there (PyTorch warns "CUDA is not available.
Disabling."): ``scale(loss)`` returns the loss, ``unscale_`` does nothing, ``step(opt)``
calls ``opt.step()``. ``autocast`` for CUDA warns and does nothing, as PyTorch's; dualgraph
has no automatic casting on the CPU either (ops run in their inputs' dtypes), so a CPU
``autocast`` warns the same way instead of casting. nanoGPT's train.py builds both.

>>> scaler = dg.amp.GradScaler("cuda", enabled=False)
>>> scaler.is_enabled()
False
"""

from __future__ import annotations

import warnings
from typing import Any


class GradScaler:
    """A disabled gradient scaler (there is no CUDA and no float16 training here)."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if enabled:
            warnings.warn("GradScaler is enabled, but CUDA is not available (dualgraph runs "
                          "on the CPU only). Disabling.", UserWarning, stacklevel=2)
        self._scale = float(init_scale)

    def is_enabled(self) -> bool:
        return False

    def scale(self, outputs: Any) -> Any:
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        pass

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        pass

    def get_scale(self) -> float:
        return 1.0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        pass


class autocast:  # noqa: N801 - PyTorch's name
    """A context manager and decorator that does nothing (after a warning when enabled):
    dualgraph runs every op in its inputs' dtypes."""

    def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if enabled:
            warnings.warn(f"autocast on {device_type!r} is not available in dualgraph (no "
                          "automatic casting). Disabling autocast.", UserWarning, stacklevel=2)

    def __enter__(self) -> "autocast":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def __call__(self, fn: Any) -> Any:
        return fn


__all__ = ["GradScaler", "autocast"]
