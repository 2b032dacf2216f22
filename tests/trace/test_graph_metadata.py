"""A graph's metadata is declared on `Graph`, carried by `Graph.replace`, and read by name.

Traces and passes once attached ``captured``, ``pass_stats``, ... as ad-hoc attributes
that hand-kept lists copied forward, and reports found the graph before fusion as
``pass_stats[-2]``, which a change to the pipeline would silently shift.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.passes as P
from dualgraph.ir.graph import Graph, Node
from dualgraph.trace.autodiff import differentiate

from .._support.sources import python_files, walked

PKG = Path(dg.__file__).resolve().parent
META = {"captured", "n_args", "single_output", "notes", "pass_stats"}


def _mlp():
    dg.manual_seed(0)
    layer = dg.nn.Linear(3, 2)
    return layer, (lambda x: (layer(x) * 1.0).tanh().sum())


def _fn(x):
    return ((x * 2.0).exp() + 1.0).sum()


# ------------------------------------------------------------------ declared fields
def test_setting_an_undeclared_attribute_fails():
    g = dg.trace(_fn, dg.ones(3))
    with pytest.raises(AttributeError):
        g.pass_stat = []  # a typo of a declared field is an error, not a new attribute
    with pytest.raises(AttributeError):
        g.anything = 1
    assert not hasattr(g, "__dict__")


def test_a_plain_graph_has_every_field_with_its_default():
    x = Node("input", (), {}, (2,), np.dtype(np.float32))
    y = Node("exp", (x,), {}, (2,), np.dtype(np.float32))
    g = Graph([x], [y], [y])
    assert (g.captured, g.n_args, g.single_output, g.notes) == ([], None, None, [])
    assert g.pass_stats == [] and isinstance(g.pass_stats, P.PassStats)


def test_trace_metadata_is_carried_through_every_pass_and_autodiff():
    layer, f = _mlp()
    traced = dg.trace(f, dg.ones(4, 3))
    assert traced.n_args == 1 and traced.single_output is True
    assert [id(t) for t in traced.captured] == [id(layer.weight), id(layer.bias)]
    d = differentiate(traced, [1, 2])
    opt = P.optimize(traced)
    stages = [s.graph for s in opt.pass_stats] + [opt, d.forward, P.optimize(d.forward)]
    for g in stages:
        assert [id(t) for t in g.captured] == [id(layer.weight), id(layer.bias)]
        assert (g.n_args, g.single_output) == (1, True)


def test_replace_shares_nothing_mutable_and_starts_notes_afresh():
    g = P.simplify(dg.trace(lambda x: (x * 1.0).exp(), dg.ones(3)))
    assert g.notes
    n = len(g.nodes)
    h = g.replace(nodes=g.nodes[:1], outputs=[g.nodes[0]])
    assert h is not g and h.notes == [] and h.pass_stats == []
    assert len(g.nodes) == n and h.outputs == [g.nodes[0]] and h.outputs is not g.outputs
    assert h.inputs == g.inputs and h.inputs is not g.inputs
    assert g.replace(notes=["n"]).notes == ["n"]


def test_optimize_never_mutates_its_input_even_with_every_pass_skipped():
    g = dg.trace(_fn, dg.ones(3))
    out = P.optimize(g, skip=[name for name, _ in P.DEFAULT_PIPELINE])
    assert out is not g and out == g and out.pass_stats == []
    assert g.pass_stats == []
    assert P.optimize(g).pass_stats and g.pass_stats == []


def _meta_writes(path: Path) -> list[str]:
    """Places that attach or copy graph metadata by hand: ``x.captured = ...`` (other than
    an object setting its own ``self.captured``), ``setattr``/``getattr``/``hasattr`` with
    a metadata name, and literal lists naming two or more metadata fields."""
    bad = []
    for node in walked(path):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if (isinstance(t, ast.Attribute) and t.attr in META
                    and not (isinstance(t.value, ast.Name) and t.value.id == "self")):
                bad.append(f"{node.lineno}: {ast.unparse(node)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "getattr", "hasattr", "delattr")
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in META):
            bad.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if len(names & META) >= 2:
                bad.append(f"{node.lineno}: {ast.unparse(node)}")
    return bad


def test_no_graph_metadata_is_attached_outside_the_graph_class():
    bad = []
    for path in python_files(PKG):
        if path == PKG / "ir" / "graph.py":
            continue
        bad += [f"{path.relative_to(PKG.parent)}:{b}" for b in _meta_writes(path)]
    assert not bad, "\n".join(bad)


def test_the_metadata_check_sees_the_old_side_channel(tmp_path):
    old = tmp_path / "old.py"
    old.write_text(
        "def trace(g, ctx):\n"
        "    g.captured = ctx.captured\n"
        "    self.notes = []\n"
        "def copy_meta(old, new):\n"
        "    for attr in ('captured', 'n_args', 'single_output'):\n"
        "        if hasattr(old, attr):\n"
        "            setattr(new, attr, getattr(old, attr))\n"
        "    return getattr(old, 'pass_stats', [])\n"
    )
    assert [b.split(":")[0] for b in _meta_writes(old)] == ["2", "5", "8"]


# ------------------------------------------------------------------ stages by name
def test_stages_are_found_by_pass_name():
    g = dg.trace(_fn, dg.ones(3))
    out = P.optimize(g)
    stats = out.pass_stats
    assert stats.before("simplify") is g
    assert stats.before("fuse") is stats.stat("dce").graph is stats.after("dce")
    assert stats.after("fuse") is out
    assert [n.op for n in stats.before("fuse").nodes] == ["mul", "exp", "add", "sum"]


@pytest.mark.parametrize("graph", ["skipped", "unoptimized"])
def test_a_stage_that_did_not_run_is_a_clear_error(graph):
    g = dg.trace(_fn, dg.ones(3))
    if graph == "skipped":
        g = P.optimize(g, skip=("fuse",))
    ran = "simplify, constant_fold, cse, dce" if graph == "skipped" else "no passes"
    with pytest.raises(LookupError, match=rf"pass 'fuse' did not run on this graph \(ran: {ran}\)"):
        g.pass_stats.before("fuse")


def _extra_pass(graph: Graph) -> Graph:
    """A pass that changes nothing, to shift every position in the pipeline."""
    return graph.replace(notes=["looked"])


@pytest.mark.parametrize("where", ["after fuse", "before fuse"])
def test_explain_and_compare_find_the_graph_before_fuse_in_any_pipeline(monkeypatch, where):
    x = dg.randn(8, requires_grad=True)
    want_groups = dg.explain(_fn, x).fusion_groups
    assert want_groups == [["mul", "exp"], ["add", "sum"]]  # exp is saved for backward
    pipeline = list(P.DEFAULT_PIPELINE)
    at = len(pipeline) if where == "after fuse" else len(pipeline) - 1
    pipeline.insert(at, ("extra", _extra_pass))
    monkeypatch.setattr(P, "DEFAULT_PIPELINE", tuple(pipeline))
    report = dg.explain(_fn, x)
    assert [s.name for s in report.passes][at] == "extra"
    assert report.fusion_groups == want_groups
    cmp = dg.compare(_fn, x, repeats=1, cold_warm=False)
    # compare reports the forward alone: nothing is saved, one kernel
    assert [f["members"] for f in cmp.fusion] == [["mul", "exp", "add", "sum"]]
