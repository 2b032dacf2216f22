"""A leaf that requires grad, written under ``no_grad`` inside a compiled function (an
optimizer's step) and read again with grad: the read is the written value, as eagerly,
and the gradient still reaches the leaf's ``.grad``."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.testing import assert_close


def _param() -> dg.nn.Parameter:
    # An inf the write replaces: the trace's read adds ``p - stop_gradient(p)`` for the
    # gradient, nan here, which the compiled value must not keep.
    return dg.nn.Parameter(dg.tensor([np.inf, 1.0, -2.0]))


def test_a_step_that_writes_a_leaf_then_reads_it_gives_eagers_values() -> None:
    def step(x):
        with dg.no_grad():
            p.copy_(dg.tensor([3.0, -0.0, 0.5]))
        loss = (p * x).sum()
        loss.backward()
        return loss, p * 1.0

    x = dg.tensor([1.0, 2.0, 3.0])
    p = _param()
    want, want_read = step(x)
    want_grad = p.grad.numpy().copy()
    p = _param()
    got, got_read = dg.compile(step)(x)
    assert_close(got, want)
    assert np.array_equal(np.signbit(got_read.numpy()), np.signbit(want_read.numpy()))
    assert_close(got_read, want_read)
    assert_close(p.grad, want_grad)


def test_a_returned_loss_read_after_the_write_differentiates_as_eagerly() -> None:
    def f(x):
        with dg.no_grad():
            p.copy_(dg.tensor([3.0, 4.0, 0.5]))
        return (p * x).sum()

    x = dg.tensor([1.0, 2.0, 3.0])
    p = _param()
    want = f(x)
    want.backward()
    want_grad = p.grad.numpy().copy()
    p = _param()
    g = dg.compile(f)
    got = g(x)
    got.backward()
    assert_close(got, want)
    assert_close(p.grad, want_grad)
    assert g.stats.traces == 1
