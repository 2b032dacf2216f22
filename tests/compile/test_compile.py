"""`dg.compile` (API.md B3): signatures, counters, modes, training loops, errors.

Every test that checks a result also checks a counter (traces, cache hits, kernels), so a
"compiler" that silently ran eagerly would fail. Compiles cost about a second each: the
functions are small, and several tests share one compiled function through module-scoped
fixtures.
"""

from __future__ import annotations

import types
import warnings

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import build
from dualgraph.nn import functional as F
from dualgraph.passes import optimize
from dualgraph.testing import assert_close

from .._support.compiled import B3, RTOL
from .._support.tolerance import tolerance


def _randn(*shape, dtype=np.float64, seed=0, requires_grad=False):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return dg.tensor(data, requires_grad=requires_grad)


class MLP(dg.nn.Module):
    """in -> hidden (tanh) -> out, initialised from a seed in any float dtype, so that an
    eager and a compiled copy start from the same parameters."""

    def __init__(self, sizes=(6, 8, 3), dtype=np.float64, seed=0) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        n_in, hidden, n_out = sizes
        self.w1 = dg.nn.Parameter(rng.normal(0, 0.5, (hidden, n_in)).astype(dtype))
        self.b1 = dg.nn.Parameter(rng.normal(0, 0.1, (hidden,)).astype(dtype))
        self.w2 = dg.nn.Parameter(rng.normal(0, 0.5, (n_out, hidden)).astype(dtype))
        self.b2 = dg.nn.Parameter(rng.normal(0, 0.1, (n_out,)).astype(dtype))

    def forward(self, x):
        return F.linear(dg.tanh(F.linear(x, self.w1, self.b1)), self.w2, self.b2)


def _params(model) -> dict:
    return {k: p.numpy().copy() for k, p in model.named_parameters()}


def _assert_same_params(a, b, what=""):
    pa, pb = _params(a), _params(b)
    assert pa.keys() == pb.keys()
    for k in pa:
        assert_close(pa[k], pb[k], **B3[pb[k].dtype], msg=f"{what} {k}")


def _counting(kernel, monkeypatch) -> list:
    """Make ``kernel`` count its runs: proof that a call ran the compiled code."""
    calls = []
    fn = kernel.fn

    def counted(*args):
        calls.append(1)
        return fn(*args)

    monkeypatch.setattr(kernel, "fn", counted)
    return calls


# ------------------------------------------------------------------ shared functions


def poly(x, y):
    return (x * y + dg.exp(y) * 0.5).sum(axis=1)


@pytest.fixture(scope="module")
def poly_c():
    """A compiled function shared by the signature tests (each adds its signatures)."""
    return dg.compile(poly)


# ------------------------------------------------------------------------- counters


def test_counters_prove_compilation(monkeypatch):
    f = dg.compile(poly)
    x, y = _randn(4, 3), _randn(4, 3, seed=1)
    outs = [f(x, y) for _ in range(3)]
    s = f.stats
    assert (s.calls, s.traces, s.cache_hits, s.kernels) == (3, 1, 2, 1)
    assert s.retrace_reasons == []
    assert s.trace_seconds > 0 and s.numba_seconds > 0
    assert s.compile_seconds >= s.numba_seconds
    (entry,) = f.entries()
    assert entry.mode == "inference"
    assert isinstance(entry.kernel.fn, numba.core.registry.CPUDispatcher)
    assert len(entry.kernel.fn.signatures) == 1  # one Numba specialization, no more
    for out in outs:
        assert_close(out.numpy(), poly(x, y).numpy(), **B3[np.float64])
    # The fourth call runs the Numba kernel, once, and traces nothing.
    ran = _counting(entry.kernel, monkeypatch)
    assert_close(f(x, y).numpy(), poly(x, y).numpy(), **B3[np.float64])
    assert len(ran) == 1 and f.stats.traces == 1


