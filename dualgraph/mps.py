"""`dg.mps`, as PyTorch has it on a machine without Apple's GPU: nothing is available.

``device = "mps" if torch.mps.is_available() else "cpu"`` picks the CPU; the seeding and
cache calls are accepted and do nothing, as the CUDA ones are (`dg.cuda`).

>>> dg.mps.is_available(), dg.mps.device_count()
(False, 0)
"""

from __future__ import annotations

from .cuda import _check_seed


def is_available() -> bool:
    """False: dualgraph runs on the CPU only."""
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored: there is no MPS generator (seed the CPU with `dg.manual_seed`)."""
    _check_seed(seed)


def seed() -> None:
    """Accepted and ignored, as `manual_seed`."""


def empty_cache() -> None:
    """Nothing to free: no device memory exists."""


def synchronize() -> None:
    """Nothing to wait for: every op has run when it returns."""
