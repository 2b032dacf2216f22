"""Values written in place, as the partition places them.

A value written in place into an input (a parameter's update) that later parts read
(the next forward) is read from that input, written by then, when no part after the
writer reads the input's old value: the writing part's outputs are its in-place writes
only, as every other parameter's update. A value written in place that nothing reads (a
batch norm's running average) is computed at the end, so that the passes it sat among
are the same run of nodes and are cut alike.
"""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import partition as P
from dualgraph.ir.graph import Graph, Node

from .._support.graphs import split_and_interpreted


def _input(shape):
    return Node("input", (), {}, shape, np.dtype(np.float64))


def _node(op, inputs, shape, **attrs):
    return Node(op, tuple(inputs), attrs, shape, np.dtype(np.float64))


def _pass(x, w, nodes, c, stat):
    """``cos(2 sin(tanh(x * w) + 0.5))`` and on over ``(4, c)``: one pass of a small
    network, with no run inside it that repeats; ``stat(value)`` after its third and
    seventh nodes adds the nodes of a statistic (a batch norm's)."""
    steps = [("mul", w), ("tanh",), ("add", 0.5), ("sin",), ("mul", 2.0), ("cos",),
             ("mul", w), ("sin",), ("add", -0.25), ("tanh",)]
    for k, (op, *arg) in enumerate(steps):
        x = _node(op, [x, *arg], (4, c))
        nodes.append(x)
        if k in (2, 6):
            nodes.extend(stat(x))
    return x


def _two_passes(c: int = 5):
    """Two passes of one network; between them its weight is updated in place (read by
    the second pass). Each pass takes two statistics, and a running total of the four is
    written in place (read by nothing): its adds sit in the second pass, where fusion
    puts a batch norm's running averages (their chain ends there)."""
    a, b, w, r = _input((4, c)), _input((4, c)), _input((c,)), _input((c,))
    nodes: list[Node] = []
    first: list[Node] = []

    def stat(x):
        first.append(_node("sum", [x], (c,), axis=(0,), keepdims=False))
        return [first[-1]]

    y1 = _pass(a, w, nodes, c, stat)
    s = _node("sum", [y1], (c,), axis=(0,), keepdims=False)
    new_w = _node("sub", [w, s], (c,))
    nodes += [s, new_w]
    total = [r]

    def fold(x):
        mine = _node("sum", [x], (c,), axis=(0,), keepdims=False)
        one = _node("add", [total[-1], first[len(total) - 1]], (c,))
        total.append(_node("add", [one, mine], (c,)))
        return [mine, one, total[-1]]

    y2 = _pass(b, new_w, nodes, c, fold)
    g = Graph([a, b, w, r], nodes, [y2, new_w, total[-1]])
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((4, c)) for _ in range(2)] + [
        rng.standard_normal(c) * 0.5 for _ in range(2)]
    return g, {1: 2, 2: 3}, arrays


def test_an_unread_in_place_write_moves_to_the_end_with_what_only_it_reads():
    g, write_to, _ = _two_passes()
    units = [n for n in g.nodes if not P._free(n)]
    kept, sunk = P._sink(units, g, write_to)
    # The statistics and the total's adds: read by nothing else.
    chain = [u for u in units if u.shape == (5,) and u.op in ("sum", "add")
             and u is not g.outputs[1].inputs[1]]
    assert len(chain) == 4 + 4 and units[-1] not in chain
    assert sunk == chain
    # Every other unit keeps its place, the weight's update (read later) too.
    assert kept == [u for u in units if u not in chain]


def test_the_second_pass_reads_the_updated_weight_from_its_input():
    g, write_to, _ = _two_passes()
    plan = P.partition(g, write_to, {id(n): 3 for n in g.nodes}, 16)
    assert plan is not None
    writer = next(s for s in plan.segments if ("in", 2) in s.dests)
    # The update hands on no copy of the new weight: it is written in place only.
    assert ("val", id(g.outputs[1])) not in writer.dests
    later = plan.segments[plan.segments.index(writer) + 1:]
    assert any(("in", 2) in s.sources for s in later)
    assert not any(kind == "val" and v == id(g.outputs[1])
                   for s in later for kind, v in s.sources)


def test_the_passes_are_cut_alike_with_the_write_between_them():
    g, write_to, _ = _two_passes()
    plan = P.partition(g, write_to, {id(n): 3 for n in g.nodes}, 16)
    keys = [s.graph.key() for s in plan.segments]
    # Each pass's parts are the other's.
    assert len(keys) - len(set(keys)) >= 1


def test_a_split_kernel_with_written_reads_equals_the_interpreter():
    k, want, ins, outs = split_and_interpreted(*_two_passes(), segment_lines=4)
    assert len(k.parts) > 2
    for got, w in zip([outs[0], ins[2], ins[3]], want):
        dg.testing.assert_close(got, w, rtol=1e-12, atol=0, check_dtype=False)
