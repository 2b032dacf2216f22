"""`dg.explain`: every stage printed, and the source map user line -> IR node -> Numba line.

Explain generates Numba source but compiles nothing, so these tests are fast."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.explain import SourceLine

from . import _programs as progs


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
