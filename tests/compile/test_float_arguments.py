"""Float arguments: 0-d graph inputs from the first call, so a float that changes on every
call (a mixup ``lam``, a learning rate) runs one entry; keyed by value where the function
needs the value itself. Every value gives eager's answer, gradients too."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

from .conftest import traces

LAMS = (0.3, 0.7123456789, 1.0 / 3, -0.0, np.float64(0.11), 2.5)


def _uses(x, lam):
    return (lam * x + (1 - lam) * x.flip(0), x ** lam, dg.where(x > 0.5, x, lam),
            x * lam, x / (lam + 4), lam / 3 * x, -lam * x, abs(lam) * x)


@pytest.mark.parametrize("runner", ["blocking", "tiered"], indirect=True)
def test_a_float_that_changes_each_call_runs_one_trace_with_eagers_values(runner):
    f = runner(_uses)
    for dtype in (np.float32, np.float64):
        base = np.linspace(0.1, 1.3, 5).astype(dtype)
        for lam in LAMS:
            x, xe = dg.tensor(base, requires_grad=True), dg.tensor(base, requires_grad=True)
            got, want = f(x, lam), _uses(xe, lam)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype == dtype
                np.testing.assert_array_equal(g.detach().numpy(), w.detach().numpy())
            sum(o.sum() for o in got).backward()
            sum(o.sum() for o in want).backward()
            dg.testing.assert_close(x.grad.numpy(), xe.grad.numpy(), rtol=1e-6, atol=0)
    assert traces(f) == 2, f.stats.retrace_reasons  # one per tensor dtype
    assert "dtype float64" in f.stats.retrace_reasons[0]


def _sgd(w, x, lr, momentum=0.5):
    loss = ((w * x).sum() - 1.0) ** 2
    loss.backward()
    with dg.no_grad():
        w.sub_(lr * momentum * w.grad)
        w.grad = None
    return loss


def test_a_learning_rate_argument_of_a_hand_written_update_is_an_input():
    f = dg.compile(_sgd)
    w, we = dg.ones(3, requires_grad=True), dg.ones(3, requires_grad=True)
    x = dg.tensor([0.5, -1.0, 2.0])
    for k, lr in enumerate((0.1, 0.05, 0.025, 0.0125)):
        # By keyword and with the default overridden too: the same entry's inputs.
        kw = {"momentum": 0.9} if k % 2 else {}
        got, want = f(w, x, lr=lr, **kw), _sgd(we, x, lr, **kw)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(w.detach().numpy(), we.detach().numpy())
    assert traces(f) == 1, f.stats.retrace_reasons



def _inplace(x, lr):
    # The in-place forms an optimizer written by hand uses: a float as the other operand
    # and as ``alpha=``; each meets the float32 tensor as a float32 number.
    d = x.clone()
    d.mul_(-lr)
    d.add_(x, alpha=-lr)
    d.sub_(x * 0.5, alpha=lr)
    d.add_(dg.mul(x, lr))  # a float32 product, as eagerly: the float enters as float32
    return d.div_(lr + 1.0)


def test_a_float_in_in_place_ops_and_as_alpha_is_an_input():
    f = dg.compile(_inplace)
    x = dg.tensor([0.5, -1.0, 2.0])
    for lr in (0.1, 1.0, 0.37):
        np.testing.assert_array_equal(f(x, lr).numpy(), _inplace(x, lr).numpy())
    assert traces(f) == 1, f.stats.retrace_reasons

def _branch(x, lam):
    if lam > 0.5:
        return x * 2
    return x - lam


def _size(x, lam):
    return x[: int(lam * 4)].sum() * lam


def test_a_float_python_needs_is_keyed_by_value():
    f, g = dg.compile(_branch), dg.compile(_size)
    x = dg.tensor(np.arange(4.0, dtype=np.float32))
    for lam in (0.3, 0.7, 0.3, 0.9, 0.7):
        np.testing.assert_array_equal(f(x, lam).numpy(), _branch(x, lam).numpy())
        np.testing.assert_array_equal(g(x, lam).numpy(), _size(x, lam).numpy())
    # One trace per value (a value met again reuses its entry), each saying why.
    assert traces(f) == traces(g) == 3, (f.stats.retrace_reasons, g.stats.retrace_reasons)
    assert "a comparison" in f.stats.retrace_reasons[0]
    assert "int()" in g.stats.retrace_reasons[0]


def _divide(x, lam):
    return x * (1 / lam)


def test_a_float_keeps_pythons_errors_and_types():
    f = dg.compile(_divide)
    x = dg.ones(2)
    np.testing.assert_array_equal(f(x, 4.0).numpy(), [0.25, 0.25])
    with pytest.raises(ZeroDivisionError):
        f(x, 0.0)
    # An int where the float was is an int (an int tensor times an int stays an int).
    h = dg.compile(lambda xi, s: xi * s)
    xi = dg.tensor([1, 2, 3])
    assert h(xi, 0.5).dtype == np.float32
    assert h(xi, 2).dtype == xi.dtype
    np.testing.assert_array_equal(h(xi, 1.5).numpy(), [1.5, 3.0, 4.5])


def _mixed(x, i, lam):
    return x * (i + lam), x * (lam * i - i)


def test_an_int_input_with_a_float_input_is_a_float():
    f = dg.compile(_mixed)
    x = dg.tensor([1.0, -2.0])
    for i, lam in ((1, 0.5), (2, 0.25), (3, 0.125)):  # the int an input from its second
        for g, w in zip(f(x, i, lam), _mixed(x, i, lam)):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert traces(f) == 2, f.stats.retrace_reasons


class _RunningMean:
    # A plain object (not a Module) whose attribute the step rebinds, as a hand-written
    # batch norm's running statistics are.
    def __init__(self) -> None:
        self.mean = dg.zeros(3)

    def __call__(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x.mean(0)
        return x - x.mean(0)


def test_a_float_argument_keeps_attribute_writes_of_the_objects_the_function_names():
    eager_stats, compiled_stats = _RunningMean(), _RunningMean()

    def make(stats):
        return lambda x, lr: stats(x) * lr

    f = dg.compile(make(compiled_stats))
    ref = make(eager_stats)
    for k, lr in enumerate((0.1, 0.05, 0.025)):
        x = dg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3) * (k + 1))
        np.testing.assert_array_equal(f(x, lr).numpy(), ref(x, lr).numpy())
        assert type(compiled_stats.mean) is dg.Tensor
        np.testing.assert_array_equal(compiled_stats.mean.numpy(), eager_stats.mean.numpy())
    assert traces(f) == 1, f.stats.retrace_reasons
