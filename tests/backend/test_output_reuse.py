"""Large outputs of a compiled call are the arrays the same call site made before, when
nothing else refers to them (`callgen.recycler`): a step that drops its gradient before
the next one gets the same gradient array back, and never one that anything still sees.

One small kernel serves every check: its output is made large by lowering the threshold.
"""

from __future__ import annotations

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
