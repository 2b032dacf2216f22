"""Captured NumPy arrays: baked into the trace as constants, checked now and then.

A NumPy array the function captures (a global, a closure variable) becomes a constant of
the graph, a copy made at trace time (JAX's rule). Checking its values on every call
would cost as much as reading the array, so the call path checks them on a sample of
calls (every `CHECK_EVERY`-th), and warns once per compiled function and array
when they no longer match the copy: the compiled call still computes with the old values.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

# The call path compares the captured arrays with their trace-time copies on every
# CHECK_EVERY-th call of an entry (a counter test on the others).
CHECK_EVERY = 16


@dataclass(slots=True, eq=False)
class BakedArray:
    """A captured array, the copy the graph holds, and where the trace first read it."""

    array: np.ndarray
    snapshot: np.ndarray
    loc: str | None


def changed(b: BakedArray) -> bool:
    """Whether ``b.array`` no longer holds the values (bit for bit) it had when traced."""
    a, s = b.array, b.snapshot
    if a.shape != s.shape or a.dtype != s.dtype:
        return True
    # Bytes, not ``==``: a NaN equals itself and -0.0 differs from 0.0, as the kernel sees.
    return a.tobytes() != s.tobytes()


def check_baked(baked: tuple, warned: set, name: str) -> None:
    """Warn once per compiled function and array whose values changed since the trace."""
    for b in baked:
        if id(b.array) in warned or not changed(b):
            continue
        warned.add(id(b.array))
        where = f" (read at {b.loc})" if b.loc else ""
        warnings.warn(
            f"dg.compile: {name} captured a NumPy array of shape {b.snapshot.shape}{where} "
            "whose values have changed since it was traced; the compiled call still uses "
            "the values it had then. Pass it as an argument (a tensor or array), or keep "
            "it in a tensor the function captures (read on every call) and change that.",
            RuntimeWarning, stacklevel=4)

