"""A product whose left operand is a block loop's row-cut result runs inside that loop, one
block per part (`codegen.product_blocks`, its chain step): a layer's output feeding the next
layer's product and bias costs no parallel region of its own. The values match the serial
build and eager, and the bits do not depend on the number of threads."""

from __future__ import annotations

import numba
import numpy as np

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba import blas_parallel
from dualgraph.backend.numba.codegen import product_blocks

from .._support.compiled import on_one_and_two_threads

F32 = np.float32
M, N, K, N2 = 64, 32, 48, 8


def _bufs() -> dict:
    return {name: kir.Buffer(name, shape, F32, kir.ARG) for name, shape in (
        ("x", (M, K)), ("w", (K, N)), ("h", (M, N)), ("b", (N,)), ("u", (N, N2)),
        ("y", (M, N2)), ("c", (N2,)), ("z", (N2, M)), ("t", (N, M)),
        ("v", (K, N2)))}


def _layer(bufs: dict, *, left="h", ta=False, right="u", out="y", m=M, n=N2, epilogue=True,
           between: tuple = (), store_to="h") -> list:
    """``h = relu(x @ w + b)`` (a product and its parallel loop), ``between``, then
    ``out = op(left) @ right`` and, with ``epilogue``, a serial loop ``out += c``."""
    i, j = kir.Var("i0"), kir.Var("i1")
    first = kir.Gemm(M, N, K, kir.Operand(bufs["x"], K), kir.Operand(bufs["w"], N),
                     kir.Operand(bufs["h"], N))
    relu = kir.Call("maximum", (kir.Bin("+", bufs["h"][i, j], bufs["b"][j]),
                                kir.const(0.0, F32)), F32)
    loop = kir.Loop(i, M, (kir.Loop(j, N, (kir.Store(bufs[store_to], (i, j), relu),)),),
                    parallel=True)
    k = bufs[left].shape[0] if ta else bufs[left].shape[1]
    # A transposed operand has its layout resolved; the others are left to the target.
    lhs = kir.Operand(bufs[left], bufs[left].shape[1] if ta else None)
    second = kir.Gemm(m, n, k, lhs, kir.Operand(bufs[right], None), kir.Operand(bufs[out], n),
                      ta=ta)
    stmts = [first, loop, *between, second]
    if epilogue:
        bias = kir.Bin("+", bufs[out][i, j], bufs["c"][j])
        stmts.append(kir.Loop(i, m, (kir.Loop(j, n, (kir.Store(bufs[out], (i, j), bias),)),)))
    return stmts


def _loops(stmts: list) -> list:
    out = product_blocks(stmts, 2)
    kir.verify(out, _bufs().values())
    return [s for s in out if isinstance(s, (kir.Loop, kir.Gemm))]


def test_the_next_layers_product_and_bias_run_in_the_block_loop():
    bufs = _bufs()
    name = kir.View(kir.Buffer("hv", (M, N), F32, kir.ARG), bufs["h"], "alias")
    note = kir.Comment("next layer")
    stmts = _layer(bufs, between=(note, name))
    out = product_blocks(stmts, 2)
    kir.verify(out, bufs.values())
    # The name and the comment between the two move above the one loop left.
    assert out[:2] == [note, name] and len(out) == 3
    loop = out[2]
    # A product this small is cut in ROW_PARTS blocks whatever the pool (`blocks`).
    assert loop.parallel and loop.extent == blas_parallel.ROW_PARTS
    gemms = [s for s in loop.body if isinstance(s, kir.Gemm)]
    assert [g.c.buf.name for g in gemms] == ["h", "y"]
    assert all(g.part[0] == loop.var for g in gemms)
    # The bias loop over the second product now runs over its block, inside the part.
    assert isinstance(loop.body[-1], kir.Loop) and not loop.body[-1].parallel
    # Without its epilogue the product alone joins.
    (loop,) = _loops(_layer(bufs, epilogue=False))
    assert [s.c.buf.name for s in loop.body if isinstance(s, kir.Gemm)] == ["h", "y"]


