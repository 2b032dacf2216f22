"""Memory planning in generated kernels: values are computed
straight into the output buffers and parameter updates straight into the parameters'
arrays, when that is safe; otherwise the kernel keeps its own array and copies at the end.

Every loop the generated code does not contain is Numba compile time saved, and every
copy it does not make is runtime saved, but a write into an input that something still
reads later would be a silently wrong number: the unsafe cases are checked here by value.
"""

from __future__ import annotations

import re

import numpy as np

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.backend.numba.codegen import lower
from dualgraph.ir.graph import Graph, Node
from dualgraph.optim import SGD
from dualgraph.passes import optimize


def _input(shape, dtype=np.float64):
    return Node("input", (), {}, shape, np.dtype(dtype))


def _node(op, inputs, out_shape, dtype=np.float64, **attrs):
    return Node(op, tuple(inputs), attrs, out_shape, np.dtype(dtype))


def test_sgd_step_updates_parameters_in_place_without_copy_loops():
    dg.manual_seed(0)
    # Big enough that every product is a BLAS call, not a loop.
    net = dg.nn.Sequential(dg.nn.Linear(64, 96), dg.nn.ReLU(), dg.nn.Linear(96, 80))
    opt = SGD(net.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (net(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    x = dg.tensor(np.random.default_rng(0).standard_normal((48, 64)).astype(np.float32))
    compiled = dg.compile(step)
    compiled(x)
    (entry,) = compiled.entries()
    src = entry.kernel.source
    # Each parameter is written by its update loop (``a{j}[...] = s``), and nothing is
    # copied into the parameters after the fact.
    copies = [line for line in src.splitlines() if line.strip().startswith("a")
              and "= v" in line]
    assert not copies, copies
    # The gradients BLAS computes land in their output buffers directly.
    lines = [line.strip() for line in src.splitlines()]
    assert any(line.startswith("dgb.gemm_call(") for line in lines)
    assert any(re.fullmatch(r"v\d+ = o\d+", line) for line in lines), src


def test_update_whose_input_is_read_later_is_not_written_in_place():
    # new_a = a - b is an update of input 0, but a * 2 (a later node) still reads the old
    # a: writing the update into a's array first would make it (a - b) * 2.
    a, b = _input((3, 4)), _input((3, 4))
    new_a = _node("sub", (a, b), (3, 4))
    later = _node("mul", (a, 2.0), (3, 4))
    graph = Graph([a, b], [new_a, later], [new_a, later])
    src = lower(graph, write_to={0: 0}).source
    assert "a0[i0, i1] = s" not in src.split("# outputs")[0]
    kernel = build(graph, use_cache=False, write_to={0: 0})
    av = np.arange(12.0).reshape(3, 4)
    bv = np.ones((3, 4))
    (doubled,) = kernel(av, bv)
    np.testing.assert_array_equal(doubled, np.arange(12.0).reshape(3, 4) * 2)
    np.testing.assert_array_equal(av, np.arange(12.0).reshape(3, 4) - 1)


def test_update_reading_a_transposed_view_of_its_input_is_not_in_place():
    # new_a = a - a.T reads other elements of a than the one it writes.
    a = _input((3, 3))
    at = _node("transpose", (a,), (3, 3), axes=(1, 0))
    new_a = _node("sub", (a, at), (3, 3))
    graph = Graph([a], [at, new_a], [new_a])
    kernel = build(graph, use_cache=False, write_to={0: 0})
    av = np.arange(9.0).reshape(3, 3)
    kernel(av)
    ref = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(av, ref - ref.T)


def test_update_whose_input_is_also_an_output_is_not_in_place():
    a, b = _input((4,)), _input((4,))
    new_a = _node("add", (a, b), (4,))
    graph = Graph([a, b], [new_a], [new_a, a])
    kernel = build(graph, use_cache=False, write_to={0: 0})
    av, bv = np.arange(4.0), np.full(4, 10.0)
    (old,) = kernel(av, bv)
    np.testing.assert_array_equal(old, np.arange(4.0))
    np.testing.assert_array_equal(av, np.arange(4.0) + 10)


def test_reductions_store_in_the_result_dtype_without_astype():
    def f(x):
        return x.sum(1), x.mean(0, keepdims=True), x.max(), x.sum(0)

    x = np.random.default_rng(1).standard_normal((5, 70)).astype(np.float32)
    compiled = dg.compile(f)
    out = compiled(dg.tensor(x))
    (entry,) = compiled.entries()
    assert ".astype(" not in entry.kernel.source
    ref = f(dg.tensor(x))
    for o, r in zip(out, ref):
        dg.testing.assert_close(o.numpy(), r.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                                check_dtype=False)
        assert o.shape == r.shape and o.dtype == r.dtype


def test_keepdims_reduction_then_reshape_is_one_reduction():
    x = _input((4, 6))
    red = _node("sum", (x,), (1, 6), axis=(0,), keepdims=True)
    flat = _node("reshape", (red,), (6,), shape=(6,))
    graph = optimize(Graph([x], [red, flat], [flat]))
    ops = [n.op for n in graph.nodes]
    assert "reshape" not in ops and graph.outputs[0].attrs["keepdims"] is False
