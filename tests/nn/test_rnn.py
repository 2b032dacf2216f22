"""Recurrent layers: values and gradients against PyTorch's (goldens recorded from torch,
tests/goldens/record_seq.py), float64 finite-difference gradients, argument errors, and a
compiled training step against the eager one."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import gradcheck
from tests.goldens.seq_cases import RNN_CASES, run

GOLDENS = Path(__file__).resolve().parents[1] / "goldens"

_DATA = np.load(GOLDENS / "rnn.npz")


def _golden(case: str) -> dict[str, np.ndarray]:
    prefix = case + "/"
    return {k[len(prefix):]: _DATA[k] for k in _DATA.files if k.startswith(prefix)}


def _load(module: dg.nn.Module, golden: dict) -> None:
    state = {k[len("param."):]: dg.tensor(v) for k, v in golden.items() if k.startswith("param.")}
    module.load_state_dict(state)


@pytest.mark.parametrize("case", sorted(RNN_CASES))
def test_matches_torch(case: str) -> None:
    kind, args, kwargs, call = RNN_CASES[case]
    module = getattr(dg.nn, kind)(*args, **kwargs).double()
    golden = _golden(case)
    # Same parameter names in the same order as PyTorch's state_dict.
    assert list(module.state_dict()) == [k[len("param."):] for k in golden
                                         if k.startswith("param.")]
    _load(module, golden)
    inputs = {k[len("input."):]: v for k, v in golden.items() if k.startswith("input.")}
    proj = {k: v for k, v in golden.items() if k.startswith("proj.")}
    got = run(dg, module, call, inputs, proj)
    expected = {k for k in golden if k.startswith(("out.", "grad."))}
    assert expected == {k for k in got if k.startswith(("out.", "grad."))}
    for key in sorted(expected):
        dg.testing.assert_close(got[key], golden[key], rtol=1e-10, atol=1e-12, equal_nan=True,
                                check_dtype=False, msg=key)


def test_parameter_names_shapes_and_init() -> None:
    dg.manual_seed(0)
    lstm = dg.nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {n: tuple(p.shape) for n, p in lstm.named_parameters()}
    assert shapes["weight_ih_l0"] == (24, 3)
    assert shapes["weight_hh_l0_reverse"] == (24, 2)
    assert shapes["weight_ih_l1"] == (24, 4)  # two directions of proj_size
    assert shapes["weight_hr_l1_reverse"] == (2, 6)
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_hr_l0"]
    bound = 1 / np.sqrt(6)
    for p in lstm.parameters():
        a = p.numpy()
        assert a.dtype == np.float32 and np.abs(a).max() <= bound and a.std() > bound / 4
    assert len(lstm.all_weights) == 4 and lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse
    lstm.flatten_parameters()  # accepted: nothing to pack on the CPU
    assert repr(lstm) == "LSTM(3, 6, proj_size=2, num_layers=2, bidirectional=True)"
    assert dg.nn.GRU(2, 3, dtype=dg.float64).weight_hh_l0.dtype == np.float64
    assert repr(dg.nn.RNNCell(2, 3, nonlinearity="relu")) == "RNNCell(2, 3, nonlinearity=relu)"


@pytest.mark.parametrize("kind,kwargs", [
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("GRU", {"bidirectional": True}),
    ("LSTM", {"num_layers": 2, "proj_size": 2, "batch_first": True}),
])
def test_gradients_match_finite_differences(kind: str, kwargs: dict) -> None:
    dg.manual_seed(1)
    module = getattr(dg.nn, kind)(2, 3, **kwargs).double()
    x = dg.randn(2, 3, 2, dtype=dg.float64)
    names = [n for n, _ in module.named_parameters()]
    weights = [p.detach() for p in module.parameters()]

    def f(x, *ws):
        # The checked float64 copies stand in for the parameters during the call.
        saved = dict(module._parameters)
        module._parameters.update(zip(names, ws))
        try:
            return module(x)[0]
        finally:
            module._parameters.update(saved)

    assert gradcheck(f, x, *weights)


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_gradients_match_finite_differences(cell: str) -> None:
    dg.manual_seed(2)
    module = getattr(dg.nn, cell)(2, 3).double()
    x, h = dg.randn(2, 2, dtype=dg.float64), dg.randn(2, 3, dtype=dg.float64)
    if cell == "LSTMCell":
        c = dg.randn(2, 3, dtype=dg.float64)
        assert gradcheck(lambda x, h, c: dg.stack(module(x, (h, c))), x, h, c)
    else:
        assert gradcheck(lambda x, h: module(x, h), x, h)


def test_dropout_between_layers_only_in_training() -> None:
    dg.manual_seed(3)
    lstm = dg.nn.LSTM(2, 4, num_layers=2, dropout=0.5)
    x = dg.randn(3, 2, 2)
    lstm.eval()
    a, b = lstm(x)[0].numpy(), lstm(x)[0].numpy()
    np.testing.assert_array_equal(a, b)
    lstm.train()
    c = lstm(x)[0].numpy()
    assert not np.allclose(a, c)
    # One layer: nothing to drop, and PyTorch's warning.
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        single = dg.nn.GRU(2, 4, dropout=0.5)
    np.testing.assert_array_equal(single(x)[0].numpy(), single(x)[0].numpy())


def test_argument_errors() -> None:
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        dg.nn.RNN(2, 3, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        dg.nn.LSTM(2, 3, proj_size=3)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        dg.nn.GRU(2, 3, proj_size=1)
    with pytest.raises(ValueError, match="dropout should be a number"):
        dg.nn.LSTM(2, 3, dropout=1.5)
    with pytest.raises(TypeError, match="hidden_size should be of type int"):
        dg.nn.RNN(2, 3.0)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        dg.nn.RNN(2, 0)
    with pytest.raises(RuntimeError, match="CPU only"):
        dg.nn.LSTM(2, 3, device="cuda")
    lstm = dg.nn.LSTM(2, 3)
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D"):
        lstm(dg.randn(2, 2, 2, 5))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        lstm(dg.randn(4, 2, 5))
    with pytest.raises(ValueError, match="does not match weight dtype"):
        lstm(dg.randn(4, 2, 2, dtype=dg.float64))
    # A state of another dtype than the weights': PyTorch's RuntimeError, no promotion.
    same = "must have the same dtype, but got Double and Float"
    with pytest.raises(RuntimeError, match=same):
        dg.nn.GRU(2, 3)(dg.randn(4, 2, 2), dg.zeros(1, 2, 3, dtype=dg.float64))
    with pytest.raises(RuntimeError, match=same):
        dg.nn.LSTM(2, 3)(dg.randn(4, 2), (dg.zeros(1, 3), dg.zeros(1, 3, dtype=dg.float64)))
    with pytest.raises(RuntimeError, match=same):
        dg.nn.RNNCell(2, 3)(dg.randn(4, 2), dg.zeros(4, 3, dtype=dg.float64))
    with pytest.raises(RuntimeError, match=same):
        dg.nn.LSTMCell(2, 3)(dg.randn(2), (dg.zeros(3, dtype=dg.float64), dg.zeros(3)))
    with pytest.raises(RuntimeError, match="Expected hidden size \\(1, 2, 3\\), got \\[1, 3, 3\\]"):
        lstm(dg.randn(4, 2, 2), (dg.zeros(1, 3, 3), dg.zeros(1, 2, 3)))
    with pytest.raises(RuntimeError, match="hx and cx should also be 3-D"):
        lstm(dg.randn(4, 2, 2), (dg.zeros(2, 3), dg.zeros(2, 3)))
    with pytest.raises(RuntimeError, match="hx should also be 2-D"):
        dg.nn.GRU(2, 3)(dg.randn(4, 2), dg.zeros(1, 1, 3))
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D"):
        dg.nn.GRUCell(2, 3)(dg.randn(1, 2, 2))


def _lm_step_pieces(kind: str, seed: int = 0) -> tuple:
    dg.manual_seed(seed)
    rnn = getattr(dg.nn, kind)(3, 4)
    head = dg.nn.Linear(4, 2)
    opt = dg.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.5)
    return rnn, head, opt


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_compiled_training_step_equals_eager(kind: str) -> None:
    """Two steps over a 2-step sequence, compiled (one trace) and eager, from the same
    weights: the losses and the updated parameters agree within B3's float32 tolerance."""
    rng = np.random.default_rng(4)
    x = dg.tensor(rng.standard_normal((2, 2, 3)).astype(np.float32))
    y = dg.tensor(rng.standard_normal((2, 2, 2)).astype(np.float32))
    results = []
    for compiled in (False, True):
        rnn, head, opt = _lm_step_pieces(kind)

        def step(x, y, rnn=rnn, head=head, opt=opt):
            opt.zero_grad()
            out, _ = rnn(x)
            loss = ((head(out) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        fn = dg.compile(step) if compiled else step
        losses = [fn(x, y).item() for _ in range(2)]
        if compiled:
            assert fn.stats.traces == 1 and fn.stats.kernels >= 1
        results.append((losses, [p.numpy().copy() for p in rnn.parameters()]))
    (eager_losses, eager_params), (comp_losses, comp_params) = results
    dg.testing.assert_close(comp_losses, eager_losses, rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    for a, b in zip(comp_params, eager_params):
        dg.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_trace_does_not_grow_with_the_sequence(kind: str) -> None:
    """Each layer and direction is one `rnn_layer` node holding the time loop (and its
    gradient one `rnn_layer_backward`): the traced forward and backward graph is the same
    size at every sequence length."""
    rnn = getattr(dg.nn, kind)(3, 4, num_layers=2, bidirectional=True)

    def loss(x):
        out = rnn(x)[0].sum()
        return dg.grad(out, [x, rnn.weight_hh_l0])

    graphs = [dg.trace(loss, dg.randn(t, 2, 3, requires_grad=True)) for t in (2, 3, 9)]
    sizes = [len(g.nodes) for g in graphs]
    assert sizes[0] == sizes[1] == sizes[2]
    ops = [n.op for n in graphs[0].nodes]
    assert ops.count("rnn_layer") == 4 and ops.count("rnn_layer_backward") == 4


def test_packed_and_projected_traces_do_not_grow_with_the_sequence() -> None:
    """A packed batch (lengths per sequence) and the LSTM's projection run as `rnn_layer`
    ops too: the traced forward and backward graph is the same size at every length."""
    from dualgraph.nn.utils.rnn import pack_padded_sequence

    rnn = dg.nn.LSTM(3, 4, num_layers=2, proj_size=2, bidirectional=True)

    def loss(x):
        packed = pack_padded_sequence(x, [x.shape[0], 2, 1], enforce_sorted=False)
        out, (h_n, c_n) = rnn(packed)
        total = out.data.sum() + h_n.sum() + c_n.sum()
        return dg.grad(total, [x, rnn.weight_hr_l0, rnn.weight_hh_l1_reverse])

    graphs = [dg.trace(loss, dg.randn(t, 3, 3, requires_grad=True)) for t in (3, 4, 9)]
    sizes = [len(g.nodes) for g in graphs]
    assert sizes[0] == sizes[1] == sizes[2]
    ops = [n.op for n in graphs[0].nodes]
    assert ops.count("rnn_layer_proj") == 4 and ops.count("rnn_layer_backward") == 4


def test_warns_nothing_on_plain_use() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dg.nn.LSTM(2, 3, num_layers=2, dropout=0.1)(dg.randn(2, 1, 2))


def test_projected_bidirectional_input_gradient_matches_finite_differences() -> None:
    lstm = dg.nn.LSTM(2, 3, bidirectional=True, proj_size=1).double()
    x = dg.tensor(np.random.default_rng(3).standard_normal((9, 1, 2)), requires_grad=True)
    assert gradcheck(lambda t: lstm(t)[0], x)


def _input_gradient(module: Any, packed_lengths: list | None = None):
    """``x -> d(loss)/dx`` recorded with ``create_graph``, so gradcheck differentiates the
    layer twice (the loss reads the output and the final state, squared)."""
    from dualgraph.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    def gradient(x):
        x = x if x.requires_grad else x.detach().requires_grad_(True)
        inp = x if packed_lengths is None else \
            pack_padded_sequence(x, packed_lengths, enforce_sorted=False)
        out, h = module(inp)
        if packed_lengths is not None:
            out = pad_packed_sequence(out)[0]
        h = h[0] if isinstance(h, tuple) else h
        (g,) = dg.grad((out ** 2).sum() + (h ** 3).sum(), [x], create_graph=True)
        return g

    return gradient


@pytest.mark.parametrize("kind,kwargs,lengths", [
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}, None),
    ("GRU", {"bidirectional": True}, [3, 1]),
    ("LSTM", {"proj_size": 2, "bidirectional": True}, [1, 3]),
])
def test_second_derivative_matches_finite_differences(kind: str, kwargs: dict,
                                                      lengths: list | None) -> None:
    """The gradient of a gradient through the layers (PyTorch supports it), packed and
    projected included: float64 finite differences of the recorded first gradient."""
    dg.manual_seed(0)
    module = getattr(dg.nn, kind)(2, 3, **kwargs).double()
    x = dg.tensor(np.random.default_rng(1).standard_normal((3, 2, 2)))
    assert gradcheck(_input_gradient(module, lengths), x)


def test_compiled_second_derivative_equals_eager() -> None:
    """A gradient penalty through a GRU inside `dg.compile`: the penalty's gradients equal
    eager's."""
    results = []
    for compiled in (False, True):
        dg.manual_seed(0)
        gru = dg.nn.GRU(2, 3).double()

        def step(x, gru=gru):
            (gx,) = dg.grad((gru(x)[0] ** 2).sum(), [x], create_graph=True)
            penalty = (gx ** 2).sum()
            penalty.backward()
            return penalty

        x = dg.tensor(np.random.default_rng(1).standard_normal((2, 2, 2)), requires_grad=True)
        fn = dg.compile(step) if compiled else step
        value = fn(x).item()
        if compiled:
            assert fn.stats.traces == 1
        results.append((value, [p.grad.numpy().copy() for p in gru.parameters()]))
    (v_eager, g_eager), (v_comp, g_comp) = results
    assert v_comp == pytest.approx(v_eager, rel=1e-12)
    for a, b in zip(g_comp, g_eager):
        dg.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
