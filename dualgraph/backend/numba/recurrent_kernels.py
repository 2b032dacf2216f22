"""The recurrent layers' time loops (``rnn_layer``, ``rnn_layer_proj``,
``rnn_layer_backward``) as C functions compiled once per installation and dtype.

A generated kernel calls them by symbol (``dgr.rnn_forward_float32(...)``), as it calls
the batched product (`blas.gemm_batched`): nothing of the loop is typed, lowered or
optimised with the kernel, so every layer, direction and cell type of a program costs
one call's code, and the kernel's compile does not grow with the number of layers or
with the sequence length. The functions themselves sit in Numba's disk cache (compiled
on the first use in an installation, loaded after).

Each function takes the arrays' data pointers (C-ordered; the call site makes them so)
and a small int64 array: the flags (cell type, direction, lengths, projection), then the
sizes the call site reads from the arrays' shapes. The loops are those of
`ops.recurrent` (its NumPy implementation is the reference): one GEMM for the input side
of every step, then per step one GEMM and one elementwise pass; backward, per step one
elementwise pass and one GEMM.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from . import kernels as dgk
from .blas import _NO_TRANS, _TRANS, _empty_of, _gemm_at

_TANH_MODE, _RELU_MODE, _LSTM_MODE, _GRU_MODE = 0, 1, 2, 3
_REVERSE, _LENGTHS, _PROJ = 4, 8, 16
MODES = {"tanh": _TANH_MODE, "relu": _RELU_MODE, "lstm": _LSTM_MODE, "gru": _GRU_MODE}


def _tanh(v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_tanh)
def _tanh_of(v):
    # The functions the elementwise lowerings use, so a layer's values round as before.
    if v == types.float32:
        return lambda v: dgk.tanh_f32(v)
    return lambda v: np.tanh(v)


def _sig(v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_sig)
def _sig_of(v):
    if v == types.float32:
        return lambda v: dgk.sigmoid_f32(v)
    return lambda v: dgk.sigmoid_f64(v)


def _of(a, v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_of)
def _of_dtype(a, v):
    """``v`` as a scalar of ``a``'s dtype: float32 arithmetic stays float32."""
    dt = a.dtype
    return lambda a, v: dt(v)


