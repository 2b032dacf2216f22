"""The kernel IR (`backend/kir.py`): well-formedness, printing, affine indices, and the
Numba printer (`backend/numba/printer.py`) agreeing with the reference executor."""

from __future__ import annotations

import math
import textwrap

import numba
import numpy as np
import pytest

from dualgraph.backend import kir
from dualgraph.backend.numba import blas as dgb
from dualgraph.backend.numba import kernels as dgk
from dualgraph.backend.numba import printer
from dualgraph.testing import assert_close

from .kir_exec import run

F4, F8, I8 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)


def compiled(params: list, stmts: list):
    """The printed statements as an njit function of the parameter buffers."""
    lines = printer.block_lines(stmts, 1)
    src = f"def k({', '.join(p.name for p in params)}):\n" + "\n".join(lines) + "\n"
    ns = {"np": np, "numba": numba, "math": math, "dgb": dgb, "dgk": dgk}
    exec(src, ns)
    return numba.njit(ns["k"]), src


def row_sum_block() -> tuple[list, list]:
    """out[i] = sum_j x[i, j] * 2, over a (3, 5) float32 input, accumulated in float64."""
    x = kir.Buffer("x", (3, 5), F4, kir.ARG)
    out = kir.Buffer("out", (3,), F4, kir.OUT)
    i, j, acc = kir.Var("i"), kir.Var("j"), kir.Var("acc", F8)
    body = [kir.Comment("%1 = sum (mul %0, 2)"), kir.Loop(i, 3, (
        kir.Let(acc, kir.const(0.0, F8)),
        kir.Loop(j, 5, (kir.Accum(acc, "add", x[i, j] * kir.const(2.0, F4)),)),
        kir.Store(out, (i,), kir.Cast(acc, F4)),
    ))]
    return [x, out], body


def test_format_block_is_readable():
    params, body = row_sum_block()
    kir.verify(body, params)
    assert kir.format_block(body) == textwrap.dedent("""\
        # %1 = sum (mul %0, 2)
        for i in 3:
          acc = 0.0:f8
          for j in 5:
            acc = add(acc, (x[i, j] * 2.0:f4))
          out[i] = f4(acc)""")


def test_printer_and_executor_agree_on_a_reduction():
    params, body = row_sum_block()
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    fn, src = compiled(params, body)
    got = np.empty(3, np.float32)
    fn(x, got)
    ref = run(body, {"x": x, "out": np.empty(3, np.float32)})["out"]
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, (x * 2).sum(1))
    assert "# %1 = sum (mul %0, 2)" in src  # the IR line stays as a comment


def test_verify_rejects_malformed_blocks():
    x = kir.Buffer("x", (3, 5), F4, kir.ARG)
    y = kir.Buffer("y", (3,), F4, kir.LOCAL)
    i = kir.Var("i")
    with pytest.raises(kir.IRError, match="not defined"):
        kir.verify([kir.Store(y, (kir.const(0),), kir.const(1.0, F4))], [x])
    with pytest.raises(kir.IRError, match="indexed with 1"):
        kir.verify([kir.Loop(i, 3, (kir.Let(kir.Var("t", F4), x[i]),))], [x])
    with pytest.raises(kir.IRError, match="read before it is bound"):
        kir.verify([kir.Let(kir.Var("t", F4), x[i, 0])], [x])
    with pytest.raises(kir.IRError, match="out of range"):
        kir.verify([kir.Let(kir.Var("t", F4), x[3, 0])], [x])
    with pytest.raises(kir.IRError, match="reshape"):
        kir.verify([kir.View(kir.Buffer("v", (4, 4), F4, kir.VIEW), x, "reshape")], [x])
    with pytest.raises(kir.IRError, match="not initialised"):
        kir.verify([kir.Accum(kir.Var("a", F8), "add", x[0, 0])], [x])
    with pytest.raises(kir.IRError, match="allocation"):
        kir.verify([kir.Alloc(kir.Buffer("o", (3,), F4, kir.OUT))], [])


def gemm_case(ta: bool, tb: bool, batch: int = 1, stride_b: int | None = None):
    m, n, k = 3, 4, 5
    a = kir.Buffer("a", (batch, k, m) if ta else (batch, m, k), F8, kir.ARG)
    b_items = 1 if stride_b == 0 else batch
    b = kir.Buffer("b", (b_items, n, k) if tb else (b_items, k, n), F8, kir.ARG)
    c = kir.Buffer("c", (batch, m, n), F8, kir.OUT)
    g = kir.Gemm(m, n, k, kir.Operand(a, m if ta else k, batch_stride=m * k),
                 kir.Operand(b, k if tb else n, batch_stride=n * k if stride_b is None
                             else stride_b),
                 kir.Operand(c, n, batch_stride=m * n), ta=ta, tb=tb, batch=batch)
    return [a, b, c], [g]


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_transpose_flags(ta: bool, tb: bool):
    params, body = gemm_case(ta, tb)
    kir.verify(body, params)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(params[0].shape)
    b = rng.standard_normal(params[1].shape)
    fn, src = compiled(params, body)
    got = np.zeros(params[2].shape)
    fn(a, b, got)
    am = a[0].T if ta else a[0]
    bm = b[0].T if tb else b[0]
    assert_close(got[0], am @ bm, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)
    ref = run(body, {"a": a, "b": b, "c": np.zeros(params[2].shape)})["c"]
    assert_close(got, ref, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)
    assert "ascontiguousarray" not in src  # no operand is copied


