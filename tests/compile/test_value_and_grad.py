"""A compiled scalar loss computes its gradients in its own kernel (docs/compile.md, "A
scalar loss"): one kernel, and every way of asking for the gradient gives eager's answer.

One compiled function serves the whole module (each compile costs about a second).
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from .._support.compiled import B3

TOL = B3[np.float64]


def loss_fn(x, w, c):
    return (dg.tanh(x @ w) * c).sum() + (x * x).mean()


@pytest.fixture(scope="module")
def compiled():
    return dg.compile(loss_fn, tiered=False)


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = dg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    w = dg.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    c = dg.tensor(rng.standard_normal(5))  # no grad: a saved input, version-checked
    return x, w, c


def _grads(fn, backward, seed: int = 0):
    x, w, c = _inputs(seed)
    out = fn(x, w, c)
    backward(out)
    return out.item(), x.grad.numpy().copy(), w.grad.numpy().copy()


@pytest.mark.parametrize("how", ["seed_one", "seed_tensor", "scaled", "hook", "summed"])
def test_gradients_equal_eager_however_backward_is_called(compiled, how):
    backward = {
        "seed_one": lambda out: out.backward(),
        "seed_tensor": lambda out: out.backward(dg.tensor(np.float64(-0.75))),
        "scaled": lambda out: (out * 3.0).backward(),
        "hook": lambda out: (out.register_hook(lambda g: g * 2.0), out.backward()),
        "summed": lambda out: (out + out * out).backward(),
    }[how]
    e_val, e_gx, e_gw = _grads(loss_fn, backward)
    c_val, c_gx, c_gw = _grads(compiled, backward)
    assert_close(c_val, e_val, **TOL)
    assert_close(c_gx, e_gx, **TOL)
    assert_close(c_gw, e_gw, **TOL)
    (entry,) = compiled.entries()
    assert entry.joint and entry.bwd_kernel is None
    assert compiled.stats.kernels == 1 and compiled.stats.traces == 1


def test_retained_graph_gives_fresh_gradients_each_time(compiled):
    """The first backward gives the kernel's arrays to the leaves; a second (retain_graph)
    must not hand out the same memory, which the optimizer may since have changed."""
    def twice(fn):
        x, w, c = _inputs(1)
        out = fn(x, w, c)
        out.backward(retain_graph=True)
        first = x.grad
        x.grad = None
        out.backward()
        second = x.grad.numpy().copy()
        first.zero_()  # in place, as zero_grad(set_to_none=False) would
        return second, x.grad.numpy()

    e_second, e_after = twice(loss_fn)
    c_second, c_after = twice(compiled)
    assert_close(c_second, e_second, **TOL)
    assert_close(c_after, e_after, **TOL)
    assert np.any(c_after != 0)


def test_changed_saved_input_raises_and_freed_graph_raises(compiled):
    x, w, c = _inputs()
    out = compiled(x, w, c)
    c.add_(1.0)  # tanh(x @ w) * c: the gradient read c's old value
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    x, w, c = _inputs()
    out = compiled(x, w, c)
    out.backward()
    with pytest.raises(RuntimeError, match="second time"):
        out.backward()
    out = compiled(x, w, c)
    with pytest.raises(RuntimeError, match="create_graph=True"):
        out.backward(create_graph=True)


def test_dg_grad_and_no_grad(compiled):
    x, w, c = _inputs(2)
    gx, gw = dg.grad(compiled(x, w, c), [x, w])
    ex, ew = _inputs(2)[:2]
    egx, egw = dg.grad(loss_fn(ex, ew, c), [ex, ew])
    assert_close(gx.numpy(), egx.numpy(), **TOL)
    assert_close(gw.numpy(), egw.numpy(), **TOL)
    assert x.grad is None  # dg.grad accumulates nothing
    with dg.no_grad():
        out = compiled(x, w, c)
    assert out.grad_fn is None and not out.requires_grad
    assert_close(out.item(), loss_fn(x, w, c).item(), **TOL)


def test_scalar_step_bitwise_and_vector_outputs_keep_two_kernels():
    """W1 (``x*y + y**2`` on 0-d tensors) with seed one equals eager bit for bit; an output
    of more than one element keeps the forward and backward kernels."""
    f = dg.compile(lambda x, y: x * y + y ** 2, tiered=False)
    x, y = dg.tensor(2.5, requires_grad=True), dg.tensor(-1.25, requires_grad=True)
    z = f(x, y)
    z.backward()
    assert (z.item(), x.grad.item(), y.grad.item()) == (-3.125 + 1.5625, -1.25, 2.5 - 2.5)
    assert f.entries()[0].joint and f.stats.kernels == 1
    g = dg.compile(lambda x: dg.tanh(x) * 2, tiered=False)
    v = dg.tensor(np.linspace(-1, 1, 4), requires_grad=True)
    g(v).backward(dg.ones(4))
    assert not g.entries()[0].joint and g.stats.kernels == 2
    assert_close(v.grad.numpy(), 2 * (1 - np.tanh(np.linspace(-1, 1, 4)) ** 2), **TOL)


def test_graph_has_no_seed_constants():
    """The seed one, broadcast by sum's VJP, becomes a literal and folds away: no constant
    array of the input's size is read by the kernel."""
    f = dg.compile(lambda x: (dg.tanh(x * 0.5 + 1) * dg.sigmoid(x) + 0.1 * x ** 2).sum(),
                   tiered=False)
    x = dg.tensor(np.linspace(-2, 2, 50).astype(np.float32), requires_grad=True)
    f(x).backward()
    (entry,) = f.entries()
    assert entry.joint
    assert not [n for n in entry.optimized.nodes if n.op == "const" and n.shape], str(
        entry.optimized)
    assert entry.kernel.lowered.consts == []


def test_in_place_writes_random_ops_and_non_leaf_inputs():
    """The one kernel also writes back what the loss changed in place, draws one dropout
    mask for the value and the gradient, and a non-leaf input passes its gradient on to
    the eager tape behind it."""
    def write_loss(x, buf):
        buf.add_(1.0)
        return (dg.tanh(x) * buf).sum()

    rng = np.random.default_rng(3)
    data = rng.standard_normal((4, 3))
    results = []
    for fn in (write_loss, dg.compile(write_loss, tiered=False)):
        x, buf = dg.tensor(data, requires_grad=True), dg.tensor(np.ones((4, 3)))
        h = x * 2.0  # the compiled function's input is not a leaf
        out = fn(h, buf)
        out.backward()
        results.append((out.item(), x.grad.numpy(), buf.numpy()))
    (e_out, e_gx, e_buf), (c_out, c_gx, c_buf) = results
    assert fn.entries()[0].joint
    assert_close(c_out, e_out, **TOL)
    assert_close(c_gx, e_gx, **TOL)
    np.testing.assert_array_equal(c_buf, e_buf)
    np.testing.assert_array_equal(c_buf, 2.0)

    dg.manual_seed(3)
    x = dg.tensor(np.ones(1000), requires_grad=True)
    f = dg.compile(lambda x: (dg.nn.functional.dropout(x, 0.3, training=True) * 2).sum(),
                   tiered=False)
    out = f(x)
    out.backward()
    g = x.grad.numpy()
    assert f.entries()[0].joint
    assert set(np.unique(g)) == {0.0, 2 / 0.7} and 0.6 < np.mean(g > 0) < 0.8
    assert_close(out.item(), g.sum(), **TOL)  # the value's mask is the gradient's mask
