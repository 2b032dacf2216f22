"""layer_norm's three gradients (input, weight, bias) as one pass over the rows: the
kernel calls one C routine where the graph has the input gradient, the weight gradient and
the bias's row sum; the answers are those of the three separate ops bit for bit, and equal
eager's to rounding."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba.lowerings import norm
from dualgraph.nn import functional as F


def _loss(x, w, b, c):
    # Two layer norms over the last dim (the second of a strided view: no merge for its
    # rows' gathered copy is needed, the routine reads strides) and one over two dims,
    # whose operands are reshaped views the merge leaves to the separate calls.
    y = F.layer_norm(x, (37,), w, b)
    z = F.layer_norm(x.transpose(0, 1), (37,), w, b)
    v = F.layer_norm(x, (7, 37))
    return (y * c).sum() + (z * c.transpose(0, 1)).sum() + (v * v * c).sum()


def _inputs(dtype):
    rng = np.random.default_rng(3)
    x = dg.tensor((rng.standard_normal((5, 7, 37)) * 2 + 0.5).astype(dtype),
                  requires_grad=True)
    w = dg.tensor(rng.standard_normal(37).astype(dtype), requires_grad=True)
    b = dg.tensor(rng.standard_normal(37).astype(dtype), requires_grad=True)
    # Random cotangents: the gradient of a plain sum of a normalised row cancels to ~0.
    c = dg.tensor(rng.standard_normal((5, 7, 37)).astype(dtype))
    return x, w, b, c


def _grads(fn, dtype):
    x, w, b, c = _inputs(dtype)
    loss = fn(x, w, b, c)
    loss.backward()
    return [loss.numpy()] + [t.grad.numpy() for t in (x, w, b)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grads_routine_equals_eager_and_separate_calls(dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "merged"))
    merged = dg.compile(_loss, tiered=False)
    got = _grads(merged, dtype)
    sources = "".join(p.read_text() for p in (tmp_path / "merged").rglob("*.py"))
    name = np.dtype(dtype).name
    # Weight and bias gradients folded into the input gradient's pass: flags 2 | 8 | 16.
    assert sources.count(f"dgw.row_layer_norm_grads_{name}(") == 2
    assert ", 3, 26, 1e-05)" in sources
    want = _grads(_loss, dtype)
    tol = 2e-5 if dtype == np.float32 else 1e-11
    for g, e in zip(got, want):
        dg.testing.assert_close(g, e, rtol=tol, atol=tol * float(np.abs(e).max()))

    # The separate calls and the sum loop add the same terms in the same order.
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "separate"))
    monkeypatch.setattr(norm, "merge_layer_norm_grads", lambda stmts: list(stmts))
    separate = dg.compile(_loss, tiered=False)
    apart = _grads(separate, dtype)
    sources = "".join(p.read_text() for p in (tmp_path / "separate").rglob("*.py"))
    assert "row_layer_norm_grads" not in sources
    for g, e in zip(got, apart):
        dg.testing.assert_close(g, e, rtol=0, atol=0)


def test_grads_gradcheck_float64():
    rng = np.random.default_rng(5)
    c = rng.standard_normal((3, 4, 9))

    def fn(x, w, b):
        return (F.layer_norm(x, (9,), w, b) * dg.tensor(c)).sum()

    compiled = dg.compile(fn, tiered=False)
    args = (rng.standard_normal((3, 4, 9)), rng.standard_normal(9), rng.standard_normal(9))
    assert dg.testing.gradcheck(compiled, *args)


def _buf(name, shape, dtype=np.float32, role="local"):
    return kir.Buffer(name, shape, np.dtype(dtype), role)


def _ln_calls(between=()):
    g, x, w = _buf("g", (4, 8), role="in"), _buf("x", (4, 8), role="in"), _buf("w", (8,))
    dx, dw, db = _buf("dx", (4, 8)), _buf("dw", (8,)), _buf("db", (8,), role="out")
    acc = _buf("acc", (1, 8), np.float64)
    i, j, k = kir.Var("i"), kir.Var("j"), kir.Var("k")
    f8, zero = np.dtype(np.float64), kir.const(0)
    column_sum = [
        kir.Alloc(acc),
        kir.Loop(j, 8, (kir.Store(acc, (zero, j), kir.Const(0.0, f8)),)),
        kir.Loop(i, 4, (kir.Loop(j, 8, (
            kir.Store(acc, (zero, j), kir.Cast(g[i, j], f8), "add"),)),)),
        kir.Loop(k, 8, (kir.Store(db, (k,), kir.Cast(acc[zero, k], np.dtype(np.float32))),)),
    ]
    return [
        kir.Alloc(dx),
        kir.LibCall("row_layer_norm_backward", (g, x, w, 3, 2, 1e-5), (dx,)),
        *between,
        kir.Alloc(dw),
        kir.LibCall("row_layer_norm_weight_grad", (g, x, 3, 0, 1e-5), (dw,)),
        *column_sum,
    ], (g, x, w, dx, dw, db)


def test_merge_folds_weight_and_bias_gradients():
    stmts, (g, x, w, dx, dw, db) = _ln_calls()
    got = norm.merge_layer_norm_grads(stmts)
    assert got == [kir.Alloc(dx), kir.Alloc(dw), kir.LibCall(
        "row_layer_norm_grads", (g, x, w, dw, db, 3, 26, 1e-5), (dx, dw, db))]


def test_merge_keeps_calls_apart_when_the_input_gradient_is_read_between():
    read = kir.View(_buf("y", (4, 8)), _buf("dx", (4, 8)), "alias")
    stmts, _ = _ln_calls([read])
    assert norm.merge_layer_norm_grads(stmts) == stmts
