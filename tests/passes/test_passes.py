"""Each pass: what it rewrites (the printed graph), that results are unchanged, that it is
pure (its input graph is untouched) and that its output verifies."""

from __future__ import annotations

import importlib
import textwrap

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import passes
from dualgraph.ir.graph import GraphError
from dualgraph.modes import bind
from dualgraph.ops import OPS
from dualgraph.ops.shape import astype, broadcast_to
from dualgraph.testing import assert_close

from .._support.graphs import all_ops, assert_convex, op_nodes, snapshot

F64 = dg.float64
SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.5, -2.0, 1e308])


def t64(*shape):
    return dg.ones(*shape, dtype=F64)


def run_pass(pass_fn, fn, *args, inputs=None, **kwargs):
    """Trace ``fn``, run the pass, check purity, verify() and unchanged results on
    ``inputs`` (default: random float64 of the arguments' shapes). Returns both graphs."""
    g = dg.trace(fn, *args)
    before = snapshot(g)
    out = pass_fn(g, **kwargs)
    assert snapshot(g) == before, "the pass mutated its input graph"
    out.verify()
    if inputs is None:
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(a.shape) for a in args]
    with np.errstate(all="ignore"):  # inf and nan inputs are on purpose
        pairs = list(zip(dg.interpret(g, *inputs), dg.interpret(out, *inputs)))
    for a, b in pairs:
        assert_close(b, a, rtol=1e-12, atol=1e-12, equal_nan=True)
    return g, out


# ------------------------------------------------------------------------------- cse


class TestCSE:
    def test_commutative_operands_are_canonicalized(self):
        g, out = run_pass(passes.cse, lambda a, b: a * b + b * a, t64(3), t64(3))
        assert str(out) == textwrap.dedent("""\
            graph(%0:f64[3], %1:f64[3]):
              %2:f64[3] = mul %0, %1
              %3:f64[3] = add %2, %2
              return %3""")
        assert out.notes == ["merged mul f64[3] into an equal node"]

    def test_merges_cascade_through_consumers(self):
        _, out = run_pass(passes.cse, lambda a, b: (a + b).exp() - (b + a).exp(), t64(3), t64(3))
        assert op_nodes(out) == ["add", "exp", "sub"]

    def test_literal_operands_of_commutative_ops(self):
        _, out = run_pass(passes.cse, lambda a: (a * 2.0) + (2.0 * a), t64(3))
        assert op_nodes(out) == ["mul", "add"]

    def test_non_commutative_ops_keep_operand_order(self):
        _, out = run_pass(passes.cse, lambda a, b: (a - b) * (b - a) + (a / b) * (b / a),
                          t64(3), t64(3))
        assert op_nodes(out).count("sub") == 2 and op_nodes(out).count("div") == 2

    def test_different_attributes_are_not_merged(self):
        _, out = run_pass(passes.cse, lambda a: a.sum(axis=0) + a.sum(axis=1), t64(3, 3))
        assert op_nodes(out).count("sum") == 2
        _, out = run_pass(passes.cse, lambda a: a.sum(axis=0) + a.sum(axis=0), t64(3, 3))
        assert op_nodes(out).count("sum") == 1

    def test_literals_of_different_types_are_not_merged(self):
        # 2 and 2.0 promote differently in general: CSE must not treat them as equal.
        _, out = run_pass(passes.cse, lambda k: (k * 2, k * 2.0), dg.tensor([1, 2]),
                          inputs=[np.array([3, 4])])
        assert op_nodes(out).count("mul") == 2

    def test_equal_constants_merge(self):
        c1, c2, c3 = np.array([1.0, 2.0]), np.array([1.0, 2.0]), np.array([1.0, 5.0])
        _, out = run_pass(passes.cse, lambda a: a * c1 + a * c2 + c3, t64(2))
        assert [n.op for n in out.nodes] == ["const", "mul", "add", "const", "add"]


# ------------------------------------------------------------------------------- dce