def test_train_mode_has_one_tape_node_and_two_kernels(monkeypatch):
    f = dg.compile(poly)
    x, y = _randn(4, 3, requires_grad=True), _randn(4, 3, seed=1, requires_grad=True)
    out = f(x, y)
    assert out.requires_grad and not out.is_leaf
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    assert f.stats.kernels == 2
    (entry,) = f.entries()
    assert entry.mode == "train"
    assert entry.kernel is not None and entry.bwd_kernel is not None
    ran = _counting(entry.bwd_kernel, monkeypatch)
    out.sum().backward()
    assert len(ran) == 1  # the gradient came from the compiled backward kernel
    ex, ey = _randn(4, 3, requires_grad=True), _randn(4, 3, seed=1, requires_grad=True)
    poly(ex, ey).sum().backward()
    assert_close(x.grad.numpy(), ex.grad.numpy(), **B3[np.float64])
    assert_close(y.grad.numpy(), ey.grad.numpy(), **B3[np.float64])
    # Two calls alive at once: each keeps its own residuals until its backward.
    x2 = _randn(4, 3, seed=2, requires_grad=True)
    y2 = _randn(4, 3, seed=3, requires_grad=True)
    a, b = f(x2, y2), f(y2, x2)
    (a * 2.0 + b).sum().backward()
    ex2 = _randn(4, 3, seed=2, requires_grad=True)
    ey2 = _randn(4, 3, seed=3, requires_grad=True)
    (poly(ex2, ey2) * 2.0 + poly(ey2, ex2)).sum().backward()
    assert_close(x2.grad.numpy(), ex2.grad.numpy(), **B3[np.float64])
    assert_close(y2.grad.numpy(), ey2.grad.numpy(), **B3[np.float64])
    assert f.stats.traces == 1 and len(ran) == 3


def test_new_shape_retraces_and_says_why(poly_c):
    before = poly_c.stats.traces
    poly_c(_randn(4, 3), _randn(4, 3))
    poly_c(_randn(5, 3), _randn(5, 3))
    assert poly_c.stats.traces >= before + 1
    reason = poly_c.stats.retrace_reasons[-1]
    assert "argument 0" in reason and "shape" in reason
    assert "(5, 3)" in reason and "(4, 3)" in reason
    # Both signatures stay cached: going back does not retrace.
    traces = poly_c.stats.traces
    poly_c(_randn(4, 3), _randn(4, 3))
    poly_c(_randn(5, 3), _randn(5, 3))
    assert poly_c.stats.traces == traces


def test_dtype_and_requires_grad_are_part_of_the_signature(poly_c):
    x32, y32 = _randn(4, 3, dtype=np.float32), _randn(4, 3, dtype=np.float32)
    poly_c(_randn(4, 3), _randn(4, 3))
    out = poly_c(x32, y32)
    assert out.dtype == np.float32
    reason = poly_c.stats.retrace_reasons[-1]
    assert "argument 0" in reason and "dtype" in reason and "float32" in reason
    assert_close(out.numpy(), poly(x32, y32).numpy(), **B3[np.float32])
    poly_c(_randn(4, 3), _randn(4, 3))
    poly_c(_randn(4, 3), _randn(4, 3, requires_grad=True))
    assert "argument 1" in poly_c.stats.retrace_reasons[-1]
    assert "requires_grad" in poly_c.stats.retrace_reasons[-1]


def test_grad_mode_is_part_of_the_signature():
    f = dg.compile(poly)
    x = _randn(4, 3, requires_grad=True)
    assert f(x, x).requires_grad
    with dg.no_grad():
        out = f(x, x)
    assert not out.requires_grad and out.grad_fn is None
    assert f.stats.traces == 2 and f.stats.retrace_reasons == ["grad mode off instead of on"]
    train, inference = f.entries()
    assert (train.mode, inference.mode) == ("train", "inference")
    assert inference.bwd_kernel is None
    assert_close(out.numpy(), poly(x, x).numpy(), **B3[np.float64])


def test_zero_dimensional_inputs_and_outputs():
    f = dg.compile(lambda a, b: a * b + a ** 3.0)
    a, b = dg.tensor(2.0, requires_grad=True), dg.tensor(3.0, requires_grad=True)
    out = f(a, b)
    assert out.shape == () and float(out.numpy()) == 14.0
    out.backward()
    assert (a.grad.shape, float(a.grad.numpy()), float(b.grad.numpy())) == ((), 15.0, 2.0)


def test_non_contiguous_inputs():
    f = dg.compile(lambda x, w: (x @ w).sum(axis=1) * 2.0)
    w = _randn(3, 2)
    base = _randn(3, 8)
    for x in (base[:, :4].T, base.T[::2], base.T[1:5]):  # transposed and strided views
        assert not x.numpy().flags.c_contiguous
        assert_close(f(x, w).numpy(), (x.numpy() @ w.numpy()).sum(axis=1) * 2.0, **B3[np.float64])
    assert f.stats.traces == 1


