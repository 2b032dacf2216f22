"""The reference interpreter: `graph(*arrays)` and `dg.interpret`, fused graphs included."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.passes import fuse, optimize
from dualgraph.testing import assert_close

from .._support.graphs import all_ops, arrays_for

RNG = np.random.default_rng(3)

PROGRAMS = {
    "chain_bcast": (lambda x, y: ((x * y + 1.0).tanh() * dg.sigmoid(y) - x / 3.0),
                    [(4, 3), (3,)]),
    "reduce": (lambda x, y: ((x - y) ** 2).sum(axis=0) + (x * y).mean(), [(4, 3), (4, 1)]),
    "linear_relu": (lambda x, w, b: dg.relu(x @ w + b), [(5, 4), (4, 3), (3,)]),
    "shared": (lambda x: (lambda e: e.sum() + e.max() + e)(dg.exp(x * 0.5)), [(6,)]),
    "softmax": (lambda x: dg.softmax(dg.tanh(x * 2.0), dim=-1), [(3, 4)]),
    "multi_out": (lambda x, y: (x * y, (x + y).sum(), dg.maximum(x, y)), [(2, 3), (2, 3)]),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_fused_graph_equals_unfused_and_eager(name):
    fn, shapes = PROGRAMS[name]
    arrays = [RNG.standard_normal(s) for s in shapes]
    g = dg.trace(fn, *[dg.tensor(a) for a in arrays])
    opt = optimize(g, verify=True)
    assert "fused" in [n.op for n in opt.nodes]
    unfused = dg.interpret(g, *arrays)
    fused = dg.interpret(opt, *arrays)
    eager = fn(*[dg.tensor(a) for a in arrays])
    eager = eager if isinstance(eager, tuple) else (eager,)
    assert len(unfused) == len(fused) == len(eager)
    for u, f, e in zip(unfused, fused, eager):
        assert_close(u, e.numpy(), rtol=1e-12, atol=1e-12)
        assert_close(f, u, rtol=1e-12, atol=1e-12)


def test_call_and_interpret_agree():
    g = fuse(dg.trace(PROGRAMS["chain_bcast"][0], dg.ones(4, 3), dg.ones(3)))
    x, y = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal(3).astype(
        np.float32)
    out = g(x, y)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    (same,) = dg.interpret(g, x, y)
    np.testing.assert_array_equal(out, same)
    # Tensors are accepted too.
    np.testing.assert_array_equal(g(dg.tensor(x), dg.tensor(y)), out)


def test_multiple_outputs_come_back_as_a_tuple():
    g = dg.trace(PROGRAMS["multi_out"][0], dg.ones(2, 3), dg.ones(2, 3))
    outs = g(np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32))
    assert isinstance(outs, tuple) and len(outs) == 3
    assert_close(outs[1], np.float32(18.0).reshape(()), rtol=1e-12, atol=1e-12)


def test_fused_bodies_run_with_the_registry_kernels():
    g = optimize(dg.trace(lambda x, w, b: dg.relu(x @ w + b), dg.ones(5, 4), dg.ones(4, 3),
                          dg.ones(3)))
    assert [n.op for n in g.nodes] == ["fused"]
    assert list(all_ops(g)) == ["fused", "matmul", "add", "relu"]
    x, w, b = (RNG.standard_normal(s).astype(np.float32) for s in [(5, 4), (4, 3), (3,)])
    assert_close(g(x, w, b), np.maximum(x @ w + b, 0), rtol=1e-6, atol=1e-6)


def test_module_graph_interprets_with_captured_parameters():
    dg.manual_seed(2)
    net = dg.nn.Sequential(dg.nn.Linear(4, 3), dg.nn.ReLU(), dg.nn.Linear(3, 2))
    x = dg.randn(6, 4)
    g = optimize(dg.trace(net, x), verify=True)
    assert_close(g(*arrays_for(g, x)), net(x).numpy(), rtol=1e-6, atol=1e-6)


def test_bad_arguments():
    g = dg.trace(lambda x: x * 2, dg.ones(3))
    with pytest.raises(TypeError, match="graph takes 1 inputs, got 2"):
        g(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match=r"input of shape \(4,\) for a graph input of f32\[3\]"):
        g(np.ones(4, np.float32))
