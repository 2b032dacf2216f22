"""The recurrence ops (`rnn_layer`, `rnn_layer_proj`, `rnn_layer_backward`): the generated
code does not grow with the sequence length, second derivatives match finite differences,
and bad input is refused.

Values and gradients are checked in tests/ops/cases.py (against plain NumPy loops and
finite differences), tests/backend/test_ops_compiled.py (compiled against eager),
tests/goldens (against PyTorch) and tests/nn/test_rnn.py (the layers)."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.errors import ShapeError
from dualgraph.ops.recurrent import layer_backward, rnn_layer, weight_grads
from dualgraph.passes import optimize
from dualgraph.testing import gradcheck

from .._support.compiled import graph_ops
from .cases import CASES, NO_SECOND_DERIVATIVE


def _step_graph(kind: str, steps: int, **kwargs):
    """The optimized graph of an RNN's loss and its gradients over ``steps`` steps."""
    dg.manual_seed(0)
    rnn = getattr(dg.nn, kind)(3, 4, **kwargs)
    params = list(rnn.parameters())

    def step(x):
        loss = (rnn(x)[0] ** 2).sum()  # a mean would fold 1 / numel into a literal
        return (loss, *dg.grad(loss, params))

    return optimize(dg.trace(step, dg.randn(steps, 2, 3)))


@pytest.mark.parametrize("kind,kwargs", [("LSTM", {"bidirectional": True, "proj_size": 3}),
                                         ("GRU", {"num_layers": 2}),
                                         ("RNN", {"nonlinearity": "relu"})])
def test_generated_code_does_not_grow_with_the_sequence(kind: str, kwargs: dict) -> None:
    """A training step's graph and generated module are the same at 70 and 97 steps: the
    time loop's extent, and every size that depends on it, is read from the arguments'
    shapes, so the two lengths share one compiled module. (The lengths are chosen so that
    no product crosses the size below which a matrix product is written as loops, and so
    that no fixed size, such as the weights' gradients' 140 elements, equals T * B: the
    printer writes such a number as the shape it equals.)"""
    g_short, g_long = _step_graph(kind, 71, **kwargs), _step_graph(kind, 97, **kwargs)
    assert len(g_short.nodes) == len(g_long.nodes)
    ops = [n.op for n in g_short.nodes]
    assert {"rnn_layer", "rnn_layer_proj"} & set(ops) and "rnn_layer_backward" in ops
    k_short, k_long = build(g_short, segment_lines=0), build(g_long, segment_lines=0)
    assert k_short.lowered.code == k_long.lowered.code


