"""`dg.accelerator`, as ``torch.accelerator`` on a machine without one: dualgraph runs on
the CPU only, so no accelerator is available.

>>> dg.accelerator.is_available()
False
"""

from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def current_accelerator(check_available: bool = False) -> None:
    """None: there is no accelerator (PyTorch's answer on a CPU-only machine)."""
    return None
