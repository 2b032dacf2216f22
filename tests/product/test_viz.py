"""Pictures: DOT for tapes and graphs, shared colours per source line, fused clusters, and
rendering with and without Graphviz."""

from __future__ import annotations

import builtins
import re
import shutil

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import passes as P

from . import _programs as progs

NODE = re.compile(r'\[label="(?P<label>[^"]*)", fillcolor="(?P<fill>[^"]*)"\]')


def _colours(dot: str) -> dict[str, set[str]]:
    """``file:line`` -> the fill colours of the nodes labelled with it."""
    out: dict[str, set[str]] = {}
    for m in NODE.finditer(dot):
        where = m["label"].split("\\n")[-1]
        if ".py:" in where:
            out.setdefault(where, set()).add(m["fill"])
    return out


@pytest.fixture
def tape_output():
    x, y = progs.inputs()
    with dg.record_locations():
        return progs.every_fate(x, y)


def test_to_dot_of_a_tape(tape_output):
    dot = dg.viz.to_dot(tape_output)
    assert dot.startswith('digraph "dualgraph" {') and dot.rstrip().endswith("}")
    for op in ("mul", "exp", "sigmoid", "tanh", "sum"):
        assert f'label="{op}' in dot
    assert "output 0" in dot and "->" in dot
    # Same graph as dg.graph_of: one DOT node per tape node and input, and one output.
    g = dg.graph_of(tape_output)
    assert dot.count("[label=") == len(g.inputs) + len(g.nodes) + 1


def test_to_dot_of_a_graph_draws_fused_groups_as_clusters():
    optimized = P.optimize(dg.trace(progs.every_fate, *progs.inputs()))
    kernels = sum(1 for n in optimized.nodes if n.op == "fused")
    dot = dg.viz.to_dot(optimized)
    assert dot.count("subgraph cluster_") == kernels > 0
    assert "fused kernel (reduce)" in dot and "fused kernel (elementwise)" in dot


def test_eager_and_optimized_drawings_share_colours_per_line(tape_output):
    eager = _colours(dg.viz.to_dot(tape_output))
    optimized = _colours(dg.viz.to_dot(P.optimize(dg.trace(progs.every_fate,
                                                           *progs.inputs()))))
    common = set(eager) & set(optimized)
    assert len(common) >= 3
    for where in common:
        # One colour per line, the same in both pictures.
        assert len(eager[where]) == 1 and eager[where] == optimized[where]
    assert len({c for cs in eager.values() for c in cs}) >= 2


def test_make_dot_names_parameters_like_torchviz():
    graphviz = pytest.importorskip("graphviz")
    w = dg.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    x = dg.tensor(np.ones((4, 3), np.float32))
    y = (x @ w).relu().sum()
    src = dg.viz.make_dot(y, params={"weight": w})
    assert isinstance(src, graphviz.Source)
    # torchviz's labels: backward names, and the leaf's name and shape.
    assert 'label="weight\\n (3, 2)"' in src.source
    assert "MmBackward0" in src.source and "AccumulateGrad" in src.source


BOTH = r"pip install graphviz.*apt-get install graphviz"  # one message, both installs


def test_render_without_the_dot_program_is_a_clear_error_and_writes_dot(tmp_path,
                                                                        monkeypatch,
                                                                        tape_output):
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    with pytest.raises(RuntimeError, match=BOTH + ".*dot program is not on PATH"):
        dg.viz.render(tape_output, str(tmp_path / "tape.png"))
    written = (tmp_path / "tape.dot").read_text()
    assert written == dg.viz.to_dot(tape_output)
    assert not (tmp_path / "tape.png").exists()


def test_make_dot_source_without_the_dot_program(tmp_path, monkeypatch, tape_output):
    graphviz = pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    src = dg.viz.make_dot(tape_output)
    assert isinstance(src, graphviz.Source)
    assert src.source.rstrip() == dg.viz.make_dot_source(tape_output)  # as torchviz's does
    for draw in (lambda: src.render(str(tmp_path / "t"), format="png"),
                 lambda: src.pipe(format="svg"), src._repr_mimebundle_):
        with pytest.raises(RuntimeError, match=BOTH) as e:
            draw()
        assert not isinstance(e.value, graphviz.ExecutableNotFound)


def test_render_without_the_graphviz_package(tmp_path, monkeypatch, tape_output):
    real_import = builtins.__import__

    def no_graphviz(name, *args, **kwargs):
        if name == "graphviz":
            raise ImportError("No module named 'graphviz'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_graphviz)
    with pytest.raises(RuntimeError, match=BOTH + ".*Python package is missing"):
        dg.viz.render(tape_output, str(tmp_path / "t.svg"), format="svg")
    assert (tmp_path / "t.dot").exists()
    src = dg.viz.make_dot(tape_output)  # still the DOT text, and one clear error to draw
    assert src.source == dg.viz.make_dot_source(tape_output) == str(src)
    with pytest.raises(RuntimeError, match=BOTH):
        src.render("t.png")


@pytest.mark.skipif(shutil.which("dot") is None, reason="the Graphviz dot program is missing")
def test_render_with_graphviz(tmp_path, tape_output):
    pytest.importorskip("graphviz")  # the optional [viz] extra
    out = dg.viz.render(tape_output, str(tmp_path / "tape.png"))
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_to_dot_has_a_cluster_per_fused_kernel():
    def prog(x, w, b):
        h = dg.relu(x @ w + b)
        return (h * 2).exp().sum(axis=1), h.max()

    g = P.optimize(dg.trace(prog, dg.ones(4, 3), dg.ones(3, 5), dg.ones(5)))
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