def test_a_second_length_compiles_nothing_new() -> None:
    """A compiled training step called at a second sequence length traces again (new
    shapes) but loads no new kernel module: the code is the first length's. (Lengths
    above the printer's literal sizes: a short length, like a head's width, is written
    into the code as a number.)"""
    from dualgraph.backend.numba import cache

    dg.manual_seed(0)
    gru = dg.nn.GRU(3, 4)
    head = dg.nn.Linear(4, 1)
    opt = dg.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (head(gru(x)[0]) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    fn = dg.compile(step, tiered=False)
    fn(dg.randn(25, 2, 3))
    before = {digest for digest, _ in cache.loaded()}
    fn(dg.randn(40, 2, 3))
    assert fn.stats.traces == 2
    assert {digest for digest, _ in cache.loaded()} <= before


# Every mode, both directions, lengths and the projection (the other rows' first
# derivatives are checked in test_ops.py).
SECOND_ORDER = ("rnn_layer-tanh_lengths", "rnn_layer-relu_reverse_lengths",
                "rnn_layer-lstm_reverse_lengths", "rnn_layer-gru_lengths",
                "rnn_layer-gru_reverse", "rnn_layer_proj-lstm_reverse_lengths")
RECURRENT_CASES = [c for c in CASES if c.id in SECOND_ORDER]


@pytest.mark.parametrize("case", RECURRENT_CASES, ids=lambda c: c.id)
def test_second_derivative_matches_finite_differences(case) -> None:
    """Under ``create_graph`` the VJP composes the backward through time from ordinary ops,
    so the gradient has a gradient: every input's first gradient (of a fixed random
    weighting of the workspace) checked against finite differences in float64."""
    rng = np.random.default_rng(5)
    arrays = case.arrays(rng, np.float64)
    out_shape = case.fn(*[dg.tensor(a) for a in arrays]).shape
    weights = dg.tensor(rng.standard_normal(out_shape))

    def first(*xs):
        xs = tuple(x if x.requires_grad else x.detach().requires_grad_(True) for x in xs)
        grads = dg.grad((case.fn(*xs) * weights).sum(), xs, create_graph=True)
        return dg.concatenate([g.reshape(-1) for g in grads])

    assert gradcheck(first, *arrays)


def test_the_backward_op_itself_has_no_gradient() -> None:
    """`rnn_layer_backward` (the one-op form, used when nothing records) raises if
    differentiated directly; the layers never record it under ``create_graph``."""
    assert NO_SECOND_DERIVATIVE == ("rnn_layer_backward", "rnn_layer_weight_grads")
    ws = dg.randn(4, 1, 18, dtype=dg.float64, requires_grad=True)
    h = dg.zeros(1, 3, dtype=dg.float64)
    back = layer_backward(dg.ones(4, 1, 18, dtype=dg.float64), ws, h, h,
                          dg.zeros(12, 3, dtype=dg.float64), mode="lstm")
    with pytest.raises(NotImplementedError, match="second derivative through nn.RNN"):
        back.sum().backward()
    flat = weight_grads(back.detach().requires_grad_(True), dg.randn(4, 1, 2,
                        dtype=dg.float64), ws, mode="lstm", hidden=3)
    with pytest.raises(NotImplementedError, match="second derivative through nn.RNN"):
        flat.sum().backward()


def test_a_layers_gradient_is_two_ops_over_the_sequence() -> None:
    """The traced gradient of a layer holds the backward through time and one op for
    every weight's and bias's gradient, not a product and a sum per weight."""
    lstm = dg.nn.LSTM(2, 3)

    def step(x):
        out, _ = lstm(x)
        loss = out.sum()
        loss.backward()
        return loss

    f = dg.compile(step)
    f(dg.randn(4, 2, 2))
    (entry,) = f.entries()
    ops = list(graph_ops(entry.optimized))
    if not entry.joint:
        ops += list(graph_ops(entry.backward_graph))
    assert ops.count("rnn_layer_backward") == 1 and ops.count("rnn_layer_weight_grads") == 1
    assert "matmul" not in ops  # x needs no gradient: no product outside the two ops


def test_the_compilers_own_backward_of_a_layer_is_the_one_op_loop() -> None:
    """A compiled function whose output is differentiated after the call: the backward
    graph the compiler builds runs the layer's one-op backward through time (its VJPs
    run with grad mode off, as an eager backward without create_graph), not the per-step
    composition a second derivative needs, whose size grows with the sequence."""
    gru = dg.nn.GRU(2, 3)
    f = dg.compile(lambda x: gru(x)[0].sum())
    x = dg.randn(5, 2, 2, requires_grad=True)
    f(x).backward()
    (entry,) = f.entries()
    ops = list(graph_ops(entry.optimized))
    if not entry.joint:
        ops += list(graph_ops(entry.backward_graph))
    assert ops.count("rnn_layer_backward") == 1 and ops.count("rnn_layer_weight_grads") == 1
    assert ops.count("getitem") < 20  # the per-step composition slices every step's gates
    expected = dg.grad(gru(x)[0].sum(), [x])[0]
    dg.testing.assert_close(x.grad, expected)


def test_first_derivative_under_create_graph_is_right() -> None:
    """``create_graph=True`` composes the backward from ordinary ops: the first gradient
    equals the one-op backward's."""
    gru = dg.nn.GRU(2, 3).double()
    x = dg.randn(3, 2, 2, dtype=dg.float64, requires_grad=True)
    (plain,) = dg.grad(gru(x)[0].sum(), [x])
    (recorded,) = dg.grad(gru(x)[0].sum(), [x], create_graph=True)
    dg.testing.assert_close(recorded.detach(), plain, rtol=0, atol=0)


def test_bad_input_is_refused_clearly() -> None:
    x, h = dg.zeros(3, 2, 4), dg.zeros(2, 5)
    w_ih, w_hh, b = dg.zeros(15, 4), dg.zeros(15, 5), dg.zeros(15)
    assert rnn_layer(x, h, None, w_ih, w_hh, b, b, mode="gru").shape == (3, 2, 25)
    with pytest.raises(ValueError, match="mode must be one of"):
        rnn_layer(x, h, None, w_ih, w_hh, b, b, mode="lstmx")
    with pytest.raises(ShapeError, match=r"w_hh has shape \(15, 4\), expected \(15, 5\)"):
        rnn_layer(x, h, None, w_ih, dg.zeros(15, 4), b, b, mode="gru")
    with pytest.raises(ShapeError, match="time >= 1"):
        rnn_layer(dg.zeros(0, 2, 4), h, None, w_ih, w_hh, b, b, mode="gru")
    with pytest.raises(TypeError, match="same floating dtype"):
        rnn_layer(x.double(), h, None, w_ih, w_hh, b, b, mode="gru")
    with pytest.raises(TypeError, match="give it for mode='lstm'"):
        rnn_layer(x, h, None, dg.zeros(20, 4), dg.zeros(20, 5), dg.zeros(20), dg.zeros(20),
                  mode="lstm")
    np.testing.assert_array_equal(
        rnn_layer(x, h, h, dg.zeros(20, 4), dg.zeros(20, 5), dg.zeros(20), dg.zeros(20),
                  mode="lstm").numpy()[..., 2 * 5:3 * 5], 0.5)  # the input gate at zero
