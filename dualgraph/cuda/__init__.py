"""`dg.cuda`, as a CPU-only build of PyTorch has it: no CUDA device is available.

The queries answer as on a machine without a GPU (``is_available()`` is False,
``device_count()`` is 0); the seeding calls are accepted and do nothing, as PyTorch's do
when CUDA is absent (so ``torch.cuda.manual_seed_all(seed)`` in a training script runs);
anything that needs a device raises `RuntimeError` naming it.

>>> dg.cuda.is_available(), dg.cuda.device_count()
(False, 0)
"""

from __future__ import annotations

from typing import Any, NoReturn

from . import amp  # noqa: F401 - torch.cuda.amp


def is_available() -> bool:
    """False: dualgraph runs on the CPU only."""
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Accepted and ignored: there is no CUDA generator (seed the CPU with `dg.manual_seed`)."""
    _check_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored, as `manual_seed`."""
    _check_seed(seed)


def seed() -> None:
    """Accepted and ignored: there is no CUDA generator."""


def seed_all() -> None:
    """Accepted and ignored: there is no CUDA generator."""


def synchronize(device: Any = None) -> NoReturn:
    _unavailable("synchronize()")


def empty_cache() -> None:
    """Nothing to free: there is no CUDA caching allocator (PyTorch's call is a no-op too
    when CUDA was never initialised)."""


def current_device() -> NoReturn:
    _unavailable("current_device()")


def set_device(device: Any) -> NoReturn:
    _unavailable(f"set_device({device!r})")


def get_device_name(device: Any = None) -> NoReturn:
    _unavailable("get_device_name()")


def get_device_properties(device: Any) -> NoReturn:
    _unavailable("get_device_properties()")


def memory_allocated(device: Any = None) -> NoReturn:
    _unavailable("memory_allocated()")


def _check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):
        raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}")


def _unavailable(what: str) -> NoReturn:
    raise RuntimeError(f"dg.cuda.{what}: no CUDA device is available: dualgraph runs on the "
                       "CPU only (NumPy and Numba)")
