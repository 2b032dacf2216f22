"""``where`` with a condition that broadcasts to the selected array (attention's causal
mask over batch and heads) and a scalar on the other side: a bitwise select or a fill and
a masked copy, instead of np.where's broadcast loop. Same bits, dtype and shape as
np.where, for every fill and either side."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops import elementwise as E

FILLS = [0.0, 0, -0.0, -np.inf, np.inf, 1.5, 3, np.nan, 1e300, 10**400]


def _where_or_none(*args):
    try:
        with np.errstate(all="ignore"):
            return np.where(*args)
    except OverflowError:
        return None


@pytest.mark.parametrize("shape,cshape", [((4, 2, 40, 40), (40, 40)), ((5, 300), (300,)),
                                          ((5, 300), (5, 300)), ((10, 10), (10,))])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_where_with_a_broadcast_condition_gives_np_wheres_bits(shape, cshape, dtype):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[::7] = -0.0
    x.flat[::11] = np.nan
    c = rng.random(cshape) > 0.4
    for fill in FILLS:
        for args in ((c, x, fill), (c, fill, x)):
            want = _where_or_none(*args)
            if want is None:
                continue
            with np.errstate(all="ignore"):
                got = E._where_impl(*args)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), (fill, args[1] is x)


def test_causal_attention_scores_and_gradient_through_where():
    rng = np.random.default_rng(0)
    s = dg.tensor(rng.standard_normal((3, 2, 40, 40)).astype(np.float32), requires_grad=True)
    mask = np.tril(np.ones((40, 40), np.bool_))
    out = dg.where(mask, s, -np.inf)
    dg.testing.assert_close(out, np.where(mask, s.numpy(), np.float32(-np.inf)), rtol=0,
                            atol=0)
    g = rng.standard_normal((3, 2, 40, 40)).astype(np.float32)
    out.backward(dg.tensor(g))
    dg.testing.assert_close(s.grad, np.where(mask, g, np.float32(0)), rtol=0, atol=0)


def test_a_causal_mask_takes_the_select_paths(monkeypatch):
    # The fast forms are what run: np.where itself is not called for these.
    calls = []
    real = np.where

    def counting_where(*args):
        calls.append(len(args))
        return real(*args)

    x = np.random.default_rng(1).standard_normal((4, 2, 40, 40)).astype(np.float32)
    mask = np.tril(np.ones((40, 40), np.bool_))
    want_fill, want_zero = real(mask, x, -np.inf), real(mask, x, np.float32(0))
    monkeypatch.setattr(E.np, "where", counting_where)
    got_fill = E._where_impl(mask, x, -np.inf)
    got_zero = E._where_impl(mask, x, 0.0)
    monkeypatch.undo()
    assert calls == []
    assert got_fill.tobytes() == want_fill.tobytes()
    assert got_zero.tobytes() == want_zero.tobytes()
    assert E._fill_where(mask, x, 2.0, False).tobytes() == real(mask, 2.0, x).tobytes()
