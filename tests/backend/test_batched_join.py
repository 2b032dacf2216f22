"""Batched products that fill their slice of a concatenation: `blas.gemm_batched` writes
any strided result (row-major items with a leading dimension, column-major items as the
transposed product, other layouts through a copy), and attention's q/k/v gradient
products write straight into the join of the split's gradient (`codegen.plan_joins`), so
no copy of a head, no head merge and no join pass are left; the answers are eager's."""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import blas, codegen


@numba.njit
def _into(x, y, c):
    blas.gemm_batched(x, y, c)


@pytest.mark.skipif(not blas.HAVE_CBLAS, reason="NumPy's BLAS has no cblas symbols")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_batched_writes_strided_results(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 5, 4)).astype(dtype)
    y = rng.standard_normal((3, 2, 4, 6)).astype(dtype)
    want = x @ y
    tol = 1e-5 if dtype == np.float32 else 1e-12
    row = np.full((3, 5, 2, 20), np.nan, dtype)  # items row-major, leading dimension 20
    col = np.full((3, 6, 2, 7), np.nan, dtype)  # items column-major
    odd = np.full((3, 2, 10, 12), np.nan, dtype)  # neither: through a copy
    results = [row[..., 3:9].transpose(0, 2, 1, 3), col[..., 1:6].transpose(0, 2, 3, 1),
               odd[:, :, ::2, ::2], np.empty_like(want)]
    for c in results:
        _into(x, y, c)
        dg.testing.assert_close(c, want, rtol=tol, atol=tol)
    # Nothing outside the result is written.
    assert np.isnan(row[..., :3]).all() and np.isnan(row[..., 9:]).all()
    assert np.isnan(col[..., 0]).all() and np.isnan(col[..., 6]).all()
    assert np.isnan(odd[:, :, 1::2]).all()
    # An empty contraction writes zeros into the view.
    z = np.full((3, 6, 2, 7), np.nan, dtype)
    _into(x[..., :0], y[:, :, :0], z[..., 1:6].transpose(0, 2, 3, 1))
    dg.testing.assert_close(z[..., 1:6], np.zeros((3, 6, 2, 5), dtype), rtol=0, atol=0)
    assert np.isnan(z[..., 0]).all()


B, T, H, D = 2, 6, 3, 4
# A loop storing one array's element into another: a copy into the join.
_COPY = re.compile(r"^ +v\d+\[[^\]]*\] = v\d+\[[^\]]*\]$", re.M)


def _loss(x, w, c):
    return _attention(x @ w, c)


def _attention(qkv, c):
    # Self-attention's heads from one projection, split and merged back.
    q, k, v = qkv.split(H * D, -1)
    q, k, v = (a.reshape(B, T, H, D).transpose(1, 2) for a in (q, k, v))
    p = (q @ k.transpose(-2, -1) * D ** -0.5).softmax(-1)
    o = (p @ v).transpose(1, 2).reshape(B, T, H * D)
    return (o * c).sum()


def _grads(fn, dtype):
    rng = np.random.default_rng(4)
    x = dg.tensor(rng.standard_normal((B, T, 5)).astype(dtype), requires_grad=True)
    w = dg.tensor(rng.standard_normal((5, 3 * H * D)).astype(dtype), requires_grad=True)
    c = dg.tensor(rng.standard_normal((B, T, H * D)).astype(dtype))
    loss = fn(x, w, c)
    loss.backward()
    return [loss.numpy(), x.grad.numpy(), w.grad.numpy()]


@pytest.mark.skipif(not blas.HAVE_CBLAS, reason="NumPy's BLAS has no cblas symbols")
def test_attention_gradient_products_fill_the_join(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "joined"))
    got = _grads(dg.compile(_loss, tiered=False), np.float32)
    sources = "".join(p.read_text() for p in (tmp_path / "joined").rglob("*.py"))
    # The q, k and v gradients are views of the join's slices; no loop fills it.
    assert sources.count("_j = v") == 3
    assert not _COPY.search(sources)
    want = _grads(_loss, np.float32)
    for g, e in zip(got, want):
        dg.testing.assert_close(g, e, rtol=2e-5, atol=2e-5 * float(np.abs(e).max()))

    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "copied"))
    monkeypatch.setattr(codegen._Writer, "plan_joins", lambda self, taken: {})
    apart = _grads(dg.compile(_loss, tiered=False), np.float32)
    sources = "".join(p.read_text() for p in (tmp_path / "copied").rglob("*.py"))
    assert "_j = v" not in sources and _COPY.search(sources)
    for g, e in zip(got, apart):
        dg.testing.assert_close(g, e, rtol=2e-6, atol=2e-6 * float(np.abs(e).max()))


@pytest.mark.skipif(not blas.HAVE_CBLAS, reason="NumPy's BLAS has no cblas symbols")
def test_join_that_is_an_output_is_filled_in_place(tmp_path, monkeypatch):
    # The projection's output is the leaf: its gradient, the join, is a kernel output,
    # and the products write into the output's slices.
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(6)
    qkv = rng.standard_normal((B, T, 3 * H * D)).astype(np.float32)
    c = dg.tensor(rng.standard_normal((B, T, H * D)).astype(np.float32))

    def grad(fn):
        leaf = dg.tensor(qkv, requires_grad=True)
        fn(leaf, c).backward()
        return leaf.grad.numpy()

    got = grad(dg.compile(_attention, tiered=False))
    sources = "".join(p.read_text() for p in tmp_path.rglob("*.py"))
    assert sources.count("_j = o") == 3 and not _COPY.search(sources)
    want = grad(_attention)
    dg.testing.assert_close(got, want, rtol=2e-5, atol=2e-5 * float(np.abs(want).max()))
