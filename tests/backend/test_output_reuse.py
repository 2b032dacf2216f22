"""Large and one-element outputs of a compiled call are the arrays the same call site made
before, when nothing else refers to them (`callgen.recycler`, and the kept one-element
outputs of `callgen._output_lines`): a step that drops its gradient before the next one
gets the same gradient array back, and never one that anything still sees.

One small kernel serves the large outputs' checks (its output is made large by lowering
the threshold), one scalar step the one-element outputs'.
"""

from __future__ import annotations

import sys
import threading
import weakref

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.compile import callgen

N = 4_099


@pytest.fixture(scope="module")
def step():
    old = callgen.RECYCLE_BYTES
    callgen.RECYCLE_BYTES = 1024  # the gradient of N float64 values is large
    try:
        f = dg.compile(lambda x: (dg.tanh(x) * x).sum(), tiered=False)
        x = dg.tensor(np.linspace(-2, 2, N), requires_grad=True)
        f(x).backward()  # compiled now, with the call path that recycles
    finally:
        callgen.RECYCLE_BYTES = old

    def run(x):
        x.grad = None
        f(x).backward()
        return x.grad.numpy()
    return run, x


def _expected(x: np.ndarray) -> np.ndarray:
    t = np.tanh(x)
    return (1 - t * t) * x + t


def test_a_dropped_gradient_array_is_used_again(step):
    run, x = step
    first = weakref.ref(run(x))  # a weak reference does not keep it from reuse
    second = run(x)  # the first gradient was dropped with x.grad = None
    assert first() is second
    dg.testing.assert_close(second, _expected(x.numpy()), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("hold", ["array", "view", "tensor"])
def test_an_array_still_seen_is_never_overwritten(step, hold):
    run, x = step
    g = run(x)
    kept = {"array": g, "view": g[::2], "tensor": x.grad}[hold]
    before = np.array(kept if hold != "tensor" else kept.numpy(), copy=True)
    del g
    y = dg.tensor(np.linspace(-1, 3, N), requires_grad=True)
    other = run(y)
    seen = kept if hold != "tensor" else kept.numpy()
    assert not np.shares_memory(other, seen)
    dg.testing.assert_close(seen, before, rtol=0, atol=0)
    dg.testing.assert_close(other, _expected(y.numpy()), rtol=1e-12, atol=1e-12)


def test_threads_never_share_an_output(step):
    run, _ = step
    xs = [dg.tensor(np.linspace(-2, 2, N) * (k + 1), requires_grad=True) for k in range(4)]
    copies: dict = {k: [] for k in range(4)}

    def work(k: int) -> None:
        for _ in range(20):
            # A copy as soon as the step returns, and the gradient dropped: another
            # thread writing the same array would show in the copy.
            copies[k].append(np.array(run(xs[k]), copy=True))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, got in copies.items():
        assert len(got) == 20
        for g in got:
            dg.testing.assert_close(g, _expected(xs[k].numpy()), rtol=1e-12, atol=1e-12)


def _poly(x, y):
    return x * y + y ** 2


@pytest.fixture(scope="module")
def scalar():
    """A scalar step (0-d loss and gradients) compiled once, and its eager answers."""
    f = dg.compile(_poly, tiered=False)

    def values(a: float, b: float) -> tuple:
        return a * b + b * b, b, a + 2 * b

    return f, values


def _leaves(a: float, b: float) -> tuple:
    return (dg.tensor(np.float64(a), requires_grad=True),
            dg.tensor(np.float64(b), requires_grad=True))


def test_dropped_scalar_outputs_are_used_again_and_held_ones_never(scalar):
    f, values = scalar
    x, y = _leaves(2.0, 3.0)
    f(x, y).backward()
    for _ in range(2):  # the first call made the kept arrays; then reused
        first = [weakref.ref(x.grad.numpy()), weakref.ref(y.grad.numpy())]
        x.grad = y.grad = None
        z = f(x, y)
        z.backward()
        assert x.grad.numpy() is first[0]() and y.grad.numpy() is first[1]()
        assert (z.item(), x.grad.item(), y.grad.item()) == values(2.0, 3.0)
    # Held as a tensor, an array or a view: never written again.
    held = [z, x.grad.numpy(), y.grad.numpy()[...]]
    before = [z.item(), x.grad.item(), y.grad.item()]
    x.grad = y.grad = None
    u, v = _leaves(-1.5, 0.5)
    w = f(u, v)
    w.backward()
    assert (w.item(), u.grad.item(), v.grad.item()) == values(-1.5, 0.5)
    assert [held[0].item(), float(held[1]), float(held[2])] == before
    assert not any(np.shares_memory(a, b) for a in (w.numpy(), u.grad.numpy(), v.grad.numpy())
                   for b in (held[0].numpy(), held[1], held[2]))


def test_scalar_outputs_stay_exact_with_retained_graphs_and_accumulation(scalar):
    f, values = scalar
    x, y = _leaves(2.0, 3.0)
    z = f(x, y)
    z.backward(retain_graph=True)  # the node keeps its gradients for a second backward
    z2 = f(x, y)  # another call while the first node holds its arrays
    z.backward()
    z2.backward()
    _, gx, gy = values(2.0, 3.0)
    assert (x.grad.item(), y.grad.item()) == (3 * gx, 3 * gy)  # accumulated
    x.grad = y.grad = None
    y.register_hook(lambda g: g * 10)
    f(x, y).backward()
    assert (x.grad.item(), y.grad.item()) == (gx, 10 * gy)


def test_threads_never_share_a_scalar_output(scalar):
    f, values = scalar
    got: dict = {k: [] for k in range(4)}

    def work(k: int) -> None:
        x, y = _leaves(k + 1.0, k - 0.5)
        for _ in range(200):
            x.grad = y.grad = None
            z = f(x, y)
            z.backward()
            got[k].append((z.item(), x.grad.item(), y.grad.item()))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch inside the steps
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    for k, results in got.items():
        assert results == [values(k + 1.0, k - 0.5)] * 200