class TestDCE:
    def test_drops_unused_nodes(self):
        def prog(a, b):
            (a * b).exp()  # computed and thrown away
            a.tanh()
            return b.sin()

        g, out = run_pass(passes.dce, prog, t64(3), t64(3))
        assert op_nodes(g) == ["mul", "exp", "tanh", "sin"]
        assert str(out) == textwrap.dedent("""\
            graph(%0:f64[3], %1:f64[3]):
              %2:f64[3] = sin %1
              return %2""")
        assert out.notes == ["removed mul f64[3]", "removed exp f64[3]", "removed tanh f64[3]"]

    def test_keeps_unused_inputs_and_everything_an_output_needs(self):
        g, out = run_pass(passes.dce, lambda a, b: ((a * 2).exp(), a.sum()), t64(3), t64(3))
        assert len(out.inputs) == 2
        assert op_nodes(out) == op_nodes(g) == ["mul", "exp", "sum"]
        assert out.notes == []

    def test_drops_dead_constants(self):
        c = np.arange(3.0)
        _, out = run_pass(passes.dce, lambda a: (a + c, a * 2)[1], t64(3))
        assert [n.op for n in out.nodes] == ["mul"]


# --------------------------------------------------------------------- constant_fold


class TestConstantFold:
    def test_folds_subgraphs_of_constants(self):
        c = dg.tensor(np.array([0.0, 1.0, 2.0]))  # no grad: a constant of the trace

        def prog(x):
            return x * (c.exp() * 2.0 + c.sum())

        g, out = run_pass(passes.constant_fold, prog, t64(3))
        assert op_nodes(g) == ["exp", "mul", "sum", "add", "mul"]
        assert op_nodes(out) == ["mul"]
        value = out.outputs[0].inputs[1].attrs["value"]
        assert_close(value, np.exp(c.numpy()) * 2.0 + 3.0, rtol=1e-12, atol=1e-12)
        assert [n.op for n in passes.dce(out).nodes] == ["const", "mul"]
        assert sum("folded" in s for s in out.notes) == 4

    def test_leaves_input_dependent_nodes(self):
        c = np.array([1.0, 2.0])
        _, out = run_pass(passes.constant_fold, lambda x: (x + c).exp(), t64(2))
        assert op_nodes(out) == ["add", "exp"]
        assert out.notes == []

    def test_does_not_blow_a_small_constant_up(self):
        c = dg.tensor(np.array(1.5))

        def prog(x):
            return x + broadcast_to(c, (200, 200)) + broadcast_to(c, (2, 200)).sum()

        _, out = run_pass(passes.constant_fold, prog, t64(200, 200))
        # The 320 kB broadcast stays an op; the small one (and its sum) are folded.
        assert op_nodes(out) == ["broadcast_to", "add", "add"]

    def test_folded_value_has_the_op_dtype(self):
        c = dg.tensor(np.array([1, 2], dtype=np.int64))
        _, out = run_pass(passes.constant_fold, lambda x: x * (c * 2.5), t64(2))
        value = out.outputs[0].inputs[1].attrs["value"]
        assert value.dtype == np.float32
        assert_close(value, np.array([2.5, 5.0], np.float32), rtol=1e-12, atol=1e-12)


# -------------------------------------------------------------------------- simplify


def _simplified(fn, *args, finite_math=False):
    """``fn`` traced and simplified: checked pure, verified and exact on inf, nan, -0.
    Simplify leaves the nodes it bypassed for DCE, so the result is returned after DCE
    (with simplify's notes)."""
    inputs = [np.resize(SPECIAL, a.shape) if a.dtype.kind == "f" else np.ones(a.shape, a.dtype)
              for a in args]
    out = run_pass(passes.simplify, fn, *args, inputs=inputs, finite_math=finite_math)[1]
    return passes.dce(out).replace(notes=out.notes)


def _identity_rewrite(fn):
    """``fn(x)`` simplifies to ``x`` itself: no op nodes left."""
    out = _simplified(fn, t64(2, 4))
    assert op_nodes(out) == [] and out.outputs[0] is out.inputs[0], str(out)
    return out.notes


