"""Products as kernel IR GEMMs: a batch folded into the rows (a linear layer on 3-D input)
or into the inner dimension (a weight gradient summed over the batch) is one BLAS call;
other batched products are one ``gemm_batched`` library call reading the operands in
place (transposed views with the transpose flag), never a copy."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import kir, schedule

from .._support.compiled import B3


def _source(fn, *arrays) -> str:
    return dg.explain(fn, *(dg.tensor(a) for a in arrays)).numba_source


def _check(fn, *arrays) -> None:
    f = dg.compile(fn)
    ts = [dg.tensor(a) for a in arrays]
    got = f(*ts)
    assert f.stats.kernels >= 1
    want = fn(*ts)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        dg.testing.assert_close(g.numpy(), w.numpy(), equal_nan=True, **B3[w.numpy().dtype])


def _rng(*shape: int, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def linear3d(x, w):
    return x @ w.T


def test_a_batch_against_a_matrix_is_one_product():
    x, w = _rng(4, 16, 32), _rng(24, 32)
    src = _source(linear3d, x, w)
    assert src.count("dgb.gemm_call(") == 1
    assert "gemm_call(" in src and "np.dot" not in src
    assert "_b0 in range" not in src  # no loop over the batch
    _check(linear3d, x, w)


def weight_grad(x, g):
    return (x.transpose(1, 2) @ g).sum(0)


def test_a_batch_summed_product_is_one_product():
    # float64: one sum in another order than eager's per-item products and sum (float32
    # differs in the last bits, as any two BLAS orders do)
    x, g = _rng(4, 16, 32, dtype=np.float64), _rng(4, 16, 24, dtype=np.float64)
    src = _source(weight_grad, x, g)
    # x.T @ g over 4 x 16 rows: m, n, k = 32, 24, 64 (sizes read from the arguments)
    (call,) = [line.strip() for line in src.splitlines() if "dgb.gemm_call(" in line]
    m, n, k = call.split(", ")[2:5]
    sizes = {line.split()[0]: line.split("# ")[-1] for line in src.splitlines()
             if ".shape[" in line}
    assert call.startswith("dgb.gemm_call(112, 111, ")
    assert [sizes[m], sizes[n], sizes[k]] == ["32", "24", "64"]
    assert "_b0 in range" not in src
    _check(weight_grad, x, g)


def weight_grad_and_product(x, g):
    p = x.transpose(1, 2) @ g
    return p.sum(0), p * 2.0


def test_a_product_read_elsewhere_is_not_folded():
    x, g = _rng(4, 16, 32, dtype=np.float64), _rng(4, 16, 24, dtype=np.float64)
    src = _source(weight_grad_and_product, x, g)
    assert "dgb.gemm_batched_float64(" in src  # the products themselves are needed: not folded
    _check(weight_grad_and_product, x, g)


def attention_scores(q, k):
    # q's heads come out of a (batch, seq, heads, dim) layout: a strided view
    return q.transpose(1, 2) @ k.transpose(-2, -1)


def test_batched_products_are_one_library_call_on_strided_views():
    q, k = _rng(2, 16, 3, 8), _rng(2, 3, 16, 8)
    src = _source(attention_scores, q, k)
    assert "ascontiguousarray" not in src
    assert src.count("dgb.gemm_batched_float32(") == 1 and "_b0 in range" not in src
    _check(attention_scores, q, k)


def test_a_batched_product_is_one_gemm_batched_node():
    from dualgraph.backend.numba import lowerings
    from dualgraph.backend.numba.lowerings.linalg import matmul_block
    from dualgraph.ir.graph import Node

    x = Node("input", (), {}, (2, 3, 16, 8), "float32")
    y = Node("input", (), {}, (1, 3, 8, 16), "float32")  # broadcast over the first axis
    node = Node("matmul", (x, y), {}, (2, 3, 16, 16), "float32")
    args = [lowerings.Arg(kir.Buffer(n, s.shape, np.float32, kir.ARG, "A"))
            for n, s in (("x", x), ("y", y))]
    block = matmul_block(node, args, "r")
    calls = [s for s in kir.walk(block.stmts) if isinstance(s, kir.LibCall)]
    assert [c.fn for c in calls] == ["gemm_batched"]
    assert not any(isinstance(s, (kir.Loop, kir.Gemm)) for s in kir.walk(block.stmts))
    assert calls[0].outs == (block.result,)


def test_gemm_batched_reads_every_layout_in_place_or_copies_once():
    import numba

    from dualgraph.backend.numba import blas

    batched = numba.njit(lambda x, y, c: blas.gemm_batched(x, y, c))
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((2, 16, 72)).astype(np.float32)
    q = qkv[:, :, :24].reshape(2, 16, 3, 8).transpose(0, 2, 1, 3)  # rows 72 apart
    k = np.ascontiguousarray(qkv[:, :, 24:48]).reshape(2, 16, 3, 8).transpose(0, 2, 3, 1)
    cases = [(q, k),  # row-major items against transposed ones (the transpose flag)
             (rng.standard_normal((4, 1, 5, 6)), rng.standard_normal((3, 6, 7))),  # broadcast
             (rng.standard_normal((5, 6)), rng.standard_normal((3, 7, 6)).transpose(0, 2, 1)),
             (rng.standard_normal((3, 5, 12))[:, :, ::2], rng.standard_normal((3, 6, 7))),
             # negative strides: both copied
             (rng.standard_normal((3, 5, 12))[:, ::-1, ::-2], rng.standard_normal((3, 6, 7))[::-1]),
             (rng.standard_normal((3, 5, 0)), rng.standard_normal((3, 0, 7)))]  # k = 0
    for a, b in cases:
        want = a @ b
        c = np.full(want.shape, np.nan, want.dtype)
        batched(a, b, c)
        dg.testing.assert_close(c, want, rtol=1e-5, atol=1e-5, equal_nan=True, check_dtype=False)


def test_swap_product_is_a_pass_on_structure():
    x = kir.Buffer("x", (4, 16), np.float32, kir.ARG)
    wt = kir.Buffer("w", (16, 32), np.float32, kir.ARG, layout="F")
    res = kir.Buffer("r", (4, 32), np.float32)
    block = kir.Block([kir.Alloc(res), kir.Gemm(4, 32, 16, kir.Operand(x, None),
                                                kir.Operand(wt, None), kir.Operand(res, 32))],
                      res)
    swapped = schedule.swap_product(block)
    assert swapped is not None and swapped.result.layout == "F"
    kir.verify(swapped, [x, wt])
    assert "gemm NN 32x4x16 rt ld=4 = r_yt ld=? @ r_xt ld=?" in kir.format_block(swapped)
    wide = kir.Buffer("r", (64, 32), np.float32)
    xs = kir.Buffer("x", (64, 16), np.float32, kir.ARG)
    tall = kir.Block([kir.Alloc(wide), kir.Gemm(64, 32, 16, kir.Operand(xs, None),
                                                kir.Operand(wt, None),
                                                kir.Operand(wide, 32))], wide)
    assert schedule.swap_product(tall) is None  # more rows than columns: as it is
    # An epilogue reading an F-ordered array: transposed whatever the shape, for a short
    # contraction only.
    assert schedule.swap_product(tall, epilogue_reads_f=True).result.layout == "F"
    xl = kir.Buffer("x", (64, schedule.SHORT_K + 1), np.float32, kir.ARG)
    wl = kir.Buffer("w", (schedule.SHORT_K + 1, 32), np.float32, kir.ARG)
    long_k = kir.Block([kir.Alloc(wide), kir.Gemm(64, 32, schedule.SHORT_K + 1,
                                                  kir.Operand(xl, None), kir.Operand(wl, None),
                                                  kir.Operand(wide, 32))], wide)
    assert schedule.swap_product(long_k, epilogue_reads_f=True) is None


def test_write_into_replaces_the_allocation():
    res = kir.Buffer("r", (3,), np.float64)
    out = kir.Buffer("o0", (3,), np.float64, kir.OUT)
    i = kir.Var("i")
    block = kir.Block([kir.Alloc(res), kir.Loop(i, 3, (kir.Store(res, (i,), kir.const(
        1.0, np.float64)),))], res)
    placed = schedule.write_into(block, out)
    assert placed is not None
    assert placed.stmts[0] == kir.View(res, out, "alias")
    assert schedule.write_into(block, kir.Buffer("o0", (4,), np.float64, kir.OUT)) is None
