"""The gradient of ``split`` (each piece's gradient scattered into zeros the size of the
whole, then summed) becomes one concatenation (`simplify.fold_add_scatters`), bit for bit:
-0.0 in a piece's gradient comes out +0.0, as from the sum of scatters."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph import passes

SPECIAL = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1.5, -2.0, 3.25, -0.0, 7.0, 0.5, -1.0],
                   np.float32)


def _grad_of_split(pieces: tuple):
    def f(x, w):
        parts = x.split(4, dim=-1)
        loss = sum((parts[i] * w[i]).sum() for i in pieces)
        return dg.autograd.grad(loss, (x,))[0]

    return f


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 12)).astype(np.float32)
    # Each piece's gradient is its weight: signed zeros, inf and nan among them.
    w = np.stack([np.tile(SPECIAL[4 * i:4 * i + 4], (3, 1)) for i in range(3)])
    return x, w


def _same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    nan = np.isnan(expected)
    dg.testing.assert_close(np.isnan(actual), nan)
    dg.testing.assert_close(actual[~nan].view(np.int32), expected[~nan].view(np.int32))


def test_the_sum_of_scatters_becomes_one_concatenation():
    x, w = _data()
    f = _grad_of_split((0, 1, 2))
    traced = dg.trace(f, dg.tensor(x, requires_grad=True), dg.tensor(w))
    graph = passes.optimize(traced, verify=True)
    ops = [n.op for n in graph.nodes]
    assert "concatenate" in ops and "scatter" not in ops, graph
    with np.errstate(all="ignore"):
        expected = f(dg.tensor(x, requires_grad=True), dg.tensor(w)).numpy()
        (got,) = dg.interpret(graph, x, w)
    _same_bits(got, expected)
    assert np.signbit(expected[0, 0]) == np.signbit(got[0, 0]) == False  # noqa: E712


def test_pieces_that_do_not_meet_stay_scatters():
    x, w = _data()
    f = _grad_of_split((0, 2))
    graph = passes.optimize(dg.trace(f, dg.tensor(x, requires_grad=True), dg.tensor(w)))
    assert "scatter" in [n.op for n in graph.nodes], graph
    with np.errstate(all="ignore"):
        expected = f(dg.tensor(x, requires_grad=True), dg.tensor(w)).numpy()
        (got,) = dg.interpret(graph, x, w)
    _same_bits(got, expected)


def test_compiled_split_gradient_keeps_every_bit():
    x, w = _data()
    f = _grad_of_split((0, 1, 2))
    with np.errstate(all="ignore"):
        expected = f(dg.tensor(x, requires_grad=True), dg.tensor(w)).numpy()
        got = dg.compile(f, tiered=False)(dg.tensor(x, requires_grad=True),
                                          dg.tensor(w)).numpy()
    _same_bits(got, expected)