class TestSimplify:
    @pytest.mark.parametrize("fn,rule", [
        (lambda x: x + -0.0, "fold_add_zero"),  # x + 0.0 is not x for -0.0 (test_ieee.py)
        (lambda x: -0.0 + x, "fold_add_zero"),
        (lambda x: x - 0, "fold_sub_zero"),
        (lambda x: x * 1, "fold_mul_one"),
        (lambda x: 1.0 * x, "fold_mul_one"),
        (lambda x: x / 1, "fold_div_one"),
        (lambda x: x ** 1, "fold_pow_one"),
        (lambda x: x.neg().neg(), "cancel_neg_neg"),
        (lambda x: bind(OPS["reshape"], x, shape=(2, 4)), "fold_identity_view"),
        (lambda x: broadcast_to(x, (2, 4)), "fold_identity_view"),
        (lambda x: astype(x, dg.float64), "fold_identity_view"),
        (lambda x: bind(OPS["transpose"], x, axes=(0, 1)), "fold_identity_view"),
        (lambda x: x.T.T, "cancel_transpose_transpose"),
        (lambda x: x.reshape(8).reshape(4, 2).reshape(2, 4), "fold_reshape_reshape"),
    ], ids=["add_zero", "zero_add", "sub_zero", "mul_one", "one_mul", "div_one", "pow_one",
            "neg_neg", "reshape_same", "broadcast_same", "astype_same", "transpose_identity",
            "transpose_transpose", "reshape_chain"])
    def test_identity_rules(self, fn, rule):
        notes = _identity_rewrite(fn)
        assert notes and all(n.startswith(rule) for n in notes), notes

    def test_splat_constants_become_literals(self):
        """A constant of one repeated value (an array, or a broadcast scalar) is a literal
        to an elementwise op, which then folds: exact on inf, nan and -0.0 inputs."""
        ones = np.ones((2, 4))
        out = _simplified(lambda x: x * ones, t64(2, 4))
        assert op_nodes(out) == [] and out.outputs[0] is out.inputs[0], str(out)
        assert out.notes[:2] == ["fold_splat_literal: mul f64[2,4]", "fold_mul_one: mul f64[2,4]"]
        out = _simplified(lambda x: x + broadcast_to(np.array(0.25), (2, 4)) * 2.0, t64(2, 4))
        assert op_nodes(out) == ["add"] and "add %0, 0.5" in str(out), str(out)
        # float32: the literal is the shortest decimal of the float32 value, exactly it
        out = _simplified(lambda x: x * np.full((3,), 0.1, np.float32),
                          dg.tensor(np.ones(3, np.float32)))
        assert "mul %0, 0.1" in str(out) and np.float32(0.1) == np.float32(
            out.nodes[-1].inputs[1])

    @pytest.mark.parametrize("const,literal", [
        # float64 x times a float32 array is float64 with or without the literal: exact
        (np.full((2, 4), 2.0, np.float32), True),
        (np.full((4,), 3.0), True),  # a row that broadcasts within x's shape
        (np.array([[0.0, -0.0, 0.0, 0.0]] * 2), False),  # two values: +0.0 and -0.0
        (np.full((2, 4), np.inf), False),  # not finite
        (np.full((3, 2, 4), 2.0), False),  # it broadcasts x: the literal would not
    ], ids=["promotes_anyway", "row", "signed_zeros", "inf", "broadcasts_x"])
    def test_splat_literal_keeps_types_and_values(self, const, literal):
        out = _simplified(lambda x: x * const, t64(2, 4))
        lits = [i for n in out.nodes for i in n.inputs if not hasattr(i, "op")]
        assert bool(lits) == literal, str(out)
        assert out.outputs[0].shape == np.broadcast_shapes((2, 4), const.shape)

    def test_fold_pow_two(self):
        out = _simplified(lambda x: x ** 2, t64(5))
        assert str(out).splitlines()[1] == "  %1:f64[5] = mul %0, %0"
        assert out.notes == ["fold_pow_two: pow f64[5]"]

    def test_transposes_compose(self):
        out = _simplified(lambda x: x.transpose(1, 2, 0).transpose(1, 2, 0), t64(2, 3, 4))
        assert op_nodes(out) == ["transpose"]
        assert out.nodes[0].attrs["axes"] == (2, 0, 1)

    def test_reshapes_compose(self):
        out = _simplified(lambda x: x.reshape(8).reshape(4, 2), t64(2, 4))
        assert op_nodes(out) == ["reshape"] and out.nodes[0].inputs[0] is out.inputs[0]

    def test_rules_chain_on_one_value(self):
        out = _simplified(lambda x: -(-((x * 1 - 0) / 1)) ** 1, t64(4))
        assert op_nodes(out) == []

    def test_rules_need_a_literal(self):
        # 0 * y is a zero tensor, not the literal 0: x + 0 * y keeps its add (and mul).
        out = _simplified(lambda x, y: x + 0 * y, t64(2, 3), t64(3))
        assert op_nodes(out) == ["mul", "add"]

    def test_no_rewrite_that_changes_shape_or_dtype(self):
        # y + 0 broadcast to x's shape is not y; int + 0.0 is a float, not the int.
        out = _simplified(lambda x, y: x * 0 + 1 + (y + x * 0), t64(2, 3), t64(3))
        assert "add" in op_nodes(out)
        k = dg.tensor([1, 2])
        out = run_pass(passes.simplify, lambda k: (k + 0.0, k * 1.0, k ** 1.0), k,
                       inputs=[np.array([3, 4])])[1]
        # Each op carries the int -> float32 promotion (one rule, `result_dtype`): kept.
        assert [o.op for o in out.outputs] == ["add", "mul", "pow"]
        assert [o.dtype for o in out.outputs] == [np.dtype(np.float32)] * 3
        out = _simplified(lambda x: broadcast_to(x[0], (2, 4)) + 0, t64(2, 4))
        assert "broadcast_to" in op_nodes(out)

    def test_mul_zero_is_not_applied_by_default(self):
        out = _simplified(lambda x: x * 0, t64(8))
        assert op_nodes(out) == ["mul"]
        # ... because it would be wrong: inf * 0 and nan * 0 are nan.
        with np.errstate(invalid="ignore"):
            assert np.isnan(out(SPECIAL)[:3]).all()

    def test_mul_zero_with_finite_math(self):
        g = dg.trace(lambda x: x * 0 + x, t64(4))
        simplified = passes.simplify(g, finite_math=True).verify()
        assert any(n.startswith("fold_mul_zero") for n in simplified.notes)
        out = passes.dce(simplified)
        # the zeros are a literal to the add, and x + 0.0 is x under finite math
        assert op_nodes(out) == []
        x = np.array([1.0, -2.0, 3.0, 0.5])
        assert_close(out(x), g(x), rtol=1e-12, atol=1e-12)

    @pytest.mark.parametrize("fn", [
        lambda x: x.log().exp(),
        lambda x: x.exp().log(),
        lambda x: x - x,
        lambda x: x / x,
        lambda x: (x ** 0.5) ** 2,
        lambda x: dg.sqrt(x) * dg.sqrt(x),
    ], ids=["exp_log", "log_exp", "x_minus_x", "x_over_x", "sqrt_pow_two", "sqrt_sqrt"])
    def test_inexact_identities_are_not_applied(self, fn):
        g = dg.trace(fn, t64(8))
        out = passes.simplify(g, finite_math=True)
        # Any rewrite left must not drop the ops that made the identity inexact.
        assert {"exp", "log", "sub", "div", "sqrt"} & set(op_nodes(g)) <= set(op_nodes(out))
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(out(SPECIAL), g(SPECIAL))
        # exp(log x) != x where it matters: negative inputs and overflow.
        with np.errstate(all="ignore"):
            assert not np.array_equal(g(SPECIAL), SPECIAL, equal_nan=True)

    def test_every_rule_is_documented(self):
        module = importlib.import_module("dualgraph.passes.simplify")

        for rule in module.RULES + module.FINITE_MATH_RULES:
            assert rule.__name__.startswith(("fold_", "cancel_"))
            assert rule.__name__ in open(module.__file__).read()


