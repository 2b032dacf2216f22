"""Every registered op, compiled, equals eager: forward values and gradients.

Driven by the op case table (``tests/ops/cases.py``): its rows are grouped by op family, and
each group runs as one compiled function (one compile per group and dtype) against the same
rows run eagerly; an op in ``dg.ops.OPS`` with no row that compiles fails
``test_every_op_has_a_compiled_row``. A row whose result shape depends on the data (which
``dg.trace`` refuses) runs eagerly only.

In the default run the float64 groups keep each op's first row (float32 runs every row):
the generated code differs between the dtypes only in its types, and the kernels' compile
time follows their rows. The compositions, and the ``shape_extra`` program, run in float32
only: every op they are made of has its float64 row in its own family's group. ``-m slow``
runs every row, and ``shape_extra``, in float64 too.

``PROGRAMS`` adds a few programs for what single-op rows do not reach: generated-code paths
(BLAS-sized products, long reduction axes, writes through chains of views) and NaN
propagation.

Inputs are NumPy arrays; floating ones require grad. The eager reference and the compiled
call get the same data; gradients come from backward through a weighted sum of the outputs,
computed eagerly on the compiled outputs (so each check also mixes compiled and eager code
on the tape).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.ops import OPS
from dualgraph.testing import assert_close

from .._support.compiled import B3, graph_ops
from .._support.tolerance import tolerance
from ..ops.cases import CASES, COMPOSITES, OpCase

DTYPES = (np.float32, np.float64)


@dataclass(frozen=True)
class Case:
    name: str
    ops: tuple[str, ...]  # ops the compiled forward or backward graph must contain
    fn: Callable
    inputs: Callable[[np.random.Generator, type], list]  # arrays; floating ones need grad
    rows: tuple[OpCase, ...] = ()  # the case-table rows of a row group


def _uniform(rng, lo, hi, shape, dtype):
    return rng.uniform(lo, hi, shape).astype(dtype)


# ------------------------------------------------------------------- the case table's rows
# Rows of one family share a compiled function, at most GROUP rows (a bigger graph compiles
# more slowly than two halves: 40 composition rows take ~10% more CPU than two groups of 20,
# and the longest test sets the floor of a two-worker run); an op's family is the module of
# its shape rule, and the compositions are one family of their own.
GROUP = 20


def _family(row: OpCase) -> str:
    if row.op not in OPS:
        return "composite"
    return getattr(OPS[row.op].infer, "__module__", "").rpartition(".")[2] or "other"


def _traces(row: OpCase) -> bool:
    arrays = row.arrays(np.random.default_rng(0), np.float64)
    try:
        dg.trace(row.fn, *[dg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays])
    except dg.TraceError:
        return False  # a data-dependent shape: eager only
    return True


def _families() -> dict[str, list[OpCase]]:
    """The rows ``dg.trace`` captures, by family, in table order."""
    rows = sorted((r for r in CASES + COMPOSITES if _traces(r)), key=_family)  # stable
    return {family: list(members) for family, members in groupby(rows, key=_family)}


def _chunks(family: str, rows: list[OpCase], suffix: str = "") -> list[Case]:
    return [_group(f"{family}{k // GROUP}{suffix}", rows[k:k + GROUP])
            for k in range(0, len(rows), GROUP)]


def _group(name: str, rows: list[OpCase]) -> Case:
    """One program running every row of ``rows`` on its own inputs."""
    sizes = [len(r.inputs) for r in rows]

    def program(*xs):
        outs, at = [], 0
        for row, n in zip(rows, sizes):
            out = row.fn(*xs[at:at + n])
            outs += list(out) if isinstance(out, tuple) else [out]
            at += n
        return tuple(outs)

    def inputs(rng, dtype):
        return [a for row in rows for a in row.arrays(rng, dtype)]

    program.__name__ = program.__qualname__ = f"rows_{name}"
    ops = tuple(dict.fromkeys(r.op for r in rows if r.op in OPS))
    return Case(name, ops, program, inputs, tuple(rows))


def _first_row_of_each_op(rows: list[OpCase]) -> list[OpCase]:
    firsts = {id(r) for r in {r.op: r for r in reversed(rows)}.values()}
    return [r for r in rows if id(r) in firsts]


FAMILIES = _families()
ROWS = [c for family, rows in FAMILIES.items() for c in _chunks(family, rows)]
# float64: each op's first row, taken over the whole family before it is cut in groups;
# none of the compositions (see _all_cases).
FIRST_ROWS = [c for family, rows in FAMILIES.items() if family != "composite"
              for c in _chunks(family, _first_row_of_each_op(rows), "_first")]


# ----------------------------------------------------------------------------- programs


def select(x, y):
    # Bool outputs come back as bool tensors next to the differentiable ones.
    return (dg.relu(x), dg.abs(x), dg.maximum(x, y), dg.minimum(x, y), dg.where(x < y, x, y),
            dg.maximum(x, 0.25), x < y, x <= y, x > y, x >= y, x == y, x != y)


def view_writes(x, w):
    # Writes through views (a transposed slice, a reshaped strided slice, an int index)
    # become view_scatter nodes into the base, forward and backward.
    y = x * 1.0
    y.T[1:3, 0].mul_(w[:2])
    y.reshape(2, 6)[1, ::2] += w[1:]
    y[2, 3] = 0.5
    return (y, y.T[1] * 2.0)


def matmuls(a, b, v, w, bias, big_a, big_b):
    # Small products are loops in the generated code, big ones BLAS calls: both kinds.
    return (a @ b, v @ a, a @ w, v @ v, F.linear(a, b.T, bias), a.T @ a, big_a @ big_b,
            F.linear(big_a, big_b.T, big_b[0, :]))


def batched_by_matrix(p, q):
    return p @ q, q.T @ p.transpose(0, 2, 1)


def int_prefix_index(x):
    # stack's VJP along axis 0 is the same kind of index (g[0], g[1]).
    return x[1] * 2.0, x[None, 0] + 1.0, dg.stack([x[:, 0], x[:, 1]], 0)


def reductions(x, long):
    # ``long`` has a long last axis (70 = 4 * 16 + 6): reduced with several accumulators
    # and a remainder loop in the generated code.
    return (x.sum(), x.sum(axis=0), x.sum(axis=(0, 2), keepdims=True), x.mean(axis=1),
            x.mean(), x.max(), x.amax(axis=1), x.amax(axis=0, keepdims=True), x.amax(axis=2),
            long.sum(axis=1), long.amax(axis=1), long.mean(), dg.exp(long).sum())


def arg_reductions(x, long):
    # max(dim)/min(dim): argmax/argmin, then a gather whose backward is a scatter-add.
    v, i = x.max(dim=1)
    w, j = x.min(0, keepdim=True)
    return (v, i, w, j, x.min(), x.amin(dim=(0, 2)), x.argmax(), x.argmin(dim=-1),
            long.max(dim=1).values, long.argmin(dim=1, keepdim=True), long.amin(axis=1))


def _with_ties(r, t):
    """x, and y equal to x in about half the places (ties split the gradient)."""
    x = _uniform(r, -2.0, 2.0, (3, 5), t)
    y = np.where(r.random(x.shape) < 0.5, x, _uniform(r, -2.0, 2.0, x.shape, t))
    return [x, y.astype(t)]


# ---- shape (dualgraph/ops/shape.py, ops/linalg.py, ops/einsum.py)
def shape_extra(x, v, w):
    # x (2, 3, 4); v, w (3,). Views, copies and products, then writes through new views.
    a, b = x.split([1, 3], dim=2)
    y = x * 1.0
    y.diagonal(0, 1, 2).mul_(2.0)  # a write through a diagonal: view_scatter replays it
    y.movedim(0, -1)[1].add_(w[:2])
    y.narrow(2, 1, 2).chunk(2, 1)[0].mul_(-1.0)
    return (x.flatten(1) * 2.0, x.unflatten(2, (2, 2)).sum(2), x.swapaxes(0, 2) + 1.0,
            a * b[..., :1], x.unbind(1)[2], x.repeat(1, 2, 1) * 1.5, x.tile((2,)),
            x.repeat_interleave(2, dim=1), x.roll((1, -1), (1, 2)), x.flip(0, 2),
            x.rot90(1, (1, 2)),
            x.tril(1), x.triu(-1), x.diagonal(1, 1, 2), dg.diag(v, 1), dg.diag_embed(x[0]),
            x[0].trace(), dg.meshgrid(v, w[:2], indexing="xy")[0] * dg.meshgrid(w[:2], v)[1],
            dg.hstack([v, w]), dg.vstack([v, w]), dg.diff(x, dim=1), dg.cross(v, w),
            dg.outer(v, w), dg.kron(x[0, :2, :2], x[1, :2, :2]), x.view(dg.int32), y)


PROGRAMS = [
    Case("select", ("relu", "threshold_backward", "abs", "maximum", "minimum", "where", "lt",
                    "le", "gt", "ge", "eq", "ne"), select,
         _with_ties),
    Case("view_writes", ("view_scatter", "getitem", "transpose", "reshape"), view_writes,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t), _uniform(r, -1, 1, (4,), t)]),
    Case("matmul", ("matmul", "addmm"), matmuls,
         lambda r, t: [_uniform(r, -1, 1, (4, 4), t), _uniform(r, -1, 1, (4, 3), t),
                       _uniform(r, -1, 1, (4,), t), _uniform(r, -1, 1, (4,), t),
                       _uniform(r, -1, 1, (3,), t), _uniform(r, -1, 1, (32, 16), t),
                       _uniform(r, -1, 1, (16, 24), t)]),
    Case("matmul_batched_by_matrix", ("matmul",), batched_by_matrix,
         lambda r, t: [_uniform(r, -1, 1, (2, 3, 4), t), _uniform(r, -1, 1, (4, 5), t)]),
    Case("getitem_int_prefix", ("getitem", "stack"), int_prefix_index,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t)]),
    Case("reductions", ("sum", "mean", "max"), reductions,
         lambda r, t: [_uniform(r, -1, 1, (3, 4, 5), t), _uniform(r, -1, 1, (3, 70), t)]),
    Case("arg_reductions", ("min", "argmax", "argmin", "gather_axis", "scatter_add_axis"),
         arg_reductions,
         lambda r, t: [_uniform(r, -1, 1, (3, 4, 5), t), _uniform(r, -1, 1, (3, 70), t)]),
    Case("shape_extra", ("diagonal", "diag_scatter", "flip", "view_dtype", "view_scatter"),
         shape_extra,
         lambda r, t: [_uniform(r, -1, 1, (2, 3, 4), t), _uniform(r, -1, 1, (3,), t),
                       _uniform(r, -1, 1, (3,), t)]),
]


# Program runs in the slow set, with why the default run still covers them. shape_extra is a
# composition of shape ops (24 s of cold compile per dtype on a two-core runner): as for
# the compositions' rows, every op it is made of has its float64 row in its family's group
# (rows-shape0-f64 and the other -f64 groups), and its float32 run stays.
SLOW_PROGRAMS = {("shape_extra", "f64")}


def _all_cases() -> list:
    """(case, dtype) pairs: every row group in float32; in float64, each op's first row
    (no composition), and every row under ``-m slow``."""
    out = [pytest.param(c, np.float32, id=f"rows-{c.name}-f32") for c in ROWS]
    out += [pytest.param(c, np.float64, id=f"rows-{c.name.removesuffix('_first')}-f64")
            for c in FIRST_ROWS]
    in_first = {id(r) for c in FIRST_ROWS for r in c.rows}
    for c in ROWS:
        if all(id(r) in in_first for r in c.rows):
            continue
        # Slow because the float32 run above compiles every one of these rows (the same
        # generated code but for its types) and the float64 run above keeps each op's
        # first row; a composition's ops each have their first row there too. Together
        # ~2 minutes of cold compiles on a two-core runner.
        out.append(pytest.param(c, np.float64, id=f"rows-{c.name}-f64-every-row",
                                marks=pytest.mark.slow))
    for c in PROGRAMS:
        out += [pytest.param(c, t, id=f"{c.name}-{i}",
                             marks=[pytest.mark.slow] if (c.name, i) in SLOW_PROGRAMS else [])
                for t, i in zip(DTYPES, ("f32", "f64"))]
    return out


ALL_CASES = _all_cases()


# ---------------------------------------------------------------------------- running


def _tensors(arrays: list) -> list:
    return [dg.tensor(a.copy(), requires_grad=a.dtype.kind == "f") for a in arrays]


def _as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _run(fn: Callable, arrays: list, weights_seed: int = 1) -> tuple[list, list]:
    """Outputs and input gradients of ``fn``: backward of a weighted sum of its float
    outputs (the weights make every output's gradient count, with its own scale)."""
    ts = _tensors(arrays)
    outs = _as_tuple(fn(*ts))
    rng = np.random.default_rng(weights_seed)
    loss = None
    for o in outs:
        if o.dtype.kind != "f":
            continue
        w = rng.uniform(0.5, 1.5, o.shape).astype(o.dtype)
        term = (o * w).sum().astype(np.float64)
        loss = term if loss is None else loss + term
    loss.backward()
    # An input that reaches no float output (an integer result's operand) has no grad.
    grads = [None if t.grad is None else t.grad.numpy() for t in ts]
    return [o.numpy() for o in outs], grads


def _tol(dtype: np.dtype) -> dict:
    """B3's tolerance for floats; other dtypes (a bit view's int16, ...) compare exactly."""
    return B3.get(dtype, {"rtol": 0.0, "atol": 0.0})


# Families whose input gradients sum, over a sequence's steps, products of gate values:
# an element can be a cancellation of terms of the array's size and carries their
# absolute rounding error, so it is held to B3's "rtol times the largest magnitude"
# (never looser than `_tol`'s floor). In float32 the compiled tanh and sigmoid round
# apart from NumPy's in the last bit: over 30 seeds of the recurrent rows, 0.5% (the
# loops written into the kernel) to 1.1% (the C functions) of the gradient arrays had
# such an element past 1e-6, none past rtol times the largest magnitude, and the eager
# float32 gradients' own error against float64 was of the same size.
_CANCELLING = ("recurrent",)


def _grad_tol(case: Case, e: np.ndarray) -> dict:
    if case.name.startswith(_CANCELLING) and e.dtype in B3 and e.dtype.kind == "f":
        return tolerance(e, B3[e.dtype]["rtol"], floor=B3[e.dtype]["atol"] / B3[e.dtype]["rtol"])
    return _tol(e.dtype)


def _compare(case: Case, compiled: Callable, arrays: list) -> list:
    """Check compiled outputs and gradients against eager; returns the compiled outputs."""
    eager_out, eager_grads = _run(case.fn, arrays)
    out, grads = _run(compiled, arrays)
    assert len(out) == len(eager_out)
    for k, (a, e) in enumerate(zip(out, eager_out)):
        assert_close(a, e, **_tol(e.dtype), equal_nan=True, msg=f"{case.name} output {k}")
    for k, (a, e) in enumerate(zip(grads, eager_grads)):
        assert (a is None) == (e is None), f"{case.name} grad of input {k}: {a} vs {e}"
        if e is not None:
            assert_close(a, e, **_grad_tol(case, e), equal_nan=True,
                         msg=f"{case.name} grad of input {k}")
    return out


@pytest.fixture(scope="module")
def compiled_cases() -> dict:
    """One compiled function per (case, dtype), shared by the tests below."""
    return {}


def _compiled(compiled_cases: dict, case: Case, dtype) -> Callable:
    key = (case.name, np.dtype(dtype))
    if key not in compiled_cases:
        compiled_cases[key] = dg.compile(case.fn)
    return compiled_cases[key]


# ------------------------------------------------------------------------------ tests


def test_every_op_has_a_compiled_row():
    covered = {op for case in ROWS for op in case.ops}
    missing = sorted(set(OPS) - covered)
    assert not missing, f"ops with no row of tests/ops/cases.py that compiles: {missing}"
    unknown = sorted({op for case in PROGRAMS for op in case.ops} - set(OPS))
    assert not unknown, f"PROGRAMS name ops that are not registered: {unknown}"


@pytest.mark.parametrize(("case", "dtype"), ALL_CASES)
def test_compiled_equals_eager(case: Case, dtype, compiled_cases):
    f = _compiled(compiled_cases, case, dtype)
    arrays = case.inputs(np.random.default_rng(0), dtype)
    _compare(case, f, arrays)
    # Compiled for real: one trace, forward and backward kernels (one kernel for a scalar
    # loss, which returns its gradients too), and every op the case claims is in a
    # compiled graph (not folded away before lowering).
    assert f.stats.traces == 1
    (entry,) = f.entries()
    assert entry.mode == "train"
    assert f.stats.kernels == (1 if entry.joint else 2)
    lowered = set(graph_ops(entry.optimized))
    if not entry.joint:
        lowered |= set(graph_ops(entry.backward_graph))
    assert set(case.ops) <= lowered, f"not compiled: {sorted(set(case.ops) - lowered)}"
    # Same signature, new data: the kernels are reused.
    _compare(case, f, case.inputs(np.random.default_rng(1), dtype))
    assert f.stats.traces == 1 and f.stats.cache_hits >= 1


# Special values: NaN propagates as in NumPy, infinities order as numbers, ties split.
SPECIAL = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0, -0.0, 2.0, np.nan, -1.0, np.inf,
                    -np.inf, 0.5, 3.0, np.nan, -2.0])
