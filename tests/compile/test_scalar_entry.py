"""The small-step fast paths: a scalar kernel called through its compiled entry (not the
dispatcher) only with inputs of the types it was compiled for, the backward hand-out's
gradients as complete tensors, and call counting that garbage collection cannot move."""

from __future__ import annotations

import gc

import numpy as np

import dualgraph as dg
from dualgraph.eager.internal import make_tensor
from dualgraph.eager.tensor import Tensor
from dualgraph.testing import assert_close
from tests.compile.test_step_call_counts import _calls

from .._support.profiling import python_calls


def _poly(x, y):
    return x * y + y ** 2


def _kernel_frames(call) -> int:
    """How many times ``call()`` entered a compiled kernel through Numba's dispatcher
    (which shows a profiler the kernel's Python function; its compiled entry, called
    directly, is a C function)."""
    return sum(file.rsplit("/", 1)[-1].startswith("dg_") for file, _ in python_calls(call))


def _scalar(value: float) -> Tensor:
    return dg.tensor(np.float32(value), requires_grad=True)


def test_a_scalar_kernel_runs_through_its_compiled_entry_and_matches_eager():
    f = dg.compile(_poly, tiered=False)
    x, y = _scalar(2.0), _scalar(3.0)
    f(x, y)
    assert "ep(" in f.call_source(x, y)
    assert _kernel_frames(lambda: f(x, y)) == 0
    for a, b in ((2.0, 3.0), (-1.5, 0.25), (0.0, 7.0)):
        x, y = _scalar(a), _scalar(b)
        z = f(x, y)
        z.backward()
        ex, ey = _scalar(a), _scalar(b)
        ez = _poly(ex, ey)
        ez.backward()
        assert_close(z, ez)
        assert_close(x.grad, ex.grad)
        assert_close(y.grad, ey.grad)
    assert f.stats.traces == 1


def test_a_tensor_passed_twice_misses_the_checked_pair_and_is_counted_once():
    """The 0-d arguments the last call checked are kept as one entry; another pair (here
    one tensor passed twice, which shares memory) runs the alias check, and the call takes
    its own signature, counted once."""
    f = dg.compile(_poly, tiered=False)
    x, y = _scalar(2.0), _scalar(3.0)
    for a, b in ((x, y), (x, y), (x, x), (x, y), (y, y), (x, x)):
        a.grad = b.grad = None
        z = f(a, b)
        z.backward()
        ea, eb = _scalar(a.item()), _scalar(b.item())
        ez = _poly(ea, ea if a is b else eb)
        ez.backward()
        assert_close(z, ez)
        assert_close(a.grad, ea.grad)
        if a is not b:
            assert_close(b.grad, eb.grad)
    assert f.stats.traces == 2
    assert f.stats.calls == 6
    assert f.stats.fast_calls >= 2


def test_read_only_and_misaligned_inputs_go_through_the_dispatcher():
    f = dg.compile(_poly, tiered=False)
    y = np.array(3.0, np.float32)
    f(np.array(2.0, np.float32), y)
    assert _kernel_frames(lambda: f(np.array(2.0, np.float32), y)) == 0

    frozen = np.array(2.0, np.float32)
    frozen.flags.writeable = False
    # Four bytes at an odd address: a float32 NumPy calls unaligned.
    odd = np.frombuffer(bytearray(8), np.float32, count=1, offset=1).reshape(())
    odd[...] = 2.5
    assert not odd.flags.aligned
    for a in (frozen, odd):
        assert _kernel_frames(lambda a=a: f(a, y)) == 1
        assert_close(f(a, y), _poly(dg.tensor(a), dg.tensor(y)))
    # The entry stays off for this call path: every later call is typed by the dispatcher.
    assert _kernel_frames(lambda: f(np.array(2.0, np.float32), y)) == 1
    assert_close(f(np.array(2.0, np.float32), y), dg.tensor(np.float32(15.0)))


def test_a_replaced_kernel_function_is_the_one_called(monkeypatch):
    f = dg.compile(_poly, tiered=False)
    x, y = _scalar(2.0), _scalar(3.0)
    f(x, y)
    kernel = f.entries()[0].kernel
    calls = []
    fn = kernel.fn

    def counted(*args):
        calls.append(1)
        return fn(*args)

    monkeypatch.setattr(kernel, "fn", counted)
    assert_close(f(x, y), dg.tensor(np.float32(15.0)))
    assert calls == [1]


def test_handed_out_gradients_are_tensors_as_make_tensor_builds_them():
    f = dg.compile(_poly, tiered=False)
    x, y = _scalar(2.0), _scalar(3.0)
    for _ in range(2):
        x.grad = y.grad = None
        f(x, y).backward()
    slots = [s for s in Tensor.__slots__ if s not in ("_data", "__weakref__")]
    for g, want in ((x.grad, 3.0), (y.grad, 8.0)):
        assert type(g) is Tensor
        ref = make_tensor(np.float32(want), False, None)
        for s in slots:
            got, expected = getattr(g, s), getattr(ref, s)
            assert got == expected, (s, got, expected)
        assert_close(g, ref)
        g.add_(1.0)  # a tensor of its own: in-place ops work and bump its version
        assert g._version[0] == 1
    # Accumulation (no reset): the hand-out adds to the gradients the leaves have.
    f(x, y).backward()
    assert_close(x.grad, dg.tensor(np.float32(3.0 + 1.0 + 3.0)))
    assert_close(y.grad, dg.tensor(np.float32(8.0 + 1.0 + 8.0)))


def test_a_compiled_scalar_loss_is_a_tensor_as_make_tensor_builds_it():
    f = dg.compile(_poly, tiered=False)
    x, y = _scalar(2.0), _scalar(3.0)
    f(x, y)
    z = f(x, y)
    assert type(z) is Tensor and z.requires_grad and z.grad_fn.hands_out
    ref = make_tensor(np.float32(15.0), True, z.grad_fn)
    for s in Tensor.__slots__:
        if s not in ("_data", "__weakref__"):
            assert getattr(z, s) == getattr(ref, s), s
    assert_close(z, ref)
    with dg.no_grad():  # no tape: the loss made without a node
        w = f(x, y)
    assert w.grad_fn is None and not w.requires_grad
    assert_close(w, ref.detach())


def test_call_counts_ignore_garbage_collection_callbacks():
    f = dg.compile(_poly, tiered=False)
    x, y = _scalar(2.0), _scalar(3.0)

    def step():
        x.grad = None
        y.grad = None
        f(x, y).backward()

    for _ in range(3):
        step()
    quiet = _calls(step)

    def on_collect(phase, info):  # a Python callback, as JAX and Hypothesis install
        pass

    threshold = gc.get_threshold()
    gc.callbacks.append(on_collect)
    gc.set_threshold(1)  # a collection at (almost) every allocation
    try:
        busy = _calls(step)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(on_collect)
    assert busy == quiet, (busy, quiet)
