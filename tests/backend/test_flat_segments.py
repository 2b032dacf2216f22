"""Parts of a split kernel that compute elementwise over one shape (an optimizer's update
of one parameter) take their arrays flat: pieces of any shape and rank print the same
source and share one function, and a strided array is still written in place."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import partition as P
from dualgraph.backend.numba import build
from dualgraph.ir.graph import Graph, Node
from dualgraph.ir.interpret import interpret

SHAPES = [(5, 7), (7,), (3, 4, 2), (2, 9)]


def _input(shape, dtype=np.float64):
    return Node("input", (), {}, shape, np.dtype(dtype))


def _node(op, inputs, out_shape, dtype=np.float64, **attrs):
    return Node(op, tuple(inputs), attrs, out_shape, np.dtype(dtype))


def _updates():
    """``m += g; p -= m`` for parameters of several shapes and ranks, each written in
    place (each node an output, as an optimizer's are once fused); the gradient of the
    last reaches the update through a reshape."""
    inputs, nodes, outputs, write_to = [], [], [], {}
    for k, shape in enumerate(SHAPES):
        p, m = _input(shape), _input(shape)
        g = _input((9, 2)) if k == len(SHAPES) - 1 else _input(shape)
        inputs += [p, m, g]
        gv = _node("reshape", [g], shape, shape=shape) if g.shape != shape else g
        m2 = _node("add", [m, gv], shape)
        p2 = _node("sub", [p, m2], shape)
        nodes += ([gv] if gv is not g else []) + [m2, p2]
        write_to[len(outputs)] = inputs.index(m)
        write_to[len(outputs) + 1] = inputs.index(p)
        outputs += [m2, p2]
    return Graph(inputs, nodes, outputs), write_to


def _arrays(graph):
    rng = np.random.default_rng(1)
    return [rng.standard_normal(x.shape) for x in graph.inputs]


def test_flatten_makes_every_array_of_the_shape_flat_and_keeps_scalars():
    a, s, g = _input((3, 4)), _input(()), _input((12,))
    r = _node("reshape", [g], (3, 4), shape=(3, 4))
    y = _node("mul", [_node("add", [a, r], (3, 4)), s], (3, 4))
    seg = P.Segment(Graph([a, s, g], [r, y.inputs[0], y], [y]), {},
                    [("in", 0), ("in", 1), ("in", 2)], [("out", 0)])
    flat = P.flatten(seg)
    assert (flat.flat_in, flat.flat_out) == ((0, 2), (0,))
    assert [x.shape for x in flat.graph.inputs] == [(12,), (), (12,)]
    assert [n.op for n in flat.graph.nodes] == ["add", "mul"]
    arrays = [np.arange(12.0).reshape(3, 4), np.array(0.5), np.ones(12)]
    (want,) = interpret(seg.graph, *arrays)
    (got,) = interpret(flat.graph, arrays[0].reshape(-1), arrays[1], arrays[2])
    dg.testing.assert_close(got, want.reshape(-1), rtol=0, atol=0)


def test_flatten_keeps_a_segment_with_a_transpose_or_a_broadcast():
    a, b = _input((3, 4)), _input((4,))
    t = _node("transpose", [a], (4, 3), axes=(1, 0))
    y = _node("mul", [t, t], (4, 3))
    seg = P.Segment(Graph([a], [t, y], [y]), {}, [("in", 0)], [("out", 0)])
    assert P.flatten(seg) is seg
    z = _node("add", [a, b], (3, 4))
    seg = P.Segment(Graph([a, b], [z], [z]), {}, [("in", 0), ("in", 1)], [("out", 0)])
    assert P.flatten(seg) is seg


def test_updates_of_every_shape_share_one_flat_function_and_equal_the_interpreter():
    graph, write_to = _updates()
    arrays = _arrays(graph)
    want = interpret(graph, *[a.copy() for a in arrays])
    k = build(graph, write_to=write_to, segment_lines=2)
    assert len(k.parts) == len(SHAPES)
    assert all(s.flat for s in k.plan.segments)
    assert all(len(s.graph.inputs[1].shape) == 1 for s in k.plan.segments)
    assert len({id(p.fn) for p in k.parts}) == 1
    # One compiled function for all parameters: the same argument types for every part.
    sig = k.signature(arrays)
    assert len(set(sig)) == 1

    # A strided parameter (Fortran-ordered) is updated in place through a flat copy, and
    # the contiguous ones through views, on the same call. Read-only gradients (as
    # cotangents reach a kernel) keep their flag in the flat views' types, so the
    # function compiled for the kernel's signature is the one every call uses.
    for fortran in (False, True):
        ins = k.prepare([a.copy() for a in arrays])
        for g in ins[2::3]:
            g.setflags(write=False)
        if fortran:
            ins[0] = np.asfortranarray(ins[0])
            assert not ins[0].flags.c_contiguous
        else:
            k.compile(ins, prepared=True)
        held = ins[0]
        k.run(ins, k.new_outputs())
        assert ins[0] is held
        for o, j in write_to.items():
            dg.testing.assert_close(ins[j], want[o], rtol=1e-12, atol=0, check_dtype=False)
    assert len(k.parts[0].fn.overloads) == 1
