"""A view that is a graph output is read by later parts from its output array.

Batch norm's weight and bias gradients are the two rows of one ``(2, C)`` value, and the
step hands each row out as a ``.grad``. The optimizer's update of those parameters, cut
into a part of its own, then reads a whole array (the copied-out gradient), as every other
parameter's update does: one flat function serves them all.
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


def _step(c: int = 5) -> tuple[Graph, dict[int, int], list[np.ndarray]]:
    """Rows of a computed (2, c) value handed out and used to update two parameters in
    place, a third parameter updated from a gradient of its own."""
    a, w, b, q = _input((2, c)), _input((c,)), _input((c,)), _input((c,))
    nodes = []
    x = a
    for _ in range(6):
        x = _node("tanh", [_node("mul", [x, 0.5], (2, c))], (2, c))
        nodes += [x.inputs[0], x]
    g0 = _node("getitem", [x], (c,), index=(0,))
    g1 = _node("getitem", [x], (c,), index=(1,))
    gq = _node("sum", [x], (c,), axis=(0,), keepdims=False)
    nodes += [g0, g1, gq]
    updates = [_node("sub", [p, g], (c,)) for p, g in ((w, g0), (b, g1), (q, gq))]
    nodes += updates
    g = Graph([a, w, b, q], nodes, [g0, g1, *updates])
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, c)), *(rng.standard_normal(c) for _ in range(3))]
    return g, {2: 1, 3: 2, 4: 3}, arrays


def test_updates_reading_output_rows_are_one_flat_function():
    g, write_to, _ = _step()
    plan = P.partition(g, write_to, {id(n): 3 for n in g.nodes}, 6)
    assert plan is not None
    updates = [s for s in plan.segments if any(k == "in" for k, _ in s.dests)]
    assert len(updates) == 3
    # Each reads its gradient as an array of its own, flat: one source for the three.
    assert all(s.flat for s in updates)
    assert len({s.graph.key() for s in updates}) == 1


def test_split_kernel_with_output_rows_equals_the_interpreter():
    k, want, ins, outs = split_and_interpreted(*_step(), segment_lines=2)
    assert len(k.parts) > 3
    got = [outs[0], outs[1], ins[1], ins[2], ins[3]]
    for o, w in zip(got, want):
        dg.testing.assert_close(o, w, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)
