"""What a compiled function guards, passes in at run time, and treats as constant (issue 11).

Each test compiles a small function, changes something the trace read (a module flag, a
rebound tensor, a hyperparameter) and checks that the compiled result follows eager mode,
with the counters that say whether it retraced.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

from ._helpers import assert_close


# ------------------------------------------------------------------ no_grad and detach
def _no_grad_fn(x):
    with dg.no_grad():
        c = x * 2
    return (x * c).sum()


def _detach_fn(x):
    return (x * (x * 2).detach()).sum()


@pytest.mark.parametrize("fn", [_no_grad_fn, _detach_fn])
def test_no_grad_values_are_constants_in_train_mode(fn):
    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    fn(x).backward()
    expected = x.grad.numpy()
    x.grad = None
    f = dg.compile(fn)
    f(x).backward()
    assert_close(x.grad.numpy(), expected)
    assert_close(expected, np.array([2.0, 4.0, 6.0], np.float32))
    assert f.stats.traces == 1


def test_no_grad_values_are_constants_in_step_mode():
    def step(x):
        loss = _no_grad_fn(x)
        loss.backward()
        return loss

    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    f = dg.compile(step)
    f(x)
    assert f.stats.traces == 1
    assert_close(x.grad.numpy(), np.array([2.0, 4.0, 6.0], np.float32))
