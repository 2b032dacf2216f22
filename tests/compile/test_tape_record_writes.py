"""The generated call records a compiled scalar loss's tape node with no call per input
(its inputs' tape nodes and the version of each saved input are tuple displays), hands
0-d results out as subscripts of the kernel's outputs, and writes a step's gradients back
in one call: every write eager mode sees between the call and ``backward`` is still seen,
and no array is shared between two calls."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def _loss(x, y):
    return x * y + y ** 2


F = dg.compile(_loss, tiered=False)  # one kernel serves the scalar tests of the file


def _leaves():
    return (dg.tensor(np.float32(2.0), requires_grad=True),
            dg.tensor(np.float32(3.0), requires_grad=True))


def _error(fn) -> str | None:
    try:
        fn()
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("which", [0, 1])
def test_an_input_written_in_place_before_backward_raises_as_in_eager(which: int) -> None:
    for f in (F, _loss):
        ts = _leaves()
        z = f(*ts)
        with dg.no_grad():
            ts[which].add_(1.0)
        msg = _error(z.backward)
        assert msg is not None and "modified by an inplace operation" in msg, (f, msg)


def test_a_leaf_seen_for_the_first_time_gets_its_tape_node() -> None:
    for _ in range(2):  # the call path serves fresh leaves, which have no tape node yet
        x, y = _leaves()
        z = F(x, y)
        assert [n.name() for n, _ in z.grad_fn.next_functions] == ["AccumulateGrad"] * 2
        z.backward()
        assert (x.grad.item(), y.grad.item()) == (3.0, 8.0)


def test_a_non_leaf_input_takes_the_engine_with_eager_gradients() -> None:
    for f in (F, _loss):
        x, y = _leaves()
        f(x * 2.0, y).backward()
        assert (x.grad.item(), y.grad.item()) == (6.0, 10.0), f


def test_results_of_two_calls_share_no_memory() -> None:
    x, y = _leaves()
    z1, z2 = F(x, y), F(x, y)
    z1.backward()
    g1 = x.grad
    x.grad = None
    z2.backward()
    arrays = [z1.numpy(), z2.numpy(), g1.numpy(), x.grad.numpy()]
    for i, a in enumerate(arrays):
        assert a.shape == ()
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)
    with dg.no_grad():
        z1.add_(100.0)
        g1.add_(100.0)
    assert (z2.item(), x.grad.item()) == (15.0, 3.0)


def test_grad_reads_run_in_c_and_the_setter_still_checks() -> None:
    x, _ = _leaves()
    x.grad = dg.tensor(np.float32(1.0))
    assert type(dg.Tensor.grad.fget).__name__ == "attrgetter"
    assert x.grad.item() == 1.0 and x.shape == () and x.ndim == 0
    assert x.dtype == np.float32
    with pytest.raises(RuntimeError, match="different size"):
        x.grad = dg.ones(2)
    with pytest.raises(TypeError, match="expected to be a Tensor"):
        x.grad = 1.0
    x.grad = None
    assert x.grad is None


@pytest.mark.parametrize("passed", [False, True])
def test_a_gradient_read_by_a_loss_is_version_checked(passed: bool) -> None:
    # The loss reads `w.grad` (of a captured tensor, or of an argument): the tape node
    # saves that gradient tensor, so writing it in place before backward raises, as in
    # eager mode.
    w = dg.tensor(np.float32(1.5), requires_grad=True)
    w.grad = dg.tensor(np.float32(4.0))

    def loss(x, v):
        return x * (v if passed else w).grad + x ** 2

    f = dg.compile(loss, tiered=False)
    for fn in (f, loss):
        x = dg.tensor(np.float32(2.0), requires_grad=True)
        fn(x, w).backward()
        assert x.grad.item() == 8.0, fn
        z = fn(x, w)
        with dg.no_grad():
            w.grad.mul_(2.0)
        msg = _error(z.backward)
        assert msg is not None and "modified by an inplace operation" in msg, (fn, msg)
        w.grad = dg.tensor(np.float32(4.0))


def test_a_compiled_step_writes_each_gradient_back_as_eager_does() -> None:
    def make():
        dg.manual_seed(0)
        net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU(), dg.nn.Linear(3, 1))
        opt = dg.optim.SGD(net.parameters(), lr=0.1)

        def step(x, t):
            opt.zero_grad()
            out = dg.nn.functional.mse_loss(net(x), t)
            out.backward()
            opt.step()
            return out
        return net, step

    x = dg.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(10, 2))
    t = dg.zeros(10, 1)
    (cnet, cstep), (enet, estep) = make(), make()
    f = dg.compile(cstep, tiered=False)
    seen = []
    for _ in range(3):
        dg.testing.assert_close(f(x, t), estep(x, t))
        grads = [p.grad for p in cnet.parameters()]
        for (cp, ep), g in zip(zip(cnet.parameters(), enet.parameters()), grads):
            dg.testing.assert_close(cp, ep)
            dg.testing.assert_close(g, ep.grad)
            assert g.grad_fn is None and not g.requires_grad
        seen.append([g.numpy() for g in grads])
    assert f.stats.traces == 1
    # Each step's gradients are new arrays: a gradient kept from the step before keeps
    # its values.
    for a, b in zip(*seen[-2:]):
        assert not np.shares_memory(a, b)


def test_modes_above_the_base_are_counted_in_every_thread() -> None:
    import threading

    from dualgraph import modes

    seen = []

    def traced(x):
        seen.append(len(modes.ABOVE_BASE))  # runs while the trace's mode is pushed
        return x * 2.0

    assert modes.ABOVE_BASE == []
    dg.compile(traced, tiered=False)(dg.ones(2))
    assert seen and seen[0] >= 1 and modes.ABOVE_BASE == []
    # A mode another thread pushed is counted here too, and this thread stays eager.
    pushed, release = threading.Event(), threading.Event()

    def other():
        modes.push_mode(lambda op, args, attrs: None)
        pushed.set()
        release.wait(10)
        modes.pop_mode()

    th = threading.Thread(target=other)
    th.start()
    try:
        assert pushed.wait(10)
        assert len(modes.ABOVE_BASE) == 1
        x, y = _leaves()
        z = x * y
        z.backward()
        assert (z.item(), x.grad.item()) == (6.0, 3.0)
    finally:
        release.set()
        th.join()
    assert modes.ABOVE_BASE == []
