"""Kernel-op lowerings build kernel IR, and the reduce path's generated code.

Every op registered in the shape, index, scan, random, reduce and pool lowering modules,
and nll_loss with its backward, returns a `kir.Block` that `kir.verify` accepts (literal
inputs passed as `kir.Const`s), and that block, run by the plain NumPy executor
(`kir_exec`), gives what the op's NumPy kernel gives.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba.lowerings import LOWER, Arg, ishape, kernel_lowering
from dualgraph.ir.graph import Node
from dualgraph.ops import OPS

from .._support.graphs import traced_cases
from ..ops.cases import CASES
from .kir_exec import run
from .test_kir import compiled


# --------------------------------------------------------------- the reduce path's code
def test_reduction_over_trailing_axis_with_unit_outer_dims_compiles():
    # Outer dims of size 1 have no loop: the store after the inner loop must be indented
    # by the loops there are, not by the number of outer dims (an IndentationError, or a
    # store inside the max's `if` that a row of -inf never reached).
    x = np.random.default_rng(0).standard_normal((1, 2, 1, 2, 2, 2))
    x[0, 1, 0, 1, 1, :] = -np.inf
    f = dg.compile(lambda t: (t.amax(-1).sum(), t.amax(-1)), tiered=False)
    total, rows = f(dg.tensor(x))
    np.testing.assert_array_equal(rows.numpy(), x.max(-1))
    assert total.item() == x.max(-1).sum()


def test_reduction_gradient_over_unit_outer_dims_matches_eager():
    x0 = np.random.default_rng(1).standard_normal((1, 2, 1, 2, 2, 2))

    def step(t):
        y = t.amax(-1).sum()
        y.backward()
        return y

    x = dg.tensor(x0, requires_grad=True)
    dg.compile(step, tiered=False)(x)
    xe = dg.tensor(x0, requires_grad=True)
    step(xe)
    np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())


# ------------------------------------------------------------ prod is a reduction
def test_prod_goes_through_its_reduction_spec():
    from dualgraph.backend.numba import lowerings

    spec = OPS["prod"].reduction
    assert spec is not None and spec.combine == "mul" and spec.identity(np.float32) == 1
    assert lowerings.path(OPS["prod"]) == "reduce" and "prod" not in LOWER


def test_compiled_prod_over_long_and_empty_axes_and_integers():
    # A row of 100 is a lane reduction (independent partial products); integers give int64.
    rng = np.random.default_rng(3)
    x = rng.uniform(0.9, 1.1, (3, 100))
    x[1, 7] = 0.0
    k = rng.integers(-3, 4, (4, 5)).astype(np.int32)
    e = np.zeros((2, 0))
    f = dg.compile(lambda a, b, c: (a.prod(1), a.prod(), b.prod(0), c.prod(1),
                                    dg.prod(a, (0, 1), keepdim=True)), tiered=False)
    rows, whole, ints, empty, kept = f(dg.tensor(x), dg.tensor(k), dg.tensor(e))
    dg.testing.assert_close(rows.numpy(), x.prod(1), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(whole.numpy(), x.prod(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    assert ints.numpy().dtype == np.int64
    np.testing.assert_array_equal(ints.numpy(), k.prod(0, dtype=np.int64))
    np.testing.assert_array_equal(empty.numpy(), np.ones(2))
    dg.testing.assert_close(kept.numpy(), x.prod(keepdims=True), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)


# ------------------------------------------------------------------ bitcast views
def test_bitcast_view_prints_what_the_executor_does():
    x = kir.Buffer("x", (2, 3), np.dtype(np.float32), kir.ARG, "A")
    out = kir.Buffer("out", (6,), np.dtype(np.int32), kir.OUT)
    v = kir.Buffer("v", (3, 2), np.dtype(np.int32), kir.VIEW)
    i = kir.Var("i")
    flat = kir.Buffer("vf", (6,), np.dtype(np.int32), kir.VIEW)
    stmts = [kir.View(v, x, "bitcast"), kir.View(flat, v, "reshape"),
             kir.Loop(i, 6, (kir.Store(out, (i,), flat[i]),))]
    kir.verify(stmts, [x, out])
    a = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2).T  # not C-ordered
    expected = np.ascontiguousarray(a).view(np.int32).reshape(6)
    assert (run(stmts, {"x": a, "out": np.zeros(6, np.int32)})["out"] == expected).all()
    fn, _ = compiled([x, out], stmts)
    got = np.zeros(6, np.int32)
    fn(a, got)
    assert (got == expected).all()


def test_verify_rejects_a_bitcast_of_other_bytes():
    x = kir.Buffer("x", (2, 3), np.dtype(np.float32), kir.ARG)
    v = kir.Buffer("v", (6,), np.dtype(np.int64), kir.VIEW)
    with pytest.raises(kir.IRError, match="bitcast"):
        kir.verify([kir.View(v, x, "bitcast")], [x])


# ------------------------------------------------------- lowerings build kernel IR
FAMILIES = ("shape", "index", "scan", "random", "reduce", "pool")
OURS = sorted({name for name, fn in LOWER.items()
               if fn.__module__.rsplit(".", 1)[-1] in FAMILIES} | {"nll_loss", "nll_loss_backward"})


def _samples(op: str) -> list:
    """(node, input values by node id) for every ``op`` node of the op cases' traced
    forward graphs (float64 inputs)."""
    out = []
    for _, arrays, graph in traced_cases(c for c in CASES if c.op == op):
        env = {id(i): np.asarray(a) for i, a in zip(graph.inputs, arrays)}
        for n in graph.nodes:
            ins = [env[id(i)] if isinstance(i, Node) else i for i in n.inputs]
            env[id(n)] = np.asarray(n.attrs["value"] if n.op == "const"
                                    else OPS[n.op].impl(*ins, **n.attrs))
            if n.op == op:
                out.append((n, env))
    return out


def test_every_lowering_here_has_a_sample():
    assert OURS, "no lowerings registered from the families"
    missing = [op for op in OURS if not _samples(op)]
    assert not missing, f"no traced op case for {missing}"


# Sums whose kernel adds in another order than the NumPy kernel (which spreads a window's
# gradient one dim at a time): equal to rounding.
REORDERED = {"avg_pool2d_backward", "adaptive_avg_pool2d_backward"}


@pytest.mark.parametrize("op", OURS)
def test_lowering_builds_verified_ir_that_computes_the_kernel(op):
    for node, env in _samples(op):
        args, arrays = [], {}
        for k, i in enumerate(node.inputs):
            if isinstance(i, Node):
                buf = kir.Buffer(f"x{k}", ishape(i), i.dtype, kir.ARG, "A")
                args.append(Arg(buf))
                arrays[buf.name] = env[id(i)].reshape(ishape(i)).copy()
            else:
                args.append(kir.const(i))
        block = kernel_lowering(op)(node, args, "r")
        assert isinstance(block, kir.Block), f"{op} returned {type(block).__name__}"
        assert block.result is not None and block.result.name == "r"
        kir.verify(block, [a.buf for a in args if isinstance(a, Arg)])
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            got = run(block, arrays)["r"]
        want = env[id(node)]
        assert got.shape == ishape(node) and got.dtype == want.dtype
        if op in REORDERED:
            dg.testing.assert_close(got.reshape(want.shape), want, rtol=1e-13, atol=1e-15,
                                       msg=op, equal_nan=True, check_dtype=False)
        else:
            np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=op)


# ----------------------------------------------------------------- pooling windows
def _traced(fn, *arrays) -> list:
    graph = dg.trace(fn, *[dg.tensor(a) for a in arrays])
    return list(graph.nodes)


def _block_of(node: Node) -> kir.Block:
    args = [Arg(kir.Buffer(f"x{k}", ishape(i), i.dtype, kir.ARG, "A")) if isinstance(i, Node)
            else kir.const(i) for k, i in enumerate(node.inputs)]
    return kernel_lowering(node.op)(node, args, "r")


@pytest.mark.parametrize("pool, regular", [
    (lambda x: dg.nn.functional.max_pool2d(x, 2), True),
    (lambda x: dg.nn.functional.avg_pool2d(x, 3, 1), True),
    (lambda x: dg.nn.functional.max_pool2d(x, 3, 2, 1), False),
    (lambda x: dg.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False), False),
    (lambda x: dg.nn.functional.adaptive_avg_pool2d(x, (4, 3)), False),
])
def test_regular_windows_are_affine_and_others_read_tables(pool, regular):
    x = np.random.default_rng(0).standard_normal((2, 6, 7))
    node = next(n for n in _traced(pool, x) if n.op in LOWER and "pool" in n.op)
    block = _block_of(node)
    stmts = list(kir.walk(block.stmts))
    # A library routine's window geometry (a few constants it reads) is not a table of
    # window positions.
    geometry = {a.name for s in stmts if isinstance(s, kir.LibCall) for a in s.args
                if isinstance(a, kir.Buffer)}
    tables = [s for s in stmts if isinstance(s, kir.Table) and s.buf.name not in geometry]
    bounds = [kir.const(b) for s in stmts if isinstance(s, kir.Loop)
              for b in (s.start, s.extent)]
    if regular:  # every loop bound is affine in the enclosing loops' variables
        assert not tables and all(kir.affine(b) is not None for b in bounds)
    else:
        assert tables and all(t.buf.dtype == np.int64 for t in tables)


# ------------------------------------------------------------------ literal inputs
def test_literal_inputs_reach_lowerings_as_kernel_ir_constants(monkeypatch):
    from dualgraph.backend.numba import codegen
    from dualgraph.backend.numba.printer import block_lines

    seen = []
    real = LOWER["nll_loss"]

    def spy(node, args, out):
        seen.append(args)
        return real(node, args, out)

    monkeypatch.setitem(LOWER, "nll_loss", spy)
    x = np.log(np.random.default_rng(0).dirichlet(np.ones(3), 4))
    t = np.array([0, 2, 1, 2])
    graph = dg.trace(lambda x, t: dg.nn.functional.nll_loss(x, t), dg.tensor(x),
                     dg.tensor(t))
    node = next(n for n in graph.nodes if n.op == "nll_loss")
    assert not isinstance(node.inputs[2], Node)  # the weight is a literal
    codegen.lower(graph)
    (args,) = seen
    assert isinstance(args[0], Arg) and isinstance(args[1], Arg)
    assert args[2] == kir.const(node.inputs[2])

    # A non-finite literal prints as NumPy's name for it (a bare inf is a NameError).
    inf_args = [Arg(kir.Buffer("x0", x.shape, x.dtype, kir.ARG)),
                Arg(kir.Buffer("x1", t.shape, t.dtype, kir.ARG)), kir.const(-np.inf)]
    block = real(node, inf_args, "r")
    text = "\n".join(block_lines(block))
    assert "np.float64(-np.inf)" in text and " inf" not in text.replace("np.inf", "")
    with np.errstate(invalid="ignore"):
        got = run(block, {"x0": x, "x1": t})["r"]
        want = OPS["nll_loss"].impl(x, t, -np.inf, **node.attrs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
