"""`dg.explain` of a compiled function shows the graphs its compiled plan runs: the inputs
it captures, the constants it folds and the passes as they ran, not a fresh `dg.trace`
(which reads captured tensors as constants and folds what the compiled call computes)."""

from __future__ import annotations

import dualgraph as dg

W = dg.tensor([0.5, 1.0, 1.5])  # captured: read on every call, so an input of the kernel


def _ops(graph) -> list[str]:
    return [m.op for n in graph.nodes
            for m in (n.attrs["body"].nodes if n.op == "fused" else [n])]


def test_explain_shows_the_compiled_inference_graph():
    @dg.compile(tiered=False)
    def f(x):
        return x * (W * 2).exp() + dg.exp(dg.tensor(0.25))

    x = dg.ones(3)
    assert "not called with arguments of this signature yet" in str(dg.explain(f, x))
    f(x)
    plan = f.plan_for(x)
    report = dg.explain(f, x)
    assert report.traced is plan.graph and report.optimized is plan.optimized
    assert len(report.optimized.inputs) == 2  # x and the captured W
    # W's exp runs in the kernel (W may change between calls); the literal's is folded.
    assert _ops(report.optimized).count("exp") == 1
    text = str(report)
    assert text.splitlines()[1].startswith("== graphs: the inference plan dg.compile built")
    assert "def kernel(" in report.numba_source


def test_explain_shows_the_compiled_forward_and_backward():
    @dg.compile(tiered=False)
    def g(x):
        return (x * (W * 2).exp()).tanh()

    @dg.compile(tiered=False)
    def loss(x):
        return (x * W).exp().sum()

    x = dg.ones(3, requires_grad=True)
    g(x)
    loss(x)
    plan = g.plan_for(x)
    report = dg.explain(g, x)
    assert report.optimized is plan.optimized
    assert report.backward_optimized is plan.backward_graph
    assert report.differentiated is plan.differentiated
    assert "-- given to the passes" in str(report)  # the forward also returns residuals
    assert "def forward(" in report.numba_source and "def backward(" in report.numba_source
    joint = dg.explain(loss, x)
    assert joint.value_and_grad is loss.plan_for(x).optimized
    assert "== value and grad" in str(joint)