def test_python_scalars_are_inputs_or_baked_and_keyed():
    @dg.compile
    def scale(x, a, flag):
        return x * a if flag else x - a

    x = _randn(3)
    assert_close(scale(x, 2.0, True).numpy(), x.numpy() * 2.0, **B3[np.float64])
    assert_close(scale(x, 3.0, True).numpy(), x.numpy() * 3.0, **B3[np.float64])
    assert_close(scale(x, 3.0, False).numpy(), x.numpy() - 3.0, **B3[np.float64])
    # The float is a graph input; the bool is baked in and keyed.
    assert scale.stats.traces == 2
    assert "argument 2" in scale.stats.retrace_reasons[0]
    assert_close(scale(x, 2.0, True).numpy(), x.numpy() * 2.0, **B3[np.float64])
    assert scale.stats.traces == 2 and scale.stats.cache_hits == 2
    assert all(len(e.graph.inputs) == 2 for e in scale.entries())

    # A float the function uses as a Python value is baked in: a literal in the graph.
    @dg.compile
    def rounded(x, a):
        return x * round(a, 1)

    assert_close(rounded(x, 2.04).numpy(), x.numpy() * 2.0, **B3[np.float64])
    assert_close(rounded(x, 3.04).numpy(), x.numpy() * 3.0, **B3[np.float64])
    assert rounded.stats.traces == 2
    assert "3.04" in rounded.stats.retrace_reasons[0]
    graphs = {str(e.graph) for e in rounded.entries()}
    assert any("mul %0, 2.0" in g for g in graphs), graphs
    assert all(len(e.graph.inputs) == 1 for e in rounded.entries())


def test_numpy_array_arguments_are_inputs():
    f = dg.compile(lambda x, a: (x * a).sum())
    x = _randn(3, requires_grad=True)
    a = np.array([1.0, 2.0, 3.0])
    out = f(x, a)
    assert_close(out.numpy(), (x.numpy() * a).sum(), **B3[np.float64])
    out.backward()
    assert_close(x.grad.numpy(), a, **B3[np.float64])
    # New values in an array of the same shape: no retrace (an input, not a constant).
    assert_close(f(x, a * 2).numpy(), (x.numpy() * a * 2).sum(), **B3[np.float64])
    assert f.stats.traces == 1


def test_integer_and_bool_values():
    def f(i):
        # i.mean() raises as in PyTorch (tests/ops/test_reductions_parity.py): a float mean.
        return (i * 2 + 1, (i * i).sum(), i / 2, i.amax(axis=0), (i * 1.0).mean(), dg.exp(i), i > 2,
                dg.where(i > 2, 1.0, 0.0).sum())

    i = dg.tensor(np.arange(6).reshape(2, 3))
    out = dg.compile(f)(i)
    expected = f(i)
    for k, (a, e) in enumerate(zip(out, expected)):
        assert_close(a.numpy(), e.numpy(), **B3[e.dtype], msg=f"output {k}")
    assert [o.dtype for o in out][:2] == [np.int64, np.int64] and out[6].dtype == np.bool_


def test_verify_catches_a_stale_baked_value():
    hyper = types.SimpleNamespace(scale=2.0)  # a plain object's attribute: not guarded
    f = dg.compile(lambda x: x * hyper.scale, verify=True)
    x = _randn(3)
    assert_close(f(x).numpy(), x.numpy() * 2.0, **B3[np.float64])
    hyper.scale = 3.0  # baked into the trace: the compiled code still multiplies by 2
    with pytest.raises(dg.StaleTraceError, match="baked"):
        f(x)
    assert f.stats.traces == 1


