"""``torch.backends.cudnn`` without cuDNN: settable flags that change nothing."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from .flags import guard_flags

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    return False


def version() -> None:
    """None, as PyTorch answers without cuDNN."""
    return None


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, deterministic: bool = False,
          allow_tf32: bool = True) -> Iterator[None]:
    """Set the flags for a block and restore them after (they change nothing here)."""
    mod = sys.modules[__name__]
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    old = {n: getattr(mod, n) for n in names}
    for n, v in zip(names, (enabled, benchmark, deterministic, allow_tf32)):
        setattr(mod, n, v)
    try:
        yield
    finally:
        for n, v in old.items():
            setattr(mod, n, v)


guard_flags(__name__, ("enabled", "benchmark", "deterministic", "allow_tf32",
                       "benchmark_limit"))
