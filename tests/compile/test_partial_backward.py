"""A backward that reaches only some outputs of a compiled call: the others contribute
nothing (not a zero cotangent, whose product with an inf is nan), and an input only they
reach gets no gradient, as in eager mode."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

BIG = 1e308


def _two(x, y, z):
    # The second output's backward at a zero cotangent: 0 * log(0) and 0 / 0 are nan.
    return x * y, dg.log(z) * y * BIG


def _leaves():
    x = dg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = dg.tensor([2.0, np.inf, 0.5], requires_grad=True)
    z = dg.tensor([0.0, 1.0, np.inf], requires_grad=True)
    return x, y, z


def _grads(*ts) -> list:
    return [None if t.grad is None else t.grad.numpy().copy() for t in ts]


def _scenario(f) -> dict:
    got = {}
    x, y, z = _leaves()
    a, _ = f(x, y, z)
    a.sum().backward()
    got["first"] = _grads(x, y, z)

    x, y, z = _leaves()
    _, b = f(x, y, z)
    b.sum().backward()
    got["second"] = _grads(x, y, z)

    x, y, z = _leaves()
    a, _ = f(x, y, z)
    got["grad"] = [None if g is None else g.numpy()
                   for g in dg.autograd.grad(a.sum(), [x, y, z], allow_unused=True)]

    x, y, z = _leaves()
    a, _ = f(x, y, z)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        dg.autograd.grad(a.sum(), [z])

    # A zero cotangent that is asked for is a gradient like any other: nan, as in eager.
    x, y, z = _leaves()
    a, b = f(x, y, z)
    (a.sum() + b.sum() * 0.0).backward()
    got["zero"] = _grads(x, y, z)

    # Gradients already there are kept where no gradient arrives; both outputs in turn.
    x, y, z = _leaves()
    z.grad = dg.full((3,), 5.0)
    a, b = f(x, y, z)
    a.sum().backward(retain_graph=True)
    got["kept"] = _grads(x, y, z)
    b.sum().backward()
    got["then"] = _grads(x, y, z)
    return got


def test_a_backward_through_some_outputs_matches_eager(runner):
    want = _scenario(_two)
    got = _scenario(runner(_two))
    assert got.keys() == want.keys()
    for case in want:
        for g, e in zip(got[case], want[case]):
            assert (g is None) == (e is None), case
            if e is not None:
                np.testing.assert_array_equal(g, e, err_msg=case)
    # What the cases check: no gradient reaches z through the first output alone, and
    # no nan reaches y from the second output's zero cotangent.
    assert want["first"][2] is None and want["grad"][2] is None
    assert not np.isnan(want["first"][1]).any() and np.isnan(want["zero"][2]).any()
    np.testing.assert_array_equal(want["kept"][2], [5.0, 5.0, 5.0])
