"""A split kernel's parts run from one generated caller: the same values as the kernel
in one function, call after call, whether an input is a new array, the same array with
new values, or a strided one; parts reading only the kernel's own arrays call their
compiled entries."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.ir.graph import Graph, Node

SHAPE = (5, 7)


def _node(op, inputs, **attrs):
    return Node(op, tuple(inputs), attrs, SHAPE, np.dtype(np.float64))


def _chain():
    """``x * y`` then steps on that work value alone (flat parts of the kernel's own
    arrays), then a step reading ``x`` again, ``y`` updated in place."""
    x = Node("input", (), {}, SHAPE, np.dtype(np.float64))
    y = Node("input", (), {}, SHAPE, np.dtype(np.float64))
    a = _node("mul", [x, y])
    b = _node("add", [a, a])
    c = _node("exp", [_node("neg", [b])])
    d = _node("mul", [c, b])
    e = _node("sub", [d, x])
    f = _node("add", [e, y])
    nodes = [a, b, c.inputs[0], c, d, e, f]
    return Graph([x, y], nodes, [e, f]), {1: 1}


def test_split_kernel_equals_one_function_over_calls_and_input_changes():
    graph, write_to = _chain()
    split = build(graph, write_to=write_to, segment_lines=1)
    whole = build(graph, write_to=write_to, segment_lines=0)
    assert len(split.parts) > 2 and not whole.parts
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE)
    y = rng.standard_normal(SHAPE)
    ys = [y, y.copy()]  # one per kernel: each writes its own
    split.compile([x, ys[0]])
    whole.compile([x, ys[1]])
    assert split.entry_parts >= 1
    # The same input objects with new values, new objects, then a strided input (its
    # flat view would be a copy: the call copies it in and out), then views again.
    for step in range(5):
        if step == 1:
            x *= 0.5
        elif step == 2:
            x = rng.standard_normal(SHAPE)
        elif step == 3:
            x = np.asfortranarray(x)
            ys = [np.asfortranarray(y) for y in ys]
        elif step == 4:
            x, ys = np.ascontiguousarray(x), [np.ascontiguousarray(y) for y in ys]
        outs = []
        for k, y in zip((split, whole), ys):
            o = k.new_outputs()
            k.run([x, y], o)
            outs.append(o[0])
        dg.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
        dg.testing.assert_close(ys[0], ys[1], rtol=0, atol=0)
    assert len(split._pool) == 1  # one work set, given back after every call
