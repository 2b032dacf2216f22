"""A training step that branches on numbers it reads with ``.item()`` (a loss threshold, a
``max(1, n)`` normaliser, a nested read, a read under ``no_grad``) or on a traced tensor's
truth value (``if norm > theta:``, ``while``, ``and``/``or``/``not``): compiled, each call
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


# The truth value of a traced tensor (no .item()): d2l's hand-written gradient clipping.


def _clipper():
    w = dg.tensor([0.5, -1.0, 2.0], requires_grad=True)

    def step(x, theta):
        w.grad = None
        loss = (w * x).sum()
        loss.backward()
        norm = dg.sqrt((w.grad ** 2).sum())
        if norm > theta:
            w.grad[:] *= theta / norm
        with dg.no_grad():
            w.sub_(w.grad, alpha=0.1)
        return norm

    return w, step


def test_a_branch_on_a_traced_tensor_compiles_per_side_and_steps_once():
    w_e, eager = _clipper()
    w_c, step = _clipper()
    f = dg.compile(step)
    theta = dg.tensor(1.0)
    # Clipped, clipped, not clipped (retrace), clipped (the first entry again).
    for s, n in ((1.0, 1), (2.0, 1), (0.1, 2), (3.0, 2)):
        x = dg.tensor([s, s, s])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = f(x, theta)
        dg.testing.assert_close(got, eager(x, theta), rtol=1e-6, atol=0)
        # One SGD step per call, whether the guard held or the call retraced.
        dg.testing.assert_close(w_c.detach(), w_e.detach(), rtol=1e-6, atol=0)
        dg.testing.assert_close(w_c.grad, w_e.grad, rtol=1e-6, atol=0)
        assert traces(f) == n
    reason = f.stats.retrace_reasons[-1]
    assert f"{__file__}:" in reason
    assert "the truth value of a traced tensor gave True when traced, False now" in reason


def _branchy(x, w):
    loss = (w * x).sum()
    while loss > 4:  # a loop bound: one entry per count
        loss = loss / 2
    if not (loss > 0 and x.max() < 10) or x.min() == 0:
        return -loss
    return loss * 3


@pytest.mark.parametrize("strict", [False, True])
def test_while_and_or_not_on_traced_tensors_give_eagers_values_and_gradients(strict):
    f = dg.compile(_branchy, strict=strict)
    for x, n in (([1.0, 2.0], 1), ([-1.0, -2.0], 2), ([1.0, 2.0], 2), ([3.0, 4.0], 3)):
        w, we = dg.ones(2, requires_grad=True), dg.ones(2, requires_grad=True)
        got = f(dg.tensor(x), w)
        want = _branchy(dg.tensor(x), we)
        dg.testing.assert_close(got, want, rtol=1e-6, atol=0)
        got.backward()
        want.backward()
        dg.testing.assert_close(w.grad, we.grad, rtol=1e-6, atol=0)
        assert traces(f) == n


def test_a_truth_value_needing_more_than_one_value_or_a_random_one():
    f = dg.compile(lambda x: x * 2 if x > 0 else x)
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        f(dg.ones(3))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(dg.ones(3))  # as eager mode says it

    def noisy(x):
        return x * 2 if (x + dg.rand(2)).sum() > 100 else x

    g = dg.compile(noisy)
    with pytest.warns(RuntimeWarning, match="the truth value"):
        np.testing.assert_array_equal(g(dg.ones(2)).numpy(), np.ones(2))
    assert traces(g) == 0
    with pytest.raises(dg.TraceError, match="the truth value"):
        dg.compile(noisy, strict=True)(dg.ones(2))
