"""Row routines in a parallel kernel's block loops (`codegen.product_blocks`): a row-wise
library call over the rows a block loop's row-cut product has just written runs in that
loop on each block's rows. Each row is computed as the whole call computes it, so the
values match the serial build and eager, and the bits do not depend on the thread count."""

from __future__ import annotations

import numba
import numpy as np

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba import blas_parallel, printer
from dualgraph.backend.numba.codegen import product_blocks
from dualgraph.workloads import mlp_data, mlp_model

F32 = np.float32
M, N, K, N2 = 64, 32, 48, 8


def _bufs() -> dict:
    return {name: kir.Buffer(name, shape, F32, kir.ARG) for name, shape in (
        ("x", (M, K)), ("w", (K, N)), ("h", (M, N)), ("b", (N,)), ("s", (M, N)),
        ("g", (M, N)), ("d", (N,)), ("e", (M, N)), ("u", (N, N2)), ("y", (M, N2)))}


def _layer(bufs: dict) -> list:
    """``h = relu(x @ w + b)``: a product and its parallel loop."""
    i, j = kir.Var("i0"), kir.Var("i1")
    first = kir.Gemm(M, N, K, kir.Operand(bufs["x"], K), kir.Operand(bufs["w"], N),
                     kir.Operand(bufs["h"], N))
    relu = kir.Call("maximum", (kir.Bin("+", bufs["h"][i, j], bufs["b"][j]),
                                kir.const(0.0, F32)), F32)
    loop = kir.Loop(i, M, (kir.Loop(j, N, (kir.Store(bufs["h"], (i, j), relu),)),),
                    parallel=True)
    return [first, loop]


def _softmax(bufs: dict, x: str = "h", out: str = "s") -> kir.LibCall:
    return kir.LibCall("row_softmax", (bufs[x], 3, 0, 0.0), (bufs[out],))


def _column_sum(bufs: dict, g: str = "g", out: str = "d") -> kir.LibCall:
    return kir.LibCall("row_column_sum", (bufs[g], 3, 0, 0.0), (bufs[out],))


def _run(stmts: list) -> list:
    out = product_blocks(stmts, 2)
    kir.verify(out, _bufs().values())
    return out


def _calls(stmt) -> list:
    return [t.fn for t in kir.walk([stmt]) if isinstance(t, kir.LibCall)]


def test_a_row_call_on_the_loops_rows_runs_in_it_on_each_blocks_rows():
    bufs = _bufs()
    note = kir.Comment("softmax")
    out = _run([*_layer(bufs), note, _softmax(bufs)])
    assert out[0] == note and len(out) == 2
    (call,) = [t for t in out[1].body if isinstance(t, kir.LibCall)]
    assert call.fn.startswith("row_softmax[rows") and len(call.args) == 6
    line = printer.LIBRARY[call.fn].format(*("A", 3, 0, 0.0, "R0", "R1"), out="S",
                                           dtype="float32")
    assert line == "dgw.row_softmax_float32(A[R0:R1], S[R0:R1], 3, 0, 0.0)"
    # An operand the loop does not write is cut the same way.
    out = _run([*_layer(bufs), kir.LibCall("row_softmax_backward",
                                           (bufs["g"], bufs["h"], 3, 0, 0.0), (bufs["s"],))])
    assert len(out) == 1 and _calls(out[0])


def test_row_calls_that_need_other_rows_or_clash_with_the_loop_stay_apart():
    bufs = _bufs()
    # Reads what the loop reads and writes: its output is the loop's operand.
    assert len(_run([*_layer(bufs), _softmax(bufs, out="x")])) == 2
    # Writes the loop's own result in place.
    assert len(_run([*_layer(bufs), _softmax(bufs, out="h")])) == 2
    # Work between the two that the call does not need stays after the loop.
    i = kir.const(0)
    other = kir.Store(bufs["d"], (i,), kir.const(1.0, F32))
    out = _run([*_layer(bufs), other, _softmax(bufs)])
    assert len(out) == 2 and out[1] == other and _calls(out[0])
    # Work it needs moves above the loop, unless that needs the loop's result.
    other = kir.Store(bufs["g"], (i, i), kir.const(1.0, F32))
    backward = kir.LibCall("row_softmax_backward", (bufs["g"], bufs["h"], 3, 0, 0.0),
                           (bufs["s"],))
    out = _run([*_layer(bufs), other, backward])
    assert len(out) == 2 and out[0] == other and _calls(out[1])
    other = kir.Store(bufs["g"], (i, i), bufs["h"][i, i])
    assert len(_run([*_layer(bufs), other, backward])) == 3
    # Work that may raise does not move above a loop that writes an argument (``h``):
    # the error would then come before that write, not after.
    check = kir.If(kir.Bin("<", bufs["d"][i], kir.const(0.0, F32)),
                   (kir.Raise("IndexError", "out of bounds"),))
    other = kir.Loop(kir.Var("t0"), 1, (check, kir.Store(bufs["g"], (i, i),
                                                           kir.const(1.0, F32))))
    assert len(_run([*_layer(bufs), other, backward])) == 3
    # Not row-wise: a column sum of the loop's result needs every block's rows.
    assert len(_run([*_layer(bufs), _column_sum(bufs, g="h")])) == 2


