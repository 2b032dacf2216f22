"""`dg.explain` on a training step, and `dg.viz.to_dot` for a Graph."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.passes import optimize

PASSES = ["simplify", "constant_fold", "cse", "dce", "fuse"]


@pytest.fixture(scope="module")
def mlp_step():
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(6, 8), dg.nn.ReLU(), dg.nn.Linear(8, 3))
    x = dg.randn(5, 6)
    y = dg.tensor(np.array([0, 2, 1, 1, 0]))

    def step(x, y):
        return dg.nn.functional.cross_entropy(net(x), y)

    return net, step, x, y


def _section(text, title, end):
    start = text.index(title)
    return text[start:text.index(end, start)]


def test_explain_mlp_step_prints_every_stage(mlp_step):
    net, step, x, y = mlp_step
    report = dg.explain(step, x, y)
    text = str(report)
    forward = _section(text, "== forward: traced", "== backward: traced")
    backward = _section(text, "== backward: traced", "== residuals")
    for part, stats in ((forward, report.passes), (backward, report.backward_passes)):
        assert [s.name for s in stats] == PASSES
        for s in stats:
            assert f"-- after {s.name}: {s.nodes_before} -> {s.nodes_after} nodes" in part
        # Graphs before (traced) and after the passes that changed something.
        assert part.count("graph(%0") >= 2
        assert "fused[kind=" in part
    assert str(report.traced) in forward and str(report.optimized) in forward
    assert str(report.differentiated.backward) in backward
    assert str(report.backward_optimized) in backward
    traced_ops = len([n for n in report.traced.nodes if n.op != "const"])
    kernels = sum(n.op == "fused" for n in report.optimized.nodes)
    assert (f"== forward: {traced_ops} traced nodes -> {report.passes[-1].nodes_after} "
            f"optimized nodes, {kernels} fused kernel(s)") in text
    assert re.search(r"== residuals: \d+ saved by the forward \(\d+ bytes\); recomputed in "
                     r"the backward: transpose f32\[6,8\], transpose f32\[8,3\] "
                     r"\(288 bytes saved per step\)", text)
    # Parameters are differentiated: one gradient per parameter, not for x or the labels.
    assert len(report.differentiated.backward.outputs) == len(list(net.parameters()))
    assert report.fusion_groups and all(len(g) >= 2 for g in report.fusion_groups)


def test_explained_graphs_compute_the_step(mlp_step):
    net, step, x, y = mlp_step
    report = dg.explain(step, x, y)
    params = [p.numpy() for p in net.parameters()]
    d = report.differentiated
    outs = dg.interpret(report.optimized, x.numpy(), y.numpy(), *params)
    loss = step(x, y)
    np.testing.assert_allclose(outs[0], loss.numpy(), rtol=1e-6)
    grads = dg.interpret(report.backward_optimized, np.ones((), np.float32), *outs[1:])
    net.zero_grad()
    loss.backward()
    for gr, p in zip(grads, net.parameters()):
        np.testing.assert_allclose(gr, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert d.n_outputs == 1


def test_explain_without_gradients():
    report = dg.explain(lambda x: (x * 2).exp().sum(), dg.ones(3), wrt=None)
    assert report.differentiated is None
    text = str(report)
    assert "== backward" not in text
    assert "-- after fuse: 3 -> 1 nodes" in text


def test_to_dot_has_a_cluster_per_fused_kernel():
    def prog(x, w, b):
        h = dg.relu(x @ w + b)
        return (h * 2).exp().sum(axis=1), h.max()

    g = optimize(dg.trace(prog, dg.ones(4, 3), dg.ones(3, 5), dg.ones(5)))
    kernels = [n for n in g.nodes if n.op == "fused"]
    assert len(kernels) >= 2
    dot = dg.viz.to_dot(g)
    assert dot.startswith('digraph "dualgraph" {') and dot.rstrip().endswith("}")
    assert dot.count("subgraph cluster_") == len(kernels)
    for n in kernels:
        assert f"fused kernel ({n.attrs['kind']})" in dot
    for op in ("matmul", "relu", "exp", "max"):
        assert f'label="{op}' in dot
    assert dot.count("shape=box, style=dashed") == len(g.outputs)
    assert dot.count("{") == dot.count("}")


def test_to_dot_of_an_unfused_graph_has_no_clusters():
    g = dg.trace(lambda x: (x * 2).exp(), dg.ones(3))
    dot = dg.viz.to_dot(g)
    assert "cluster" not in dot
    assert 'label="mul\\nf32[3]' in dot and "-> out0" in dot


def test_explain_shows_the_value_and_grad_kernel_of_a_scalar_loss(mlp_step):
    """A scalar loss compiles to one kernel that returns the loss and its gradients: the
    report prints that graph, and it computes what the forward and backward graphs do."""
    net, step, x, y = mlp_step
    report = dg.explain(step, x, y)
    joint = report.value_and_grad
    assert joint is not None and "== value and grad: a scalar loss" in str(report)
    params = [p.numpy() for p in net.parameters()]
    loss, *grads = dg.interpret(joint, x.numpy(), y.numpy(), *params)
    net.zero_grad()
    eager = step(x, y)
    eager.backward()
    np.testing.assert_allclose(loss, eager.item(), rtol=1e-6)
    for g, p in zip(grads, net.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    vector = dg.explain(lambda x: x * 2, dg.ones(3, requires_grad=True))
    assert vector.value_and_grad is None and "== value and grad" not in str(vector)


def test_the_report_echoes_as_its_text():
    """At the interpreter's prompt ``dg.explain(...)`` shows the report, not a dataclass
    dump; in a script, ``print`` it."""
    e = dg.explain(lambda x: (x * 2).exp().sum(), dg.randn(3))
    assert repr(e) == str(e) and repr(e).startswith("== forward: traced")
