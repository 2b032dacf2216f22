"""threshold_backward (ReLU's backward as one op) differentiated in its second argument
alone: the tape saves that argument only for the first argument's gradient."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.ops.elementwise import threshold_backward


def test_gradient_in_the_compared_values_alone_is_zero() -> None:
    g = dg.tensor(np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]))  # needs no grad
    y = dg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    out = threshold_backward(g, y * y, 0.25)
    out.sum().backward()
    np.testing.assert_array_equal(out.numpy(), [[0.0, -2.0, 3.0], [0.0, 5.0, -6.0]])
    np.testing.assert_array_equal(y.grad.numpy(), np.zeros(3))
    assert y.grad.shape == (3,)


def test_gradient_in_both_arguments() -> None:
    g = dg.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    y = dg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    threshold_backward(g * 2.0, y, 0.0).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), [2.0, 0.0, 2.0])
    np.testing.assert_array_equal(y.grad.numpy(), np.zeros(3))
