"""Writes through views under `dg.compile`: the trace is
functionalised. A write through a view becomes a ``view_scatter`` into its base, later
reads of every alias see it, and writes into an argument are written back to the caller's
tensor: compiled results and gradients equal eager ones.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from .._support.compiled import graph_ops

LEAF_VIEW = "a view of a leaf Variable that requires grad is being used in an in-place"


def through_slice(x):
    y = x * 1
    y[0:2].mul_(10)
    return y


def view_before_base_write(x):
    y = x * 1
    v = y[0:2]
    y.mul_(2)
    return (v * 3).sum()


def copy_into_view(x, w):
    y = x * 1
    y[0:2].copy_(w)
    return y * dg.tensor([1.0, 2.0, 3.0])


def transposed_and_reshaped(x):
    y = x * 1
    t = y.reshape(3, 1).T
    t[0, 1:].add_(5)
    u = y[1:]
    u[0] = 7.0
    return y * u.sum()


def overlapping_siblings(x):
    y = x * 1
    a, b = y[0:2], y[1:3]
    a.mul_(2)
    b.add_(b * 1)
    return a * dg.tensor([1.0, 10.0]) + b


def view_of_view(x):
    y = x * 2
    v = y.reshape(3, 1)[1:]
    v[0].mul_(v[1] * 1.0)  # a copy: saving v[1] itself would be stale (eager raises)
    return y, v


PROGRAMS = [through_slice, view_before_base_write, copy_into_view, transposed_and_reshaped,
            overlapping_siblings, view_of_view]


def _run(fn, compiled: bool):
    xs = [dg.tensor([1.0, 2.0, 3.0], requires_grad=True),
          dg.tensor([5.0, 7.0], requires_grad=True)]
    n = fn.__code__.co_argcount
    xs = xs[:n]
    f = dg.compile(fn) if compiled else fn
    outs = f(*xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    total = sum((o * (k + 1.5)).sum() for k, o in enumerate(outs))
    total.backward()
    return [o.numpy().copy() for o in outs], [x.grad.numpy().copy() for x in xs]


@pytest.mark.parametrize("fn", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_compiled_equals_eager(fn):
    eager_out, eager_grads = _run(fn, False)
    comp_out, comp_grads = _run(fn, True)
    for a, b in zip(comp_out + comp_grads, eager_out + eager_grads):
        assert_close(a, b)


def test_issue_example_values():
    out, (gx,) = _run(through_slice, True)
    assert_close(out[0], np.array([10.0, 20.0, 3.0], np.float32))
    assert_close(gx, np.array([15.0, 15.0, 1.5], np.float32))
    _, (gx,) = _run(view_before_base_write, True)
    assert_close(gx, np.array([9.0, 9.0, 0.0], np.float32))


def test_write_through_view_is_a_view_scatter_node():
    graph = dg.trace(through_slice, dg.tensor([1.0, 2.0, 3.0]))
    assert "view_scatter" in list(graph_ops(graph))


def test_write_into_argument_through_view_is_written_back():
    def f(x):
        x[1:].add_(1.0)
        x.reshape(2, 2).T[0].mul_(10.0)
        return x * 2

    a = dg.tensor([1.0, 2.0, 3.0, 4.0])
    b = dg.tensor([1.0, 2.0, 3.0, 4.0])
    eager = f(a)
    compiled = dg.compile(f)
    out = compiled(b)
    assert_close(b.numpy(), a.numpy())
    assert_close(out.numpy(), eager.numpy())
    c = dg.tensor([1.0, 2.0, 3.0, 4.0])  # the cached kernel writes back too
    compiled(c)
    assert_close(c.numpy(), a.numpy())


def test_view_of_argument_made_before_write_sees_it():
    def f(x):
        v = x[0:2]
        x.mul_(3.0)
        return v + 0.0

    a = dg.tensor([1.0, 2.0, 3.0])
    out = dg.compile(f)(a)
    assert_close(out.numpy(), np.array([3.0, 6.0], np.float32))
    assert_close(a.numpy(), np.array([3.0, 6.0, 9.0], np.float32))


@pytest.mark.parametrize("write", [
    lambda a: a[0:1].mul_(2),
    lambda a: a.reshape(3, 1).T.__iadd__(1),
], ids=["mul_slice", "iadd_transpose"])
def test_inplace_on_view_of_argument_that_requires_grad_raises(write):
    def f(a):
        write(a)
        return a * 1

    with pytest.raises(RuntimeError, match=LEAF_VIEW):
        dg.compile(f)(dg.tensor([1.0, 2.0, 3.0], requires_grad=True))


def test_whole_step_with_write_through_view_matches_eager():
    def make():
        w = dg.nn.Parameter(dg.tensor([0.5, -1.0, 2.0]))
        return w, dg.optim.SGD([w], lr=0.1)

    def step_for(w, opt):
        def step(x):
            opt.zero_grad()
            y = w * x
            y[0:2].mul_(y[1:3] * 1.0)
            loss = (y * y).sum()
            loss.backward()
            opt.step()
            return loss
        return step

    we, opt_e = make()
    wc, opt_c = make()
    eager, compiled = step_for(we, opt_e), dg.compile(step_for(wc, opt_c))
    for k in range(3):
        x = dg.tensor([1.0, 2.0, 3.0]) * (k + 1)
        le, lc = eager(x), compiled(x)
        assert_close(lc.numpy(), le.numpy(), rtol=1e-5, atol=1e-6)
        assert_close(wc.numpy(), we.numpy(), rtol=1e-5, atol=1e-6)


def test_write_through_expanded_view_raises():
    with pytest.raises(RuntimeError, match="single memory location"):
        dg.compile(lambda x: x.expand(3, 2).mul_(2))(dg.tensor([1.0, 2.0]))


def test_write_through_view_of_captured_tensor_is_written_back():
    buf = dg.zeros(4)

    def f(x):
        buf[1:3].add_(x)
        return buf * 2

    g = dg.compile(f)
    g(dg.tensor([1.0, 2.0]))
    out = g(dg.tensor([1.0, 2.0]))
    assert_close(buf.numpy(), np.array([0.0, 2.0, 4.0, 0.0], np.float32))
    assert_close(out.numpy(), np.array([0.0, 4.0, 8.0, 0.0], np.float32))


def test_backward_after_an_in_place_change_of_a_saved_output_raises_as_eager():
    """exp's VJP reads its output: changing it in place inside the compiled function makes
    the compiled backward raise, as eager and PyTorch do; div by a constant saves nothing."""
    def f(x):
        y = x.exp()
        y += 1
        return y

    def g(x):
        y = x / 2.0
        y += 1
        return y

    x = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f(x).sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        dg.compile(f)(x).sum().backward()
    dg.compile(g)(x).sum().backward()
    assert x.grad.tolist() == [0.5, 0.5]


def test_a_reshape_that_eager_copies_is_not_a_view_when_traced():
    """x.T.reshape(-1) copies in eager mode (NumPy cannot view it), so writing to it leaves
    x alone; a reshape that is a view writes through, compiled as eager."""
    def f(x):
        y = x * 1
        z = y.T.reshape(-1)
        z.mul_(10)
        w = y.reshape(-1)
        w[0:1].mul_(3)
        return y, z

    x = dg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    eager = f(x)
    got = dg.compile(f)(x)
    for e, c in zip(eager, got):
        np.testing.assert_array_equal(c.numpy(), e.numpy())
    assert eager[0].numpy()[0, 1] == 1.0 and eager[0].numpy()[0, 0] == 0.0
