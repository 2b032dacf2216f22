"""The Graph IR: the printer, verify(), structural equality and hashing."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ir.graph import Graph, GraphError, Node

F32 = np.dtype(np.float32)


def _prog(x, y):
    return (x * y + 2.0).sum(axis=1)


def test_printer_is_jaxpr_like_with_literals():
    g = dg.trace(_prog, dg.ones(2, 3), dg.ones(3))
    assert str(g) == textwrap.dedent("""\
        graph(%0:f32[2,3], %1:f32[3]):
          %2:f32[2,3] = mul %0, %1
          %3:f32[2,3] = add %2, 2.0
          %4:f32[2] = sum[axis=(1,), keepdims=False] %3
          return %4""")


def test_printer_constants_dtypes_and_int_literals():
    c = np.array([1.0, 2.0])
    g = dg.trace(lambda k, x: (k * 3, x + c), dg.tensor([1, 2]), dg.ones(2, dtype=dg.float64))
    assert str(g) == textwrap.dedent("""\
        graph(%0:i64[2], %1:f64[2]):
          %2:i64[2] = mul %0, 3
          %3:f64[2] = const [1., 2.]
          %4:f64[2] = add %1, %3
          return %2, %4""")
    assert repr(g) == "<Graph 2 inputs, 3 nodes, 2 outputs>"


def test_printer_indents_fused_bodies():
    g = dg.passes.fuse(dg.trace(lambda x: (x * 2).exp(), dg.ones(3)))
    assert str(g) == textwrap.dedent("""\
        graph(%0:f32[3]):
          %1:f32[3] = fused[kind='elementwise'] %0
            graph(%0:f32[3]):
              %1:f32[3] = mul %0, 2
              %2:f32[3] = exp %1
              return %2
          return %1""")


def test_nodes_carry_op_inputs_shape_dtype():
    g = dg.trace(_prog, dg.ones(2, 3), dg.ones(3))
    mul = g.nodes[0]
    assert (mul.op, mul.shape, mul.dtype) == ("mul", (2, 3), F32)
    assert mul.inputs == (g.inputs[0], g.inputs[1])
    assert g.nodes[1].inputs[1] == 2.0 and isinstance(g.nodes[1].inputs[1], float)
    assert mul.type_str == "f32[2,3]"


# ------------------------------------------------------------------------------ verify


def _node(op, inputs, shape, dtype=F32, **attrs):
    return Node(op, tuple(inputs), attrs, tuple(shape), np.dtype(dtype))


def _inputs():
    return _node("input", (), (2, 3)), _node("input", (), (3,))


def test_verify_accepts_traced_and_hand_built_graphs():
    g = dg.trace(_prog, dg.ones(2, 3), dg.ones(3))
    assert g.verify() is g
    x, y = _inputs()
    m = _node("mul", (x, y), (2, 3))
    Graph([x, y], [m], [m]).verify()


def test_verify_rejects_use_before_definition():
    x, y = _inputs()
    m = _node("mul", (x, y), (2, 3))
    e = _node("exp", (m,), (2, 3))
    with pytest.raises(GraphError, match=r"node 0 \(exp\) uses a value before it is defined"):
        Graph([x, y], [e, m], [e]).verify()


def test_verify_rejects_a_missing_input():
    x, y = _inputs()
    m = _node("mul", (x, y), (2, 3))
    with pytest.raises(GraphError, match="before it is defined"):
        Graph([x], [m], [m]).verify()


def test_verify_rejects_wrong_shape_and_dtype():
    x, y = _inputs()
    bad_shape = _node("mul", (x, y), (3, 2))
    with pytest.raises(GraphError, match=r"node 0 \(mul\) says f32\[3,2\] but its op gives "
                                         r"f32\[2,3\]"):
        Graph([x, y], [bad_shape], [bad_shape]).verify()
    bad_dtype = _node("mul", (x, y), (2, 3), np.float64)
    with pytest.raises(GraphError, match=r"says f64\[2,3\] but its op gives f32\[2,3\]"):
        Graph([x, y], [bad_dtype], [bad_dtype]).verify()


def test_verify_rejects_ill_typed_inputs():
    x = _node("input", (), (2, 3))
    z = _node("input", (), (4,))
    bad = _node("add", (x, z), (2, 3))
    with pytest.raises(GraphError, match=r"node 0 \(add\) is ill-typed.*\(2, 3\).*\(4,\)"):
        Graph([x, z], [bad], [bad]).verify()


def test_verify_rejects_duplicates_unknown_ops_and_undefined_outputs():
    x, y = _inputs()
    m = _node("mul", (x, y), (2, 3))
    with pytest.raises(GraphError, match="defined twice"):
        Graph([x, y], [m, m], [m]).verify()
    with pytest.raises(GraphError, match="appears twice"):
        Graph([x, x], [], [x]).verify()
    with pytest.raises(GraphError, match="unknown op 'frobnicate'"):
        Graph([x], [_node("frobnicate", (x,), (2, 3))], [x]).verify()
    with pytest.raises(GraphError, match="output .* is not defined"):
        Graph([x, y], [], [m]).verify()
    with pytest.raises(GraphError, match="non-node input"):
        Graph([x], [_node("mul", (x, "2"), (2, 3))], [x]).verify()


def test_verify_checks_constants_and_fused_bodies():
    c = Node("const", (), {"value": np.zeros(3)}, (3,), np.dtype(np.float32))
    with pytest.raises(GraphError, match="const node 0 does not match its type"):
        Graph([], [c], [c]).verify()
    g = dg.passes.fuse(dg.trace(lambda x: (x * 2).exp(), dg.ones(3)))
    f = g.nodes[0]
    lying = Node("fused", f.inputs, f.attrs, (4,), f.dtype)
    with pytest.raises(GraphError, match="does not match its body's output"):
        Graph(g.inputs, [lying], [lying]).verify()
    two = Node("fused", f.inputs * 2, f.attrs, f.shape, f.dtype)
    with pytest.raises(GraphError, match="2 inputs for a body of 1"):
        Graph(g.inputs, [two], [two]).verify()


def test_verify_names_the_pass():
    x, y = _inputs()
    bad = _node("mul", (x, y), (3, 2))
    with pytest.raises(GraphError, match="after pass 'cse'"):
        Graph([x, y], [bad], [bad]).verify("cse")


# ------------------------------------------------------------------ equality and hash


def test_equal_graphs_from_two_traces():
    g1 = dg.trace(_prog, dg.ones(2, 3), dg.ones(3))
    g2 = dg.trace(_prog, dg.randn(2, 3), dg.randn(3))
    g3 = dg.trace(lambda a, b: (a * b + 2.0).sum(axis=1), dg.ones(2, 3), dg.ones(3))
    assert g1 is not g2 and g1.nodes[0] is not g2.nodes[0]
    assert g1 == g2 == g3
    assert hash(g1) == hash(g2) == hash(g3)
    assert len({g1, g2, g3}) == 1


@pytest.mark.parametrize("other", [
    lambda: dg.trace(_prog, dg.ones(4, 3), dg.ones(3)),  # shape
    lambda: dg.trace(_prog, dg.ones(2, 3, dtype=dg.float64), dg.ones(3)),  # dtype
    lambda: dg.trace(lambda x, y: (x * y + 3.0).sum(axis=1), dg.ones(2, 3), dg.ones(3)),
    lambda: dg.trace(lambda x, y: (x * y + 2).sum(axis=1), dg.ones(2, 3), dg.ones(3)),
    lambda: dg.trace(lambda x, y: (x + y + 2.0).sum(axis=1), dg.ones(2, 3), dg.ones(3)),
    lambda: dg.trace(lambda x, y: (x * y + 2.0).sum(axis=0), dg.ones(2, 3), dg.ones(3)),
    lambda: dg.trace(lambda x, y: (y * x + 2.0).sum(axis=1), dg.ones(2, 3), dg.ones(3)),
    lambda: dg.trace(lambda x, y: (x * y + 2.0).mean(axis=1), dg.ones(2, 3), dg.ones(3)),
], ids=["shape", "dtype", "literal", "literal_type", "op", "attr", "operand_order", "reduce"])
def test_different_graphs_differ(other):
    g = dg.trace(_prog, dg.ones(2, 3), dg.ones(3))
    h = other()
    assert g != h
    assert hash(g) != hash(h)


def test_constants_compare_by_value():
    def with_const(value):
        c = np.array(value)
        return dg.trace(lambda x: x + c, dg.ones(2, dtype=dg.float64))

    assert with_const([1.0, 2.0]) == with_const([1.0, 2.0])
    assert with_const([1.0, 2.0]) != with_const([1.0, 3.0])


def test_fused_graphs_compare_by_body():
    g1 = dg.passes.optimize(dg.trace(lambda x: (x * 2).exp(), dg.ones(3)))
    g2 = dg.passes.optimize(dg.trace(lambda x: (x * 2).exp(), dg.ones(3)))
    g3 = dg.passes.optimize(dg.trace(lambda x: (x * 2).tanh(), dg.ones(3)))
    assert g1 == g2 and hash(g1) == hash(g2)
    assert g1 != g3
    assert g1 != "graph" and g1 != dg.trace(lambda x: (x * 2).exp(), dg.ones(3))
