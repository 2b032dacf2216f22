"""Backends that lower optimized graphs to executable code."""

from __future__ import annotations

import sys
import threading
from typing import Any

_IMPORT_LOCK = threading.Lock()
_IMPORTED: list = []  # the Numba backend, once an import of it has finished


def import_backend() -> Any:
    """``dualgraph.backend.numba``, imported by one thread at a time: its modules import
    each other, which Python resolves in one thread only, so two threads importing it at
    once (a kernel load in the background and `dg.explain`) could find a module half
    initialised. An interrupted import (Ctrl-C while Numba loads, the first compiled
    call's second or so) leaves nothing half-imported: the modules it added are dropped,
    so the next call imports them again instead of finding a ``numba`` without its
    ``core``."""
    if _IMPORTED:
        return _IMPORTED[0]
    with _IMPORT_LOCK:
        if _IMPORTED:
            return _IMPORTED[0]
        before = set(sys.modules)
        try:
            from . import numba as backend
        except BaseException:
            for name in set(sys.modules) - before:
                sys.modules.pop(name, None)
            raise
        _IMPORTED.append(backend)
        return backend
