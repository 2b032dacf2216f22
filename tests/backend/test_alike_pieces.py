"""A training step split into parts shares functions across the per-parameter work that
is not an in-place update: each gradient's norm (``clip_grad_norm_``), with gradient
accumulation the sum into ``.grad`` computed with it. The
product a second micro-step accumulates into ``.grad`` is cut from its accumulation and
put back among the backward's nodes, so both micro-steps' backward runs hold the same
nodes."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph import nn, optim
from dualgraph.backend import partition


def _model():
    dg.manual_seed(0)
    # Three weight shapes and three bias shapes, above the sizes generated code prints as
    # literals, so a piece's function is shared only when it is flat.
    return nn.Sequential(nn.Linear(24, 40), nn.Tanh(), nn.Linear(40, 32), nn.Tanh(),
                         nn.Linear(32, 20))


def _step(net, opt, micro: int):
    def step(xs, ts):
        for k in range(micro):
            loss = nn.functional.cross_entropy(net(xs[k]), ts[k]) / micro
            loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss * micro

    return step


def _graph_and_kernel(monkeypatch):
    """Eager and compiled accumulation steps agree; the compiled step's graph and kernel."""
    monkeypatch.setenv("DUALGRAPH_SEGMENT_LINES", "80")
    rng = np.random.default_rng(0)
    xs = dg.tensor(rng.standard_normal((2, 18, 24)).astype(np.float32))
    ts = dg.tensor(rng.integers(0, 20, (2, 18)))
    net_e, net_c = _model(), _model()
    step_e = _step(net_e, optim.Adam(net_e.parameters(), lr=1e-2), 2)
    compiled = dg.compile(_step(net_c, optim.Adam(net_c.parameters(), lr=1e-2), 2),
                          tiered=False)
    for _ in range(3):
        le, lc = step_e(xs, ts), compiled(xs, ts)
        dg.testing.assert_close(lc.numpy(), le.numpy(), rtol=1e-5, atol=1e-6)
    for pe, pc in zip(net_e.parameters(), net_c.parameters()):
        dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-4, atol=1e-6)
    assert compiled.stats.traces == 1
    (entry,) = compiled.entries()
    return entry.kernel, len(list(net_c.parameters()))


def _full_norms(seg) -> bool:
    return any(partition._full_reduce(n) for n in seg.graph.nodes)


def test_accumulated_clipped_step_shares_per_parameter_pieces(monkeypatch):
    kernel, params = _graph_and_kernel(monkeypatch)
    segs = kernel.plan.segments
    # Each gradient's norm is a flat part of its own, of a few functions for all (a
    # reduction's loop differs by whether it folds lanes; the accumulation may come with).
    norms = [p for p, s in zip(kernel.parts, segs) if s.flat and _full_norms(s)]
    assert len(norms) >= params
    assert len({p.code for p in norms}) <= 3


def test_accumulated_product_goes_back_among_the_backward(monkeypatch):
    import dualgraph.backend.numba as backend

    graphs: list = []
    real = backend.build

    def keep(graph, *args, **kwargs):
        graphs.append(graph)
        return real(graph, *args, **kwargs)

    monkeypatch.setattr(backend, "build", keep)
    _graph_and_kernel(monkeypatch)
    (graph,) = graphs

    def anchored(g):
        return [n for n in g.nodes if partition._anchor(n) is not None]

    late = anchored(graph)
    assert late, "the second micro-step's weight gradient is fused with its accumulation"
    split, weight = partition.split_epilogues(graph, {})
    assert len(anchored(split)) < len(late)
    assert len(split.nodes) == len(graph.nodes) + len(late) - len(anchored(split))
    # Each moved product sits before the nodes traced after it, and every node still
    # follows its inputs.
    where = {id(n): k for k, n in enumerate(split.nodes)}
    for k, n in enumerate(split.nodes):
        for i in n.inputs:
            if isinstance(i, dg.ir.graph.Node) and id(i) in where:
                assert where[id(i)] < k
    # Unchanged, the same object, when nothing moves.
    again, _ = partition.split_epilogues(split, weight)
    assert again is split