# ------------------------------------------------------------------------------ fuse


def _fused(graph):
    return [n for n in graph.nodes if n.op == "fused"]


class TestFuse:
    def test_elementwise_chain_with_broadcasts_is_one_node(self):
        def prog(x, y, z):
            return ((x * y + 1.0).tanh() * z - dg.sigmoid(y)).exp() / (z.expand(4, 3) + 2)

        g, out = run_pass(passes.fuse, prog, t64(4, 3), t64(3), t64(4, 1))
        (f,) = out.nodes
        assert f.op == "fused" and f.attrs["kind"] == "elementwise"
        body = f.attrs["body"]
        assert [n.op for n in body.nodes] == op_nodes(g)
        assert "broadcast_to" in [n.op for n in body.nodes]
        assert len(f.inputs) == 3 and len(body.inputs) == 3
        assert out.notes == [f"fused {len(g.nodes)} nodes ({', '.join(op_nodes(g))}) "
                             "into kernel 0 (elementwise)"]

    def test_producer_fuses_into_a_reduction(self):
        _, out = run_pass(passes.fuse, lambda x, y: (x * y).sum(), t64(5), t64(5))
        (f,) = out.nodes
        assert f.attrs["kind"] == "reduce"
        assert [n.op for n in f.attrs["body"].nodes] == ["mul", "sum"]

    def test_reduction_ends_a_group(self):
        _, out = run_pass(passes.fuse, lambda x: (x * 2).sum(axis=1).exp() + 1, t64(3, 4))
        assert [n.op for n in out.nodes] == ["fused", "fused"]
        kinds = [f.attrs["kind"] for f in out.nodes]
        assert kinds == ["reduce", "elementwise"]
        assert [n.op for n in out.nodes[1].attrs["body"].nodes] == ["exp", "add"]

    def test_matmul_epilogue_bias_relu(self):
        _, out = run_pass(passes.fuse, lambda x, w, b: dg.relu(x @ w + b),
                          t64(5, 4), t64(4, 3), t64(3))
        (f,) = out.nodes
        assert f.attrs["kind"] == "matmul"
        assert [n.op for n in f.attrs["body"].nodes] == ["matmul", "add", "relu"]

    def test_linear_layer_epilogue(self):
        dg.manual_seed(0)
        layer = dg.nn.Linear(4, 3)
        x = dg.ones(5, 4)
        g = dg.trace(lambda x: dg.relu(layer(x)), x)
        out = passes.fuse(g).verify()
        assert [n.op for n in out.nodes] == ["transpose", "fused"]
        assert [n.op for n in out.nodes[1].attrs["body"].nodes] == ["addmm", "relu"]

    def test_matmul_operand_producers_stay_out(self):
        _, out = run_pass(passes.fuse, lambda x, w: dg.relu((x * 2).exp() @ w),
                          t64(5, 4), t64(4, 3))
        assert [n.attrs["kind"] for n in _fused(out)] == ["elementwise", "matmul"]
        assert [n.op for n in _fused(out)[1].attrs["body"].nodes] == ["matmul", "relu"]

    def test_one_contraction_per_group(self):
        _, out = run_pass(passes.fuse, lambda x, w, v: (x @ w) + (x @ v),
                          t64(3, 4), t64(4, 2), t64(4, 2))
        assert list(all_ops(out)).count("matmul") == 2
        assert [n.op for n in out.nodes] == ["matmul", "fused"]

    def test_shared_value_is_computed_once(self):
        def prog(x):
            e = (x * 2).exp()
            return e.sum() + e.max()

        _, out = run_pass(passes.fuse, prog, t64(5))
        assert list(all_ops(out)).count("exp") == 1
        assert list(all_ops(out)).count("mul") == 1
        assert [n.op for n in out.nodes] == ["fused", "sum", "max", "add"]

    def test_shared_value_inside_one_group_is_fused(self):
        # Both consumers are in the same group: the value is still computed once.
        _, out = run_pass(passes.fuse, lambda x: (lambda e: e * e + e)(x.exp()), t64(5))
        (f,) = out.nodes
        assert [n.op for n in f.attrs["body"].nodes] == ["exp", "mul", "add"]

    def test_graph_output_is_stored_not_fused_away(self):
        _, out = run_pass(passes.fuse, lambda x: (lambda e: (e, (e * 2).tanh()))(x.exp()),
                          t64(5))
        assert list(all_ops(out)).count("exp") == 1
        assert out.outputs[0].op == "exp"

    def test_groups_are_convex(self):
        def prog(x, y):
            a = x * y
            s = a.sum()
            b = (a + s).tanh()
            return b * a.exp() + (b - s).max()

        g, out = run_pass(passes.fuse, prog, t64(4), t64(4))
        assert_convex(g)
        assert list(all_ops(out)).count("mul") == list(all_ops(g)).count("mul")

    def test_single_nodes_and_non_fusible_ops_are_left_alone(self):
        _, out = run_pass(passes.fuse, lambda x: x.exp(), t64(3))
        assert [n.op for n in out.nodes] == ["exp"]
        _, out = run_pass(passes.fuse, lambda x: (x.reshape(6) * 2).sum(), t64(2, 3))
        assert [n.op for n in out.nodes] == ["reshape", "fused"]

    def test_fusion_groups_reports_decisions(self):
        g = dg.trace(lambda x: (lambda e: e.sum() + e.max())((x * 2).exp()), t64(5))
        decisions = []
        groups = passes.fusion_groups(g, decisions)
        assert [(root.op, [m.op for m in members], kind) for root, members, kind in groups] == [
            ("exp", ["mul", "exp"], "elementwise")]
        blocked = [d for d in decisions if d["node"].op == "exp"]
        assert "consumers in different groups" in blocked[0]["rule"]