@numba.njit(inline="always", cache=True, nogil=True)
def _grid(p, rows, cols):
    """A (rows, cols) C-ordered array over the pointer ``p``."""
    return numba.carray(p, (rows * cols,)).reshape((rows, cols))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _forward(px, ph0, pc0, plens, pwih, pwhh, pwhr, pbih, pbhh, pws, geo):
    g = numba.carray(geo, (6,))
    flags, t_len, batch, n_in, p, hc = g[0], g[1], g[2], g[3], g[4], g[5]
    mode = flags & 3
    reverse, has_lens, proj = (flags & _REVERSE) != 0, (flags & _LENGTHS) != 0, \
        (flags & _PROJ) != 0
    lstm, gru = mode == _LSTM_MODE, mode == _GRU_MODE
    n = hc if lstm else p
    gn = (4 if lstm else 3 if gru else 1) * n
    w = p + (5 * n if lstm else 4 * n if gru else 0)
    rows = t_len * batch
    if rows == 0 or n == 0:
        return
    x = _grid(px, rows, n_in)
    wih = _grid(pwih, gn, n_in)
    whh = _grid(pwhh, gn, p)
    bih = numba.carray(pbih, (gn,))
    bhh = numba.carray(pbhh, (gn,))
    ws = _grid(pws, rows, w)  # row t * B + b is step t of sequence b
    lens = numba.carray(plens, (batch if has_lens else 1,))
    zero = _of(ws, 0.0)
    gx = _empty_of(pws, rows * gn).reshape((rows, gn))
    if n_in:
        _gemm_at(_NO_TRANS, _TRANS, rows, gn, n_in, x, 0, n_in, wih, 0, n_in, 0.0, gx, 0, gn)
    else:
        gx[:, :] = zero
    hp = _empty_of(pws, batch * p).reshape((batch, p))
    hp[:, :] = _grid(ph0, batch, p)
    cp = _empty_of(pws, batch * n).reshape((batch, n))
    if lstm:
        cp[:, :] = _grid(pc0, batch, n)
    gh = _empty_of(pws, batch * gn).reshape((batch, gn))
    hu = _empty_of(pws, batch * n).reshape((batch, n))
    hq = _empty_of(pws, batch * p).reshape((batch, p))
    whr = _grid(pwhr, p if proj else 1, n if proj else 1)
    for s in range(t_len):
        t = t_len - 1 - s if reverse else s
        _gemm_at(_NO_TRANS, _TRANS, batch, gn, p, hp, 0, p, whh, 0, p, 0.0, gh, 0, gn)
        for b in range(batch):
            run = (not has_lens) or t < lens[b]
            r = t * batch + b
            for j in range(n):
                h_old = hp[b, j] if not proj else zero
                if mode == _TANH_MODE or mode == _RELU_MODE:
                    a = (gx[r, j] + bih[j]) + (gh[b, j] + bhh[j])
                    if mode == _TANH_MODE:
                        h = _tanh(a)
                    else:
                        h = a if not (a <= zero) else zero
                elif lstm:
                    i = _sig((gx[r, j] + bih[j]) + (gh[b, j] + bhh[j]))
                    f = _sig((gx[r, j + n] + bih[j + n]) + (gh[b, j + n] + bhh[j + n]))
                    cg = _tanh((gx[r, j + 2 * n] + bih[j + 2 * n])
                               + (gh[b, j + 2 * n] + bhh[j + 2 * n]))
                    o = _sig((gx[r, j + 3 * n] + bih[j + 3 * n])
                             + (gh[b, j + 3 * n] + bhh[j + 3 * n]))
                    c_old = cp[b, j]
                    c = f * c_old + i * cg
                    h = o * _tanh(c)
                    if not run:
                        c = c_old
                    cp[b, j] = c
                    ws[r, j + p] = c
                    ws[r, j + p + n] = i if run else zero
                    ws[r, j + p + 2 * n] = f if run else zero
                    ws[r, j + p + 3 * n] = cg if run else zero
                    ws[r, j + p + 4 * n] = o if run else zero
                else:
                    rg = _sig((gx[r, j] + bih[j]) + (gh[b, j] + bhh[j]))
                    z = _sig((gx[r, j + n] + bih[j + n]) + (gh[b, j + n] + bhh[j + n]))
                    hn = gh[b, j + 2 * n] + bhh[j + 2 * n]
                    new = _tanh((gx[r, j + 2 * n] + bih[j + 2 * n]) + rg * hn)
                    h = (h_old - new) * z + new
                    ws[r, j + n] = rg if run else zero
                    ws[r, j + 2 * n] = z if run else zero
                    ws[r, j + 3 * n] = new if run else zero
                    ws[r, j + 4 * n] = hn if run else zero
                if proj:
                    hu[b, j] = h
                else:
                    if not run:
                        h = h_old
                    ws[r, j] = h
                    hp[b, j] = h
        if proj:
            # h = W_hr (o * tanh(c)), taken (or the old state kept) over (B, P).
            _gemm_at(_NO_TRANS, _TRANS, batch, p, n, hu, 0, n, whr, 0, n, 0.0, hq, 0, p)
            for b in range(batch):
                run = (not has_lens) or t < lens[b]
                for q in range(p):
                    v = hq[b, q] if run else hp[b, q]
                    ws[t * batch + b, q] = v
                    hp[b, q] = v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _backward(pg, pws, ph0, pc0, pwhh, pwhr, plens, pout, geo):
    gg = numba.carray(geo, (7,))
    flags, t_len, batch, w, p, hc, k_w = gg[0], gg[1], gg[2], gg[3], gg[4], gg[5], gg[6]
    mode = flags & 3
    reverse, has_lens, proj = (flags & _REVERSE) != 0, (flags & _LENGTHS) != 0, \
        (flags & _PROJ) != 0
    lstm, gru = mode == _LSTM_MODE, mode == _GRU_MODE
    n = hc if lstm else p
    gn = (4 if lstm else 3 if gru else 1) * n
    k_g = (2 if gru else 1) * gn + (p if proj else 0)
    rows = t_len * batch
    out = _grid(pout, rows, k_w)
    out[:, :] = _of(out, 0.0)
    if rows == 0 or n == 0:
        return
    g = _grid(pg, rows, w)
    ws = _grid(pws, rows, w)
    h0 = _grid(ph0, batch, p)
    c0 = _grid(pc0, batch if lstm else 1, n if lstm else 1)
    whh = _grid(pwhh, gn, p)
    whr = _grid(pwhr, p if proj else 1, n if proj else 1)
    lens = numba.carray(plens, (batch if has_lens else 1,))
    zero, one = _of(ws, 0.0), _of(ws, 1.0)
    dh = _empty_of(pout, batch * p).reshape((batch, p))
    dh[:, :] = zero
    dc = _empty_of(pout, batch * n).reshape((batch, n))
    dc[:, :] = zero
    du = _empty_of(pout, batch * n).reshape((batch, n))
    carry = _empty_of(pout, batch * p).reshape((batch, p))
    last = t_len - 1
    off = gn if gru else 0
    # dh is the gates' path alone after the product when nothing else adds to it.
    adds = gru or has_lens or proj
    for s in range(t_len):
        t = s if reverse else last - s
        first = t == (last if reverse else 0)
        pv = min(t + 1, last) if reverse else max(t - 1, 0)
        for b in range(batch):
            for q in range(p):
                out[t * batch + b, q + k_g] = h0[b, q] if first else ws[pv * batch + b, q]
        if proj:
            for b in range(batch):
                run = (not has_lens) or t < lens[b]
                for q in range(p):
                    dq = dh[b, q] + g[t * batch + b, q]
                    out[t * batch + b, q + gn] = dq if run else zero
                    dh[b, q] = zero if run else dq
            _gemm_at(_NO_TRANS, _NO_TRANS, batch, n, p, out, t * batch * k_w + gn, k_w,
                     whr, 0, n, 0.0, du, 0, n)
        for b in range(batch):
            run = (not has_lens) or t < lens[b]
            r = t * batch + b
            rp = pv * batch + b
            for j in range(n):
                d_h = du[b, j] if proj else dh[b, j] + g[r, j]
                if mode == _TANH_MODE:
                    h = ws[r, j]
                    out[r, j] = d_h * (one - h * h) if run else zero
                elif mode == _RELU_MODE:
                    out[r, j] = (d_h if ws[r, j] > zero else zero) if run else zero
                elif lstm:
                    c = ws[r, j + p]
                    i = ws[r, j + p + n]
                    f = ws[r, j + p + 2 * n]
                    cg = ws[r, j + p + 3 * n]
                    o = ws[r, j + p + 4 * n]
                    tc = _tanh(c)
                    d_c = dc[b, j] + g[r, j + p] + (d_h * o * (one - tc * tc) if run else zero)
                    c_prev = c0[b, j] if first else ws[rp, j + p]
                    if run:
                        out[r, j] = (d_c * cg + g[r, j + p + n]) * i * (one - i)
                        out[r, j + n] = (d_c * c_prev + g[r, j + p + 2 * n]) * f * (one - f)
                        out[r, j + 2 * n] = (d_c * i + g[r, j + p + 3 * n]) * (one - cg * cg)
                        out[r, j + 3 * n] = (d_h * tc + g[r, j + p + 4 * n]) * o * (one - o)
                        dc[b, j] = d_c * f
                    else:
                        dc[b, j] = d_c
                else:
                    rg = ws[r, j + n]
                    z = ws[r, j + 2 * n]
                    new = ws[r, j + 3 * n]
                    hn = ws[r, j + 4 * n]
                    h_prev = h0[b, j] if first else ws[rp, j]
                    dnew = (d_h * (one - z) + g[r, j + 3 * n]) * (one - new * new)
                    dr = (dnew * hn + g[r, j + n]) * rg * (one - rg)
                    dz = (d_h * (h_prev - new) + g[r, j + 2 * n]) * z * (one - z)
                    if run:
                        out[r, j] = dr
                        out[r, j + n] = dz
                        out[r, j + 2 * n] = dnew
                        out[r, j + 3 * n] = dr
                        out[r, j + 4 * n] = dz
                        out[r, j + 5 * n] = dnew * rg + g[r, j + 4 * n]
                        dh[b, j] = d_h * z
                    else:
                        dh[b, j] = d_h
                if has_lens and not gru and not proj:
                    dh[b, j] = zero if run else d_h
        # The hidden side's gradient to the state before: d_gates @ W_hh.
        _gemm_at(_NO_TRANS, _NO_TRANS, batch, p, gn, out, t * batch * k_w + off, k_w,
                 whh, 0, p, 0.0, carry, 0, p)
        if adds:
            for b in range(batch):
                for q in range(p):
                    dh[b, q] += carry[b, q]
        else:
            dh[:, :] = carry
    for b in range(batch):
        for q in range(p):
            out[b, q + k_g + p] = dh[b, q]
        if lstm:
            for j in range(n):
                out[b, j + k_g + 2 * p] = dc[b, j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _weight_grads(pback, px, pws, pres, geo):
    gg = numba.carray(geo, (7,))
    flags, t_len, batch, n_in, k_w, w, n = gg[0], gg[1], gg[2], gg[3], gg[4], gg[5], gg[6]
    mode = flags & 3
    proj = (flags & _PROJ) != 0
    lstm, gru = mode == _LSTM_MODE, mode == _GRU_MODE
    gn = (4 if lstm else 3 if gru else 1) * n
    p = w - (5 * n if lstm else 4 * n if gru else 0)
    k_g = (2 if gru else 1) * gn + (p if proj else 0)
    off = gn if gru else 0  # the hidden side's gate gradients
    rows = t_len * batch
    size = gn * n_in + gn * p + (p * n if proj else 0) + 2 * gn
    res = numba.carray(pres, (size,))
    res[:] = _of(res, 0.0)
    if rows == 0 or n == 0:
        return
    back = _grid(pback, rows, k_w)
    x = _grid(px, rows, n_in)
    # Each product straight into its place in the flat result (row-major, ldc its width).
    if n_in:
        _gemm_at(_TRANS, _NO_TRANS, gn, n_in, rows, back, 0, k_w, x, 0, n_in, 0.0, res, 0,
                 n_in)
    at = gn * n_in
    _gemm_at(_TRANS, _NO_TRANS, gn, p, rows, back, off, k_w, back, k_g, k_w, 0.0, res, at, p)
    at += gn * p
    if proj:
        ws = _grid(pws, rows, w)
        un = _empty_of(pres, rows * n).reshape((rows, n))
        for r in range(rows):
            for j in range(n):
                un[r, j] = ws[r, j + p + 4 * n] * _tanh(ws[r, j + p])
        _gemm_at(_TRANS, _NO_TRANS, p, n, rows, back, gn, k_w, un, 0, n, 0.0, res, at, n)
        at += p * n
    for r in range(rows):
        for j in range(gn):
            res[at + j] += back[r, j]
            res[at + gn + j] += back[r, j + off]


def _c_functions(dtype: Any) -> tuple:
    ptr, iptr = types.CPointer(dtype), types.CPointer(types.int64)

    def forward(x, h0, c0, lens, w_ih, w_hh, w_hr, b_ih, b_hh, ws, geo):
        _forward(x, h0, c0, lens, w_ih, w_hh, w_hr, b_ih, b_hh, ws, geo)

    def backward(g, ws, h0, c0, w_hh, w_hr, lens, out, geo):
        _backward(g, ws, h0, c0, w_hh, w_hr, lens, out, geo)

    def weight_grads(back, x, ws, res, geo):
        _weight_grads(back, x, ws, res, geo)

    opts = {"cache": True, "nopython": True, "error_model": "numpy"}
    fwd = numba.cfunc(types.void(ptr, ptr, ptr, iptr, ptr, ptr, ptr, ptr, ptr, ptr, iptr),
                      **opts)(forward)
    bwd = numba.cfunc(types.void(ptr, ptr, ptr, ptr, ptr, ptr, iptr, ptr, iptr),
                      **opts)(backward)
    wg = numba.cfunc(types.void(ptr, ptr, ptr, ptr, iptr), **opts)(weight_grads)
    return fwd, bwd, wg


_FUNCTIONS: dict = {}


def need(dtype: str) -> None:
    """Compile (or load from Numba's disk cache) the forward and backward C functions for
    ``dtype`` and register their symbols, once per process: before a kernel calling them
    is compiled (its typing does this) or loaded (its module's header does)."""
    if dtype in _FUNCTIONS:
        return
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        if dtype not in _FUNCTIONS:
            fns = _c_functions(types.float32 if dtype == "float32" else types.float64)
            for kind, fn in zip(("forward", "backward", "weight_grads"), fns):
                llvm.add_symbol(f"dualgraph_rnn_{kind}_{dtype}", fn.address)
            _FUNCTIONS[dtype] = fns


def _call_c(kind: str, flags_and_arrays: tuple, float_args: tuple, geo_dims: tuple,
            n_sizes: int = 0) -> Any:
    """The typing and code of a call ``(reverse, lengths, proj, m0, m1, *arrays, *sizes)``
    of the C function ``kind`` with the arrays' data pointers and the geometry: the flags,
    the sizes ``geo_dims`` lists as (array position, axis), then the ``n_sizes`` integer
    arguments. ``float_args``: the positions of the floating arrays (the others are
    int64)."""
    end = len(flags_and_arrays) - n_sizes
    arrays = flags_and_arrays[5:end]
    if not all(isinstance(a, types.Array) for a in arrays) or not all(
            isinstance(a, types.Integer) for a in flags_and_arrays[end:]):
        return None
    dt = arrays[float_args[0]].dtype
    if dt not in (types.float32, types.float64) or any(
            arrays[k].dtype != dt for k in float_args):
        return None
    name = f"dualgraph_rnn_{kind}_{dt}"
    need(str(dt))

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        flags = ir.Constant(i64, 0)
        for bit, v in zip((_REVERSE, _LENGTHS, _PROJ, 1, 2), args[:5]):
            flags = builder.or_(flags, builder.mul(builder.zext(v, i64), ir.Constant(i64, bit)))
        geo = cgutils.alloca_once(builder, i64, size=1 + len(geo_dims) + n_sizes)
        builder.store(flags, builder.gep(geo, [ir.Constant(i64, 0)]))
        arys = [context.make_array(ty)(context, builder, v)
                for ty, v in zip(signature.args[5:end], args[5:end])]
        for k, (pos, axis) in enumerate(geo_dims):
            dim = cgutils.unpack_tuple(builder, arys[pos].shape, arrays[pos].ndim)[axis]
            builder.store(dim, builder.gep(geo, [ir.Constant(i64, k + 1)]))
        for k, (ty, v) in enumerate(zip(signature.args[end:], args[end:])):
            builder.store(context.cast(builder, v, ty, types.int64),
                          builder.gep(geo, [ir.Constant(i64, 1 + len(geo_dims) + k)]))
        fl = context.get_value_type(dt).as_pointer()
        ptrs = [builder.bitcast(a.data, fl if k in float_args else i64.as_pointer())
                for k, a in enumerate(arys)]
        fnty = ir.FunctionType(ir.VoidType(), [q.type for q in ptrs] + [i64.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, ptrs + [geo])
        return context.get_dummy_value()

    return types.void(*flags_and_arrays), codegen


@intrinsic
def rnn_forward(typingctx, reverse, lengths, proj, m0, m1, x, h0, c0, lens, w_ih, w_hh, w_hr,
                b_ih, b_hh, ws):
    """One layer and direction's forward (`ops.recurrent.rnn_layer`) into ``ws``: a call
    of the C function; the geometry T, B, I from ``x``, P from ``h0``, H from ``c0``."""
    return _call_c("forward", (reverse, lengths, proj, m0, m1, x, h0, c0, lens, w_ih, w_hh,
                               w_hr, b_ih, b_hh, ws), (0, 1, 2, 4, 5, 6, 7, 8, 9),
                   ((0, 0), (0, 1), (0, 2), (1, 1), (2, 1)))


@intrinsic
def rnn_backward(typingctx, reverse, lengths, proj, m0, m1, g, ws, h0, c0, w_hh, w_hr, lens,
                 out):
    """`ops.recurrent.rnn_layer_backward` into ``out``: a call of the C
    function; the geometry T, B, W from ``ws``, P from ``h0``, H from ``c0``, K from
    ``out``."""
    return _call_c("backward", (reverse, lengths, proj, m0, m1, g, ws, h0, c0, w_hh, w_hr,
                                lens, out), (0, 1, 2, 3, 4, 5, 7),
                   ((1, 0), (1, 1), (1, 2), (2, 1), (3, 1), (7, 2)))


@intrinsic
def rnn_weight_grads(typingctx, reverse, lengths, proj, m0, m1, back, x, ws, res, hidden):
    """`ops.recurrent.rnn_layer_weight_grads` into ``res``: a call of the C function; the
    geometry T, B, I from ``x``, K from ``back``, W from ``ws``, then ``hidden``."""
    return _call_c("weight_grads", (reverse, lengths, proj, m0, m1, back, x, ws, res,
                                    hidden), (0, 1, 2, 3),
                   ((1, 0), (1, 1), (1, 2), (0, 2), (2, 2)), n_sizes=1)


# The names generated code calls, one per dtype (`cache.module_source` registers the C
# functions a kernel's module names).
rnn_forward_float32 = rnn_forward_float64 = rnn_forward
rnn_backward_float32 = rnn_backward_float64 = rnn_backward
rnn_weight_grads_float32 = rnn_weight_grads_float64 = rnn_weight_grads
