"""Flat elementwise loops (`loops.flatten_nests`) and the views they read through
(`kernels.flat`, and `kernels.reshaped` for every other reshape): a perfect nest over
whole C-ordered arrays becomes one loop over 1-D views, with the same results (run before
and after through the reference executor, and compiled), and nests where a flat view would
change what is read or written stay."""

from __future__ import annotations

import numba
import numpy as np

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.loops import flatten_nests
from dualgraph.backend.numba import build
from dualgraph.backend.numba import kernels as dgk
from dualgraph.ir.interpret import interpret
from dualgraph.passes import optimize
from dualgraph.testing import assert_close

from .kir_exec import run

F4 = np.dtype(np.float32)
i, j, k = kir.Var("i"), kir.Var("j"), kir.Var("k")


def buf(name: str, *shape: int, role: str = kir.ARG, layout: str = "C") -> kir.Buffer:
    return kir.Buffer(name, shape, F4, role, layout)


def nest(shape: tuple, body: list) -> kir.Loop:
    idx = (i, j, k)[:len(shape)]
    stmt: tuple = tuple(body)
    for var, n in reversed(list(zip(idx, shape))):
        stmt = (kir.Loop(var, n, stmt),)
    return stmt[0]


def loops_in(stmts: list) -> list[kir.Loop]:
    return [s for s in kir.walk(stmts) if isinstance(s, kir.Loop)]


def same_results(params: list, before: list, after: list) -> None:
    rng = np.random.default_rng(0)
    arrays = {p.name: (rng.random(p.shape) - 0.5).astype(p.dtype) for p in params}
    want = run(before, {n: a.copy() for n, a in arrays.items()})
    got = run(after, {n: a.copy() for n, a in arrays.items()})
    for p in params:
        assert_close(got[p.name], want[p.name], rtol=0, atol=0, msg=p.name)


def test_a_perfect_nest_over_whole_arrays_is_one_flat_loop():
    x, y = buf("x", 4, 5, 6, layout="A"), buf("y", 4, 5, 6)
    o = buf("o", 4, 5, 6, role=kir.OUT)
    t = kir.Var("t", F4)
    ix = (i, j, k)
    before = [nest((4, 5, 6), [
        kir.Let(t, x[ix] * y[ix]),
        kir.Store(o, ix, kir.Select(kir.Bin(">", t, kir.const(0.0, F4)), t, y[ix])),
    ])]
    after = flatten_nests(before)
    kir.verify(after, [x, y, o])
    (loop,) = loops_in(after)
    assert loop.extent == 120
    views = [s for s in after if isinstance(s, kir.View)]
    assert sorted(v.base.name for v in views) == ["o", "x", "y"]
    assert all(v.buf.shape == (120,) and v.how == "reshape" for v in views)
    same_results([x, y, o], before, after)


def test_a_stored_array_read_back_is_flattened_in_place():
    w = buf("w", 3, 7, role=kir.SCRATCH)
    before = [nest((3, 7), [kir.Store(w, (i, j), w[i, j] * 2.0)])]
    after = flatten_nests(before)
    assert len(loops_in(after)) == 1
    same_results([w], before, after)


def test_nests_a_flat_view_would_change_stay():
    x, o = buf("x", 4, 5), buf("o", 4, 5, role=kir.OUT)
    b = buf("b", 5)
    a = buf("a", 4, 5)  # an argument updated in place may be strided
    sqt = kir.Buffer("sqt", (4, 4), F4, kir.VIEW, "A")
    sq, sx = buf("sq", 4, 4, role=kir.OUT), buf("sx", 4, 4)
    cases = {
        "broadcast operand": [nest((4, 5), [kir.Store(o, (i, j), x[i, j] + b[j])])],
        "store into an argument": [nest((4, 5), [kir.Store(a, (i, j), x[i, j])])],
        "transposed index": [nest((4, 4), [kir.Store(sq, (i, j), sx[j, i])])],
        "index used as a value": [nest((4, 5), [kir.Store(o, (i, j), kir.Cast(j, F4))])],
        "one loop": [kir.Loop(i, 4, (kir.Store(b, (i,), b[i]),))],
        "another view of the stored array": [
            kir.View(sqt, sq, "transpose", (1, 0)),
            nest((4, 4), [kir.Store(sq, (i, j), sqt[i, j] + sx[i, j])])],
    }
    for name, stmts in cases.items():
        assert flatten_nests(stmts) == stmts, name


