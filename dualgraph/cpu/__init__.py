"""`dg.cpu`, as PyTorch's ``torch.cpu``: the one device dualgraph runs on.

>>> dg.cpu.is_available(), dg.cpu.device_count(), dg.cpu.current_device()
(True, 1, 'cpu')
"""

from __future__ import annotations

from typing import Any

from . import amp  # noqa: F401 - torch.cpu.amp


def is_available() -> bool:
    """True: dualgraph runs on the CPU."""
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def is_initialized() -> bool:
    return True


def set_device(device: Any) -> None:
    """Accepted for the CPU only, as PyTorch's (a no-op)."""
    from ..dtypes import check_device

    check_device(device, "cpu.set_device()")


def synchronize(device: Any = None) -> None:
    """A no-op: CPU work is done when a call returns."""
