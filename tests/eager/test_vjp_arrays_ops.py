"""The array forms of the VJPs of ``log_softmax``, ``softmax``, ``nll_loss`` (so
cross-entropy's backward), ``reshape``, ``sub``, ``pow`` with a literal exponent and
``where`` run in an eager backward that records nothing, give the op-by-op VJP's bits
(NaN, infinities and signed zeros included), warn about nothing the ops would not, and
leave hooks, ``retain_grad`` and a recorded backward as they were."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops import OPS
from dualgraph.testing import assert_close

from .._support.profiling import vjp_runs

F = dg.nn.functional

_INT = {2: np.int16, 4: np.int32, 8: np.int64}

OPS_WITH_FORMS = ("log_softmax", "softmax", "nll_loss", "reshape", "sub", "pow", "where")


@pytest.fixture
def op_vjp_calls():
    """Counts the op-by-op VJP's runs, per op."""
    with vjp_runs(*(OPS[name] for name in OPS_WITH_FORMS)) as runs:
        yield runs


def _data(shape, dtype, seed=0, special=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype) * 3
    if special:  # the edges: an infinity, a NaN, signed zeros
        flat = a.reshape(-1)
        flat[:4] = [np.inf, np.nan, 0.0, -0.0]
    return a


def _run(program, leaves, array_form):
    """The leaves' gradients after ``program(*tensors).backward()``, with the ops' array
    forms on or off."""
    ts = [dg.tensor(a, requires_grad=rg) for a, rg in leaves]
    saved = {name: OPS[name].vjp_arrays for name in OPS_WITH_FORMS}
    if not array_form:
        for name in OPS_WITH_FORMS:
            object.__setattr__(OPS[name], "vjp_arrays", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the ops are quiet: so is their array form
            program(*ts).backward()
    finally:
        for name, f in saved.items():
            object.__setattr__(OPS[name], "vjp_arrays", f)
    return [t.grad.numpy() if t.grad is not None else None for t, (_, rg) in zip(ts, leaves)]


def _same_bits(fast, slow):
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.flags.c_contiguous == b.flags.c_contiguous
            assert_close(a.view(_INT[a.itemsize]), b.view(_INT[b.itemsize]))


def _targets(n, c, seed=0):
    return np.random.default_rng(seed).integers(0, c, n)


PROGRAMS = {
    # cross-entropy's fused eager form: LogSoftmaxBackward0 under NllLossBackward0
    "cross_entropy_mean": (lambda x, t: F.cross_entropy(x, t), (5, 7), True),
    "cross_entropy_sum": (lambda x, t: F.cross_entropy(x, t, reduction="sum"), (5, 7), True),
    # the general nll_loss: ignored positions and class weights
    "nll_ignore_weight": (lambda x, t: F.nll_loss(
        F.log_softmax(x, 1), t, weight=dg.tensor(np.linspace(0.5, 2, 7).astype(x.dtype)),
        ignore_index=int(t.numpy()[0])), (5, 7), True),
    "log_softmax_3d": (lambda x, t: (F.log_softmax(x, 0) * 1.5).sum(), (3, 4, 5), False),
    "softmax_last": (lambda x, t: (F.softmax(x, -1) * x).sum(), (4, 6), False),
    # rows long and many enough for the row sums' BLAS path (`R.row_sums`)
    "cross_entropy_wide": (lambda x, t: F.cross_entropy(x, t), (40, 96), True),
    "softmax_rows": (lambda x, t: (F.softmax(x, -1) * x).sum(), (4, 16, 64), False),
    "reshape": (lambda x, t: (x.reshape(2, -1) * 2.0).sum(), (4, 6), False),
    "sub_broadcast": (lambda x, t: (x - x[0]).sum(), (4, 6), False),
    "pow_2": (lambda x, t: (x ** 2).sum(), (4, 6), False),
    "pow_3": (lambda x, t: (x ** 3).sum(), (4, 6), False),
    "pow_0": (lambda x, t: (x ** 0).sum(), (4, 6), False),
    "pow_half": (lambda x, t: (x.abs() ** 0.5).sum(), (4, 6), False),
    "where_both": (lambda x, t: dg.where(x > 0, x * 2.0, x * 3.0).sum(), (4, 6), False),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_array_form_gives_the_op_forms_bits(op_vjp_calls, name, dtype, special):
    fn, shape, with_targets = PROGRAMS[name]
    x = _data(shape, dtype, special=special)
    t = _targets(shape[0], shape[1]) if with_targets else np.zeros(1, np.int64)

    def program(xt, tt):
        return fn(xt, tt)

    fast = _run(program, [(x, True), (t, False)], True)
    ran_ops = list(op_vjp_calls)
    slow = _run(program, [(x, True), (t, False)], False)
    _same_bits(fast, slow)
    assert ran_ops == [], ran_ops  # every one of these ops took its array form
    assert op_vjp_calls  # and the reference the op-by-op one


def test_scalar_pow_and_sub():
    """0-d operands: every intermediate product is an array, as an op's result is."""
    def program(x, y):
        return x * y + y ** 2 - x ** 3

    leaves = [(np.array(2.0, np.float32), True), (np.array(3.0, np.float32), True)]
    fast = _run(program, leaves, True)
    _same_bits(fast, _run(program, leaves, False))
    assert all(type(g) is np.ndarray and g.shape == () for g in fast)


def test_hooks_and_retained_gradients_see_the_same_values():
    x = dg.tensor(_data((4, 6), np.float32), requires_grad=True)
    seen = []
    r = x.reshape(3, 8)
    r.register_hook(lambda g: seen.append(g.numpy().copy()))
    s = F.log_softmax(r, 1)
    s.retain_grad()
    loss = F.nll_loss(s, dg.tensor(_targets(3, 8)))
    loss.backward()
    g = x.grad.numpy()
    x.grad = None
    seen_slow = []
    saved = {name: OPS[name].vjp_arrays for name in OPS_WITH_FORMS}
    for name in OPS_WITH_FORMS:
        object.__setattr__(OPS[name], "vjp_arrays", None)
    try:
        r2 = x.reshape(3, 8)
        r2.register_hook(lambda g: seen_slow.append(g.numpy().copy()))
        s2 = F.log_softmax(r2, 1)
        s2.retain_grad()
        F.nll_loss(s2, dg.tensor(_targets(3, 8))).backward()
    finally:
        for name, f in saved.items():
            object.__setattr__(OPS[name], "vjp_arrays", f)
    _same_bits([g, seen[0], s.grad.numpy()], [x.grad.numpy(), seen_slow[0], s2.grad.numpy()])


def test_create_graph_records_the_op_form(op_vjp_calls):
    x = dg.tensor(_data((3, 5), np.float64), requires_grad=True)
    t = dg.tensor(_targets(3, 5))
    (gx,) = dg.autograd.grad(F.cross_entropy(x.reshape(3, 5) - 1.0, t), [x],
                             create_graph=True)
    assert gx.grad_fn is not None
    assert op_vjp_calls.count("nll_loss") == 1 and op_vjp_calls.count("log_softmax") == 1
    (gx * gx).sum().backward()  # the second order goes through the recorded ops
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()


def test_changed_target_after_forward_is_still_caught():
    """nll_loss's saved target keeps its version check in the array form."""
    x = dg.tensor(_data((4, 3), np.float32), requires_grad=True)
    t = dg.tensor(_targets(4, 3))
    loss = F.cross_entropy(x, t)
    t.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
