"""Tolerances for `dualgraph.testing.assert_close` where arrays' magnitudes vary per call."""

from __future__ import annotations

from typing import Any

import numpy as np


def tolerance(expected: Any, rtol: float, floor: float = 1.0) -> dict[str, float]:
    """``rtol``, and an absolute floor of ``rtol`` times the largest finite magnitude of
    ``expected`` (at least ``floor``): an element that is a difference of large terms
    carries their absolute rounding error, not one relative to itself.

    >>> assert_close(got, want, **tolerance(want, 1e-5))
    """
    e = np.asarray(expected)
    finite = np.abs(e[np.isfinite(e)]) if e.dtype.kind in "fc" else np.zeros(0)
    scale = float(finite.max()) if finite.size else 0.0
    return {"rtol": rtol, "atol": rtol * max(scale, floor)}
