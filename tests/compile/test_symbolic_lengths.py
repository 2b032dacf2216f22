"""Symbolic lengths (`compile.dims`): which axes of a traced graph may take any length.

Traces only: nothing here compiles a kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.compile.capture import trace_call
from dualgraph.compile.dims import Dim, changed_axes, same_program, symbolic_shapes
from dualgraph.ir.graph import Graph

F32, I64 = np.dtype("float32"), np.dtype("int64")
TABLE = dg.randn(10, 4)


def _shapes(fn, *makers, lengths=(5, 7), seeds=None):
    """The traces of ``fn`` at two lengths (``makers`` build the arguments from a length)
    and the analysis of the second with the first as its pair."""
    first, second = (dg.trace(fn, *(m(n) for m in makers)) for n in lengths)
    if seeds is None:
        seeds = {j: tuple(k for k, (a, b) in enumerate(zip(x.shape, y.shape)) if a != b)
                 for j, (x, y) in enumerate(zip(first.inputs, second.inputs))
                 if x.shape != y.shape}
    return first, second, symbolic_shapes(second, seeds, first)


def _rows(n):
    return dg.randn(n, 4)


def _index(n):
    return dg.tensor(np.arange(n) % 10)


def test_changed_axes_only_when_lengths_alone_differ():
    key = ((5, 4), F32, False)
    assert changed_axes([key, ("c", 1)], [((7, 4), F32, False), ("c", 1)]) == {0: (0,)}
    assert changed_axes([((5, 4), F32, False)], [((7, 3), F32, False)]) == {0: (0, 1)}
    assert changed_axes([key], [key]) is None
    assert changed_axes([key], [((5, 4, 1), F32, False)]) is None  # rank
    assert changed_axes([key], [((7, 4), I64, False)]) is None  # dtype too
    assert changed_axes([key], [((7, 4), F32, True)]) is None  # requires_grad too
    assert changed_axes([key, (int, 1)], [((7, 4), F32, False), (int, 2)]) is None
    assert changed_axes([key], [key, key]) is None


def test_allowed_ops_carry_the_symbol_to_the_outputs():
    w = dg.randn(4, 3)

    def f(x, idx):
        e = F.embedding(idx, TABLE)  # rows follow the index
        s = TABLE.index_select(0, idx).sum(1)  # a reduction over another axis
        y = (x * 2 + 1).relu() @ w  # rows of a matmul
        z = dg.cat([x, x.exp()], 1).T  # along another axis, then transposed
        return y, e.mean(0), s, z, x.sum(0) + e.sum(0), (x.unsqueeze(0) @ x.T.unsqueeze(0))

    first, second, shapes = _shapes(f, _rows, _index)
    assert shapes.refused is None
    s0, s1 = Dim(0, 0), Dim(1, 0)
    got = [shapes.dims[id(o)] for o in second.outputs]
    assert got == [(s0, None), (None,), (s1,), (None, s0), (None,), (None, s0, s0)]
    assert same_program(first, second, shapes) is None


def test_a_length_used_as_a_number_keys_by_value():
    def by_hand(x):
        return x.sum(0) / x.shape[0]  # a literal holding the length

    first, second, shapes = _shapes(by_hand, _rows)
    assert shapes.refused is None
    assert "reads another operand or literal" in same_program(first, second, shapes)

    def padded(x):
        return dg.cat([x, dg.zeros(1, 4)], 0).sum(0)  # the symbol meets a fixed length

    assert "concatenates along a symbolic length" in _shapes(padded, _rows)[2].refused

    def loop(x):
        return sum(x[i] for i in range(x.shape[0]))  # a graph whose size is the length

    first, second = (dg.trace(loop, _rows(n)) for n in (5, 7))
    assert same_program(first, second, symbolic_shapes(second, {0: (0,)})) is not None


@pytest.mark.parametrize("fn, why", [
    (lambda x: x.reshape(-1), "reshapes a symbolic length together"),
    (lambda x: x.amax(0), "reduces over a symbolic length"),
    (lambda x: x[1:], "indexes or slices a symbolic length"),
    (lambda x: x.T @ dg.ones(5, 2), "contracts a symbolic length against another"),
    (lambda x: x + dg.ones(5, 4), "against a fixed length"),
    (lambda x: x.cumsum(0), "not among the ops"),
])
def test_the_symbol_meeting_a_disallowed_op_refuses(fn, why):
    shapes = symbolic_shapes(dg.trace(fn, _rows(5)), {0: (0,)})
    assert why in shapes.refused


def test_two_symbols_meeting_refuse():
    shapes = symbolic_shapes(dg.trace(lambda a, b: a + b, _rows(5), _rows(5)),
                             {0: (0,), 1: (0,)})
    assert "two symbolic lengths" in shapes.refused


def test_embedding_bag_offsets_arange_carries_the_symbol():
    # The bag sum decomposes into a one-hot built from an arange of the index length,
    # contracted with the gathered rows: both carry the index's symbol.
    offsets = dg.tensor([0, 2])

    def bag(idx):
        return F.embedding_bag(idx, TABLE, offsets, mode="sum")

    first, second, shapes = _shapes(bag, _index)
    assert shapes.refused is None
    assert shapes.dims[id(second.outputs[0])] == (None, None)
    assert any(n.op == "const" and Dim(0, 0) in shapes.dims[id(n)] for n in second.nodes)
    assert same_program(first, second, shapes) is None
    # An arange whose length does not follow the symbol stays a fixed constant.
    first, second, shapes = _shapes(bag, _index, lengths=(5, 5), seeds={0: (0,)})
    assert "contracts a symbolic length against another" in shapes.refused


def _step_graphs(step, make, lengths=(6, 9)):
    graphs = []
    for n in lengths:
        ctx, outputs, _, _ = trace_call(step, make(n))
        inputs = ctx.inputs + [n for _, n in ctx.captured] + [n for n, _ in ctx.runtime]
        graphs.append(Graph(inputs, ctx.nodes, list(outputs)))
    return graphs


def test_a_training_step_scatters_gradients_into_the_fixed_table():
    w = dg.nn.Parameter(dg.randn(10, 4))
    opt = dg.optim.SGD([w], lr=0.1)

    def step(idx, y, mean=False):
        err = (F.embedding(idx, w).sum(1) - y) ** 2
        loss = err.mean() if mean else err.sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    first, second = _step_graphs(step, lambda n: (_index(n), dg.ones(())))
    shapes = symbolic_shapes(second, {0: (0,)}, first)
    assert shapes.refused is None
    puts = [n for n in second.nodes if n.op == "index_put"]
    assert puts and all(shapes.dims[id(n)] == (None, None) for n in puts)
    assert same_program(first, second, shapes) is None
    # The index and the targets are two symbols, which the loss broadcasts together.
    first, second = _step_graphs(step, lambda n: (_index(n), dg.randn(n)))
    assert "two symbolic lengths" in symbolic_shapes(second, {0: (0,), 1: (0,)}, first).refused
    # A mean's gradient spreads 1/n, a literal, over the symbol's length.
    first, second = _step_graphs(lambda i, y: step(i, y, True),
                                 lambda n: (_index(n), dg.ones(())))
    shapes = symbolic_shapes(second, {0: (0,)}, first)
    assert shapes.refused is None
    assert "reads another operand or literal" in same_program(first, second, shapes)


class _StopError(Exception):
    pass


def test_dlrm_step_is_one_program_over_its_index_lengths(monkeypatch):
    # DLRM's step (EmbeddingBag over offsets, forward, backward and SGD in one graph) sees
    # index vectors of other lengths each batch: three symbols, all accepted.
    from tests.programs import written11_programs as W

    graphs = []

    def tracing_compile(fn, **kwargs):
        def call(*args):
            ctx, outputs, _, _ = trace_call(fn, args)
            inputs = ctx.inputs + [n for _, n in ctx.captured] + [n for n, _ in ctx.runtime]
            graphs.append(Graph(inputs, ctx.nodes, list(outputs)))
            if len(graphs) == 2:
                raise _StopError
            return fn(*args)
        return call

    weights, _ = W.SET.golden("dlrm")
    program = W.SET.load("dlrm", dg)
    # The program's `torch` is dualgraph itself: patch its compile for this test only.
    monkeypatch.setattr(program.torch, "compile", tracing_compile)
    with pytest.raises(_StopError):
        program.run(weights=weights, compiled=True)
    first, second = graphs
    seeds = {j: (0,) for j, (a, b) in enumerate(zip(first.inputs, second.inputs))
             if a.shape != b.shape}
    assert len(seeds) == 3 and all(len(first.inputs[j].shape) == 1 for j in seeds)
    shapes = symbolic_shapes(second, seeds, first)
    assert shapes.refused is None
    assert same_program(first, second, shapes) is None
    assert {s for d in shapes.dims.values() for s in d if s is not None} == \
        {Dim(j, 0) for j in seeds}
