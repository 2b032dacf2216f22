"""Large graphs split into several functions: the same answers, identical segments shared.

A split kernel runs its parts in order, passing values between them in work arrays, and
writes in-place outputs where no later part still reads the old value. These tests force
small parts (``segment_lines``) on small graphs, so the splitting is exercised without
the compile time of a large model.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import partition as P
from dualgraph.backend.numba import build, cache
from dualgraph.ir.graph import Graph, Node
from dualgraph.ir.interpret import interpret
from dualgraph.passes import optimize

from .._support.compiled import adam_mlp_step


def _input(shape, dtype=np.float64):
    return Node("input", (), {}, shape, np.dtype(dtype))


def _node(op, inputs, out_shape, dtype=np.float64, **attrs):
    return Node(op, tuple(inputs), attrs, out_shape, np.dtype(dtype))


def _layers(n_layers: int, width: int = 6) -> Graph:
    """x -> tanh(x @ W_i + b_i) for ``n_layers`` identical layers, optimized."""
    rng = np.random.default_rng(0)
    ws = [dg.tensor(rng.standard_normal((width, width)) * 0.3) for _ in range(n_layers)]
    bs = [dg.tensor(rng.standard_normal(width)) for _ in range(n_layers)]

    def f(x, *params):
        for w, b in zip(params[:n_layers], params[n_layers:]):
            x = dg.tanh(x @ w + b).exp().sqrt()
        return x.sum()

    x = dg.tensor(rng.standard_normal((5, width)))
    g = optimize(dg.trace(f, x, *ws, *bs))
    return g, [x.numpy()] + [t.numpy() for t in ws + bs]


def test_a_small_graph_stays_one_function():
    g, arrays = _layers(2)
    k = build(g)
    assert k.parts == [] and k.fn is not None


def test_split_kernel_equals_the_interpreter_and_shares_identical_layers():
    g, arrays = _layers(6)
    whole = build(g, segment_lines=0)
    split = build(g, segment_lines=12)
    assert len(split.parts) > 2
    # Identical layers are identical parts: fewer distinct functions than parts, and a
    # compile finds the repeated ones compiled already.
    distinct = {d for d, _ in split.dispatchers()}
    assert len(distinct) < len(split.parts)
    split.compile(arrays)
    assert split.shared_parts == len(split.parts) - len(distinct)
    (want,) = interpret(g, *arrays)
    dg.testing.assert_close(split(*arrays)[0], want, rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(whole(*arrays)[0], want, rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)


def test_cuts_fall_at_the_same_places_in_repeated_structure():
    g, _ = _layers(8)
    weights = {id(n): 3 for n in g.nodes}
    plan = P.partition(g, {}, weights, 9)
    keys = [s.graph.key() for s in plan.segments]
    # Eight identical layers: most segments repeat one another.
    assert len(set(keys)) <= len(keys) // 2


def test_in_place_write_waits_for_the_last_reader_of_the_old_value():
    # out0 = a * 2 is written into a's array, but later nodes still read the old a.
    a, b = _input((4,)), _input((4,))
    d = _node("mul", [a, 2.0], (4,))
    nodes = [d]
    x = b
    for _ in range(6):
        x = _node("add", [_node("tanh", [_node("mul", [x, 0.5], (4,))], (4,)), a], (4,))
        nodes += [x.inputs[0].inputs[0], x.inputs[0], x]
    g = Graph([a, b], nodes, [d, x, d])
    arrays = [np.arange(4.0), np.linspace(-1, 1, 4)]
    want = interpret(g, *[v.copy() for v in arrays])
    k = build(g, write_to={0: 0}, segment_lines=3)
    assert len(k.parts) > 2
    # The first part computes the doubled value; the write into ``a`` is in a later part.
    assert k.parts[0].lowered.source.count("a0[") >= 1
    ins = k.prepare([v.copy() for v in arrays])
    outs = k.new_outputs()
    k.run(ins, outs)
    dg.testing.assert_close(ins[0], want[0], rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(outs[0], want[1], rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(outs[1], want[2], rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)


def test_outputs_that_are_inputs_views_or_scalars_cross_cuts():
    a = _input((2, 3))
    s = _input(())
    t = _node("transpose", [a], (3, 2), axes=(1, 0))
    y = _node("mul", [t, s], (3, 2))
    nodes = [t, y]
    for _ in range(5):
        y = _node("tanh", [_node("add", [y, t], (3, 2))], (3, 2))
        nodes += [y.inputs[0], y]
    tot = _node("sum", [y], (), axis=None, keepdims=False)
    r = _node("reshape", [y], (6,), shape=(6,))
    nodes += [tot, r]
    g = Graph([a, s], nodes, [tot, r, a, t, y])
    arrays = [np.arange(6.0).reshape(2, 3) / 6, np.array(0.7)]
    want = interpret(g, *arrays)
    k = build(g, segment_lines=2)
    assert len(k.parts) > 2
    got = k(*arrays)
    for w, o in zip(want, got):
        dg.testing.assert_close(o, w, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)


def test_split_training_step_equals_eager(monkeypatch):
    """An Adam step (in-place parameter and state updates) split into small parts."""
    monkeypatch.setenv("DUALGRAPH_SEGMENT_LINES", "30")

    rng = np.random.default_rng(1)
    x = dg.tensor(rng.standard_normal((10, 8)).astype(np.float32))
    t = dg.tensor(rng.integers(0, 3, 10))
    net_e, step_e = adam_mlp_step()
    net_c, step_c = adam_mlp_step()
    compiled = dg.compile(step_c, tiered=False)
    for _ in range(3):
        le, lc = step_e(x, t), compiled(x, t)
        dg.testing.assert_close(lc.numpy(), le.numpy(), rtol=1e-5, atol=0, equal_nan=True,
                                check_dtype=False)
    (entry,) = compiled.entries()
    assert len(entry.kernel.parts) > 1
    for pe, pc in zip(net_e.parameters(), net_c.parameters()):
        dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-4, atol=1e-6, equal_nan=True,
                                check_dtype=False)


def test_split_kernel_runs_from_threads_at_once():
    g, arrays = _layers(6)
    k = build(g, segment_lines=12)
    (want,) = interpret(g, *arrays)
    k.compile(arrays)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: k(*arrays)[0], range(16)))
    for o in got:
        dg.testing.assert_close(o, want, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)


def test_parts_load_from_the_disk_cache_in_a_new_process(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    g, arrays = _layers(4)
    with cache.isolated(str(tmp_path)):
        k = build(g, segment_lines=12)
        sig = k.signature(arrays)
        assert not k.on_disk(sig)
        k.compile(sig=sig)
    with cache.isolated(str(tmp_path)):
        k2 = build(g, segment_lines=12)
        assert k2.on_disk(k2.signature(arrays))
        k2.compile(arrays)
        assert k2.loaded_parts == len({d for d, _ in k2.dispatchers()})


@pytest.mark.parametrize("env, parts", [("0", False), ("8", True)])
def test_segment_lines_setting(monkeypatch, env, parts):
    monkeypatch.setenv("DUALGRAPH_SEGMENT_LINES", env)
    g, arrays = _layers(4)
    assert bool(build(g).parts) is parts


def test_parts_compile_in_parallel_in_helper_processes(tmp_path, monkeypatch):
    from dualgraph.backend.numba import worker

    monkeypatch.setenv("DUALGRAPH_COMPILE_JOBS", "2")
    monkeypatch.setattr(worker, "PARALLEL_MIN_LINES", 0)
    g, arrays = _layers(5)
    with cache.isolated(str(tmp_path)):
        k = build(g, segment_lines=12)
        distinct = len({d for d, _ in k.dispatchers()})
        k.compile(arrays)
        # A helper compiled a share into the disk cache; this process loaded it.
        assert 0 < k.helper_parts < distinct
        assert k.loaded_parts == k.helper_parts
        (want,) = interpret(g, *arrays)
        dg.testing.assert_close(k(*arrays)[0], want, rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)


def _step_graph(monkeypatch, workload: str) -> tuple:
    """The optimized graph (and in-place writes) of a model workload's quick Adam step,
    taken where `dg.compile` hands it to the backend, without compiling it."""
    import dualgraph.backend.numba as backend
    from dualgraph.workloads import model_step

    seen = []

    class TakenError(Exception):
        pass

    def take(graph, parallel=False, use_cache=True, name="kernel", write_to=None, **kw):
        seen.append((graph, dict(write_to or {})))
        raise TakenError

    monkeypatch.setattr(backend, "build", take)
    step, args, _ = model_step(workload, quick=True)
    with pytest.raises(TakenError):
        dg.compile(step, tiered=False)(*args)
    return seen[0]


def test_four_transformer_blocks_cost_little_more_source_than_one(monkeypatch):
    from dualgraph.backend.numba import _line_weights
    from dualgraph.backend.numba.codegen import lower

    distinct_lines, distinct_parts = {}, {}
    for workload in ("transformer", "transformer-4"):
        g, write_to = _step_graph(monkeypatch, workload)
        plan = P.partition(g, write_to, _line_weights(g, lower(g, write_to=write_to)), 150)
        sources = {lower(s.graph, name="part", write_to=s.write_to).source
                   for s in plan.segments}
        distinct_lines[workload] = sum(s.count("\n") for s in sources)
        distinct_parts[workload] = len(sources)
        if workload == "transformer-4":
            # The three repeated blocks share most of their parts with the first.
            assert len(sources) <= 0.6 * len(plan.segments)
    # Four blocks hold four times the nodes, but the repeated blocks, their backward and
    # their parameters' updates are identical parts.
    assert distinct_lines["transformer-4"] < 1.4 * distinct_lines["transformer"]
    # The forward, the backward and the updates each repeat with a period of one block:
    # the parts new to four blocks are the few that straddle a seam between two periods.
    assert distinct_parts["transformer-4"] <= distinct_parts["transformer"] + 4
