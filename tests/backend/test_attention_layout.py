"""Attention's layout in generated code: the heads split out of a slice of the fused q/k/v
product are strided views (`kernels.strided`), read in place by the batched products and
by loops, never copied first; and the values stay those of eager mode."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import kernels as dgk
from dualgraph.backend.numba.lowerings.shape import split_groups


@pytest.mark.parametrize("base,shape,groups", [
    ((16, 64, 128), (16, 64, 4, 32), (1, 1, 2)),
    ((4, 6), (2, 2, 3, 2), (2, 2)),
    ((4, 6), (4, 6, 1), (1, 2)),
    ((16, 64, 128), (1024, 128), None),  # merges dims
    ((4, 6), (2, 3, 4), None),  # crosses a dim boundary
    ((4, 6), (4, 6), None),  # not a split
    ((0, 6), (0, 2, 3), None),
])
def test_split_groups(base, shape, groups):
    assert split_groups(base, shape) == groups


@numba.njit
def _split(x):
    return dgk.strided(x, (3, 2, 5), (x.strides[0], 5 * x.strides[1], x.strides[1]))


def test_strided_is_a_view_with_the_given_strides():
    base = np.arange(3 * 24, dtype=np.float32).reshape(3, 24)
    x = base[:, 7:17]  # strided: not C-ordered
    got = _split(x)
    want = x.reshape(3, 2, 5)  # NumPy makes this a view too
    assert got.strides == want.strides and np.shares_memory(got, base)
    assert numba.typeof(got).layout == "A"
    dg.testing.assert_close(got, want)


def _attention(x, w):
    b, t, width = x.shape
    h, d = 2, width // 2
    qkv = x @ w.T
    q, k, v = (qkv[..., i * width:(i + 1) * width].reshape(b, t, h, d).transpose(1, 2)
               for i in range(3))
    a = dg.softmax((q @ k.transpose(-2, -1)) * 0.25, dim=-1)
    heads = (a @ v).transpose(1, 2).reshape(b, t, width)
    # A loop reading a split view directly (not a product).
    return (heads * 2.0).sum() + (v * v).sum()


def test_heads_of_a_slice_are_not_copied_and_match_eager():
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((3, 5, 8)).astype(np.float32), requires_grad=True)
    w = dg.tensor(rng.standard_normal((24, 8)).astype(np.float32), requires_grad=True)

    def f(x, w):
        loss = _attention(x, w)
        gx, gw = dg.autograd.grad(loss, (x, w))
        return loss, gx, gw

    compiled = dg.compile(f, tiered=False)
    got = compiled(x, w)
    want = f(x, w)
    for g, e in zip(got, want):
        dg.testing.assert_close(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)
    src = compiled.entries()[0].kernel.source
    # q, k and v in the forward, and again in the backward where they are read.
    assert src.count("dgk.strided(") >= 3, src