def test_retrace_budget():
    f = dg.compile(lambda x, a: x * a if a else x, strict=True, max_retraces=2)
    x = _randn(3)
    for a in (1.0, 2.0, 3.0):  # a float branched on is baked: each value is a new trace
        assert_close(f(x, a).numpy(), x.numpy() * a, **B3[np.float64])
    with pytest.raises(dg.RetraceLimitError, match="retraced 2 times") as info:
        f(x, 4.0)
    assert "4.0 instead of 3.0" in str(info.value)  # the reasons are listed
    assert f.stats.traces == 3
    # Not strict: warn once and run eagerly from then on (no more compiles).
    g = dg.compile(lambda x, a: x * a if a else x, max_retraces=0)
    g(x, 1.0)
    with pytest.warns(RuntimeWarning, match="Running eagerly"):
        assert_close(g(x, 5.0).numpy(), x.numpy() * 5.0, **B3[np.float64])
    assert_close(g(x, 6.0).numpy(), x.numpy() * 6.0, **B3[np.float64])
    assert g.stats.traces == 1


# ------------------------------------------------------------- compiled and eager mix


def test_compiled_output_feeds_eager_ops_and_backward():
    f = dg.compile(lambda x, w: dg.tanh(x @ w))
    x0 = _randn(5, 4)
    w = _randn(4, 3, seed=1, requires_grad=True)
    x = dg.tensor(x0.numpy(), requires_grad=True)
    # eager -> compiled -> eager: the compiled input is a non-leaf, the output feeds
    # eager ops, and backward crosses both boundaries.
    h = x * 2.0 + 1.0
    loss = (f(h, w) * _randn(5, 3, seed=2)).sum() + (h ** 2).mean()
    loss.backward()
    assert f.stats.traces == 1 and f.stats.kernels == 2
    ex = dg.tensor(x0.numpy(), requires_grad=True)
    ew = _randn(4, 3, seed=1, requires_grad=True)
    eh = ex * 2.0 + 1.0
    eloss = (dg.tanh(eh @ ew) * _randn(5, 3, seed=2)).sum() + (eh ** 2).mean()
    eloss.backward()
    assert_close(loss.numpy(), eloss.numpy(), **B3[np.float64])
    assert_close(x.grad.numpy(), ex.grad.numpy(), **B3[np.float64])
    assert_close(w.grad.numpy(), ew.grad.numpy(), **B3[np.float64])


def test_multiple_outputs_each_carry_the_gradient():
    f = dg.compile(lambda x: (x.sum(), x * x, dg.sin(x)))
    x = _randn(3, 2, requires_grad=True)
    s, sq, sn = f(x)
    assert s.grad_fn is not None and sq.grad_fn is not None
    (sq.sum() + 3.0 * sn.sum()).backward()  # s unused: its gradient is zero
    xn = x.numpy()
    assert_close(x.grad.numpy(), 2 * xn + 3 * np.cos(xn), **B3[np.float64])
    assert f.stats.kernels == 2


def test_inputs_without_a_gradient_path_keep_grad_none():
    """As on the eager tape: an unused input, or one that only feeds a comparison, gets no
    gradient (None, not zeros). The difference shows in an optimizer, which skips a
    parameter whose .grad is None but decays Adam's state for a zero gradient."""
    def f(x, unused, cond):
        return dg.where(cond > 0.0, x * 2.0, 0.0).sum()

    fc = dg.compile(f)
    x, unused, cond = (_randn(4, seed=s, requires_grad=True) for s in (0, 1, 2))
    fc(x, unused, cond).backward()
    assert unused.grad is None and cond.grad is None
    assert_close(x.grad.numpy(), np.where(cond.numpy() > 0, 2.0, 0.0), **B3[np.float64])


def test_outputs_that_need_no_grad_do_not_require_grad():
    # As in eager mode, comparisons never require grad.
    f = dg.compile(lambda x: (x * 2.0, x > 0.0))
    x = _randn(4, requires_grad=True)
    y, mask = f(x)
    assert y.requires_grad
    assert mask.dtype == np.bool_ and not mask.requires_grad and mask.grad_fn is None
    y.sum().backward()
    assert_close(x.grad.numpy(), np.full(4, 2.0), **B3[np.float64])


def test_detach_stops_the_gradient():
    def f(x):
        return (x.detach() * x).sum(), x.detach() * 3.0

    x = _randn(4, requires_grad=True)
    out, d = dg.compile(f)(x)
    assert not d.requires_grad
    out.backward()
    assert_close(x.grad.numpy(), x.numpy(), **B3[np.float64])


# ------------------------------------------------------------------------- modules


