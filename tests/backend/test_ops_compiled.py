"""Every registered op, compiled, equals eager: forward values and gradients.

Driven by the registry: ``CASES`` lists small programs, each naming the ops it must put in
a compiled graph (forward or backward); ``test_every_op_has_a_compiled_case`` fails when an
op in ``dg.ops.OPS`` is in none of them. Several ops share one program so that the suite
compiles few kernels (each Numba compile costs about a second).

A case's function takes NumPy-array-shaped inputs; floating ones require grad. The eager
reference and the compiled call get the same data; gradients come from backward through a
weighted sum of the outputs, computed eagerly on the compiled outputs (so each case also
checks that compiled and eager code mix on the tape).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.modes import bind
from dualgraph.nn import functional as F
from dualgraph.ops import OPS
from dualgraph.ops import random as RND
from dualgraph.ops.shape import SCATTER
from dualgraph.testing import assert_close

from .._support.compiled import B3, graph_ops
from ..ops.decomp_programs import decompositions, decompositions_inputs

DTYPES = (np.float32, np.float64)


@dataclass(frozen=True)
class Case:
    name: str
    ops: tuple[str, ...]  # ops the compiled forward or backward graph must contain
    fn: Callable
    inputs: Callable[[np.random.Generator, type], list]  # arrays; floating ones need grad
    xfail: str | None = None  # a known bug, described for whoever fixes it


def _uniform(rng, lo, hi, shape, dtype):
    return rng.uniform(lo, hi, shape).astype(dtype)


# --------------------------------------------------------------------------- programs


def detached(x):
    # detach() in a traced function is a stop_gradient node: the gradient of x.detach() * x
    # is x, not 2x (eager gives x because the tape never records the detached value).
    return (x.detach() * x,)


def arith(x, y):
    # y broadcasts along x's first axis, so its gradient is summed back by the backward.
    return x + y, x - y, x * y, x / y, x ** y, -x, x ** 3.0, 2.0 ** x, 1.5 - x, y / 3.0


def unary(x):
    return (dg.exp(x), dg.log(x), dg.tanh(x), dg.sigmoid(x - 1.0), dg.sqrt(x), dg.sin(x),
            dg.cos(x))


def select(x, y):
    # Bool outputs come back as bool tensors next to the differentiable ones.
    return (dg.relu(x), dg.abs(x), dg.maximum(x, y), dg.minimum(x, y), dg.where(x < y, x, y),
            dg.maximum(x, 0.25), x < y, x <= y, x > y, x >= y, x == y, x != y)


def shapes(x, y):
    return (
        x.reshape(6, 4) * 2.0,
        x.transpose(2, 0, 1) + 1.0,
        y.expand(3, 4) * x[0, :, :],  # broadcast_to, then getitem (backward: scatter)
        x[1, :, ::2],
        x[..., None, 1:3] * 3.0,
        dg.concatenate([x, y.reshape(1, 1, 4) * x], axis=1),
        dg.stack([y, y * 2.0], 1),
    )


def scatter(g):
    # scatter is getitem's VJP; binding it directly checks its forward lowering too.
    return (bind(SCATTER, g * 2.0, shape=(4, 5), index=((1, 3, 1), (0, 5, 2))),)


def view_writes(x, w):
    # Writes through views (a transposed slice, a reshaped strided slice, an int index)
    # become view_scatter nodes into the base, forward and backward.
    y = x * 1.0
    y.T[1:3, 0].mul_(w[:2])
    y.reshape(2, 6)[1, ::2] += w[1:]
    y[2, 3] = 0.5
    return (y, y.T[1] * 2.0)


def casts(x, k):
    other = np.float64 if x.dtype == np.float32 else np.float32
    return x.astype(other) * 2.0, k.astype(x.dtype) * x, x.astype(other).sum()


def matmuls(a, b, v, w, bias, big_a, big_b):
    # Small products are loops in the generated code, big ones BLAS calls: both kinds.
    return (a @ b, v @ a, a @ w, v @ v, F.linear(a, b.T, bias), a.T @ a, big_a @ big_b,
            F.linear(big_a, big_b.T, big_b[0, :]))


def batched(p, r):
    return p @ r, p[:1] @ r  # the second broadcasts p's batch dimension


def int_prefix_index(x):
    # stack's VJP along axis 0 is the same kind of index (g[0], g[1]).
    return x[1] * 2.0, x[None, 0] + 1.0, dg.stack([x[:, 0], x[:, 1]], 0)


def batched_by_matrix(p, q):
    return p @ q, q.T @ p.transpose(0, 2, 1)


def reductions(x, long):
    # ``long`` has a long last axis (70 = 4 * 16 + 6): reduced with several accumulators
    # and a remainder loop in the generated code.
    return (x.sum(), x.sum(axis=0), x.sum(axis=(0, 2), keepdims=True), x.mean(axis=1),
            x.mean(), x.max(), x.amax(axis=1), x.amax(axis=0, keepdims=True), x.amax(axis=2),
            long.sum(axis=1), long.amax(axis=1), long.mean(), dg.exp(long).sum())


def random_ops(x, k):
    # From a given key eager binds the same counter-based ops as the kernel, so compiled
    # equals eager; dropout's backward regenerates the mask from the key.
    return (RND.dropout(x, k, 0.3, 0) * 2.0, RND.randn(k, (3, 4), x.dtype, 1) * x,
            RND.rand(k, (5,), x.dtype, 2))


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


CASES = [
    Case("arith", ("add", "sub", "mul", "div", "pow", "neg"), arith,
         lambda r, t: [_uniform(r, 0.5, 2.0, (3, 4), t), _uniform(r, 0.5, 1.5, (4,), t)]),
    Case("unary", ("exp", "log", "tanh", "sigmoid", "sqrt", "sin", "cos"), unary,
         lambda r, t: [_uniform(r, 0.2, 3.0, (2, 5), t)]),
    Case("select", ("relu", "threshold_backward", "abs", "maximum", "minimum", "where", "lt",
                    "le", "gt", "ge", "eq", "ne"), select,
         _with_ties),
    Case("shapes", ("reshape", "transpose", "broadcast_to", "getitem", "scatter",
                    "concatenate", "stack"), shapes,
         lambda r, t: [_uniform(r, -1, 1, (2, 3, 4), t), _uniform(r, -1, 1, (4,), t)]),
    Case("scatter", ("scatter", "getitem"), scatter,
         lambda r, t: [_uniform(r, -1, 1, (2, 3), t)]),
    Case("astype", ("astype",), casts,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t), r.integers(-3, 4, (3, 4))]),
    Case("matmul", ("matmul", "addmm"), matmuls,
         lambda r, t: [_uniform(r, -1, 1, (4, 4), t), _uniform(r, -1, 1, (4, 3), t),
                       _uniform(r, -1, 1, (4,), t), _uniform(r, -1, 1, (4,), t),
                       _uniform(r, -1, 1, (3,), t), _uniform(r, -1, 1, (32, 16), t),
                       _uniform(r, -1, 1, (16, 24), t)]),
    Case("matmul_batched", ("matmul",), batched,
         lambda r, t: [_uniform(r, -1, 1, (2, 3, 4), t), _uniform(r, -1, 1, (2, 4, 2), t)]),
    Case("reductions", ("sum", "mean", "max"), reductions,
         lambda r, t: [_uniform(r, -1, 1, (3, 4, 5), t), _uniform(r, -1, 1, (3, 70), t)]),
    Case("arg_reductions", ("min", "argmax", "argmin", "gather_axis", "scatter_add_axis"),
         arg_reductions,
         lambda r, t: [_uniform(r, -1, 1, (3, 4, 5), t), _uniform(r, -1, 1, (3, 70), t)]),
]
# Formerly known bugs (a partial int index, a batched @ unbatched matmul), fixed: kept as
# their own cases.
CASES += [
    Case("getitem_int_prefix", ("getitem", "stack"), int_prefix_index,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t)]),
    Case("matmul_batched_by_matrix", ("matmul",), batched_by_matrix,
         lambda r, t: [_uniform(r, -1, 1, (2, 3, 4), t), _uniform(r, -1, 1, (4, 5), t)]),
    Case("stop_gradient", ("stop_gradient",), detached,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t)]),
    Case("random", ("randn", "rand", "dropout"), random_ops,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t), np.array(r.integers(0, 2 ** 62))]),
    Case("view_writes", ("view_scatter", "getitem", "transpose", "reshape"), view_writes,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t), _uniform(r, -1, 1, (4,), t)]),
]
BROKEN: list = []
ALL_CASES = [
    pytest.param(c, id=c.name, marks=pytest.mark.xfail(strict=True, reason=c.xfail))
    if c.xfail else pytest.param(c, id=c.name)
    for c in CASES + BROKEN
]


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
    grads = [t.grad.numpy() if t.requires_grad else None for t in ts]
    return [o.numpy() for o in outs], grads


def _compare(case: Case, compiled: Callable, arrays: list) -> list:
    """Check compiled outputs and gradients against eager; returns the compiled outputs."""
    eager_out, eager_grads = _run(case.fn, arrays)
    out, grads = _run(compiled, arrays)
    assert len(out) == len(eager_out)
    for k, (a, e) in enumerate(zip(out, eager_out)):
        assert_close(a, e, **B3[e.dtype], equal_nan=True, msg=f"{case.name} output {k}")
    for k, (a, e) in enumerate(zip(grads, eager_grads)):
        if e is not None:
            assert_close(a, e, **B3[e.dtype], equal_nan=True,
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


def test_every_op_has_a_compiled_case():
    covered = {op for case in CASES for op in case.ops}
    missing = sorted(set(OPS) - covered)
    assert not missing, f"ops with no compiled case in CASES: {missing}"
    unknown = sorted(covered - set(OPS))
    assert not unknown, f"CASES name ops that are not registered: {unknown}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", ALL_CASES)
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
    case = next(c for c in CASES if c.name == "select")
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
    case = next(c for c in CASES if c.name == "reductions")
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


# ============================================================================ math
# The math primitives of dualgraph/ops/math.py, and one function over many compositions
# (activations, statistics, tests): compositions need no lowering, but must compile.
def math_unary(x, s):
    # x in [0.2, 0.9] (inside every domain); s on a grid off the integers and halves.
    return (dg.tan(x), dg.asin(x), dg.acos(x), dg.atan(x), dg.sinh(x), dg.cosh(x),
            dg.asinh(x), dg.acosh(x + 1.0), dg.atanh(x), dg.erf(x - 0.5), dg.log2(x),
            dg.log10(x), dg.log1p(x), dg.expm1(x), dg.sign(s) * x, dg.floor(s) + x,
            dg.ceil(s) * x, dg.round(s) - x, dg.trunc(s) + x)


def math_binary(x, y, k):
    return (dg.copysign(x, y - 1.0), dg.fmod(x * 4.0, y), (x * 4.0) % (y - 2.0), x // y,
            dg.atan2(x, y - 1.0), k % 3, k // -2, dg.fmod(k, 2) * x, dg.round(k * 0.5) + x)


def bitwise(x, k, j):
    m = k > 0
    return (x * 2.0, k & j, k | j, k ^ j, ~k, k << 2, k >> 1, m & (j > 0), ~m, m | (j < 0),
            m ^ (j > 1))


def composites(x, y, s):
    F_ = F
    return (F_.gelu(x), dg.erf(y), F_.gelu(x, approximate="tanh"), F_.silu(x), F_.elu(s),
            F_.celu(s, 0.5),
            F_.selu(s), F_.softplus(x, 2.0, 1.0), F_.softsign(x), F_.hardtanh(s * 0.5),
            F_.relu6(s * 3.0), F_.hardsigmoid(s * 2.0), F_.hardswish(s * 2.0),
            F_.leaky_relu(s, 0.1), F_.mish(x), F_.logsigmoid(x), F_.softmin(x, 1),
            F_.normalize(x), dg.var(x, 1), dg.std(x, 0, correction=0), dg.logsumexp(x, 1),
            dg.lerp(x, y, 0.3), dg.lerp(x, y, y), dg.logaddexp(x, y), dg.rsqrt(y + 2.0),
            dg.exp2(x), dg.square(x), dg.reciprocal(y + 2.0), dg.frac(s),
            dg.div(s, y + 2.0, rounding_mode="trunc"), dg.add(x, y, alpha=2.0),
            dg.isclose(x, y), dg.isfinite(x / s), dg.isnan(x), dg.isinf(x),
            dg.logical_and(x > 0, y > 0), dg.logical_not(s > 0), dg.any(x > 1.0, 1),
            dg.all(x > -1.5), dg.amin(x, 0), x.amax())


def _off_grid(r, shape, t):
    """Values k/2 + 1/4: never an integer or a half, so rounding is unambiguous."""
    return ((r.integers(-6, 6, shape) * 0.5) + 0.25).astype(t)


CASES += [
    Case("math_unary", ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                        "atanh", "erf", "log2", "log10", "log1p", "expm1", "sign", "floor",
                        "ceil", "round", "trunc"), math_unary,
         lambda r, t: [_uniform(r, 0.2, 0.9, (2, 5), t), _off_grid(r, (2, 5), t)]),
    Case("math_binary", ("copysign", "fmod", "remainder", "floor_divide", "atan2"),
         math_binary,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t), _uniform(r, 0.5, 1.5, (4,), t),
                       r.integers(-5, 6, (3, 4))]),
    Case("bitwise", ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift",
                     "right_shift"), bitwise,
         lambda r, t: [_uniform(r, -1, 1, (3,), t), r.integers(-5, 6, (2, 3)),
                       r.integers(-5, 6, (3,))]),
    Case("composites", ("erf", "expm1", "log1p", "trunc", "gelu", "gelu_backward"), composites,
         lambda r, t: [_uniform(r, -2, 2, (3, 4), t), _uniform(r, -1, 1, (4,), t),
                       _off_grid(r, (3, 4), t)]),
]
ALL_CASES += [pytest.param(c, id=c.name) for c in CASES[-4:]]


def prods(x, k):
    return x.prod(1), x.prod(), dg.prod(x, (0, 2), keepdim=True), k.prod(0) * 1.5, x.prod(0)


CASES.append(Case("prod", ("prod",), prods,
                  lambda r, t: [_uniform(r, 0.5, 1.5, (2, 3, 4), t), r.integers(-3, 4, (3, 2))]))
ALL_CASES.append(pytest.param(CASES[-1], id="prod"))


# ---- normalisation and modules
def norms(x, w, b, v):
    return (F.layer_norm(x, (4,), w, b), F.layer_norm(x, (3, 4)), F.layer_norm(x, 4, None, b),
            F.group_norm(v, 2, w, b), F.batch_norm(v, None, None, w, b, training=True),
            F.instance_norm(v), F.batch_norm(v, w * 0.1, b * b + 0.5, b, w))


CASES.append(Case("norms", ("layer_norm",), norms,
                  lambda r, t: [_uniform(r, -2, 2, (2, 3, 4), t), _uniform(r, 0.5, 1.5, (4,), t),
                                _uniform(r, -1, 1, (4,), t), _uniform(r, -2, 2, (2, 4, 3), t)]))
ALL_CASES.append(pytest.param(CASES[-1], id="norms"))
# ---- convolution. One program over conv2d (bias, stride, padding, groups,
# dilation, 'same'), conv1d, conv_transpose2d, unfold and fold; its backward holds im2col,
# col2im and batched matmuls.
def convolutions(x, w, b, wg, s, wt):
    return (F.conv2d(x, w, b, stride=2, padding=1),
            F.conv2d(x, wg, padding="same", dilation=(1, 2), groups=2),
            F.conv1d(s, w[:, :, 0], b, padding=1),
            F.conv_transpose2d(x, wt, b[:2], stride=2, padding=1, output_padding=1),
            F.unfold(x, 2, padding=1, stride=(2, 1)),
            F.fold(F.unfold(x, (2, 3), dilation=(2, 1)) * 2.0, (5, 6), (2, 3), dilation=(2, 1)))


CASES.append(Case("convolution", ("conv2d", "im2col", "col2im"), convolutions,
                  lambda r, t: [_uniform(r, -1, 1, (2, 4, 5, 6), t),
                                _uniform(r, -1, 1, (3, 4, 3, 2), t),
                                _uniform(r, -1, 1, (3,), t), _uniform(r, -1, 1, (4, 2, 2, 3), t),
                                _uniform(r, -1, 1, (2, 4, 7), t),
                                _uniform(r, -1, 1, (4, 2, 3, 3), t)]))
ALL_CASES.append(pytest.param(CASES[-1], id="convolution"))
# ---- indexing. One program for index / index_put / gather_axis through their spellings:
# constant and traced (k) indices, repeats (the backward accumulates), a write through a
# basic-index view, and a traced mask written to (a where).
def indexing(x, w, v, k):
    a = x[dg.tensor([2, 0, 2])] * x[k]
    b = x[:, [-1, 1]]
    c = x.gather(1, dg.tensor([[0, 3], [1, 1], [2, 0]]))
    e = F.embedding(dg.tensor([[4, 0], [1, 4]]), w)
    y = x * 1.0
    y[dg.tensor([1, 0])] = v
    y[2, [0, 3]] = 0.5
    y[x > 0.5] = 0.0
    z = x.index_add(0, k[:2], v)
    m = x.masked_fill(x < -0.5, 1.0)
    return a, b, c, e, y, z, m


CASES += [
    Case("indexing", ("index", "index_put", "view_scatter", "gather_axis"), indexing,
         lambda r, t: [_uniform(r, -1, 1, (3, 4), t), _uniform(r, -1, 1, (5, 3), t),
                       _uniform(r, -1, 1, (2, 4), t), np.array([2, -1, 0])]),
]
ALL_CASES += [pytest.param(CASES[-1], id=CASES[-1].name)]
# ---- scans and sorting
def scans(x, y):
    cm, cn = x.cummax(1), dg.cummin(x, 0)
    return (x.cumsum(1), dg.cumsum(x, 0), x.cumprod(1), dg.logcumsumexp(x * 30.0, 1),
            cm.values, cm.indices, cn.values, cn.indices, y.cumsum(0), dg.cumprod(y, 0))


def sorting(x, y):
    s, t = x.sort(1), dg.topk(x, 2, 0)
    d = dg.sort(x, 0, descending=True)
    kv, md = dg.kthvalue(x, 2, 1), x.median(0)
    return (s.values, s.indices, d.values, d.indices, t.values, t.indices, kv.values,
            kv.indices, md.values, md.indices, x.median(), dg.nanmedian(x, 1, keepdim=True)[0],
            x.msort(), dg.searchsorted(dg.sort(y).values, x), dg.bucketize(x, y.sort()[0]),
            dg.histc(x, 4), dg.count_nonzero(x > 0, 1), y.sort(descending=True).values)


CASES += [
    Case("scans", ("cumsum", "cumprod", "logcumsumexp", "argcummax", "argcummin", "gather_axis",
                   "scatter_add_axis"), scans,
         lambda r, t: [_uniform(r, -1, 1, (3, 5), t), _uniform(r, 0.5, 1.5, (4,), t)]),
    Case("sorting", ("argsort", "gather_axis", "scatter_add_axis", "searchsorted", "histc"),
         sorting, lambda r, t: [_uniform(r, -1, 1, (4, 5), t), _uniform(r, -1, 1, (6,), t)]),
]
ALL_CASES += [pytest.param(c, id=c.name) for c in CASES[-2:]]
# ---- special functions and small matrices (dualgraph/ops/math.py, ops/matrix.py)
def special_matrix(x, p, m):
    # x (2, 3) in (-0.9, 0.9); p (2, 3) positive; m (2, 3, 3) well conditioned.
    return (dg.erfc(x), dg.erfinv(x), dg.lgamma(p), dg.digamma(p), dg.polygamma(1, p),
            dg.linalg.det(m), dg.linalg.inv(m))


CASES.append(Case(
    "special_matrix", ("erfc", "erfinv", "lgamma", "polygamma", "det", "inv"), special_matrix,
    lambda r, t: [_uniform(r, -0.9, 0.9, (2, 3), t), _uniform(r, 0.5, 3.0, (2, 3), t),
                  (np.eye(3) * 3.0 + r.uniform(-0.5, 0.5, (2, 3, 3))).astype(t)]))
ALL_CASES.append(pytest.param(CASES[-1], id="special_matrix"))
# ---- pooling and padding (dualgraph/ops/pool.py): every pooling, padding and
# resampling primitive in one program (one compile per dtype).
def pooling(x, s):
    v, i = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    return (v, i, F.max_pool2d(x[0], (2, 3), ceil_mode=True), F.avg_pool2d(x, 3, 2, 1),
            F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False),
            F.adaptive_avg_pool2d(x, (3, None)), F.adaptive_max_pool2d(x, 2),
            F.pad(x, (1, -1, 2, 0), value=0.5), F.pad(x, (2, 1, 1, 2), mode="reflect"),
            F.pad(s, (2, 3), mode="replicate"), F.pad(s, (1, 2), mode="circular"),
            s.unfold(-1, 3, 2) * 2.0, F.interpolate(x, scale_factor=2),
            F.interpolate(x, size=(4, 7), mode="bilinear"), dg.nn.Flatten()(x) * 1.5)


CASES.append(Case("pooling", ("max_pool2d_indices", "adaptive_max_pool2d_indices",
                              "pool_gather", "pool_scatter", "avg_pool2d",
                              "avg_pool2d_backward", "adaptive_avg_pool2d",
                              "adaptive_avg_pool2d_backward", "pad", "pad_index",
                              "pad_index_backward", "unfold", "unfold_backward"), pooling,
                  lambda r, t: [_uniform(r, -1, 1, (2, 3, 6, 5), t),
                                _uniform(r, -1, 1, (2, 3, 6), t)]))
ALL_CASES.append(pytest.param(CASES[-1], id="pooling"))
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


def einsums(a, b, c, s):
    # a (2, 3, 4), b (2, 4, 5), c (4,), s (3, 3).
    return (dg.einsum("bij,bjk->bik", a, b), dg.einsum("bij,bjk", a, b), dg.einsum("ii->i", s),
            dg.einsum("ii", s), dg.einsum("bij,j->bi", a, c), dg.einsum("i,j->ij", c, c),
            dg.einsum("...j,j", a, c), dg.einsum("bij,bkj->bik", a, a),
            dg.einsum("bij,bjk,k->bi", a, b, b[0, 0]), dg.einsum("ij->ji", s),
            dg.einsum("bij->", a))


CASES += [
    Case("shape_extra", ("diagonal", "diag_scatter", "flip", "view_dtype", "view_scatter"),
         shape_extra,
         lambda r, t: [_uniform(r, -1, 1, (2, 3, 4), t), _uniform(r, -1, 1, (3,), t),
                       _uniform(r, -1, 1, (3,), t)]),
    Case("einsum", ("matmul", "diagonal", "transpose", "sum"), einsums,
         lambda r, t: [_uniform(r, -1, 1, (2, 3, 4), t), _uniform(r, -1, 1, (2, 4, 5), t),
                       _uniform(r, -1, 1, (4,), t), _uniform(r, -1, 1, (3, 3), t)]),
]
ALL_CASES += [pytest.param(c, id=c.name) for c in CASES[-2:]]
# ============================================================================ losses
# Losses and attention (dualgraph/ops/softmax.py, ops/loss.py): one program over the softmax
# family and every cross_entropy / nll_loss form; the backward ops appear in the backward graph.
_W3 = np.array([0.5, 2.0, 1.5], np.float32)


def losses(x, x3, p, k, k3):
    return (F.cross_entropy(x, k), F.cross_entropy(x, k, _W3, ignore_index=1, reduction="none",
                                                   label_smoothing=0.1),
            F.nll_loss(F.log_softmax(x3, 1), k3, reduction="sum"),
            F.cross_entropy(x, p, label_smoothing=0.2), F.cross_entropy(x3, k3, _W3),
            F.softmax(x3, dim=1), dg.softmax(x, 0), x.log_softmax(0), F.cross_entropy(x[0], k[0]))


CASES.append(Case("losses", ("log_softmax", "softmax", "nll_loss", "log_softmax_backward",
                             "softmax_backward", "nll_loss_backward"), losses,
                  lambda r, t: [_uniform(r, -2, 2, (5, 3), t), _uniform(r, -2, 2, (2, 3, 4), t),
                                _uniform(r, 0, 1, (5, 3), t), r.integers(0, 3, 5),
                                r.integers(0, 3, (2, 4))]))
ALL_CASES.append(pytest.param(CASES[-1], id="losses"))


class _Softsign(dg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x / (1 + x.abs())

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / (1 + x.abs()) ** 2


def custom_functions(x):
    return _Softsign.apply(x), _Softsign.apply(x * x).sum(0)


CASES.append(Case("custom_function", ("custom_function",), custom_functions,
                  lambda r, t: [_uniform(r, -1, 1, (3, 4), t)]))
ALL_CASES.append(pytest.param(CASES[-1], id=CASES[-1].name))


# The matrix decompositions (their program is shared with tests/ops/test_decomp.py).
CASES.append(Case("decompositions", ("cholesky", "cholesky_info", "eigh", "svd", "qr",
                                     "solve_triangular", "pinv", "matrix_exp"), decompositions,
                  decompositions_inputs))
ALL_CASES.append(pytest.param(CASES[-1], id=CASES[-1].name))


# ---- recurrences: each mode and direction of rnn_layer as one op holding the time loop;
# the backward graph holds rnn_layer_backward. The whole workspace is an output, so the
# gradient of every column (states and gates) is compared.
def recurrences(x, h0, c0, w4i, w4h, b4, w3i, w3h, b3, w1i, w1h, b1):
    from dualgraph.ops.recurrent import rnn_layer

    return (rnn_layer(x, h0, c0, w4i, w4h, b4, b4 * 0.5, mode="lstm", reverse=True),
            rnn_layer(x, h0, None, w3i, w3h, b3, b3 * 0.5, mode="gru"),
            rnn_layer(x, h0, None, w1i, w1h, b1, b1 * 0.5, mode="tanh"),
            rnn_layer(x, h0, None, w1i, w1h, b1, b1 * 0.5, mode="relu", reverse=True))


def _recurrence_inputs(r, t):
    n, i = 3, 2
    shapes = [(4, 2, i), (2, n), (2, n)]
    for g in (4, 3, 1):
        shapes += [(g * n, i), (g * n, n), (g * n,)]
    return [_uniform(r, -1, 1, s, t) for s in shapes]


CASES.append(Case("recurrences", ("rnn_layer", "rnn_layer_backward"), recurrences,
                  _recurrence_inputs))
ALL_CASES.append(pytest.param(CASES[-1], id=CASES[-1].name))