def test_products_that_need_other_blocks_rows_stay_apart():
    bufs = _bufs()
    # Read transposed: block p needs every row of h.
    assert len(_loops(_layer(bufs, left="h", ta=True, right="h", out="t", m=N, n=N,
                             epilogue=False))) == 2
    # Cut by columns (more columns than rows): block p is not the rows block p wrote.
    assert len(_loops(_layer(bufs, left="z", right="h", out="t", m=N2, n=N,
                             epilogue=False))) == 2
    # Its left operand is not what the loop writes.
    assert len(_loops(_layer(bufs, left="x", right="v", epilogue=False))) == 2
    # A statement between that the second product needs and that needs the loop's
    # result: it must run between the two.
    i = kir.const(0)
    other = kir.Store(bufs["h"], (i, i), kir.Bin("+", bufs["h"][i, i], kir.const(1.0, F32)))
    assert len(_loops(_layer(bufs, between=(other,)))) >= 2
    # One the product's bias needs, independent of the loop: it moves above the loop.
    other = kir.Store(bufs["c"], (i,), kir.const(1.0, F32))
    out = product_blocks(_layer(bufs, between=(other,)), 2)
    assert out[0] == other and len(out) == 2


def test_a_large_product_is_cut_in_one_block_per_thread_a_smaller_one_in_four():
    # Each block's BLAS call packs the operand the cut does not divide again: a large
    # product in one block per thread of the pool; one under ROW_PARTS * SPLIT_FLOPS
    # multiply-adds in ROW_PARTS blocks, each multiplied without packing.
    assert blas_parallel.blocks(2, 1024, 256, 784) == 2
    assert blas_parallel.blocks(2, 1024, 256, 10) == blas_parallel.ROW_PARTS
    assert blas_parallel.blocks(1, 1024, 256, 10) == 1
    assert 1 <= blas_parallel.product_parts() <= blas_parallel.ROW_PARTS
    bufs = {name: kir.Buffer(name, shape, F32, kir.ARG) for name, shape in (
        ("a", (512, 512)), ("b", (512, 256)), ("c", (512, 256)))}
    i, j = kir.Var("i0"), kir.Var("i1")
    g = kir.Gemm(512, 256, 512, kir.Operand(bufs["a"], 512), kir.Operand(bufs["b"], 256),
                 kir.Operand(bufs["c"], 256))
    relu = kir.Call("maximum", (bufs["c"][i, j], kir.const(0.0, F32)), F32)
    loop = kir.Loop(i, 512, (kir.Loop(j, 256, (kir.Store(bufs["c"], (i, j), relu),)),),
                    parallel=True)
    (merged,) = product_blocks([g, loop], 2)
    assert merged.extent == 2


def _two_layers(x, w1, b1, w2, b2):
    """Two layers and a softmax: the second product takes the first's ReLU output by rows."""
    h = dg.relu(x @ w1.T + b1)
    logits = h @ w2.T + b2
    return h, logits, dg.nn.functional.softmax(logits, dim=1)


def test_chained_layers_match_serial_build_and_eager_and_any_thread_count():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 96), F32)
    w1 = rng.standard_normal((128, 96), F32) * F32(0.1)
    b1 = rng.standard_normal(128, F32) * F32(0.1)
    w2 = rng.standard_normal((10, 128), F32) * F32(0.1)
    b2 = rng.standard_normal(10, F32) * F32(0.1)
    args = [dg.tensor(a) for a in (x, w1, b1, w2, b2)]
    eager = [r.numpy().copy() for r in _two_layers(*args)]
    serial = dg.compile(_two_layers, tiered=False)
    parallel = dg.compile(_two_layers, tiered=False, parallel=True)
    want = [r.numpy().copy() for r in serial(*args)]
    runs = on_one_and_two_threads(lambda: [r.numpy().copy() for r in parallel(*args)])
    src = parallel.entries()[0].kernel.source
    if numba.config.NUMBA_NUM_THREADS > 1:
        # The logits' product and bias in the first layer's block loop.
        lines = src[src.index("numba.prange("):].split("\n")[1:]
        body = "\n".join(line for line in
                          lines[:next(k for k, line in enumerate(lines)
                                      if line.startswith("    ") and line[4] != " ")])
        assert body.count("dgb.gemm_part(") == 2, src
        # The softmax on the logits' rows of each block, in the same loop.
        assert "dgw.row_softmax_float" in body, src
    for one, two, s, e in zip(*runs, want, eager):
        assert one.tobytes() == two.tobytes()
        dg.testing.assert_close(one, s, rtol=1e-5, atol=1e-5)
        dg.testing.assert_close(one, e, rtol=1e-5, atol=1e-5)
