"""`dg.random`: the global generator's controls under ``torch.random``'s names, with
`fork_rng`, which puts the generator's state back when its block ends.

>>> with dg.random.fork_rng():
...     a = dg.rand(2)
>>> bool((dg.rand(2) == a).all())
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .eager.creation import (
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed",
           "seed", "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kwarg: str = "devices", device_type: str = "cuda") -> Iterator[None]:
    """Draws inside the block leave the global generator as it was (``enabled=False``:
    they advance it). ``devices``/``device_type`` are accepted (CPU only)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
