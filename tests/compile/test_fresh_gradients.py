"""The backward of a compiled scalar loss hands the gradients its kernel made to the
leaves as they are (each its own array, in its leaf's shape): the answers are eager
mode's whatever else is in play (a gradient already set, a second backward, a hook,
``retain_grad``, another seed, one leaf passed twice), and no array is shared between
two leaves or two steps."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def _loss(x, y):
    return x * y + y ** 2


F = dg.compile(_loss, tiered=False)  # one kernel serves every test of the file


def _leaves():
    return (dg.tensor(np.float32(2.0), requires_grad=True),
            dg.tensor(np.float32(3.0), requires_grad=True))


def _grads(fn, use) -> list:
    x, y = _leaves()
    use(fn, x, y)
    return [None if t.grad is None else t.grad.numpy().copy() for t in (x, y)]


def _same(use) -> None:
    for c, e in zip(_grads(F, use), _grads(_loss, use)):
        assert (c is None) == (e is None)
        if e is not None:
            dg.testing.assert_close(c, e)


SCENARIOS = {
    "once": lambda f, x, y: f(x, y).backward(),
    "accumulated": lambda f, x, y: (f(x, y).backward(), f(x, y).backward()),
    "retain_graph twice": lambda f, x, y: (lambda z: (z.backward(retain_graph=True),
                                                      z.backward()))(f(x, y)),
    "seed 2": lambda f, x, y: (2.0 * f(x, y)).backward(),
    "gradient argument": lambda f, x, y: f(x, y).backward(dg.tensor(np.float32(-3.0))),
    "hook on a leaf": lambda f, x, y: (x.register_hook(lambda g: g * 10.0),
                                       f(x, y).backward()),
    "retain_grad": lambda f, x, y: (lambda z: (z.retain_grad(), z.backward()))(f(x, y)),
    "hook on the loss": lambda f, x, y: (lambda z: (z.register_hook(lambda g: g * 0.5),
                                                    z.backward()))(f(x, y)),
    "one leaf twice": lambda f, x, y: f(x, x).backward(),
    "grad zeroed in place between": lambda f, x, y: (
        f(x, y).backward(), x.grad.zero_(), f(x, y).backward()),
    "anomaly mode": lambda f, x, y: _anomaly(lambda: f(x, y).backward()),
}


def _anomaly(fn) -> None:
    with dg.autograd.detect_anomaly():
        fn()


@pytest.mark.parametrize("kind", list(SCENARIOS))
def test_the_hand_out_gives_eager_modes_gradients(kind: str) -> None:
    _same(SCENARIOS[kind])


def test_gradients_kept_by_the_user_are_never_written_by_a_later_step() -> None:
    x, y = _leaves()
    kept = []
    for _ in range(3):
        x.grad = y.grad = None
        F(x, y).backward()
        kept.append((x.grad, y.grad))
    arrays = [g.numpy() for pair in kept for g in pair]
    assert len({id(a) for a in arrays}) == len(arrays)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])
    for gx, gy in kept:
        assert (gx.item(), gy.item()) == (3.0, 8.0)


def test_each_leaf_owns_its_gradient() -> None:
    x, y = _leaves()
    F(x, y).backward()
    x.grad.add_(1.0)  # in place on one leaf's gradient: the other's is its own array
    assert (x.grad.item(), y.grad.item()) == (4.0, 8.0)
    x.grad = y.grad = None
    F(x, y).backward()
    assert (x.grad.item(), y.grad.item()) == (3.0, 8.0)


def test_create_graph_takes_the_engine_which_refuses_it() -> None:
    x, y = _leaves()
    with pytest.raises(RuntimeError, match="create_graph=True"):
        F(x, y).backward(create_graph=True)
    assert x.grad is None and y.grad is None
