"""`dg.explain`: every stage printed (a training step's passes, residuals and kernels), the
graphs it prints computing the step, and the source map user line -> IR node -> Numba line.

Explain generates Numba source but compiles nothing, so these tests are fast."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.explain import SourceLine

from . import _programs as progs

PASSES = ["simplify", "constant_fold", "cse", "dce", "fuse"]


@pytest.fixture(scope="module")
def explanation():
    return dg.explain(progs.every_fate, *progs.inputs())


def test_str_shows_every_stage(explanation):
    text = str(explanation)
    for part in ("== forward: traced", "-- after simplify", "-- after constant_fold",
                 "-- after cse", "-- after dce", "-- after fuse", "fused[kind=",
                 "== fusion groups (forward):", "== backward: traced", "== residuals:",
                 "== Numba source", "def forward(", "def backward(", "== source map"):
        assert part in text, part
    # The pass notes say what happened, with node counts.
    assert "merged exp f32[64] into an equal node" in text
    assert "removed tanh f32[64]" in text
    assert "fold_mul_one" in text


def test_fusion_groups_listed(explanation):
    groups = explanation.fusion_groups
    assert groups and all(len(g) >= 2 for g in groups)
    text = str(explanation)
    for k, g in enumerate(groups):
        assert f"kernel {k}: {' -> '.join(g)}" in text


def test_source_map_covers_every_optimized_node(explanation):
    expected = []
    for graph, name in ((explanation.optimized, "forward"),
                        (explanation.backward_optimized, "backward")):
        for n in graph.nodes:
            if n.op == "fused":
                expected += [(name, m.op) for m in n.attrs["body"].nodes if m.op != "const"]
            elif n.op != "const":
                expected.append((name, n.op))
    assert [(r.graph, r.op) for r in explanation.source_map] == expected


def test_source_map_lines_point_into_the_printed_source(explanation):
    source = explanation.numba_source.splitlines()
    for r in explanation.source_map:
        assert isinstance(r, SourceLine)
        assert source[r.numba_line - 1] == r.numba_text
    # Elementwise members are the scalar statement the backend tags with their op.
    tagged = [r for r in explanation.source_map if r.op in ("mul", "exp", "add", "sigmoid")]
    assert tagged
    assert all(r.numba_text.rstrip().endswith(f"# {r.op}") for r in tagged)
    # Forward rows are in the forward function, backward rows after `def backward(`.
    start_bwd = source.index(next(s for s in source if s.startswith("def backward("))) + 1
    for r in explanation.source_map:
        assert (r.numba_line > start_bwd) == (r.graph == "backward")


def test_source_map_from_a_user_line(explanation):
    rows = explanation.lines_for(progs.line_of(progs.every_fate, "first"))
    assert {r.op for r in rows if r.graph == "forward"} == {"mul", "exp"}
    for r in rows:
        if r.graph == "forward":  # the forward ops of this line are fused; the backward
            assert r.kernel is not None and r.kernel.startswith("%")  # may be a plain loop
        assert f"{r.op} " in r.ir
    exp_row = next(r for r in rows if r.op == "exp")
    assert "exp" in exp_row.numba_text
    # The duplicated line's forward ops were merged away by CSE: nothing of them is left to
    # map (its backward ops, the VJPs of the second use, are still the gradient's terms).
    dup = explanation.lines_for(progs.line_of(progs.every_fate, "duplicate"))
    assert [r for r in dup if r.graph == "forward"] == []
    text = str(explanation)
    assert f"-> line {exp_row.numba_line}: {exp_row.numba_text.strip()}" in text


def test_backward_nodes_map_to_the_user_lines_they_differentiate(explanation):
    rows = [r for r in explanation.source_map if r.graph == "backward"]
    assert rows and all(r.user and "_programs.py" in r.user for r in rows)


def test_without_gradients_there_is_one_kernel_and_no_backward():
    x = dg.tensor(np.ones(8, np.float32))
    e = dg.explain(lambda t: (dg.exp(t) * 2.0).sum(), x)
    assert e.differentiated is None and e.backward_optimized is None
    assert "def kernel(" in e.numba_source and "== backward" not in str(e)
    assert {r.graph for r in e.source_map} == {"kernel"}
    assert [r.op for r in e.source_map] == ["exp", "mul", "sum"]


def test_wrt_none_skips_the_backward():
    e = dg.explain(progs.every_fate, *progs.inputs(), wrt=None)
    assert e.differentiated is None and e.backward_passes == []


def test_explain_of_untraceable_function_raises_trace_error():
    x, _ = progs.inputs()
    with pytest.raises(dg.TraceError, match="_programs.py"):
        dg.explain(progs.data_dependent, x)


# ------------------------------------------------------------ a training step


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
    dg.testing.assert_close(outs[0], loss.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    grads = dg.interpret(report.backward_optimized, np.ones((), np.float32), *outs[1:])
    net.zero_grad()
    loss.backward()
    for gr, p in zip(grads, net.parameters()):
        dg.testing.assert_close(gr, p.grad.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                                check_dtype=False)
    assert d.n_outputs == 1


def test_explain_without_gradients():
    report = dg.explain(lambda x: (x * 2).exp().sum(), dg.ones(3), wrt=None)
    assert report.differentiated is None
    text = str(report)
    assert "== backward" not in text
    assert "-- after fuse: 3 -> 1 nodes" in text


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
    dg.testing.assert_close(loss, eager.item(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    for g, p in zip(grads, net.parameters()):
        dg.testing.assert_close(g, p.grad.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                                check_dtype=False)
    vector = dg.explain(lambda x: x * 2, dg.ones(3, requires_grad=True))
    assert vector.value_and_grad is None and "== value and grad" not in str(vector)


def test_the_report_echoes_as_its_text():
    """At the interpreter's prompt ``dg.explain(...)`` shows the report, not a dataclass
    dump; in a script, ``print`` it."""
    e = dg.explain(lambda x: (x * 2).exp().sum(), dg.randn(3))
    assert repr(e) == str(e) and repr(e).startswith("== forward: traced")


def test_explain_of_a_compiled_training_step_shows_the_step_it_runs():
    """A compiled function that calls ``backward()`` and an optimizer inside: the report
    shows the traced step itself (its updates written into the parameters), the source
    that runs, and no second differentiation of the step."""
    dg.manual_seed(0)
    net = dg.nn.Linear(4, 2)
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    x = dg.randn(3, 4)

    @dg.compile(tiered=False)
    def train(x):
        opt.zero_grad()
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    before = net.weight.detach().clone()
    train(x)
    report = dg.explain(train, x)
    text = str(report)
    assert report.step and report.differentiated is None
    assert "== step: traced" in text and "== backward" not in text
    assert "sub" in [n.op for n in report.traced.nodes]
    # Interpreting the explained step from the old weights gives the update train() made.
    plan = train.plan_for(x)
    assert plan.write_to and report.optimized is plan.optimized
    assert "def step(" in report.numba_source
    assert not any(r.graph == "backward" for r in report.source_map)
    # The parameters the step updates are written in place by the printed source.
    for j in plan.write_to.values():
        assert re.search(rf"\ba{j}\[[^\]]*\] = ", report.numba_source)
    assert not np.array_equal(before.numpy(), net.weight.detach().numpy())
