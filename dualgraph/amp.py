"""`dg.amp`: mixed precision as a CPU-only build of PyTorch offers it.

``GradScaler`` for CUDA is disabled there (PyTorch warns "CUDA is not available.
Disabling."): ``scale(loss)`` returns the loss, ``unscale_`` does nothing, ``step(opt)``
calls ``opt.step()``. ``autocast("cuda")`` warns and does nothing, as PyTorch's;
``autocast("cpu")`` (also ``dg.cpu.amp.autocast()``) runs PyTorch's CPU lower-precision ops
in bfloat16 or float16, emulated in float32 (`autocast`). nanoGPT's train.py builds both.

>>> scaler = dg.amp.GradScaler("cuda", enabled=False)
>>> scaler.is_enabled()
False
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .dtypes import bfloat16
from .ops.precision import AUTOCAST, FORMATS


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
    """Mixed precision on the CPU, as PyTorch's CPU autocast: inside the region the ops on
    its lower-precision list (``matmul``/``@``, ``mm``, ``bmm``, ``linear``, ``addmm``,
    the convolutions built on ``conv2d``) take their float32 operands in ``dtype`` and
    give their result in it; every other op runs in its inputs' dtype (losses and
    reductions in float32). A context manager and a decorator; regions nest, and
    ``enabled=False`` switches autocast off inside one.

    ``dtype`` is ``dg.bfloat16`` (the CPU default) or ``dg.float16``. Both are emulated in
    float32: a lower-precision result is a float32 tensor holding only values of that
    format, rounded to nearest even (`ops.precision.reduce_precision`), and its gradient
    is rounded the same way, as PyTorch's casts round it. ``device_type="cuda"`` warns and
    does nothing, as a CPU-only PyTorch does.

    >>> with dg.autocast("cpu"):
    ...     y = dg.ones(2, 3) @ dg.full((3, 1), 1.0 + 2.0 ** -9)
    >>> y.tolist()
    [[3.0], [3.0]]
    """

    def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self._format = None
        if device_type == "cpu":
            if enabled:
                self._format = _cpu_format(dtype)
        elif enabled:
            warnings.warn(f"autocast on {device_type!r} is not available in dualgraph (it runs "
                          "on the CPU only). Disabling autocast.", UserWarning, stacklevel=2)
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else bfloat16
        self._enabled = enabled and self._format is not None
        # The formats to restore, per thread: one instance (a decorator) may be entered
        # by several threads at once.
        self._saved = threading.local()

    def __enter__(self) -> "autocast":
        # An autocast for another device (cuda) leaves the CPU's state as it is.
        saved = self._saved.__dict__.setdefault("stack", [])
        saved.append(AUTOCAST.value)
        if self.device == "cpu":
            AUTOCAST.value = self._format
        return self

    def __exit__(self, *exc: Any) -> None:
        AUTOCAST.value = self._saved.stack.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def autocast_region(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return autocast_region


def _cpu_format(dtype: Any) -> tuple:
    """The emulated format of CPU autocast ``dtype`` (None: bfloat16)."""
    if dtype is None or dtype is bfloat16:
        name = "bfloat16"
    elif isinstance(dtype, (type, np.dtype)) and np.dtype(dtype) == np.float16:
        name = "float16"
    else:
        raise RuntimeError(
            f"In CPU autocast, but the target dtype is not supported: {dtype!r}. CPU autocast "
            "supports dg.bfloat16 and dg.float16 (both emulated in float32).")
    return (name, *FORMATS[name])


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can run on ``device_type``: the CPU only."""
    return device_type == "cpu"


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an autocast region of ``device_type`` is active: a CPU one for ``"cpu"``;
    never for another device (no argument means CUDA, as in PyTorch)."""
    return device_type == "cpu" and AUTOCAST.value is not None


def is_autocast_cpu_enabled() -> bool:
    """``is_autocast_enabled("cpu")``."""
    return AUTOCAST.value is not None


def get_autocast_dtype(device_type: str = "cpu") -> Any:
    """The lower-precision dtype of ``device_type``'s autocast: the active CPU region's,
    else bfloat16 on the CPU (PyTorch's default) and float16 elsewhere."""
    if device_type != "cpu":
        return np.dtype(np.float16)
    fmt = AUTOCAST.value
    return bfloat16 if fmt is None or fmt[0] == "bfloat16" else np.dtype(np.float16)


__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_available",
           "is_autocast_cpu_enabled", "is_autocast_enabled"]