def test_a_column_sum_stays_whole():
    # Cut by columns, each part's call pays the routine's fixed cost again (a 1024 x 10
    # sum: 3.8 us whole, 14 us in 4 parts, one thread): it stays one call.
    bufs = _bufs()
    assert len(_run([_column_sum(bufs), *_layer(bufs)])) == 2


def _steps(net, loss_fn, opt, x, t, compiled=None, steps=2):
    def train(x, t):
        opt.zero_grad()
        out = loss_fn(net(x), t)
        out.backward()
        opt.step()
        return out

    f = compiled(train) if compiled else train
    losses = [f(x, t).numpy().copy() for _ in range(steps)]
    return f, losses, [p.detach().numpy().copy() for p in net.parameters()]


def _mlp():
    sizes = (96, 128, 10)
    net, loss_fn = mlp_model(sizes, "ce")
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    x, t = (dg.tensor(a) for a in mlp_data(sizes, 512, "ce"))
    return net, loss_fn, opt, x, t


def test_mlp_step_matches_serial_build_and_eager_and_any_thread_count():
    _, eager_losses, eager_params = _steps(*_mlp())
    _, serial_losses, serial_params = _steps(
        *_mlp(), compiled=lambda f: dg.compile(f, tiered=False))
    threads = numba.config.NUMBA_NUM_THREADS
    runs = []
    for n in (1, min(2, threads)):
        dg.set_num_threads(n)
        try:
            f, losses, params = _steps(
                *_mlp(), compiled=lambda f: dg.compile(f, tiered=False, parallel=True))
        finally:
            dg.set_num_threads(threads)
        runs.append((losses, params))
    src = f.entries()[0].kernel.source
    if threads > 1:
        # The log-softmax and its gradient on the first layer's blocks, the hidden
        # gradient chained after them (the loss's gradient, from the targets alone,
        # above the loop): three products in the first region.
        assert "dgw.row_softmax_float32(v" in src and "):((n0 * (" in src, src
        assert "dgw.row_softmax_backward_float32(v14[(" in src, src
        lines = src[src.index("numba.prange("):].split("\n")[1:]
        body = lines[:next(k for k, line in enumerate(lines)
                           if line.startswith("    ") and line[4] != " ")]
        assert sum("dgb.gemm_part(" in line for line in body) == 3, src
    (one_l, one_p), (two_l, two_p) = runs
    for a, b in zip(one_l + one_p, two_l + two_p):
        assert a.tobytes() == b.tobytes()
    for a, s, e in zip(one_l + one_p, serial_losses + serial_params,
                       eager_losses + eager_params):
        dg.testing.assert_close(a, s, rtol=1e-5, atol=1e-6)
        dg.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)


@numba.njit(cache=False)
def _parts(x, y, parts):
    """``x @ y`` as `blas_parallel.gemm_part` computes it in ``parts`` parts, one after
    another; the parts' bounds."""
    c = np.zeros((x.shape[0], y.shape[1]), x.dtype)
    bounds = np.empty((parts, 4), np.int64)
    a, ta, lda = blas_parallel.operand(x)
    b, tb, ldb = blas_parallel.operand(y)
    for p in range(parts):
        r0, r1, c0, c1 = blas_parallel.gemm_part(p, parts, ta, tb, x.shape[0], y.shape[1],
                                                 x.shape[1], a, lda, b, ldb, 0.0, c,
                                                 y.shape[1])
        bounds[p] = (r0, r1, c0, c1)
    return c, bounds


def test_a_small_products_part_runs_the_blocks_of_the_four_part_cut_it_spans():
    # A part of a product under ROW_PARTS * SPLIT_FLOPS multiply-adds is multiplied in
    # ROW_PARTS-cut blocks (each unpacked by OpenBLAS); its bounds stay the part's own.
    rng = np.random.default_rng(3)
    for shape in ((1024, 10, 256), (10, 1024, 256)):  # rows cut, then columns
        m, k, n = shape
        x = rng.standard_normal((m, k), F32)
        y = rng.standard_normal((k, n), F32)
        two, bounds = _parts(x, y, 2)
        four, _ = _parts(x, y, blas_parallel.ROW_PARTS)
        assert two.tobytes() == four.tobytes()
        want = (x.astype(np.float64) @ y.astype(np.float64)).astype(F32)
        dg.testing.assert_close(two, want, rtol=1e-4, atol=1e-4)
        half = (m // 2, m, 0, n) if m >= n else (0, m, n // 2, n)
        assert tuple(bounds[1]) == half
