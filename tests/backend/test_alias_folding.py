"""Generated kernels bind no array to a second name: a work array or argument that a
buffer lives in, or a view that is the array itself, is read under its own name (each
extra name is a variable Numba types, lowers with its reference count and keeps live,
for no work). The source ``dg.explain`` shows keeps the names. These tests count lines,
never time."""

from __future__ import annotations

import re

import numpy as np

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.ir.interpret import interpret
from dualgraph.passes import optimize

ALIAS = re.compile(r"^    \w+ = \w+$", re.M)


def _graph():
    """A product with a fused epilogue, a row sum kept in a float64 work array and a
    reshape of the result: kernels that printed names for work arrays, outputs and the
    reshaped view."""
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((40, 24)).astype(np.float32))
    w = dg.tensor(rng.standard_normal((24, 36)).astype(np.float32) * 0.1)

    def f(x, w):
        h = dg.relu(x @ w) * 2.0
        return h.sum(dim=0), h.reshape(20, 72), h.mean()

    g = optimize(dg.trace(f, x, w))
    return g, [x.numpy(), w.numpy()]


def test_no_array_is_bound_to_a_second_name():
    g, arrays = _graph()
    k = build(g, segment_lines=0)
    assert ALIAS.findall(k.lowered.code) == []
    # The reader's copy keeps the names, line for line with the compiled copy.
    assert ALIAS.findall(k.lowered.source)
    assert k.lowered.source.count("\n") + 1 == len(k.lowered.code.splitlines())
    for got, want in zip(k(*arrays), interpret(g, *arrays)):
        dg.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, check_dtype=False)