SPECIAL_Y = np.array([1.0, np.nan, 1.0, 0.0, -0.0, 0.0, 2.0, np.nan, np.inf, np.inf,
                      -np.inf, -np.inf, np.nan, 0.0, -2.0])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_nan_and_inf_propagate_like_numpy(dtype, compiled_cases):
    case = next(c for c in PROGRAMS if c.name == "select")
    f = _compiled(compiled_cases, case, dtype)
    x = SPECIAL.reshape(3, 5).astype(dtype)
    y = SPECIAL_Y.reshape(3, 5).astype(dtype)
    with np.errstate(invalid="ignore"):
        out = _compare(case, f, [x, y])
    # The reference itself is NumPy's semantics (nan wins in maximum/minimum, comparisons
    # with nan are false except !=).
    with np.errstate(invalid="ignore"):
        expected = [np.maximum(x, 0), np.abs(x), np.maximum(x, y), np.minimum(x, y),
                    np.where(x < y, x, y), np.maximum(x, dtype(0.25)), x < y, x <= y, x > y,
                    x >= y, x == y, x != y]
    for k, (a, e) in enumerate(zip(out, expected)):
        assert_close(a, e.astype(a.dtype) if a.dtype.kind == "f" else e,
                     **B3[a.dtype], equal_nan=True, msg=f"output {k}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_reductions_propagate_nan(dtype, compiled_cases):
    case = next(c for c in PROGRAMS if c.name == "reductions")
    f = _compiled(compiled_cases, case, dtype)
    x, long = case.inputs(np.random.default_rng(2), dtype)
    x[1, 2, 3] = np.nan
    x[2, 0, 0] = np.inf
    long[0, 5] = np.nan  # in a lane
    long[1, 67] = np.nan  # in the remainder
    long[2, 9] = np.inf
    # Eager max's VJP divides by the count of maxima, 0 in a nan row (masked out after).
    with np.errstate(invalid="ignore", divide="ignore"):
        out = _compare(case, f, [x, long])
    assert np.isnan(out[0]) and np.isnan(out[5])  # sum and max see the nan
    assert np.isnan(out[6]).sum() == 1 and np.isnan(out[6][1, 3]) and out[6][2, 0] == np.inf
    assert np.isnan(out[10][:2]).all() and out[10][2] == np.inf
    assert f.stats.traces == 1  # new data, same signature: no retrace
