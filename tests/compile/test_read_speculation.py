"""A training step that branches on numbers it reads with ``.item()`` (a loss threshold, a
``max(1, n)`` normaliser, a nested read, a read under ``no_grad``): compiled, each call
first computes the read values from its inputs and runs the kernels only when the branches
go as traced; otherwise it retraces, or past the budget runs eagerly, and the optimizer
steps exactly once either way."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg

from .conftest import traces


def _stepper():
    w = dg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    opt = dg.optim.SGD([w], lr=0.01)

    def step(x):
        opt.zero_grad()
        loss = (w * x).sum()
        with dg.no_grad():
            n = (x > 0).sum().item()
        if loss.item() > 0:
            loss = loss * 2
            if (x * loss.item()).max().item() > 4:  # read from a value the branch made
                loss = loss + 1
        (loss / max(1, n)).backward()
        opt.step()
        return loss

    return w, step


# Outcomes: (loss > 0, nested > 4, max's side); the last call goes back to the first entry.
_XS = [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]
_TRACES = [1, 1, 2, 3, 3]


def test_a_step_branching_on_read_numbers_compiles_per_outcome_and_steps_once(runner):
    w_e, eager = _stepper()
    w_c, step = _stepper()
    f = runner(step)
    for x, n in zip(_XS, _TRACES):
        want = eager(dg.tensor(x))
        got = f(dg.tensor(x))
        dg.testing.assert_close(got.numpy(), want.numpy(), rtol=1e-6, atol=0)
        # One SGD step per call, whether the guard held or the call retraced.
        dg.testing.assert_close(w_c.detach().numpy(), w_e.detach().numpy(), rtol=1e-6, atol=0)
        if runner.mode != "eager":
            assert traces(f) == n
    if runner.mode != "eager":
        assert all(".item()" in r for r in f.stats.retrace_reasons)


def test_past_the_retrace_budget_a_failed_guard_runs_the_step_eagerly_once():
    w_e, eager = _stepper()
    w_c, step = _stepper()
    f = dg.compile(step, max_retraces=0)
    for x in _XS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the budget's warning
            got = f(dg.tensor(x))
        want = eager(dg.tensor(x))
        dg.testing.assert_close(got.numpy(), want.numpy(), rtol=1e-6, atol=0)
        dg.testing.assert_close(w_c.detach().numpy(), w_e.detach().numpy(), rtol=1e-6, atol=0)
    assert traces(f) == 1


def _scaled(x, w):
    loss = (w * x).sum()
    return loss * 3 if loss.item() > 0 else loss * -1


@pytest.mark.parametrize("x", [[1.0, 2.0], [-1.0, -2.0]])
def test_backward_through_a_branch_on_a_read_number_gives_eagers_gradients(x):
    f = dg.compile(_scaled)
    for sign in (1.0, -1.0, 1.0):
        xs = dg.tensor([sign * v for v in x])
        w, we = dg.ones(2, requires_grad=True), dg.ones(2, requires_grad=True)
        f(xs, w).backward()
        _scaled(xs, we).backward()
        np.testing.assert_array_equal(w.grad.numpy(), we.grad.numpy())
    assert traces(f) == 2


def test_a_read_number_not_computable_from_the_inputs_still_runs_eagerly():
    def noisy(x):
        return x * 2 if (x + dg.rand(2)).sum().item() > 100 else x

    f = dg.compile(noisy)
    with pytest.warns(RuntimeWarning, match="Python needs its value"):
        np.testing.assert_array_equal(f(dg.ones(2)).numpy(), np.ones(2))
    assert traces(f) == 0


def _first(x, k):
    n = (k > 0).sum().item()
    y = x[:n] * 2
    for _ in range(n):
        y = y + 1
    return y


def test_an_int_read_as_a_size_or_a_loop_bound_retraces_per_value():
    f = dg.compile(_first)
    x = dg.arange(5.0)
    for k, n in (([1, 1, -1], 1), ([1, 1, -1], 1), ([1, -1, -1], 2), ([1, 1, -1], 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = f(x, dg.tensor(k))
        np.testing.assert_array_equal(got.numpy(), _first(x, dg.tensor(k)).numpy())
        assert traces(f) == n
