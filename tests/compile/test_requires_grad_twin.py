"""A compiled function that only detaches an argument does not depend on that argument's
``requires_grad``: a call that differs only there reuses the entry (no second trace), and
every other use of the flag still gives eager's answer."""

from __future__ import annotations

import dualgraph as dg


def _step_state(compile_: bool):
    dg.manual_seed(0)
    w = dg.randn(3, 3, requires_grad=True)

    def step(x, h):
        h = h.detach()  # a language model's repackage_hidden
        h = dg.tanh(x @ w + h)
        loss = (h * h).sum()
        loss.backward()
        return loss, h

    return (dg.compile(step) if compile_ else step), w


def _run(compile_: bool, first_requires_grad: bool):
    f, w = _step_state(compile_)
    x = dg.ones(2, 3)
    h = dg.zeros(2, 3, requires_grad=first_requires_grad)
    out = []
    for _ in range(4):
        w.grad = None
        loss, h = f(x, h)  # h is handed back requiring grad
        out += [loss.item(), h.requires_grad, w.grad.numpy().copy()]
    return f, out


def test_a_detached_argument_is_traced_once_whichever_flag_comes_first():
    for first in (False, True):
        f, got = _run(True, first)
        _, want = _run(False, first)
        assert f.stats.traces == 1, f.stats.retrace_reasons
        for g, e in zip(got, want):
            dg.testing.assert_close(g, e, rtol=1e-5, atol=1e-6, check_dtype=False)


def test_reading_the_flag_or_differentiating_keeps_a_trace_per_flag():
    def reads(x, h):
        return x * 2 if h.requires_grad else x * 3

    def uses(x, h):
        return (x * h).sum()

    for fn in (reads, uses):
        f = dg.compile(fn)
        x = dg.ones(2)
        results = []
        for rg in (False, True, False):
            h = dg.full((2,), 2.0, requires_grad=rg)
            got, want = f(x, h), fn(x, h)
            dg.testing.assert_close(got, want)
            results.append(got.requires_grad == want.requires_grad)
        assert all(results)
        assert f.stats.traces == 2, fn.__name__


def test_a_detached_argument_that_is_returned_is_not_shared():
    def returned(x, h):
        return x + h.detach(), h

    f = dg.compile(returned)
    for rg in (False, True):
        out = f(dg.ones(2), dg.ones(2, requires_grad=rg))
        assert out[1].requires_grad == rg
    assert f.stats.traces == 2


def test_a_write_through_a_detached_argument_reaches_the_argument():
    # detach() shares memory eagerly: the write changes the caller's tensor.
    def written(x, h):
        h.detach().mul_(2)
        return x + h.detach()

    f = dg.compile(written)
    for compiled in (True, False):
        h = dg.ones(2)
        out = (f if compiled else written)(dg.ones(2), h)
        assert out.tolist() == [3.0, 3.0] and h.tolist() == [2.0, 2.0], compiled