# -------------------------------------------------------------------------- optimize


PURITY_PROGRAMS = [
    lambda a, b: (a * b + 0) * 1 + (b * a).exp(),
    lambda a, b: dg.relu(a @ b.T + 1.0).sum(axis=0) - a.neg().neg().mean(),
    lambda a, b: dg.softmax(a * 2.0 + b.T.T, dim=-1) ** 2,
]


@pytest.mark.parametrize("name", ["simplify", "constant_fold", "cse", "dce", "fuse"])
@pytest.mark.parametrize("k", range(len(PURITY_PROGRAMS)))
def test_every_pass_is_pure_and_verifies(name, k):
    pass_fn = dict(passes.DEFAULT_PIPELINE)[name]
    run_pass(pass_fn, PURITY_PROGRAMS[k], t64(3, 3), t64(3, 3))


def test_optimize_returns_per_pass_stats():
    def prog(x, y):
        return ((x * y - 0) * 1).tanh().sum() + (y * x).sum() + x.neg().neg().sum()

    g = dg.trace(prog, dg.ones(4), dg.ones(4))
    before = snapshot(g)
    out = passes.optimize(g)
    assert snapshot(g) == before
    stats = out.pass_stats
    assert [s.name for s in stats] == ["simplify", "constant_fold", "cse", "dce", "fuse"]
    assert stats[0].nodes_before == len(op_nodes(g)) == 12
    for prev, cur in zip(stats, stats[1:]):
        assert cur.nodes_before == prev.nodes_after
    assert stats[-1].nodes_after == len(op_nodes(out))
    assert stats[0].notes == ["fold_sub_zero: sub f32[4]", "fold_mul_one: mul f32[4]",
                              "cancel_neg_neg: neg f32[4]"]
    assert stats[2].notes == ["merged mul f32[4] into an equal node"]
    assert stats[3].notes == ["removed neg f32[4]"]
    assert [(s.nodes_before, s.nodes_after) for s in stats[:4]] == [
        (12, 9), (9, 9), (9, 8), (8, 7)]
    assert str(stats[0]) == "simplify         12 ->    9 nodes"
    assert all(s.graph is not None for s in stats) and stats[-1].graph is out
    x, y = np.arange(4.0, dtype=np.float32), np.ones(4, np.float32)
    assert_close(out(x, y), g(x, y), rtol=1e-6, atol=1e-6)


