"""Python calls on the eager side of a compiled training step, counted with
``sys.setprofile``: for a small step they are its cost. This counts calls, it never times
them."""

from __future__ import annotations

import sys

import numpy as np

import dualgraph as dg


def _count(fn) -> tuple[int, list]:
    """The Python function calls made while running ``fn()`` (the caller's frame is not
    counted), as (file, function) pairs."""
    names = []

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            names.append((code.co_filename.replace("\\", "/"), code.co_name))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return len(names), names


def _scalar(x, y):
    return x * y + y ** 2


F = dg.compile(_scalar, tiered=False)


def _leaves():
    return (dg.tensor(np.float32(2.0), requires_grad=True),
            dg.tensor(np.float32(3.0), requires_grad=True))


def test_backward_of_a_compiled_scalar_loss_makes_few_calls():
    x, y = _leaves()
    for _ in range(2):  # compiled, and .grad set once: the steady state
        x.grad = y.grad = None
        z = F(x, y)
        z.backward()
    x.grad = y.grad = None
    z = F(x, y)
    n, names = _count(z.backward)
    # Tensor.backward, the node's hand_out, then per leaf one accumulate and one tensor.
    assert n <= 2 + 2 * 2, names
    assert x.grad.item() == 3.0 and y.grad.item() == 8.0


def test_accumulating_backward_makes_as_few_calls():
    x, y = _leaves()
    F(x, y).backward()
    z = F(x, y)
    n, names = _count(z.backward)
    assert n <= 2 + 2 * 2, names
    assert x.grad.item() == 6.0 and y.grad.item() == 16.0


def test_recording_a_compiled_call_makes_few_eager_calls():
    x, y = _leaves()
    F(x, y)
    _, names = _count(lambda: F(x, y))
    # The tape node of the call: attach_gradients alone (the leaves' nodes are cached).
    tape = [name for path, name in names if path.endswith(("dualgraph/eager/compiled_node.py",
                                                           "dualgraph/eager/autograd.py",
                                                           "dualgraph/ir/graph.py"))]
    assert tape == ["attach_gradients"], names
