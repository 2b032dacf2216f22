"""A reduction over every dim but the last (a bias's gradient) runs as one call of the
library's column sum instead of its generated loops: the same terms added in the same
order, so the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba.lowerings import norm


def _buf(name, shape, dtype=np.float32, role="local"):
    return kir.Buffer(name, shape, np.dtype(dtype), role)


def _sum_loops(g, db, acc):
    i, j, k = kir.Var("i"), kir.Var("j"), kir.Var("k")
    f8, zero = np.dtype(np.float64), kir.const(0)
    n = g.shape[-1]
    return [
        kir.Alloc(acc),
        kir.Loop(j, n, (kir.Store(acc, (zero, j), kir.Const(0.0, f8)),)),
        kir.Loop(i, g.shape[0], (kir.Loop(j, n, (
            kir.Store(acc, (zero, j), kir.Cast(g[i, j], f8), "add"),)),)),
        kir.Loop(k, n, (kir.Store(db, (k,), kir.Cast(acc[zero, k], g.dtype)),)),
    ]


def test_the_sum_loops_become_one_call_and_its_totals_go():
    g, db = _buf("g", (4, 8), role="in"), _buf("db", (8,), role="out")
    acc = _buf("acc", (1, 8), np.float64)
    stmts = [kir.Alloc(db), *_sum_loops(g, db, acc)]
    assert norm.column_sums(stmts) == [
        kir.Alloc(db), kir.LibCall("row_column_sum", (g, 3, 0, 0.0), (db,))]


def test_the_loops_stay_when_the_totals_are_read_after_or_the_dtype_has_no_routine():
    g, db = _buf("g", (4, 8), role="in"), _buf("db", (8,), role="out")
    acc = _buf("acc", (1, 8), np.float64)
    read = kir.Let(kir.Var("t", np.float64), acc[kir.const(0), kir.const(1)])
    stmts = [kir.Alloc(db), *_sum_loops(g, db, acc), read]
    assert norm.column_sums(stmts) == stmts
    h, dh = _buf("h", (4, 8), np.float16, "in"), _buf("dh", (8,), np.float16, "out")
    stmts = [kir.Alloc(dh), *_sum_loops(h, dh, acc)]
    assert norm.column_sums(stmts) == stmts


def _loss(x, w, b, c):
    # A bias over two leading dims (its gradient sums 5 * 7 rows), then one over the
    # rows of a transposed cotangent.
    y = x @ w.T + b
    z = (y * c).sum() + (y.transpose(0, 1) * c.transpose(0, 1) + b).sum()
    return z


def _grads(fn, dtype):
    rng = np.random.default_rng(2)
    x = dg.tensor(rng.standard_normal((5, 7, 6)).astype(dtype), requires_grad=True)
    w = dg.tensor(rng.standard_normal((9, 6)).astype(dtype), requires_grad=True)
    b = dg.tensor(rng.standard_normal(9).astype(dtype), requires_grad=True)
    c = dg.tensor(rng.standard_normal((5, 7, 9)).astype(dtype))
    loss = fn(x, w, b, c)
    loss.backward()
    return [loss.numpy()] + [t.grad.numpy() for t in (x, w, b)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_gradient_call_equals_the_loops_and_eager(dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "call"))
    got = _grads(dg.compile(_loss, tiered=False), dtype)
    sources = "".join(p.read_text() for p in (tmp_path / "call").rglob("*.py"))
    assert f"dgw.row_column_sum_{np.dtype(dtype).name}(" in sources
    want = _grads(_loss, dtype)
    tol = 2e-5 if dtype == np.float32 else 1e-11
    for g, e in zip(got, want):
        dg.testing.assert_close(g, e, rtol=tol, atol=tol * float(np.abs(e).max()))

    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "loops"))
    monkeypatch.setattr(norm, "column_sums", lambda stmts: list(stmts))
    loops = _grads(dg.compile(_loss, tiered=False), dtype)
    sources = "".join(p.read_text() for p in (tmp_path / "loops").rglob("*.py"))
    assert "row_column_sum" not in sources
    for g, e in zip(got, loops):
        dg.testing.assert_close(g, e, rtol=0, atol=0)


def test_the_routine_sums_rows_along_the_last_axis_only():
    # The routine reads the last axis's geometry in place; another axis is refused when
    # the call is typed, before any unit is built.
    import numba

    from dualgraph.backend.numba import row_kernels as dgw

    @numba.njit
    def along_first(g, out):
        dgw.row_column_sum_float32(g, out, 1, 0, 0.0)

    with pytest.raises(TypeError, match="along axis 3, not 1"):
        along_first(np.ones((4, 3), np.float32), np.zeros(3, np.float32))