def test_compiled_module_sees_optimizer_updates():
    model = MLP()
    cm = dg.compile(model)
    opt = dg.optim.SGD(model.parameters(), lr=0.5)
    x = _randn(5, 6, seed=3)
    first = cm(x)
    assert first.grad_fn.name() == "CompiledFunctionBackward"
    assert_close(first.numpy(), model(x).numpy(), **B3[np.float64])
    (first ** 2).mean().backward()
    eager_model = MLP()
    (eager_model(x) ** 2).mean().backward()
    for (k, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
        assert_close(p.grad.numpy(), q.grad.numpy(), **B3[np.float64], msg=f"grad {k}")
    opt.step()
    second = cm(x)
    assert cm.stats.traces == 1 and cm.stats.cache_hits == 1
    assert not np.allclose(second.numpy(), first.numpy())  # the update was seen
    assert_close(second.numpy(), model(x).numpy(), **B3[np.float64])
    # Attributes still reach the module.
    assert cm.w1 is model.w1 and len(list(cm.parameters())) == 4


def test_compiled_forward_training_loop_matches_eager():
    """Forward compiled (train mode), loss and optimizer eager: parameters after N steps
    equal those of the all-eager loop."""
    sizes = (16, 12, 4)
    compiled_model, eager_model = MLP(sizes, seed=4), MLP(sizes, seed=4)
    cm = dg.compile(compiled_model)
    opt_c = dg.optim.SGD(compiled_model.parameters(), lr=0.1)
    opt_e = dg.optim.SGD(eager_model.parameters(), lr=0.1)
    rng = np.random.default_rng(5)
    for _ in range(20):
        x = dg.tensor(rng.standard_normal((8, 16)))
        target = dg.tensor(rng.integers(0, 4, 8))
        for model, opt in ((cm, opt_c), (eager_model, opt_e)):
            opt.zero_grad()
            F.cross_entropy(model(x), target).backward()
            opt.step()
    assert cm.stats.traces == 1 and cm.stats.cache_hits == 19
    _assert_same_params(compiled_model, eager_model, "after 20 steps")


# ------------------------------------------------------------------- whole steps


def _make_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


OPTIMIZERS = {
    "adam": lambda params: dg.optim.Adam(params, lr=0.01),
    "sgd_momentum": lambda params: dg.optim.SGD(params, lr=0.05, momentum=0.9),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_whole_step_loop_matches_eager(opt_name, dtype, monkeypatch):
    make_opt = OPTIMIZERS[opt_name]
    compiled_model, eager_model = MLP(dtype=dtype, seed=6), MLP(dtype=dtype, seed=6)
    opt_c, opt_e = make_opt(compiled_model.parameters()), make_opt(eager_model.parameters())
    step_c = dg.compile(_make_step(compiled_model, opt_c))
    step_e = _make_step(eager_model, opt_e)
    rng = np.random.default_rng(7)
    x = dg.tensor(rng.standard_normal((10, 6)).astype(dtype))
    y = dg.tensor(rng.standard_normal((10, 3)).astype(dtype))
    losses_c, losses_e = [], []
    for i in range(100):
        losses_c.append(step_c(x, y).numpy())
        losses_e.append(step_e(x, y).numpy())
        if i == 0:
            (entry,) = step_c.entries()
            assert entry.mode == "step"
            ran = _counting(entry.kernel, monkeypatch)
    # One compiled call per step and one trace: zero_grad comes first, so the step never
    # reads the .grad the previous call left behind.
    assert len(ran) == 99
    assert step_c.stats.traces == 1 and step_c.stats.kernels == 1
    assert losses_c[-1] < losses_c[0]
    assert_close(np.array(losses_c), np.array(losses_e),
                 **B3[np.array(losses_e).dtype], msg="losses")
    _assert_same_params(compiled_model, eager_model, f"{opt_name} after 100 steps")
    # Optimizer state and .grad are written back too, not only read.
    for p_c, p_e in zip(compiled_model.parameters(), eager_model.parameters()):
        assert opt_c.state[p_c].keys() == opt_e.state[p_e].keys()
        # Optimizer states span magnitudes (1e-4 to 100 within one array): the absolute
        # floor of B3 scales with each array's largest value.
        for key, value in opt_e.state[p_e].items():
            want = value.numpy()
            assert_close(opt_c.state[p_c][key], want,
                         **tolerance(want, RTOL[want.dtype], floor=1e-3), msg=f"state {key}")
        want = p_e.grad.numpy()
        assert_close(p_c.grad, want, **tolerance(want, RTOL[want.dtype], floor=1e-3),
                     msg="grad after the last step")


def test_grad_accumulation_inside_compiled_step():
    """A step without zero_grad: the first call sees .grad None (the trace assumes it),
    later calls see it set, which a guard catches; gradients accumulate as in eager."""
    compiled_model, eager_model = MLP(seed=8), MLP(seed=8)

    def accumulate(model):
        def step(x, y):
            loss = ((model(x) - y) ** 2).sum()
            loss.backward()
            return loss

        return step

    step_c = dg.compile(accumulate(compiled_model))
    step_e = accumulate(eager_model)
    rng = np.random.default_rng(9)
    batches = [(dg.tensor(rng.standard_normal((4, 6))), dg.tensor(rng.standard_normal((4, 3))))
               for _ in range(3)]
    for x, y in batches:
        assert_close(step_c(x, y).numpy(), step_e(x, y).numpy(), **B3[np.float64])
    assert step_c.stats.traces == 2
    assert any(".grad" in r for r in step_c.stats.retrace_reasons)
    assert step_c.stats.cache_hits == 1
    for (k, p), (_, q) in zip(compiled_model.named_parameters(), eager_model.named_parameters()):
        assert_close(p.grad.numpy(), q.grad.numpy(), **B3[np.float64], msg=f"accumulated grad {k}")
    # zero_grad outside puts .grad back to None: the first entry serves again.
    compiled_model.zero_grad()
    eager_model.zero_grad()
    x, y = batches[0]
    step_c(x, y)
    step_e(x, y)
    assert step_c.stats.traces == 2
    for p, q in zip(compiled_model.parameters(), eager_model.parameters()):
        assert_close(p.grad.numpy(), q.grad.numpy(), **B3[np.float64])


# ------------------------------------------------------------------- generated code


def test_generated_source_is_readable():
    x, w = _randn(4, 3), _randn(3, 2)
    graph = optimize(dg.trace(lambda x, w: dg.relu(x @ w + 1.0).sum(axis=0), x, w))
    kernel = build(graph)
    source = kernel.source
    assert "@dgc.njit(" in source  # numba.njit with dualgraph's authenticated disk cache
    comments = [line.strip() for line in source.splitlines() if line.strip().startswith("# %")]
    assert comments, source
    # Each IR node appears as a comment: its printed line, verbatim.
    names = graph.names()
    for n in graph.nodes:
        if n.op != "const":
            assert f"# {graph.format_node(n, names)}" in source
    assert_close(kernel(x.numpy(), w.numpy())[0],
                 np.maximum(x.numpy() @ w.numpy() + 1.0, 0).sum(axis=0), **B3[np.float64])
    compile(source, "<kernel>", "exec")  # valid Python, as written to the cache


def test_float32_reduction_of_a_million_elements_is_accurate():
    x = np.random.default_rng(10).uniform(0.0, 1.0, 1_000_000).astype(np.float32)
    f = dg.compile(lambda x: (x.sum(), x.mean(), (x * x).sum()))
    s, m, sq = f(dg.tensor(x))
    x64 = x.astype(np.float64)
    for got, ref in ((s, x64.sum()), (m, x64.mean()), (sq, (x64 * x64).sum())):
        assert got.dtype == np.float32
        assert abs(float(got.numpy()) - ref) <= 1e-5 * abs(ref)


def test_constants_keep_the_graph_dtype():
    def f(x):
        return dg.where(x > 0.5, x * 2.5 + 1.0, x ** 3.0 / 7.0) - dg.sqrt(x * x + 0.1)

    x = _randn(64, dtype=np.float32, requires_grad=True)
    fc = dg.compile(f)
    out = fc(x)
    assert out.dtype == np.float32
    out.sum().backward()
    assert x.grad.dtype == np.float32
    ex = _randn(64, dtype=np.float32, requires_grad=True)
    eager = f(ex)
    eager.sum().backward()
    assert_close(out.numpy(), eager.numpy(), **B3[np.float32])
    assert_close(x.grad.numpy(), ex.grad.numpy(), **B3[np.float32])
    source = fc.entries()[0].kernel.source
    assert "np.float32(2.5)" in source
    assert "np.float64" not in source  # nothing in the float32 loops is widened


def test_parallel_gives_the_same_results():
    def f(x, y):
        return (dg.tanh(x) * y + x).sum(axis=1), dg.maximum(x, y)

    shape = (256, 256)  # above the size where loops go parallel
    fp = dg.compile(f, parallel=True)
    x = _randn(*shape, requires_grad=True)
    y = _randn(*shape, seed=1, requires_grad=True)
    a, b = fp(x, y)
    (a.sum() + b.sum()).backward()
    ex, ey = _randn(*shape, requires_grad=True), _randn(*shape, seed=1, requires_grad=True)
    ea, eb = f(ex, ey)
    (ea.sum() + eb.sum()).backward()
    assert_close(a.numpy(), ea.numpy(), **B3[np.float64])
    assert_close(b.numpy(), eb.numpy(), **B3[np.float64])
    assert_close(x.grad.numpy(), ex.grad.numpy(), **B3[np.float64])
    assert_close(y.grad.numpy(), ey.grad.numpy(), **B3[np.float64])
    (entry,) = fp.entries()
    assert "numba.prange" in entry.kernel.source
    assert "parallel=True" in entry.kernel.source


# -------------------------------------------------------------------------- errors


def _not_numba(exc: BaseException) -> None:
    assert not isinstance(exc, numba.core.errors.NumbaError), exc
    assert "nopython" not in str(exc)


def test_different_arity_rank_and_dtype_retrace_with_clear_reasons():
    @dg.compile
    def total(*xs):
        out = xs[0].sum()
        for x in xs[1:]:
            out = out + x.sum()
        return out

    a, b = _randn(3), _randn(3, seed=1)
    assert_close(total(a, b).numpy(), a.numpy().sum() + b.numpy().sum(), **B3[np.float64])
    assert_close(total(a, b, a).numpy(), 2 * a.numpy().sum() + b.numpy().sum(), **B3[np.float64])
    assert "3 arguments instead of 2" in total.stats.retrace_reasons[-1]
    total(a, b)  # cached; the next reason compares with this call
    m = _randn(2, 3)
    assert_close(total(m, b).numpy(), m.numpy().sum() + b.numpy().sum(), **B3[np.float64])
    assert "argument 0" in total.stats.retrace_reasons[-1]
    assert "shape (2, 3) instead of (3,)" in total.stats.retrace_reasons[-1]
    i = dg.tensor(np.arange(3))
    total(a, b)
    out = total(i, b)
    assert out.dtype == np.float64 and float(out.numpy()) == pytest.approx(3 + b.numpy().sum())
    assert "dtype int64" in total.stats.retrace_reasons[-1]
    assert total.stats.traces == 4


def test_wrong_number_of_arguments_is_python_s_type_error():
    f = dg.compile(lambda x, y: x + y)
    with pytest.raises(TypeError) as info:
        f(_randn(3))
    _not_numba(info.value)
    assert f.stats.kernels == 0


@pytest.mark.parametrize("box", [lambda t: (t,), lambda t: [t], lambda t: {"a": t}],
                         ids=["tuple", "list", "dict"])
def test_tensors_inside_containers_are_inputs(box):
    # Tensors inside tuple, list and dict arguments are flattened into inputs
    # (tests/compile/test_fidelity.py has the scenarios): new values, same kernel.
    def fn(x, y):
        inner = y["a"] if isinstance(y, dict) else y[0]
        return x * 2.0 + inner

    f = dg.compile(fn)
    for _ in range(3):
        x, y = _randn(3), _randn(3)
        assert_close(f(x, box(y)).numpy(), (x * 2.0 + y).numpy())
    assert f.stats.traces == 1


def test_data_dependent_control_flow_compiles_guarded_and_a_trace_raises():
    def f(x):
        if x.sum() > 0:  # a compiled call computes the value; a plain trace cannot
            return x
        return -x

    x = _randn(3)
    dg.testing.assert_close(dg.compile(f)(x), f(x))
    with pytest.raises(dg.TraceError) as info:
        dg.trace(f, x)
    assert isinstance(info.value, RuntimeError)
    assert "test_compile.py" in str(info.value) and "dg.where" in str(info.value)


def test_create_graph_through_compiled_function_raises():
    f = dg.compile(lambda x: (x * x).sum())
    x = _randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="create_graph") as info:
        f(x).backward(create_graph=True)
    _not_numba(info.value)


def test_inplace_change_of_an_input_before_backward_raises():
    f = dg.compile(lambda x: (x * x).sum())
    x = _randn(3, requires_grad=True)
    out = f(x)
    with dg.no_grad():
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    # A non-leaf input changed in place (outside no_grad) is caught the same way.
    h = x * 1.0
    out = f(h)
    h.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    assert f.stats.traces == 1


def test_inplace_update_of_an_argument_is_written_back():
    def f(x):
        x += 1.0
        return x.sum()

    x = dg.tensor(np.arange(3.0))
    out = dg.compile(f)(x)
    assert float(out.numpy()) == 6.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])