@numba.njit
def _flats(c, f, s):
    return dgk.flat(c), dgk.flat(f), dgk.flat(s)


@numba.njit
def _reshapes(c, s, n):
    return dgk.reshaped(c, (n, 4)), dgk.reshaped(s, (3, 2, 4))


def test_flat_and_reshaped_view_c_ordered_arrays_and_copy_others():
    c = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    s = np.arange(48, dtype=np.float32).reshape(2, 3, 8)[:, :, ::2]
    fc, ff, fs = _flats(c, c.T, s)
    assert_close(fc, c.reshape(-1), rtol=0, atol=0)
    assert_close(ff, np.ascontiguousarray(c.T).reshape(-1), rtol=0, atol=0)
    assert_close(fs, np.ascontiguousarray(s).reshape(-1), rtol=0, atol=0)
    assert np.shares_memory(fc, c) and not np.shares_memory(fs, s)
    assert numba.typeof(fc).layout == "C" and fc.ndim == 1
    rc, rs = _reshapes(c, s, 6)
    assert_close(rc, c.reshape(6, 4), rtol=0, atol=0)
    assert_close(rs, np.ascontiguousarray(s).reshape(3, 2, 4), rtol=0, atol=0)
    assert np.shares_memory(rc, c) and rc.strides == (16, 4) and rs.flags.c_contiguous


def test_compiled_elementwise_kernel_over_strided_and_contiguous_inputs():
    rng = np.random.default_rng(1)
    x = dg.tensor(rng.standard_normal((4, 6, 5)).astype(np.float32))
    y = dg.tensor(rng.standard_normal((4, 6, 5)).astype(np.float32))

    def f(x, y):
        return dg.relu(x * y + 1.0) - y

    g = optimize(dg.trace(f, x, y))
    kernel = build(g, segment_lines=0)
    assert "dgk.flat(" in kernel.lowered.source and "for i1 in" not in kernel.lowered.source
    base = rng.standard_normal((4, 6, 10)).astype(np.float32)
    for xs in (np.ascontiguousarray(base[:, :, ::2]), base[:, :, ::2], base[:, :, ::2].T.T):
        (got,) = kernel(xs, y.numpy())
        (want,) = interpret(g, xs, y.numpy())
        assert_close(got, want)  # float32 kernels may contract a * b + c into one FMA


@numba.njit
def _layouts(a, f, n):
    a = a[:, :, ::1]  # typed "A" whatever its strides
    return dgk.contiguous(a), dgk.flat(a), dgk.reshaped(a, (n, 2)), dgk.contiguous(f)


def test_strided_views_are_checked_and_copied_inline():
    """An "A" array is used as it is when its strides are C-ordered (axes of length 1 may
    have any stride) and copied when not; an F-ordered one is copied. All of it inline:
    the kernel links no contiguity check of Numba's."""
    from numba.core.runtime import _nrt_python as nrt
    from numba.core.runtime import rtsys

    base = np.arange(96, dtype=np.float32).reshape(4, 3, 8)
    views = [base[:, :, 2:4],  # strided: copied
             base[::2, :, 2:4],  # strided on two axes
             base[:2],  # C-ordered in fact: used as it is
             base[:, 1:2, :4][1:3],  # a length-1 axis between strided ones
             base[1:2, :, :],  # a length-1 leading axis
             base[:0, :, :2]]  # empty
    was_on = nrt.memsys_stats_enabled()
    nrt.memsys_enable_stats()
    try:
        for a_any in views:
            before = rtsys.get_allocation_stats()
            c, fl, r, fc = _layouts(a_any, a_any.T, a_any.size // 2)
            want = np.ascontiguousarray(a_any)
            for got in (c, fl.reshape(want.shape), r.reshape(want.shape)):
                assert got.flags.c_contiguous and np.array_equal(got, want)
                assert np.shares_memory(got, a_any) == (want.size > 0 and np.shares_memory(
                    want, a_any))
            assert fc.flags.c_contiguous and np.array_equal(fc, np.ascontiguousarray(a_any.T))
            del c, fl, r, fc, got
            after = rtsys.get_allocation_stats()
            assert after.alloc - before.alloc == after.free - before.free  # nothing leaked
    finally:
        if not was_on:
            nrt.memsys_disable_stats()
    sig = _layouts.signatures[0]
    assert _layouts.overloads[sig].type_annotation.typemap["a"].layout == "A"
    llvm = _layouts.overloads[sig].library.get_llvm_str()
    assert "is_contiguous" not in llvm and "_call_allocator" not in llvm
