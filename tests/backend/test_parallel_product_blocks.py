"""A parallel kernel's product and the elementwise loop over its result after it run as
one ``prange`` over the product's fixed blocks (`codegen.product_blocks`): one parallel
region where there were two, the same values as the serial build and eager, and the same
bits on one thread and two."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba.blas_parallel import product_parts
from dualgraph.backend.numba.codegen import product_blocks

from .._support.compiled import on_one_and_two_threads

F32 = np.float32


def _gemm_then_loop(m: int = 64, n: int = 32, k: int = 32, *, read=None, write="out",
                    between: tuple = ()) -> tuple[list, dict]:
    """``c = a @ b`` then a parallel loop ``out[i, j] = relu(c[i, j] + bias[j])``; ``read``
    replaces the loop's load of ``c``, ``write`` names the buffer it stores to, ``between`` are
    statements placed between the two."""
    bufs = {name: kir.Buffer(name, shape, F32, kir.ARG) for name, shape in (
        ("a", (m, k)), ("b", (k, n)), ("c", (m, n)), ("bias", (n,)), ("out", (m, n)),
        ("other", (m, n)))}
    i, j = kir.Var("i0"), kir.Var("i1")
    g = kir.Gemm(m, n, k, kir.Operand(bufs["a"], k), kir.Operand(bufs["b"], n),
                 kir.Operand(bufs["c"], n))
    load = read(bufs, i, j) if read else bufs["c"][i, j]
    value = kir.Bin("+", load, bufs["bias"][j])
    body = (kir.Store(bufs[write], (i, j), value),)
    loop = kir.Loop(i, m, (kir.Loop(j, n, body),), parallel=True)
    return [g, *between, loop], bufs


def _merged(stmts: list) -> bool:
    out = product_blocks(stmts, 4)
    kir.verify(out, _gemm_then_loop()[1].values())
    return any(isinstance(s, kir.Gemm) and s.part for s in kir.walk(out))


def test_a_product_and_its_elementwise_loop_become_one_prange_over_its_blocks():
    stmts, bufs = _gemm_then_loop()
    out = product_blocks(stmts, 4)
    kir.verify(out, bufs.values())
    assert len(out) == 1 and out[0].parallel
    block, *_, rows = out[0].body
    assert isinstance(block, kir.Gemm) and len(block.part) == 5
    # The loops run over the rows and columns the block binds, serially inside the part,
    # counting from 0 from the block's first row and column.
    assert not rows.parallel and rows.start == 0 and block.part[2] in rows.extent.__dict__.values()
    assert rows.body[0].var.name == "i0"
    cols = rows.body[1]
    assert cols.start == 0 and block.part[4] in cols.extent.__dict__.values()
    assert cols.body[0].var.name == "i1"
    assert "block" in kir.format_block(out)


def test_the_product_moves_down_past_statements_independent_of_it():
    _, bufs = _gemm_then_loop()
    unrelated = kir.Store(bufs["other"], (kir.const(0), kir.const(0)), kir.const(1.0, F32))
    reads_product = kir.Store(bufs["other"], (kir.const(0), kir.const(0)),
                              bufs["c"][kir.const(0), kir.const(0)])
    writes_operand = kir.Store(bufs["a"], (kir.const(0), kir.const(0)), kir.const(1.0, F32))
    assert _merged(_gemm_then_loop(between=(unrelated,))[0])
    assert not _merged(_gemm_then_loop(between=(reads_product,))[0])
    assert not _merged(_gemm_then_loop(between=(writes_operand,))[0])


def test_loops_that_are_not_element_by_element_stay_apart():
    # Another element of the product: another block may not have computed it yet.
    def shifted(b, i, j):
        return b["c"][i, kir.Bin("-", kir.const(31), j)]

    assert not _merged(_gemm_then_loop(read=shifted)[0])
    # A loop writing an operand of the product: another block's product still reads it.
    assert not _merged(_gemm_then_loop(write="a")[0])
    # A loop that does not read the product is left to its own region.
    assert not _merged(_gemm_then_loop(read=lambda b, i, j: b["other"][i, j])[0])


def test_an_independent_product_joins_the_next_block_loop():
    _, bufs = _gemm_then_loop()
    m, n, k = 64, 32, 32
    other = kir.Gemm(m, n, k, kir.Operand(bufs["a"], k), kir.Operand(bufs["b"], n),
                     kir.Operand(bufs["other"], n), beta=1.0)
    stmts = [other, *_gemm_then_loop()[0]]
    out = product_blocks(stmts, 4)
    kir.verify(out, bufs.values())
    assert len(out) == 1
    parts = [s for s in out[0].body if isinstance(s, kir.Gemm)]
    assert [g.c.buf.name for g in parts] == ["other", "c"]
    assert all(g.part[0] == out[0].var for g in parts)
    # The loop reads what the other product writes: it needs all of it first.
    reads_it = _gemm_then_loop(read=lambda b, i, j: kir.Bin("+", b["c"][i, j],
                                                              b["other"][i, j]))[0]
    out = product_blocks([other, *reads_it], 4)
    assert isinstance(out[0], kir.Gemm) and not out[0].part


def _layers(x, w, b, v, u, lr):
    """Products followed by elementwise loops, cut by rows (``x @ w.T``: 1024 x 64) and
    by columns (``v.T @ x``: 64 x 1024), and a small one, in one kernel."""
    h = dg.relu(x @ w.T + b)
    g = (v.T @ x) * 0.5
    return h, u - lr * g, (h @ u.T).sum()


def test_merged_blocks_match_serial_build_and_eager_and_any_thread_count():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 1024), F32)
    w = rng.standard_normal((1024, 1024), F32) * F32(0.03)
    b = rng.standard_normal(1024, F32)
    v = rng.standard_normal((512, 64), F32)
    u = rng.standard_normal((64, 1024), F32)
    args = [dg.tensor(a) for a in (x, w, b, v, u, np.array(0.1, F32))]
    eager = [r.numpy().copy() for r in _layers(*args)]
    serial = dg.compile(_layers, tiered=False)
    parallel = dg.compile(_layers, tiered=False, parallel=True)
    want = [r.numpy().copy() for r in serial(*args)]
    runs = on_one_and_two_threads(lambda: [r.numpy().copy() for r in parallel(*args)])
    src = parallel.entries()[0].kernel.source
    if product_parts() > 1:  # one block per thread of the pool: none on one thread
        assert src.count("dgb.gemm_part(") >= 2, src
    for one, two, s, e in zip(*runs, want, eager):
        assert one.tobytes() == two.tobytes()
        dg.testing.assert_close(one, s, rtol=1e-5, atol=1e-4)
        dg.testing.assert_close(one, e, rtol=1e-5, atol=1e-4)
