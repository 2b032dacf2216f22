"""Helpers shared by the compiler tests."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dualgraph.ir.graph import Graph

# Tolerances of API.md B3: compiled equals eager within these (relative).
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: np.dtype | None = None,
                 what: str = "") -> None:
    """Same dtype, same shape, equal within the B3 tolerance of ``dtype`` (nan equals nan).

    A tiny absolute floor keeps values that should be 0 (and come out as 1e-17 after a
    different summation order) from failing a purely relative test.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    dtype = np.dtype(dtype or expected.dtype)
    if dtype.kind != "f":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    rtol = RTOL[dtype]
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * 1e-3, err_msg=what)


def graph_ops(graph: Graph | None) -> Iterator[str]:
    """Every op name in ``graph``, fused bodies included."""
    if graph is None:
        return
    for n in graph.nodes:
        yield n.op
        body = n.attrs.get("body") if n.op == "fused" else None
        if body is not None:
            yield from graph_ops(body)