def test_batched_gemm_with_a_broadcast_operand():
    params, body = gemm_case(False, True, batch=3, stride_b=0)
    kir.verify(body, params)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(params[0].shape), rng.standard_normal(params[1].shape)
    fn, _ = compiled(params, body)
    got = np.zeros(params[2].shape)
    fn(a, b, got)
    assert_close(got, a @ b[0].T, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)
    assert "gemm x3 NT 3x4x5" in kir.format_block(body)


def test_verify_checks_gemm_operands():
    params, body = gemm_case(False, False)
    a, b, c = params
    short = kir.Gemm(3, 4, 5, kir.Operand(a, 4), kir.Operand(b, 4), kir.Operand(c, 4))
    with pytest.raises(kir.IRError, match="leading dimension 4 < 5"):
        kir.verify([short], params)
    past = kir.Gemm(3, 4, 5, kir.Operand(a, 5, offset=1), kir.Operand(b, 4),
                    kir.Operand(c, 4))
    with pytest.raises(kir.IRError, match="reads past"):
        kir.verify([past], params)
    f_order = kir.Buffer("af", a.shape, F8, kir.VIEW, layout="F")
    with pytest.raises(kir.IRError, match="not C-ordered"):
        kir.verify([kir.View(f_order, a, "alias"),
                    kir.Gemm(3, 4, 5, kir.Operand(f_order, 5), kir.Operand(b, 4),
                             kir.Operand(c, 4))], params)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_literal_prints_non_finite_values_as_numpy_names(value: float):
    for dtype in (None, F4, F8):
        text = printer.literal(value, dtype)
        assert "np." in text
        assert eval(text, {"np": np}) == value or value != value  # noqa: S307
    x = kir.Buffer("x", (2,), F4, kir.OUT)
    fn, src = compiled([x], [kir.Store(x, (kir.const(0),), kir.const(value, F4)),
                             kir.Store(x, (kir.const(1),), kir.const(-1.5, F4))])
    got = np.zeros(2, np.float32)
    fn(got)
    np.testing.assert_array_equal(got, np.array([value, -1.5], np.float32))


def test_affine_reads_index_expressions():
    i, j = kir.Var("i"), kir.Var("j")
    assert kir.affine(i * 2 + j - 1) == ({"i": 2, "j": 1}, -1)
    assert kir.affine(kir.const(3) * (i + 1)) == ({"i": 3}, 3)
    assert kir.affine(i - i) == ({}, 0)
    assert kir.affine(i * j) is None
    assert kir.affine(i // 2) is None
    x = kir.Buffer("x", (4,), I8, kir.ARG)
    assert kir.affine(x[i] + 1) is None  # an indirect index


def test_max_reduction_propagates_nan_and_select_prints():
    x = kir.Buffer("x", (4,), F8, kir.ARG)
    out = kir.Buffer("out", (2,), F8, kir.OUT)
    i, acc = kir.Var("i"), kir.Var("acc", F8)
    body = [kir.Let(acc, kir.const(-math.inf, F8)),
            kir.Loop(i, 4, (kir.Accum(acc, "maximum", x[i]),)),
            kir.Store(out, (kir.const(0),), acc),
            kir.Store(out, (kir.const(1),), kir.Select(kir.Bin(">", acc, kir.const(0.0, F8)),
                                                       kir.const(1.0, F8), acc))]
    kir.verify(body, [x, out])
    fn, _ = compiled([x, out], body)
    for data in ([1.0, 5.0, -2.0, 3.0], [1.0, np.nan, 7.0, 3.0], [-4.0, -3, -9, -8]):
        arr = np.array(data)
        got = np.zeros(2)
        fn(arr, got)
        ref = run(body, {"x": arr, "out": np.zeros(2)})["out"]
        np.testing.assert_array_equal(got, ref)
        assert np.array_equal(got[:1], [np.max(arr)], equal_nan=True)


def test_digest_addresses_content():
    p1, b1 = row_sum_block()
    p2, b2 = row_sum_block()
    assert kir.digest(b1, p1) == kir.digest(b2, p2)
    p3, b3 = gemm_case(False, False)
    assert kir.digest(b1, p1) != kir.digest(b3, p3)


def test_block_fills_its_result():
    out = kir.Buffer("v3", (4,), F4)
    i = kir.Var("i")
    fills = kir.Block([kir.Alloc(out), kir.Loop(i, 4, (kir.Store(out, (i,),
                                                                 kir.const(1.0, F4)),))], out)
    assert fills.fills(out)
    filled = kir.Block([kir.Alloc(out, fill=0.0)], out)
    assert not filled.fills(out)  # an np.full: the fill value is part of the result
    rebound = kir.Block(fills.stmts + [kir.View(out, kir.Buffer("w", (4,), F4, kir.ARG),
                                                "alias")], out)
    assert not rebound.fills(out)
