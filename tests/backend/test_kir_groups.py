"""Fused groups, reductions and matmul epilogues as kernel IR: the scalar table builds
expression trees, and a whole lowered kernel (`Lowered.ir`) run by the NumPy executor of
the IR (`kir_exec`) agrees with the graph interpreter, with no generated source involved."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba import codegen, lowerings, printer
from dualgraph.ir.graph import Node
from dualgraph.ir.interpret import interpret

from .kir_exec import run

F4, F8, I4 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)


def _node(op: str, dtype, *inputs) -> Node:
    return Node(op, tuple(inputs), {}, (3,), np.dtype(dtype))


def _input(dtype) -> Node:
    return Node("input", (), {}, (3,), np.dtype(dtype))


# ------------------------------------------------------------------ scalar table
def test_every_scalar_row_builds_an_expression_of_the_node_dtype():
    for op, build in lowerings.SCALAR.items():
        args = [kir.Var(f"x{k}", F4) for k in range(3)]
        e = build(args, F4)
        assert isinstance(e, kir.Expr), op
        printer.expr(e)  # every tree prints


def test_float32_math_prints_the_vectorizable_function():
    x = _input(F4)
    e = lowerings.scalar_expr(_node("exp", F4, x), [kir.Var("x", F4)])
    assert printer.expr(e) == "dgk.exp_f32(x)"
    y = _input(F8)
    e = lowerings.scalar_expr(_node("exp", F8, y), [kir.Var("y", F8)])
    assert printer.expr(e) == "np.exp(y)"


def test_literals_take_the_node_dtype_and_casts_only_where_needed():
    x = _input(F4)
    e = lowerings.scalar_expr(_node("mul", F4, x, 2), [kir.Var("x", F4), 2])
    assert printer.expr(e) == "(x * np.float32(2.0))"  # no cast: Numba gives float32
    i = _input(I4)
    e = lowerings.scalar_expr(_node("add", I4, i, 1), [kir.Var("i", I4), 1])
    assert e == kir.Cast(kir.Bin("+", kir.Var("i", I4), kir.Const(1, I4)), I4)
    assert printer.expr(e) == "np.int32(i + np.int32(1))"
    # a comparison's literal takes its operands' dtype, not bool's
    c = Node("lt", (i, 2.5), {}, (3,), np.dtype(np.bool_))
    e = lowerings.scalar_expr(c, [kir.Var("i", I4), 2.5])
    assert e.op == "<" and e.b.value == 2.5 and e.b.dtype.kind == "f"
    # an identity casts only where the dtype changes
    a = Node("astype", (x,), {}, (3,), F8)
    assert lowerings.scalar_expr(a, [kir.Var("x", F4)]) == kir.Cast(kir.Var("x", F4), F8)
    assert lowerings.scalar_expr(_node("astype", F4, x), [kir.Var("x", F4)]) == kir.Var(
        "x", F4)
    # a power may widen: always cast
    p = lowerings.scalar_expr(_node("pow", F4, x, 2), [kir.Var("x", F4), 2])
    assert isinstance(p, kir.Cast)


def test_nan_propagating_select_matches_numpy():
    x = _input(F8)
    e = lowerings.scalar_expr(_node("maximum", F8, x, x), [kir.Var("a", F8), kir.Var("b", F8)])
    from .kir_exec import value
    assert np.isnan(value(e, {}, {"a": np.nan, "b": 1.0}))
    assert value(e, {}, {"a": 0.0, "b": 1.0}) == 1.0


# ----------------------------------------------------------- whole kernels as IR
def _graph(fn, *arrays, grad: bool = False):
    ts = [dg.tensor(a, requires_grad=grad) for a in arrays]
    e = dg.explain(fn, *ts, wrt="auto" if grad else None)
    return e.value_and_grad if grad else e.optimized


def _run_ir(graph, arrays, parallel=False):
    lowered = codegen.lower(graph, parallel=parallel)
    assert lowered.ir, "the kernel's IR is kept"
    env = {f"a{k}": np.array(a, n.dtype).reshape(codegen.ishape(n)).copy()
           for k, (a, n) in enumerate(zip(arrays, graph.inputs))}
    env |= {f"c{k}": c for k, c in enumerate(lowered.consts)}
    env |= {f"o{k}": np.zeros(codegen.ishape(o), o.dtype)
            for k, o in enumerate(graph.outputs)}
    got = run(lowered.ir, env)
    want = interpret(graph, *arrays)
    for k, w in enumerate(want):
        dg.testing.assert_close(got[f"o{k}"].reshape(np.shape(w)), w, rtol=1e-5, atol=1e-5,
                                equal_nan=True, check_dtype=False)
    return lowered


def _rng(*shape, dtype=np.float32):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def test_fused_elementwise_group_runs_as_ir():
    x, y = _rng(4, 5), _rng(5)
    lowered = _run_ir(_graph(lambda a, b: dg.tanh(a * 0.5 + b) * dg.sigmoid(a), x, y),
                      [x, y])
    assert "dgk.tanh_f32(" in lowered.source


def test_keepdims_mean_and_value_and_grad_run_as_ir():
    x = _rng(6, 7)
    graph = _graph(lambda t: ((t - t.mean(1, keepdim=True)) ** 2).sum(), x, grad=True)
    _run_ir(graph, [x])


def test_float32_sum_with_fold_blocks_runs_as_ir():
    x = _rng(300)
    lowered = _run_ir(_graph(lambda t: (t * 2.0).sum(), x), [x])
    assert "dgk.fold_lanes(" in lowered.source
    assert any(isinstance(s, kir.LibCall) and s.fn == "fold_lanes"
               for s in kir.walk(lowered.ir))


@pytest.mark.parametrize("op", ["max", "min"])
def test_lane_max_with_nan_runs_as_ir(op):
    x = _rng(2, 100)
    x[1, 37] = np.nan
    fn = getattr(dg, f"a{op}")
    lowered = _run_ir(_graph(lambda t: fn(t * 2.0, 1), x), [x])
    assert "lanes" in lowered.source


def test_axis0_mean_runs_as_ir():
    x = _rng(8, 33)
    _run_ir(_graph(lambda t: (t.mean(0, keepdim=True) * 2).exp(), x), [x])


def test_parallel_chunked_reduction_runs_as_ir(monkeypatch):
    monkeypatch.setattr(codegen, "PARALLEL_MIN_SIZE", 512)
    x = _rng(1000, dtype=np.float64)
    lowered = _run_ir(_graph(lambda t: (t.exp() * 2.0).sum(), x), [x], parallel=True)
    assert "numba.prange(" in lowered.source
    assert any(isinstance(s, kir.Loop) and s.parallel for s in lowered.ir)


def test_rows_reduced_on_several_threads_have_their_own_lanes(monkeypatch):
    monkeypatch.setattr(codegen, "PARALLEL_MIN_SIZE", 4)
    x = _rng(8, 100)
    lowered = _run_ir(_graph(lambda t: (t * 2.0).sum(1), x), [x], parallel=True)
    rows = next(s for s in lowered.ir if isinstance(s, kir.Loop) and s.parallel)
    lanes = [s for s in kir.walk(rows.body) if isinstance(s, kir.Alloc)]
    assert lanes and all(a.buf.role == kir.LOCAL for a in lanes)
    assert "np.empty((16,), np.float64)" in lowered.source


def test_cluster_of_a_value_and_its_gradient_runs_as_ir():
    x = _rng(200)
    graph = _graph(lambda t: (dg.tanh(t * 0.5 + 1) * dg.sigmoid(t) + 0.1 * t ** 2).sum(), x,
                   grad=True)
    _run_ir(graph, [x])


def test_matmul_epilogue_runs_as_ir():
    x, w, b = _rng(32, 64), _rng(64, 48), _rng(48)
    lowered = _run_ir(_graph(lambda a, m, c: dg.relu(a @ m + c) * 2, x, w, b), [x, w, b])
    gemms = [s for s in kir.walk(lowered.ir) if isinstance(s, kir.Gemm)]
    assert len(gemms) == 1


def test_kernel_ir_marks_each_node_for_the_source_map():
    x = _rng(4, 5)
    graph = _graph(lambda a: dg.exp(a).sum(1), x)
    lowered = codegen.lower(graph)
    lines = lowered.source.split("\n")
    for name, line in lowered.line_of_node.items():
        assert lines[line - 1].lstrip().startswith(f"# {name}"), (name, lines[line - 1])
    assert any(isinstance(s, kir.Comment) and s.node for s in lowered.ir)


def test_work_arrays_are_bound_first_so_each_comment_stays_with_its_merged_loop():
    from dualgraph.backend import loops, schedule

    x = kir.Buffer("a0", (4,), F4, kir.ARG)
    v1, v2 = kir.Buffer("v1", (4,), F4), kir.Buffer("v2", (4,), F4)
    i = kir.Var("i0")
    stmts = [kir.Comment("%1 = exp %0", "%1"), kir.Alloc(v1),
             kir.Loop(i, 4, (kir.Store(v1, (i,), x[i] * 2.0),)),
             kir.Comment("%2 = neg %0", "%2"), kir.Alloc(v2),
             kir.Loop(i, 4, (kir.Store(v2, (i,), -x[i]),))]
    hoisted = schedule.hoist_allocations(stmts)
    assert hoisted[:2] == [kir.Alloc(v1), kir.Alloc(v2)]
    out = loops.merge_loops(hoisted)
    assert [type(s) for s in out] == [kir.Alloc, kir.Alloc, kir.Comment, kir.Loop]
    assert out[3].body[1] == kir.Comment("%2 = neg %0", "%2")
    lines, marks = printer.function("k", lambda: ["a0"], out)
    assert lines[marks["%2"] - 1].strip() == "# %2 = neg %0"
    assert lines[marks["%2"]].strip().startswith("v2[i0] =")


def test_a_scalar_fold_is_not_merged_into_an_elementwise_pass():
    x = _rng(64, 10)
    # softmax written out: the library row kernel would take dg.log_softmax whole
    lowered = _run_ir(_graph(lambda t: (t * 2.0) - (t * 2.0).exp().sum(1, keepdim=True).log(), x),
                      [x])
    folds = [s for s in kir.walk(lowered.ir)
             if isinstance(s, kir.Loop) and any(isinstance(b, kir.Accum) for b in s.body)]
    assert folds
    for loop in folds:
        assert not any(isinstance(b, kir.Store) for b in loop.body), kir.format_block([loop])
