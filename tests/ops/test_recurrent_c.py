"""The recurrent layers' time loops as calls into C functions compiled once
(`backend/numba/recurrent_kernels.py`): a layer's generated code is one call, and the
compiled values and gradients equal the eager ones, the loops written into the kernel
(the lowering used without NumPy's CBLAS) included."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.backend.numba.lowerings import recurrent as lowering
from dualgraph.ops.recurrent import rnn_layer
from dualgraph.passes import optimize
from dualgraph.testing import assert_close

pytestmark = pytest.mark.skipif(not lowering.CALL_C, reason="NumPy's CBLAS not found")


def test_a_layer_is_one_call_in_the_generated_code() -> None:
    """An LSTM's training step: its forward, backward through time and weight gradients
    are calls, and no gate arithmetic is written into the kernel."""
    dg.manual_seed(0)
    lstm = dg.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    params = list(lstm.parameters())

    def step(x):
        loss = (lstm(x)[0] ** 2).sum()
        return (loss, *dg.grad(loss, params))

    code = build(optimize(dg.trace(step, dg.randn(20, 2, 3))), segment_lines=0).lowered.code
    for kind in ("forward", "backward", "weight_grads"):
        assert code.count(f"dgr.rnn_{kind}_float32(") == 4, kind
    assert "sigmoid" not in code and "tanh" not in code


def _layers(x, xb, h0, c0, lens32, w):
    """Every mode, both directions, int32 lengths, the projection, and an input that is a
    transposed view (batch first): the workspaces, to differentiate."""
    out = []
    for k, (mode, reverse, lens) in enumerate([("tanh", False, None), ("relu", True, lens32),
                                               ("lstm", True, lens32), ("gru", False, None),
                                               ("gru", True, lens32)]):
        c = c0 if mode == "lstm" else None
        src = xb.transpose(0, 1) if k % 2 else x
        out.append(rnn_layer(src, h0, c, *w[mode], mode=mode, reverse=reverse,
                             lengths=lens))
    out.append(rnn_layer(x, h0[:, :2], c0, *w["proj"][:4], mode="lstm", reverse=False,
                         lengths=lens32, w_hr=w["proj"][4]))
    return tuple(out)


def _inputs(dtype):
    rng = np.random.default_rng(0)
    t_len, batch, n_in, n = 5, 3, 2, 4

    def real(*shape):
        return dg.tensor(rng.uniform(-1, 1, shape).astype(dtype), requires_grad=True)

    w = {m: [real(g * n, n_in), real(g * n, n), real(g * n), real(g * n)]
         for m, g in (("tanh", 1), ("relu", 1), ("lstm", 4), ("gru", 3))}
    w["proj"] = [real(4 * n, n_in), real(4 * n, 2), real(4 * n), real(4 * n), real(2, n)]
    args = [real(t_len, batch, n_in), real(batch, t_len, n_in), real(batch, n),
            real(batch, n), dg.tensor(np.array([5, 2, 4], np.int32))]
    return args, w


def _values_and_grads(fn, dtype):
    args, w = _inputs(dtype)
    outs = fn(*args, w)
    leaves = [a for a in args if a.requires_grad] + [t for ws in w.values() for t in ws]
    rng = np.random.default_rng(1)
    loss = sum((o * dg.tensor(rng.uniform(0.5, 1.5, o.shape).astype(dtype))).sum()
               for o in outs)
    grads = dg.grad(loss, leaves)
    return [o.numpy() for o in outs] + [g.numpy() for g in grads]


@pytest.mark.parametrize("call_c", [True, False], ids=["c-loops", "kernel-loops"])
def test_compiled_equals_eager(monkeypatch, call_c: bool) -> None:
    """float64, one compiled function for every variant; the kernel-loops run is the
    fallback lowering, kept working."""
    monkeypatch.setattr(lowering, "CALL_C", call_c)
    eager = _values_and_grads(_layers, np.float64)
    compiled_fn = dg.compile(_layers, tiered=False)
    compiled = _values_and_grads(compiled_fn, np.float64)
    assert compiled_fn.stats.traces == 1
    for k, (a, e) in enumerate(zip(compiled, eager)):
        assert_close(a, e, rtol=1e-12, atol=1e-12, msg=f"result {k}")


def _exact_ops(x, h0, w_relu, w_gru, g1, g3, lens):
    """The ops whose arithmetic has no tanh or sigmoid in it: the ReLU layer's forward
    (both directions, with lengths), and the backward through time of a ReLU, a tanh and
    a GRU layer given their workspaces (its products and gate formulas only)."""
    from dualgraph.ops.recurrent import layer_backward

    out = [rnn_layer(x, h0, None, *w_relu, mode="relu", reverse=rev, lengths=lens)
           for rev in (False, True)]
    ws_gru = g3 * 0.5  # stand-in gates in (-0.5, 0.5): the formulas, not a real layer
    out += [layer_backward(g1, out[0], h0, w_relu[1], lens, mode="relu", lengths=True),
            layer_backward(g1, g1 * 0.9, h0, w_relu[1], mode="tanh", reverse=True),
            layer_backward(g3, ws_gru, h0, w_gru[1], mode="gru"),
            layer_backward(g3, ws_gru, h0, w_gru[1], lens, mode="gru", reverse=True,
                           lengths=True)]
    return tuple(out)


def test_float32_rounds_as_eager() -> None:
    """float32: where eager and compiled evaluate the same formulas in the same order
    (every per-step product a BLAS call with eager's operands and flags, no fused
    multiply-adds), the results are the same bits. tanh and sigmoid are the exceptions
    (NumPy's float32 functions against the kernels' own), so they are left out."""
    rng = np.random.default_rng(0)
    t_len, batch, n_in, n = 6, 4, 5, 8

    def real(*shape):
        return dg.tensor(rng.uniform(-1, 1, shape).astype(np.float32))

    x, h0 = real(t_len, batch, n_in), real(batch, n)
    w_relu = [real(n, n_in), real(n, n), real(n), real(n)]
    w_gru = [real(3 * n, n_in), real(3 * n, n), real(3 * n), real(3 * n)]
    g1, g3 = real(t_len, batch, n), real(t_len, batch, 5 * n)
    lens = dg.tensor(np.array([6, 2, 5, 1], np.int64))
    args = (x, h0, w_relu, w_gru, g1, g3, lens)
    eager = _exact_ops(*args)
    compiled = dg.compile(_exact_ops, tiered=False)(*args)
    for k, (a, e) in enumerate(zip(compiled, eager)):
        assert_close(a.numpy(), e.numpy(), rtol=0, atol=0, msg=f"result {k}")
