"""Eager mode's compiled routines: a few NumPy kernels of ops/ as loops built by the
backend (`dualgraph.backend.numba.eager_routines`), with the NumPy forms' bits.

`install` puts this module into ops' slot (`dualgraph.ops.routines`) when eager mode is
imported; the backend, and with it Numba, is imported on the first call, which comes only
from an operand of at least ``ops.routines.FROM`` elements. A process whose eager program
has none never imports Numba. The first call costs the backend's import and Numba's
set-up, and the first use of each routine in an installation its build (figures in
docs/eager.md). ``DUALGRAPH_EAGER_ROUTINES=0`` in the environment keeps every kernel on
its NumPy form, as does ``NUMBA_DISABLE_JIT=1`` (the loops would run as Python).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from ..ops import routines as slot

_BUILT: list[Any] = []  # the backend's module, once imported


def _backend() -> Any:
    if not _BUILT:
        from ..backend import import_backend

        import_backend()  # one thread at a time (the backend's modules import each other)
        from ..backend.numba import eager_routines

        _BUILT.append(eager_routines)
    return _BUILT[0]


def gelu_keep(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GELU of a C-contiguous float32 array and ``erf(x / sqrt(2)) + 1``."""
    return _backend().gelu_keep(x)


def gelu_grad(g: np.ndarray, x: np.ndarray, erf1: np.ndarray) -> np.ndarray:
    """GELU's backward from the kept ``erf(x / sqrt(2)) + 1`` (C-contiguous float32
    arrays of one shape)."""
    return _backend().gelu_grad(g, x, erf1)


def add_rows(out: np.ndarray, vals: np.ndarray, rows: np.ndarray) -> None:
    """``np.add.at(out, rows, vals)`` of C-ordered value rows (`ops.routines`)."""
    _backend().add_rows(out, vals, rows)


def enabled() -> bool:
    """Whether the environment allows the compiled routines."""
    return (os.environ.get("DUALGRAPH_EAGER_ROUTINES", "1") != "0"
            and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0"))


def install() -> bool:
    """Put the routines into ops' slot unless the environment says no; whether they are
    installed."""
    if not enabled():
        return False
    if not slot.INSTALLED:
        slot.INSTALLED.append(sys.modules[__name__])
    return True
