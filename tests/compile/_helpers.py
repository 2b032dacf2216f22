"""Helpers shared by the compiler tests."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dualgraph.ir.graph import Graph

# Tolerances of API.md B3: compiled equals eager within these (relative).
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Same dtype and shape, values equal within the B3 tolerance of the dtype (nan equals
    nan, infinities must match exactly).

    Relative to the element, with an absolute floor of ``rtol`` times the array's largest
    finite magnitude: the compiled code sums in another order (BLAS vs a loop, float64
    accumulators), and an element that is a difference of large terms carries their
    absolute rounding error, not one relative to itself.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    rtol = RTOL[expected.dtype]
    finite = np.abs(expected[np.isfinite(expected)])
    scale = float(finite.max()) if finite.size else 0.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * max(scale, 1e-3),
                               err_msg=what)


def graph_ops(graph: Graph | None) -> Iterator[str]:
    """Every op name in ``graph``, fused bodies included."""
    if graph is None:
        return
    for n in graph.nodes:
        yield n.op
        body = n.attrs.get("body") if n.op == "fused" else None
        if body is not None:
            yield from graph_ops(body)
