"""Compiled equals eager at the edges of the softmax family, cross_entropy, in-place writes
to arguments and grad mode: values and gradients, float32 and float64.

tests/backend/test_ops_compiled.py checks every op on ordinary inputs; these are the edge
cases checked by hand once and kept here: softmax / log_softmax on non-contiguous views
(transposed, sliced) along each axis, on 0-d and empty inputs; cross_entropy with batch 1,
without a batch dim, on spatial (N, C, d1) input, with ``ignore_index``, class weights and
every reduction; in-place ops on arguments inside a compiled function; compiled calls under
``dg.no_grad()``. As there, several edge cases share one program, so that each costs one
trace and one forward and one backward kernel per dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.testing import assert_close

from .._support.compiled import B3, graph_ops
from .test_ops_compiled import DTYPES, Case, _as_tuple, _compare, _uniform

IDS = ["f32", "f64"]


@pytest.fixture(scope="module")
def compiled() -> Callable:
    """``compiled(program, dtype)``: one compiled function per (program, dtype), shared by
    the tests of this module (each Numba compile costs about a second)."""
    cache: dict = {}

    def get(fn: Callable, dtype) -> Callable:
        key = (fn.__name__, np.dtype(dtype))
        if key not in cache:
            cache[key] = dg.compile(fn)
        return cache[key]

    return get


def _check_compiled(case: Case, f: Callable) -> None:
    """One trace, a forward and a backward kernel, and the case's ops in them."""
    assert f.stats.traces == 1
    assert f.stats.kernels == 2
    (entry,) = f.entries()
    assert entry.mode == "train"
    lowered = set(graph_ops(entry.optimized)) | set(graph_ops(entry.backward_graph))
    assert set(case.ops) <= lowered, f"not compiled: {sorted(set(case.ops) - lowered)}"


# ------------------------------------------------------------------- softmax family


def softmax_views(x):
    # x (3, 4, 5) is contiguous; its transpose and strided slice are not. softmax along
    # every axis of the transpose, log_softmax along every axis of the slice, and the
    # negative spellings; then a transposed 2-D slice and a reversed one.
    xt = x.transpose(0, 2)  # (5, 4, 3)
    xs = x[:, 1:, ::2]  # (3, 3, 3)
    m = x[1].T  # (5, 4)
    return (F.softmax(xt, 0), F.softmax(xt, 1), F.softmax(xt, 2), F.log_softmax(xs, 0),
            F.log_softmax(xs, 1), F.log_softmax(xs, 2), F.log_softmax(xt, -1),
            F.softmax(xs, -2), F.softmax(m, 0), F.log_softmax(m, 1),
            x[:, ::-1].log_softmax(1))


def softmax_degenerate(s, e, e2):
    # s is 0-d (softmax 1, log_softmax 0, gradient 0); e (0, 3) and e2 (2, 0) are empty,
    # along the empty axis and across it.
    return (F.softmax(s, 0), F.log_softmax(s, -1), F.softmax(s * 2.0, dim=-1), F.softmax(e, 0),
            F.softmax(e, 1), F.log_softmax(e, 0), F.log_softmax(e, -1), F.softmax(e2, 1),
            F.softmax(e2, 0), F.log_softmax(e2, 1), F.log_softmax(e2.T, 0))


