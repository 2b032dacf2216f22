"""Kernel-op lowerings build kernel IR, and the reduce path's generated code.

Every op registered in the shape, index, scan, random and reduce lowering modules returns
a `kir.Block` that `kir.verify` accepts, and that block, run by the plain NumPy executor
(`kir_exec`), gives what the op's NumPy kernel gives.
"""

from __future__ import annotations

import numpy as np

import dualgraph as dg


# --------------------------------------------------------------- the reduce path's code
def test_reduction_over_trailing_axis_with_unit_outer_dims_compiles():
    # Outer dims of size 1 have no loop: the store after the inner loop must be indented
    # by the loops there are, not by the number of outer dims (an IndentationError, or a
    # store inside the max's `if` that a row of -inf never reached).
    x = np.random.default_rng(0).standard_normal((1, 2, 1, 2, 2, 2))
    x[0, 1, 0, 1, 1, :] = -np.inf
    f = dg.compile(lambda t: (t.amax(-1).sum(), t.amax(-1)), tiered=False)
    total, rows = f(dg.tensor(x))
    np.testing.assert_array_equal(rows.numpy(), x.max(-1))
    assert total.item() == x.max(-1).sum()


def test_reduction_gradient_over_unit_outer_dims_matches_eager():
    x0 = np.random.default_rng(1).standard_normal((1, 2, 1, 2, 2, 2))

    def step(t):
        y = t.amax(-1).sum()
        y.backward()
        return y

    x = dg.tensor(x0, requires_grad=True)
    dg.compile(step, tiered=False)(x)
    xe = dg.tensor(x0, requires_grad=True)
    step(xe)
    np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())
