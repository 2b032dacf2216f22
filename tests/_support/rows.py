"""Questions about the op case table's rows (tests/ops/cases.py) that the tests derived
from it ask."""

from __future__ import annotations

from typing import Any

import numpy as np

import dualgraph as dg


def traces(row: Any) -> bool:
    """Whether ``dg.trace`` captures the row (float inputs requiring grad); a row whose
    result shape depends on the data does not, so it runs eagerly only."""
    arrays = row.arrays(np.random.default_rng(0), np.float64)
    try:
        dg.trace(row.fn, *[dg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays])
    except dg.TraceError:
        return False
    return True