SOFTMAX_CASES = [
    Case("softmax_views", ("softmax", "log_softmax", "softmax_backward",
                           "log_softmax_backward"), softmax_views,
         lambda r, t: [_uniform(r, -3, 3, (3, 4, 5), t)]),
    Case("softmax_degenerate", ("softmax", "log_softmax"), softmax_degenerate,
         lambda r, t: [np.asarray(r.uniform(-1, 1), t), np.zeros((0, 3), t),
                       np.zeros((2, 0), t)]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("case", SOFTMAX_CASES, ids=lambda c: c.name)
def test_softmax_edges(case: Case, dtype, compiled):
    f = compiled(case.fn, dtype)
    for seed in (0, 1):  # the second call reuses the kernels
        _compare(case, f, case.inputs(np.random.default_rng(seed), dtype))
    _check_compiled(case, f)
    assert f.stats.cache_hits >= 1
    if case.name == "softmax_views":
        _check_distribution(f, case, dtype)


def _check_distribution(f: Callable, case: Case, dtype) -> None:
    """Not only equal to eager: the compiled softmax of a non-contiguous view sums to one
    along its axis and agrees with NumPy on the view's values (the same kernels, new
    data)."""
    (x,) = case.inputs(np.random.default_rng(2), dtype)
    out = _as_tuple(f(dg.tensor(x, requires_grad=True)))
    xt = x.transpose(2, 1, 0)
    for k, axis in enumerate((0, 1, 2)):
        e = np.exp(xt - xt.max(axis, keepdims=True))
        assert_close(out[k].numpy(), e / e.sum(axis, keepdims=True), **B3[dtype])
        assert_close(out[k].numpy().sum(axis), np.ones_like(xt.sum(axis)), **B3[dtype])
    assert f.stats.traces == 1


# --------------------------------------------------------------------- cross_entropy

_W = np.array([0.5, 2.0, 1.5], np.float32)  # class weights, a constant of the program


def cross_entropy_forms(x, one, single, sp, k, k1, k0, ks):
    # x (4, 3), one (1, 3) a batch of 1, single (3,) no batch dim, sp (2, 3, 5) spatial
    # (N, C, d1); targets k (4,), k1 (1,), k0 (), ks (2, 5). Every reduction of each form,
    # then class weights and ignore_index (the mean divides by the kept targets' weights).
    out = []
    for reduction in ("mean", "sum", "none"):
        out += [F.cross_entropy(x, k, reduction=reduction),
                F.cross_entropy(one, k1, reduction=reduction),
                F.cross_entropy(single, k0, reduction=reduction),
                F.cross_entropy(sp, ks, _W, ignore_index=1, reduction=reduction)]
    return tuple(out) + (
        F.cross_entropy(x, k, _W), F.cross_entropy(x, k, ignore_index=2, reduction="none"),
        F.cross_entropy(x, k, _W, ignore_index=2), F.cross_entropy(sp, ks),
        F.cross_entropy(one, k1, _W, ignore_index=1, reduction="none"),
        F.nll_loss(F.log_softmax(sp, 1), ks, _W, ignore_index=0))


def cross_entropy_runtime_weight(x, sp, k, ks, w):
    # The class weights as a runtime argument; detached, so no gradient is asked of them.
    wd = w.detach()
    return (F.cross_entropy(x, k, wd), F.cross_entropy(sp, ks, wd, reduction="sum"),
            F.cross_entropy(x, k, wd, ignore_index=1, reduction="none"),
            F.cross_entropy(sp, ks, wd, ignore_index=2))


def _targets(r, shape, ignored: int | None = None):
    """Class indices in [0, 3); with ``ignored``, that class once at least (a mask that
    ignores nothing would test nothing)."""
    k = r.integers(0, 3, shape)
    if ignored is not None and k.size:
        k.reshape(-1)[0] = ignored
    return k


CE_CASES = [
    Case("cross_entropy_forms", ("log_softmax", "nll_loss", "log_softmax_backward",
                                 "nll_loss_backward"), cross_entropy_forms,
         lambda r, t: [_uniform(r, -2, 2, (4, 3), t), _uniform(r, -2, 2, (1, 3), t),
                       _uniform(r, -2, 2, (3,), t), _uniform(r, -2, 2, (2, 3, 5), t),
                       _targets(r, 4, 2), _targets(r, 1, 0), np.asarray(r.integers(0, 3)),
                       _targets(r, (2, 5), 1)]),
    Case("cross_entropy_runtime_weight", ("log_softmax", "nll_loss", "nll_loss_backward"),
         cross_entropy_runtime_weight,
         lambda r, t: [_uniform(r, -2, 2, (4, 3), t), _uniform(r, -2, 2, (2, 3, 5), t),
                       _targets(r, 4, 1), _targets(r, (2, 5), 2),
                       _uniform(r, 0.5, 2.0, (3,), t)]),
]


def _run_with(fn: Callable, arrays: list, rg: tuple) -> tuple[list, list, list]:
    """Outputs, input gradients and the inputs after the call: like test_ops_compiled's
    ``_run``, but input ``i`` requires grad only where ``rg[i]``."""
    ts = [dg.tensor(a.copy(), requires_grad=g) for a, g in zip(arrays, rg)]
    outs = _as_tuple(fn(*ts))
    rng = np.random.default_rng(1)
    loss = None
    for o in outs:
        if o.dtype.kind == "f" and o.requires_grad:
            w = rng.uniform(0.5, 1.5, o.shape).astype(o.dtype)
            term = (o * w).sum().astype(np.float64)
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    grads = [None if t.grad is None else t.grad.numpy() for t in ts]
    return [o.numpy() for o in outs], grads, [t.numpy() for t in ts]


def _compare_with(name: str, fn: Callable, f: Callable, arrays: list, rg: tuple) -> list:
    """Compiled ``f`` against eager ``fn``: outputs, which inputs got a gradient and its
    value, and the inputs' values after the call (in-place writes). Returns the compiled
    outputs."""
    eager_out, eager_grads, eager_ins = _run_with(fn, arrays, rg)
    out, grads, ins = _run_with(f, arrays, rg)
    assert len(out) == len(eager_out)
    for k, (a, e) in enumerate(zip(out, eager_out)):
        assert a.dtype == e.dtype and a.shape == e.shape, f"{name} output {k}"
        assert_close(a, e, **B3[e.dtype], equal_nan=True, msg=f"{name} output {k}")
    for k, (a, e) in enumerate(zip(grads, eager_grads)):
        assert (a is None) == (e is None), (
            f"{name} input {k}: compiled grad {'None' if a is None else 'set'}, eager "
            f"{'None' if e is None else 'set'}")
        if e is not None:
            assert_close(a, e, **B3[e.dtype], msg=f"{name} grad of input {k}")
    for k, (a, e) in enumerate(zip(ins, eager_ins)):
        assert_close(a, e, **B3[e.dtype], msg=f"{name} input {k} after the call")
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("case", CE_CASES, ids=lambda c: c.name)
def test_cross_entropy_edges(case: Case, dtype, compiled):
    f = compiled(case.fn, dtype)
    for seed in (0, 1):
        arrays = case.inputs(np.random.default_rng(seed), dtype)
        # Floating inputs require grad: runtime class weights too (detached in the program,
        # so they must get no gradient).
        rg = tuple(a.dtype.kind == "f" for a in arrays)
        _compare_with(case.name, case.fn, f, arrays, rg)
    _check_compiled(case, f)
    assert f.stats.cache_hits >= 1
    if case.name == "cross_entropy_forms":
        _check_all_targets_ignored(f, case, dtype)


def _check_all_targets_ignored(f: Callable, case: Case, dtype) -> None:
    """Every target ignored: the mean is 0 / 0 = nan, the sum 0, gradients 0, compiled as
    eager (the same kernels, new data)."""
    r = np.random.default_rng(3)
    x, one, single, sp, _, _, k0, _ = case.inputs(r, dtype)
    arrays = [x, one, single, sp, np.full(4, 2), np.ones(1, np.int64), k0,
              np.ones((2, 5), np.int64)]
    rg = (True, True, True, True, False, False, False, False)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = _compare_with(case.name, case.fn, f, arrays, rg)
    # ignore_index: the spatial mean (3) ignores every target, nan; its sum (7) is 0 and
    # its per-element losses (11) too; so is x's mean with ignore_index=2 (14).
    assert np.isnan(out[3]) and out[7] == 0 and not out[11].any() and np.isnan(out[14])
    assert not out[13].any()  # x's per-sample losses, none kept
    assert f.stats.traces == 1


# Found by these tests (compiled differed from eager), fixed since.
def test_cross_entropy_weight_requiring_grad():
    """No gradient reaches class weights (nll_loss's VJP gives none): ``w.grad`` stays None
    compiled, as in eager mode."""
    # float64 only: the difference is in which gradients exist, not in any dtype's values.
    r = np.random.default_rng(0)
    fn = lambda x, k, w: F.cross_entropy(x, k, w)  # noqa: E731
    arrays = [_uniform(r, -2, 2, (4, 3), np.float64), _targets(r, 4),
              _uniform(r, 0.5, 2.0, (3,), np.float64)]
    _compare_with("weight", fn, dg.compile(fn), arrays, (True, False, True))


# ------------------------------------------------------------ in-place on arguments


def inplace_args(a, k, y):
    # a: float, no grad; k: int; y: requires grad. Writes to a and k (whole, through a
    # row view, through a strided column view) must reach the caller's tensors, and y's
    # gradient flow through the written values.
    a.mul_(2.0)
    a += y
    a[0].zero_()
    a[:, 1::2] *= y[:2]
    k += 1
    k[1:] *= 2
    b = a * y
    return b, k * 1, a.sum(1), F.softmax(a, 1) * y


INPLACE = Case("inplace_args", ("mul", "view_scatter"), inplace_args,
               lambda r, t: [_uniform(r, -1, 1, (3, 4), t), r.integers(-3, 4, (4,)),
                             _uniform(r, 0.5, 1.5, (4,), t)])


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_inplace_on_arguments(dtype, compiled):
    f = compiled(INPLACE.fn, dtype)
    for seed in (0, 1):
        arrays = INPLACE.inputs(np.random.default_rng(seed), dtype)
        _compare_with(INPLACE.name, INPLACE.fn, f, arrays, (False, False, True))
    assert f.stats.traces == 1 and f.stats.cache_hits >= 1
    (entry,) = f.entries()
    assert entry.mode == "train"
    lowered = set(graph_ops(entry.optimized)) | set(graph_ops(entry.backward_graph))
    assert set(INPLACE.ops) <= lowered


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_inplace_on_a_leaf_requiring_grad_raises(dtype):
    """As in eager mode, before any kernel is built (so it costs no compile)."""
    x = dg.tensor(np.ones(3, dtype), requires_grad=True)
    for fn, match in ((lambda x: x.add_(1.0) * 2.0, "a leaf Variable"),
                      (lambda x: x[1:].mul_(2.0) * 1.0, "a view of a leaf Variable")):
        with pytest.raises(RuntimeError, match=match) as eager:
            fn(x)
        f = dg.compile(fn)
        with pytest.raises(RuntimeError, match=match) as comp:
            f(x)
        assert str(comp.value) == str(eager.value)
        assert f.stats.kernels == 0
    assert np.array_equal(x.numpy(), np.ones(3, dtype)) and x.grad is None


@pytest.mark.filterwarnings("ignore:dg.compile.*runs eagerly:RuntimeWarning")
def test_inplace_on_a_non_leaf_argument():
    """Eager mode rebases a non-leaf argument's history onto an in-place op; dg.compile runs
    that signature eagerly (tests/compile/test_compile.py checks the warning)."""
    def fn(h, y):
        h.add_(y)
        return h * y

    def run(g):
        x = dg.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
        y = dg.tensor(np.array([0.5, 1.5, 2.0]), requires_grad=True)
        h = x * 1.0
        g(h, y).sum().backward()
        return h.numpy(), x.grad.numpy(), y.grad.numpy()

    for a, e in zip(run(dg.compile(fn)), run(fn)):
        assert_close(a, e, **B3[np.float64])


# ------------------------------------------------------------------------ no_grad


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_compiled_under_no_grad(dtype):
    """Under ``dg.no_grad()`` a compiled call builds an inference kernel: eager's values,
    outputs that do not require grad, no tape; in-place writes still reach the caller.
    Back in grad mode the same function gets its train entry and gradients."""
    cases = [(SOFTMAX_CASES[0], None), (INPLACE, (False, False, True))]
    for case, rg in cases:
        f = dg.compile(case.fn)
        arrays = case.inputs(np.random.default_rng(4), dtype)
        rg = rg or tuple(a.dtype.kind == "f" for a in arrays)
        ts_e = [dg.tensor(a.copy(), requires_grad=g) for a, g in zip(arrays, rg)]
        ts_c = [dg.tensor(a.copy(), requires_grad=g) for a, g in zip(arrays, rg)]
        with dg.no_grad():
            eager = _as_tuple(case.fn(*ts_e))
            out = _as_tuple(f(*ts_c))
        assert len(out) == len(eager)
        for k, (a, e) in enumerate(zip(out, eager)):
            assert not a.requires_grad and a.grad_fn is None, f"{case.name} output {k}"
            assert_close(a.numpy(), e.numpy(), **B3[e.dtype], equal_nan=True,
                         msg=f"{case.name} output {k}")
        for k, (a, e) in enumerate(zip(ts_c, ts_e)):
            assert_close(a.numpy(), e.numpy(), **B3[e.dtype], msg=f"{case.name} input {k}")
        assert f.stats.traces == 1 and f.stats.kernels == 1
        assert [e.mode for e in f.entries()] == [
            "step" if case is INPLACE else "inference"]
    # Grad mode again: a second entry (train) next to the inference one, eager's gradients.
    case = SOFTMAX_CASES[0]
    f = dg.compile(case.fn)
    arrays = case.inputs(np.random.default_rng(5), dtype)
    with dg.no_grad():
        f(*[dg.tensor(a, requires_grad=True) for a in arrays])
    _compare(case, f, arrays)
    assert f.stats.traces == 2
    assert sorted(e.mode for e in f.entries()) == ["inference", "train"]