def test_backward_twice_without_retain_graph_raises():
    f = dg.compile(lambda x: (x * x).sum())
    x = _randn(3, requires_grad=True)
    out = f(x)
    out.backward(retain_graph=True)
    out.backward()
    assert_close(x.grad.numpy(), 4 * x.numpy(), **B3[np.float64])
    out = f(x)
    out.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        out.backward()



def test_backward_kernel_compiles_once_whatever_the_cotangent():
    """Cotangents reach the backward kernel C-contiguous and read-only, whether they are
    backward()'s seed, a writable array of the user's or a transposed view: one Numba
    signature serves them all (each extra one is a full compile)."""
    x = dg.tensor(np.random.default_rng(0).random((3, 4)).astype(np.float32),
                  requires_grad=True)
    f = dg.compile(lambda x: x.tanh() * 2, tiered=False)
    grads = []
    for g in (np.ones((3, 4), np.float32), np.ones((4, 3), np.float32).T):
        x.grad = None
        f(x).backward(dg.tensor(g))
        grads.append(x.grad.numpy().copy())
    h = dg.compile(lambda x: (x.tanh() * 2).sum(), tiered=False)
    x.grad = None
    h(x).backward()
    assert_close(grads[0], grads[1], rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
    assert_close(x.grad.numpy(), grads[0], rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)
    (entry,) = f.entries()
    assert len(entry.bwd_kernel.fn.signatures) == 1
    (entry,) = h.entries()  # a scalar loss: one kernel gives its value and gradient
    assert entry.joint and entry.bwd_kernel is None and len(entry.kernel.fn.signatures) == 1


def test_in_place_on_a_non_leaf_argument_runs_eagerly():
    """Eager mode moves a non-leaf argument's history onto an in-place op on it, so a later
    backward through the argument sees the change; a compiled call cannot, so that
    signature runs eagerly, with a warning that names the line (strict=True raises)."""
    def fn(h, y):
        h.add_(y)
        return (h * y).sum()

    def run(g):
        x = dg.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
        y = dg.tensor(np.array([0.5, 1.5, 2.0]), requires_grad=True)
        h = x * 1.0
        out = g(h, y)
        (out + (h * h).sum()).backward()  # through h's rebased history too
        return out.item(), h.numpy(), x.grad.numpy(), y.grad.numpy()

    f = dg.compile(fn, tiered=False)
    with pytest.warns(RuntimeWarning, match=r"test_compile.py:\d+: an in-place op .* "
                      "runs eagerly"):
        got = run(f)
    for a, e in zip(got, run(fn)):
        assert_close(a, e, **B3[np.float64])
    assert f.stats.kernels == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(f)  # the same signature: eager again, without tracing or warning again
    assert f.stats.traces == 0 and f.stats.calls == 2
    with pytest.raises(dg.EagerOnlyError, match="not a leaf"):
        run(dg.compile(fn, tiered=False, strict=True))


def test_class_weight_requiring_grad_keeps_grad_none():
    """nll_loss's VJP gives no gradient to the class weights: eager leaves ``w.grad`` None,
    and so does the compiled call (not a gradient of zeros)."""
    x0 = np.random.default_rng(0).standard_normal((4, 3))
    results = []
    for g in (F.cross_entropy, dg.compile(F.cross_entropy, tiered=False)):
        x = dg.tensor(x0, requires_grad=True)
        w = dg.tensor(np.array([0.5, 1.0, 2.0]), requires_grad=True)
        g(x, dg.tensor(np.array([0, 2, 1, 2])), w).backward()
        results.append((x.grad.numpy(), w.grad))
    (ex, ew), (cx, cw) = results
    assert ew is None and cw is None
    assert_close(cx, ex, **B3[np.float64])
