"""Graph autodiff: backward graphs from the registry's VJP rules, residuals, remat."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.passes import optimize
from dualgraph.testing import assert_close

RNG = np.random.default_rng(7)

PROGRAMS = {
    "scalar": (lambda x, y: x * y + y ** 2, [(), ()]),
    "chain": (lambda x, y: ((x * y + 1.0).tanh() * dg.sigmoid(y) / (y * y + 1)).sum(),
              [(4, 3), (3,)]),
    "mlp": (lambda x, w, b, v: F.log_softmax(dg.relu(x @ w + b) @ v, dim=-1).mean(),
            [(5, 4), (4, 6), (6,), (6, 3)]),
    "reductions": (lambda x: x.amax(axis=0).sum() + x.mean(axis=1, keepdims=True).exp().sum()
                   + (x.T.reshape(12)[2:7] ** 3).sum(), [(3, 4)]),
    "select": (lambda x, y: dg.where(x > y, x.sin(), y.cos()).sum() + dg.maximum(x, y).sum()
               + dg.minimum(x, 0.5).sum(), [(2, 5), (5,)]),
    "shapes": (lambda x, y: (dg.concatenate([x, y[None]], axis=0) * dg.stack([y, y, y]))
               .abs().sqrt().sum(), [(2, 4), (4,)]),
}


def _eager_grads(fn, arrays):
    leaves = [dg.tensor(a, requires_grad=True) for a in arrays]
    fn(*leaves).backward()
    return [t.grad.numpy() for t in leaves]


def _graph_grads(d, arrays, fwd=None, bwd=None):
    fwd = fwd or d.forward
    bwd = bwd or d.backward
    outs = dg.interpret(fwd, *arrays)
    cts = [np.ones(o.shape, o.dtype) for o in outs[:d.n_outputs]]
    return outs[:d.n_outputs], dg.interpret(bwd, *cts, *outs[d.n_outputs:])


@pytest.mark.parametrize("name", PROGRAMS)
def test_backward_graph_gradients_equal_eager(name):
    fn, shapes = PROGRAMS[name]
    arrays = [RNG.standard_normal(s) for s in shapes]
    expected = _eager_grads(fn, arrays)
    g = dg.trace(fn, *[dg.tensor(a, requires_grad=True) for a in arrays])
    d = dg.differentiate(g)
    d.forward.verify()
    d.backward.verify()
    assert d.wrt == tuple(range(len(arrays)))
    assert len(d.backward.outputs) == len(arrays)
    outs, grads = _graph_grads(d, arrays)
    assert_close(outs[0], fn(*[dg.tensor(a) for a in arrays]).numpy(), rtol=1e-12, atol=1e-12)
    for gr, ex in zip(grads, expected):
        assert_close(gr, ex, rtol=1e-12, atol=1e-12)
    # The same after optimizing both halves with the default pipeline.
    fwd, bwd = optimize(d.forward, verify=True), optimize(d.backward, verify=True)
    _, grads = _graph_grads(d, arrays, fwd, bwd)
    for gr, ex in zip(grads, expected):
        assert_close(gr, ex, rtol=1e-12, atol=1e-12)


def test_backward_is_traced_from_the_registry_rules():
    d = dg.differentiate(dg.trace(lambda x: (x * x).exp().sum(), dg.ones(3)), wrt=[0])
    assert [n.op for n in d.backward.nodes] == ["broadcast_to", "mul", "mul", "mul", "add"]
    # inputs: the output's cotangent, then the residuals exp(x*x) and x
    assert [n.shape for n in d.backward.inputs] == [(), (3,), (3,)]
    assert [o.op for o in d.forward.outputs] == ["sum", "exp", "input"]


def test_wrt_subset_and_defaults():
    fn = PROGRAMS["chain"][0]
    arrays = [RNG.standard_normal((4, 3)), RNG.standard_normal(3)]
    g = dg.trace(fn, *[dg.tensor(a) for a in arrays])
    d = dg.differentiate(g, wrt=[1])
    assert d.wrt == (1,) and len(d.backward.outputs) == 1
    _, (gy,) = _graph_grads(d, arrays)
    assert_close(gy, _eager_grads(fn, arrays)[1], rtol=1e-12, atol=1e-12)
    # Integer inputs are not differentiated by default.
    g = dg.trace(lambda x, k: x * k, dg.ones(3), dg.tensor([1, 2, 3]))
    assert dg.differentiate(g).wrt == (0,)
    with pytest.raises(IndexError, match="no input 5"):
        dg.differentiate(g, wrt=[5])


def test_unused_input_gets_a_zero_gradient():
    g = dg.trace(lambda x, y: (x * 2).sum(), dg.ones(3, dtype=dg.float64),
                 dg.ones(2, dtype=dg.float64))
    d = dg.differentiate(g)
    _, (gx, gy) = _graph_grads(d, [np.ones(3), np.ones(2)])
    assert_close(gx, np.full(3, 2.0), rtol=1e-12, atol=1e-12)
    assert_close(gy, np.zeros(2), rtol=1e-12, atol=1e-12)


def test_multiple_outputs_take_one_cotangent_each():
    def fn(x):
        return x.exp(), (x * x).sum()

    x = RNG.standard_normal(4)
    d = dg.differentiate(dg.trace(fn, dg.tensor(x)))
    outs = dg.interpret(d.forward, x)
    ct = RNG.standard_normal(4)
    (gx,) = dg.interpret(d.backward, ct, np.float64(3.0).reshape(()), *outs[2:])
    assert_close(gx, ct * np.exp(x) + 3.0 * 2 * x, rtol=1e-12, atol=1e-12)


def test_a_fused_graph_is_refused():
    g = optimize(dg.trace(lambda x: (x * 2).exp(), dg.ones(3)))
    with pytest.raises(ValueError, match="before fusing"):
        dg.differentiate(g)


def test_module_parameters_are_differentiated():
    dg.manual_seed(3)
    layer = dg.nn.Linear(4, 2)
    x = dg.randn(3, 4)
    g = dg.trace(lambda x: dg.tanh(layer(x)).sum(), x)
    d = dg.differentiate(g, wrt=[1, 2])
    _, (gw, gb) = _graph_grads(d, [x.numpy(), layer.weight.numpy(), layer.bias.numpy()])
    dg.tanh(layer(x)).sum().backward()
    assert_close(gw, layer.weight.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert_close(gb, layer.bias.grad.numpy(), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------- residuals and remat


def test_residuals_are_forward_outputs():
    d = dg.differentiate(dg.trace(lambda x: (x * 2.0).tanh().sum(), dg.ones(5)))
    # tanh saves its output: one residual of 5 float32, 20 bytes.
    assert d.n_outputs == 1
    assert [o.op for o in d.forward.outputs[1:]] == ["tanh"]
    assert d.residual_bytes == 20
    assert len(d.backward.inputs) == 1 + 1
    assert "1 output(s) + 1 residual(s), 20 residual bytes" in str(d)


def test_cheap_residuals_are_recomputed_and_reported():
    dg.manual_seed(4)
    layer = dg.nn.Linear(3, 2)
    g = dg.trace(lambda x: layer(x).sum(), dg.randn(4, 3, requires_grad=True))
    d = dg.differentiate(g)
    # The transposed weight is recomputed from the weight (an input) in the backward.
    assert d.recomputed == ["transpose f32[3,2]"]
    assert d.bytes_saved == 3 * 2 * 4
    assert "transpose" not in [o.op for o in d.forward.outputs]
    assert "transpose" in [n.op for n in d.backward.nodes]
    assert "(24 bytes saved per step)" in str(d)
    report = str(dg.explain(lambda x: layer(x).sum(), dg.randn(4, 3, requires_grad=True)))
    assert ("recomputed in the backward: transpose f32[3,2] (24 bytes saved per step)"
            in report)
    arrays = [np.ones((4, 3), np.float32), layer.weight.numpy(), layer.bias.numpy()]
    _, grads = _graph_grads(d, arrays)
    assert_close(grads[0], np.broadcast_to(layer.weight.numpy().sum(0), (4, 3)),
                 rtol=1e-6, atol=1e-6)


def test_expensive_residuals_are_saved():
    d = dg.differentiate(dg.trace(lambda x, w: (x @ w).exp().sum(), dg.ones(2, 3),
                                  dg.ones(3, 4)))
    assert d.recomputed == [] and d.bytes_saved == 0
    assert "exp" in [o.op for o in d.forward.outputs[1:]]
    assert "nothing (0 bytes saved per step)" in str(
        dg.explain(lambda x, w: (x @ w).exp().sum(), dg.ones(2, 3, requires_grad=True),
                   dg.ones(3, 4)))


def test_values_traced_under_no_grad_are_constants_for_differentiate():
    """dg.trace records which nodes ran under no_grad (graph.no_grad), and differentiate
    treats them as constants, as the eager tape does: d/dx x * (2x)|no_grad = 2x."""
    def f(x):
        with dg.no_grad():
            c = x * 2.0
        return (x * c).sum()

    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g = dg.trace(f, x)
    assert g.no_grad and all(n.uid not in g.no_grad for n in g.nodes if n.op == "sum")
    d = dg.differentiate(g, [0])
    fwd = dg.interpret(d.forward, x.numpy())
    (gx,) = dg.interpret(d.backward, np.ones((), np.float32), *fwd[1:])
    f(x).backward()
    assert_close(gx, x.grad.numpy(), rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
    assert_close(gx, [2.0, 4.0, 6.0], rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
