"""Gradients sent to one tensor by several basic-index views of it (``split``'s pieces)
fill one buffer in an eager backward that records nothing: the bits of the op-by-op
backward (a zeroed buffer per piece, scattered, summed), signed zeros and overlaps
included."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager import autograd as A
from dualgraph.ops import shape as S


def _grads(fn, xa, ga, one_buffer):
    x = dg.tensor(xa, requires_grad=True)
    real = S.GETITEM
    if not one_buffer:  # the engine no longer recognises getitem: the op-by-op backward
        A.GETITEM, saved = None, A.GETITEM
    try:
        outs = fn(x)
        total = None
        for o, g in zip(outs, ga):
            term = (o * dg.tensor(g)).sum()
            total = term if total is None else total + term
        total.backward()
    finally:
        if not one_buffer:
            A.GETITEM = saved
    assert A.GETITEM is real
    return x.grad.numpy()


def _cases():
    return [
        ("split3", (2, 3, 12), lambda x: x.split(4, dim=-1)),
        ("split_sizes", (5, 6), lambda x: dg.split(x, [1, 2, 3], dim=1)),
        ("chunk_dim0", (7, 3), lambda x: x.chunk(3, dim=0)),
        ("overlap", (6, 4), lambda x: (x[1:4], x[2:6], x[:, 1])),
        ("strided", (8, 3), lambda x: (x[::2], x[1::2], x[3])),
        ("same_piece_twice", (4, 4), lambda x: (x[1:3], x[1:3])),
        ("one_piece", (4, 4), lambda x: (x[1:3],)),
        ("pieces_and_whole", (4, 5), lambda x: (x[:2], x, x[2:])),
        ("new_axis", (3, 4), lambda x: (x[None, :, :2], x[None, :, 2:])),
        ("ints", (3, 4), lambda x: (x[0, 1], x[2], x[1, 1:])),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,shape,fn", _cases(), ids=[c[0] for c in _cases()])
def test_one_buffer_gives_the_op_by_op_bits(name, shape, fn, dtype):
    rng = np.random.default_rng(len(name))
    xa = rng.standard_normal(shape).astype(dtype)
    outs = fn(dg.tensor(xa))
    ga = []
    for o in outs:
        g = rng.standard_normal(o.shape).astype(dtype)
        g.reshape(-1)[::3] = -0.0  # signed zeros: the sum drops their sign
        if g.size > 1:
            g.reshape(-1)[1] = np.nan
        ga.append(g)
    fast = _grads(fn, xa, ga, True)
    slow = _grads(fn, xa, ga, False)
    assert fast.dtype == slow.dtype and fast.tobytes() == slow.tobytes()


@pytest.mark.parametrize("whole", [True, False])
def test_split_pieces_fill_one_buffer(monkeypatch, whole):
    """One buffer for the pieces; zeroed first only where they leave parts of it unset."""
    made = {"zeros": [], "empty": []}

    def counted(name):
        real = getattr(np, name)

        def make(*args, **kwargs):
            out = real(*args, **kwargs)
            made[name].append(out.shape)
            return out

        return make

    x = dg.tensor(np.ones((2, 3, 12), np.float32), requires_grad=True)
    q, k, v = x.split(4, dim=-1) if whole else (x[..., :4], x[..., 4:8], x[..., 10:])
    loss = (q * 2).sum() + (k * 3).sum() + (v * 4).sum()
    for name in made:  # every buffer the backward makes
        monkeypatch.setattr(np, name, counted(name))
    loss.backward()
    monkeypatch.undo()
    assert made["zeros"].count((2, 3, 12)) + made["empty"].count((2, 3, 12)) == 1, made
    assert made["zeros"].count((2, 3, 12)) == (0 if whole else 1), made
    want = [2] * 4 + [3] * 4 + ([4] * 4 if whole else [0, 0, 4, 4])
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], want)


def test_hooks_retain_grad_and_create_graph_see_the_summed_gradient():
    x = dg.tensor(np.arange(6.0), requires_grad=True)
    y = x * 1
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    a, b = y.split(3)
    ((a * a).sum() + (b * 3).sum()).backward(create_graph=False)
    want = np.array([0.0, 2, 4, 3, 3, 3])
    np.testing.assert_array_equal(seen[0], want)
    np.testing.assert_array_equal(y.grad.numpy(), want)
    (gx,) = dg.autograd.grad(sum(p.pow(2).sum() for p in x.split(2)), [x], create_graph=True)
    assert gx.grad_fn is not None
    np.testing.assert_array_equal(gx.numpy(), 2 * np.arange(6.0))
