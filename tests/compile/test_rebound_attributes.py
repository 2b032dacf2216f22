"""A tensor attribute the compiled step sets (``self.true_dist = ...``) is an output of the
call, not a guard on which tensor it holds: the write-back of one call does not make the
next retrace. What the trace read before writing is still guarded: its type, its data
read through the attribute, and values read into Python."""

from __future__ import annotations

import pytest

import dualgraph as dg

from .conftest import MODES, traces


class _Smoothing(dg.nn.Module):
    """Sets ``self.true_dist`` before any read, as the Annotated Transformer's
    LabelSmoothing does."""

    def __init__(self) -> None:
        super().__init__()
        self.true_dist = None

    def forward(self, x, target):
        d = x.data.clone()
        d.fill_(0.1)
        d.scatter_(1, target.data.unsqueeze(1), 0.8)
        self.true_dist = d
        return -(x * d).sum()


class _Holder:
    """A plain object named by the step, holding the criterion (as a loss-compute class
    holds it)."""

    def __init__(self, criterion) -> None:
        self.criterion = criterion


class _Running:
    """Reads ``self.mean`` and rebinds it to a new tensor every call."""

    def __init__(self, n: int) -> None:
        self.mean = dg.zeros(n)

    def __call__(self, x):
        with dg.no_grad():
            self.mean = 0.5 * self.mean + x.mean(0)
        return x * self.mean


def _setup():
    dg.manual_seed(0)
    w = dg.randn(4, 3, requires_grad=True)
    holder = _Holder(_Smoothing())
    running = _Running(3)

    def step(x, t):
        w.grad = None
        y = dg.nn.functional.log_softmax(running(x @ w), dim=-1)
        loss = holder.criterion(y, t)
        loss.backward()
        return loss, w.grad

    return step, holder, running


@pytest.mark.parametrize("runner", MODES, indirect=True)
def test_an_attribute_set_each_call_does_not_retrace(runner):
    results = {}
    for mode in ("eager", runner.mode):
        step, holder, running = _setup()
        f = step if mode == "eager" else runner(step)
        out = []
        t = dg.tensor([0, 2])
        for i in range(4):
            x = dg.ones(2, 4) * (i + 1)
            loss, g = f(x, t)
            out += [loss, g.clone(), holder.criterion.true_dist, running.mean]
        results[mode] = (out, f)
    got, f = results[runner.mode]
    for a, b in zip(got, results["eager"][0]):
        dg.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    if runner.mode != "eager":
        # The first call fills ``true_dist`` (it held None) and runs eagerly; one trace.
        assert traces(f) == 1, f.stats.retrace_reasons


def test_an_attribute_read_before_it_is_set_retraces_for_another_shape():
    running = _Running(3)

    def step(x):
        return running(x).sum()

    f = dg.compile(step)
    for n in (3, 3, 5, 5):
        if running.mean.shape[0] != n:
            running.mean = dg.zeros(n)  # rebound from outside to another shape
        want_state = _Running(n)
        want_state.mean = running.mean.clone()
        x = dg.ones(2, n)
        dg.testing.assert_close(f(x), (x * (0.5 * want_state.mean + x.mean(0))).sum())
    assert f.stats.traces == 2, f.stats.retrace_reasons
    assert "Running.mean" in f.stats.retrace_reasons[-1] or "shape" in \
        f.stats.retrace_reasons[-1]


def test_an_attribute_read_into_python_before_it_is_set_keeps_its_identity_guard():
    class Scale:
        def __init__(self) -> None:
            self.s = dg.tensor(1.0)

    holder = Scale()

    def step(x):
        k = holder.s.item()  # a Python number baked into the trace
        holder.s = holder.s * 2
        return x * k

    eager_holder = Scale()

    def eager(x):
        k = eager_holder.s.item()
        eager_holder.s = eager_holder.s * 2
        return x * k

    f = dg.compile(step)
    for _ in range(3):
        dg.testing.assert_close(f(dg.ones(2)), eager(dg.ones(2)))
    dg.testing.assert_close(holder.s, eager_holder.s)
