"""Constant folding computes a constant expression as eager mode does: the same NumPy
kernels on the same values, so the folded constant is eager's result bit for bit, and as
silent about inf and NaN as eager mode is."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.passes import optimize
from dualgraph.testing import assert_close

VALUES = [0.25, 0.1, 1.7, 3.3, 1e-3, 7.9]

EXPRESSIONS = {
    "exp": lambda: dg.exp(dg.tensor(VALUES)),
    "log": lambda: dg.log(dg.tensor(VALUES)),
    "tanh_of_arange": lambda: dg.tanh(dg.arange(6) * 0.37),
    "sin_of_linspace": lambda: dg.sin(dg.linspace(0, 3, 6)),
    "sqrt_of_full": lambda: dg.sqrt(dg.full((6,), 2.0)),
    "sigmoid": lambda: dg.sigmoid(dg.tensor(VALUES) - 2),
    "erf": lambda: dg.erf(dg.tensor(VALUES)),
    "pow": lambda: dg.tensor(VALUES) ** 1.5,
    "softmax": lambda: dg.softmax(dg.tensor(VALUES), dim=0),
    "splat_exp": lambda: dg.exp(dg.ones(6) * 0.3),
    "scalar_exp": lambda: dg.exp(dg.tensor(0.25)).expand(6),
    "float64": lambda: dg.exp(dg.tensor(VALUES, dtype=dg.float64)),
}


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_folded_constant_is_eager_bit_for_bit(name):
    make = EXPRESSIONS[name]
    # The argument keeps the graph a function; the output is the constant expression.
    graph = optimize(dg.trace(lambda x: (make(), x * 2), dg.ones(6)), verify=True)
    out = graph.outputs[0]
    assert out.op == "const", graph
    assert_close(out.attrs["value"], make().numpy(), rtol=0, atol=0)


def test_folding_is_as_silent_as_eager_about_inf_and_nan():
    def f(x):
        return x + dg.log(dg.zeros(3)) + dg.log(dg.tensor([0.0, 1.0, -1.0]))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = optimize(dg.trace(f, dg.ones(3)))
        expected = f(dg.ones(3))
    assert_close(dg.interpret(graph, np.ones(3, np.float32))[0], expected, equal_nan=True)
