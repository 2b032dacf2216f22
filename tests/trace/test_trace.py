"""The tracer: one IR with the eager tape, the whole A2 API on tracers, modules."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.testing import assert_close

from .._support.graphs import arrays_for


def _leaves(*arrays):
    return [dg.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]


RNG = np.random.default_rng(0)
X23, Y3, W34 = RNG.standard_normal((2, 3)), RNG.standard_normal(3), RNG.standard_normal((3, 4))


# Programs whose tape and trace must hold the same op sequence (API.md B1). Each is a
# straight line (or a chain through one value), so program order is unambiguous.
SAME_OPS = {
    "scalar": (lambda x, y: x * y + y ** 2, (2.0, 3.0)),
    "chain": (lambda x, y: ((x * y + 1.5).tanh() / (y.exp() + 1)).sum(), (X23, Y3)),
    "matmul_relu": (lambda x, w: dg.relu(x @ w).mean(axis=0), (X23, W34)),
    "reduce_shapes": (lambda x, y: (x.T.reshape(6) * 2).max() - (x - y).sum(axis=1).sum(),
                      (X23, Y3)),
    "softmax": (lambda x, y: F.softmax(x * y, dim=-1), (X23, Y3)),
    "literal_and_reflected": (lambda x, y: 2.0 - (1.0 / (x.abs() + 1)) * y, (X23, Y3)),
}


@pytest.mark.parametrize("name", SAME_OPS)
def test_tape_and_trace_record_the_same_ops(name):
    prog, data = SAME_OPS[name]
    args = _leaves(*data)
    taped = [n.op for n in dg.graph_of(prog(*args)).nodes]
    traced = [n.op for n in dg.trace(prog, *args).nodes]
    assert taped == traced
    assert len(traced) >= 2


def test_tape_and_trace_agree_on_independent_branches():
    def prog(x, y):
        a = x.exp()
        b = y.log()
        return b * a

    x, y = _leaves([1.0, 2.0], [3.0, 4.0])
    assert [n.op for n in dg.graph_of(prog(x, y)).nodes] == [
        n.op for n in dg.trace(prog, x, y).nodes]


def test_trace_records_without_computing_and_example_values_do_not_matter():
    def prog(x):
        return (x * 2).exp()

    g1 = dg.trace(prog, dg.zeros(3))
    g2 = dg.trace(prog, dg.randn(3))
    assert g1 == g2
    assert [n.op for n in g1.nodes] == ["mul", "exp"]
    assert_close(g1(np.arange(3.0, dtype=np.float32)), np.exp(np.arange(3.0, dtype=np.float32) * 2),
                 rtol=1e-12, atol=1e-12)


def test_inputs_arrays_scalars_and_constants():
    """Tensors and arrays become inputs, Python numbers literals, other tensors const."""
    c = dg.tensor(np.array([1.0, 2.0, 3.0]))

    def prog(x, a, k):
        return x * k + a + c

    g = dg.trace(prog, dg.ones(3, dtype=dg.float64), np.ones(3), 2.5)
    assert len(g.inputs) == 2
    assert [n.op for n in g.nodes] == ["mul", "add", "const", "add"]
    assert g.nodes[0].inputs[1] == 2.5
    assert_close(g.nodes[2].attrs["value"], c.numpy(), rtol=1e-12, atol=1e-12)
    x, a = np.arange(3.0), np.full(3, 0.5)
    assert_close(g(x, a), x * 2.5 + a + c.numpy(), rtol=1e-12, atol=1e-12)


def test_tracer_has_shape_dtype_and_grad_flags():
    seen = {}

    def prog(x, k):
        y = x.sum(axis=0)
        seen.update(shape=y.shape, dtype=y.dtype, ndim=y.ndim, rg=y.requires_grad,
                    krg=k.requires_grad, length=len(x))
        return y

    dg.trace(prog, dg.ones(4, 3, requires_grad=True), dg.ones(2))
    assert seen == dict(shape=(3,), dtype=np.dtype(np.float32), ndim=1, rg=True, krg=False,
                        length=4)


def _whole_api(x, y, m, w):
    """Every operation of API.md A2 once (m is a 2x3 boolean mask as float)."""
    a = x + y - 0.5 * x / (y.abs() + 1.0)
    a = a + 1.0 - x * 2.0 + (3.0 / (x * x + 1.0)) + np.full(3, 0.25) + (-a)
    a = a ** 2 + 2.0 ** (x * 0.1) + (y.abs() + 0.5) ** x
    u = dg.exp(x * 0.3) + dg.log(y.abs() + 1) + dg.tanh(x) + dg.sigmoid(y) + dg.relu(x)
    u = u + dg.sqrt(y * y + 1) + dg.abs(x) + dg.sin(x) + dg.cos(y)
    u = u + x.exp() * 0.1 + x.tanh() + y.sigmoid() + x.relu() + (y * y + 1).sqrt().log()
    u = u + x.sin() * x.cos() + abs(y)
    v = dg.maximum(x, y) + dg.minimum(x, 0.0) + dg.where(m > 0.5, x, y)
    cmp = (x < y).astype(dg.float64) + (x <= y).astype(dg.float64) + (x > 0.0).astype(
        dg.float64) + (x >= y).astype(dg.float64) + (x == x).astype(dg.float64) + (
        x != y).astype(dg.float64)
    mm = dg.matmul(a, w) + a @ w - (u @ w) * 0.5
    red = (v.sum() + v.sum(axis=0).mean() + v.sum(axis=(0, 1), keepdims=True).sum()
           + u.mean(axis=1, keepdims=True).max() + u.amax(axis=0).sum() + dg.sum(cmp)
           + dg.mean(u, dim=1).sum() + dg.max(v, dim=-1).values.sum() + u.sum(dim=0).sum())
    shp = (a.reshape(3, 2).T + a.transpose(1, 0).T + a.reshape(-1).reshape(3, 2).T)
    idx = a[0] + a[1, 1:].sum() + a[None, :, ::2][0, 1].sum() + a[..., -1].sum()
    cat = dg.concatenate([a, u], axis=0).sum(axis=0) + dg.stack([a, v], axis=0).mean(axis=0)[1]
    return mm.sum() * red + shp.sum() + idx.sum() + cat.sum() + (-cat).max()


def test_whole_tensor_api_traces_and_matches_eager():
    rng = np.random.default_rng(1)
    data = [rng.standard_normal((2, 3)), rng.standard_normal(3),
            (rng.random((2, 3)) < 0.5).astype(np.float64), rng.standard_normal((3, 2))]
    leaves = _leaves(*data)
    eager = _whole_api(*leaves)
    eager.backward()
    g = dg.trace(_whole_api, *leaves)
    g.verify()
    ops = {n.op for n in g.nodes}
    expected = {"add", "sub", "mul", "div", "pow", "neg", "exp", "log", "tanh", "sigmoid",
                "relu", "sqrt", "abs", "sin", "cos", "maximum", "minimum", "where", "lt",
                "le", "gt", "ge", "eq", "ne", "matmul", "sum", "mean", "max", "reshape",
                "transpose", "getitem", "concatenate", "stack", "astype", "const"}
    assert expected <= ops, expected - ops
    assert_close(g(*data), eager.numpy(), rtol=1e-12, atol=1e-12, msg="forward")
    d = dg.differentiate(g)
    outs = dg.interpret(d.forward, *data)
    grads = dg.interpret(d.backward, np.ones(()), *outs[1:])
    assert leaves[2].grad is None  # the mask only feeds a comparison
    expected = [t.grad.numpy() if t.grad is not None else np.zeros(t.shape) for t in leaves]
    for gr, ex in zip(grads, expected):
        assert_close(gr, ex, rtol=1e-10, atol=1e-10, msg="gradient")


def test_module_parameters_are_inputs_and_updates_are_seen():
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 2))
    x = dg.randn(5, 3)
    g = dg.trace(net, x)
    params = list(net.parameters())
    assert len(g.inputs) == 1 + len(params)
    assert g.n_args == 1
    assert all(c is p for c, p in zip(g.captured, params))
    # Parameter values are never baked in.
    assert not [n for n in g.nodes if n.op == "const"]
    assert_close(g(*arrays_for(g, x)), net(x).numpy(), rtol=1e-6, atol=1e-6)

    before = g(*arrays_for(g, x))
    opt = dg.optim.SGD(net.parameters(), lr=0.5)
    (net(x) ** 2).sum().backward()
    opt.step()
    after = g(*arrays_for(g, x))
    assert not np.allclose(before, after)
    assert_close(after, net(x).numpy(), rtol=1e-6, atol=1e-6)


def test_module_used_from_a_function_and_loss():
    dg.manual_seed(1)
    layer = dg.nn.Linear(3, 2)
    x, t = dg.randn(4, 3), dg.randn(4, 2)

    def loss(x, t):
        return dg.nn.MSELoss()(layer(x), t)

    g = dg.trace(loss, x, t)
    assert len(g.captured) == 2
    assert g.captured[0] is layer.weight and g.captured[1] is layer.bias
    assert "addmm" in [n.op for n in g.nodes]
    assert_close(g(*arrays_for(g, x, t)), loss(x, t).numpy(), rtol=1e-6, atol=1e-6)


def test_tuple_outputs_and_returning_an_input():
    g = dg.trace(lambda x, y: (x + y, x), dg.ones(2), dg.ones(2))
    assert len(g.outputs) == 2 and g.outputs[1] is g.inputs[0]
    s, x = g(np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32))
    assert_close(s, np.array([4.0, 6.0], np.float32), rtol=1e-12, atol=1e-12)
    assert_close(x, np.array([1.0, 2.0], np.float32), rtol=1e-12, atol=1e-12)


def test_user_locations_recorded_on_nodes():
    g = dg.trace(lambda x: x * 2, dg.ones(2))
    assert g.nodes[0].loc is not None and g.nodes[0].loc.startswith(__file__ + ":")