def test_optimize_skip_and_custom_pipeline():
    g = dg.trace(lambda x: (x * 1).exp(), t64(3))
    out = passes.optimize(g, skip=("fuse", "simplify"))
    assert [s.name for s in out.pass_stats] == ["constant_fold", "cse", "dce"]
    assert op_nodes(out) == ["mul", "exp"]
    out = passes.optimize(g, passes=[("dce", passes.dce)])
    assert [s.name for s in out.pass_stats] == ["dce"]


def _broken_pass(graph):
    """Drops the first node but keeps its users: an invalid graph."""
    return dg.Graph(graph.inputs, graph.nodes[1:], graph.outputs)


def test_a_pass_that_breaks_the_graph_is_named(monkeypatch):
    pipeline = list(passes.DEFAULT_PIPELINE)
    pipeline.insert(2, ("broken", _broken_pass))
    monkeypatch.setattr(passes, "DEFAULT_PIPELINE", tuple(pipeline))
    g = dg.trace(lambda x: (x * 2).exp(), t64(3))
    with pytest.raises(GraphError, match="after pass 'broken'"):
        passes.optimize(g, verify=True)
    with pytest.raises(GraphError, match="after pass 'broken'"):
        dg.explain(lambda x: (x * 2).exp(), dg.ones(3, requires_grad=True))
