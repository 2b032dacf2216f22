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
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from . import kernels as dgk
from .blas import _NO_TRANS, _TRANS, _empty_of, _gemm_at
from .cache_key import cached_njit
from .library import Routines

_TANH_MODE, _RELU_MODE, _LSTM_MODE, _GRU_MODE = 0, 1, 2, 3
_REVERSE, _LENGTHS, _PROJ = 4, 8, 16
MODES = {"tanh": _TANH_MODE, "relu": _RELU_MODE, "lstm": _LSTM_MODE, "gru": _GRU_MODE}


def _tanh(v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_tanh, inline="always")
def _tanh_of(v):
    # The functions the elementwise lowerings use, so a layer's values round as before.
    if v == types.float32:
        return lambda v: dgk.tanh_f32(v)
    return lambda v: np.tanh(v)


def _sig(v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_sig, inline="always")
def _sig_of(v):
    if v == types.float32:
        return lambda v: dgk.sigmoid_f32(v)
    return lambda v: dgk.sigmoid_f64(v)


def _of(a, v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_of, inline="always")
def _of_dtype(a, v):
    """``v`` as a scalar of ``a``'s dtype: float32 arithmetic stays float32."""
    dt = a.dtype
    return lambda a, v: dt(v)


@cached_njit(inline="always", nogil=True)
def _grid(p, rows, cols):
    """A (rows, cols) C-ordered array over the pointer ``p``."""
    return numba.carray(p, (rows * cols,)).reshape((rows, cols))


@cached_njit(nogil=True, error_model="numpy")
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
    bih = numba.carray(pbih, (gn,))
    bhh = numba.carray(pbhh, (gn,))
    ws = _grid(pws, rows, w)  # row t * B + b is step t of sequence b
    lens = numba.carray(plens, (batch if has_lens else 1,))
    zero = _of(ws, 0.0)
    gx = _empty_of(pws, rows * gn).reshape((rows, gn))
    if n_in:
        # The input side of every step: one product over the whole sequence.
        _gemm_at(_NO_TRANS, _TRANS, rows, gn, n_in, x, 0, n_in, wih, 0, n_in, 0.0, gx, 0, gn)
    else:
        gx[:, :] = zero
    whh = _grid(pwhh, gn, p)
    whr = _grid(pwhr, p if proj else 1, n if proj else 1)
    hp = _empty_of(pws, batch * p).reshape((batch, p))
    hp[:, :] = _grid(ph0, batch, p)
    cp = _empty_of(pws, batch * n).reshape((batch, n))
    if lstm:
        cp[:, :] = _grid(pc0, batch, n)
    gh = _empty_of(pws, batch * gn).reshape((batch, gn))
    hu = _empty_of(pws, batch * n).reshape((batch, n))
    hq = _empty_of(pws, batch * p).reshape((batch, p))
    for s in range(t_len):
        t = t_len - 1 - s if reverse else s
        # Each product is a BLAS call with the operands and flags of `ops.recurrent`'s
        # NumPy product, so both sum in the same order (OpenBLAS's small-matrix kernels
        # cost a fraction of a microsecond per call at these sizes).
        _gemm_at(_NO_TRANS, _TRANS, batch, gn, p, hp, 0, p, whh, 0, p, 0.0, gh, 0, gn)
        # The gates in short passes over (B, gates * H) rows, each reading and writing few
        # arrays, so that every pass vectorises (one pass doing all of a cell's work
        # writes too many arrays for the compiler's overlap checks). Each value is the
        # same expression as in `ops.recurrent`, so it rounds the same.
        for b in range(batch):
            r = t * batch + b
            run = (not has_lens) or t < lens[b]
            if gru:
                for k in range(2 * n):  # r and z
                    gh[b, k] = _sig((gx[r, k] + bih[k]) + (gh[b, k] + bhh[k]))
                for j in range(2 * n, 3 * n):  # W_hn h + b_hn
                    gh[b, j] = gh[b, j] + bhh[j]
                for j in range(n):  # n
                    hq[b, j] = _tanh((gx[r, j + 2 * n] + bih[j + 2 * n])
                                     + gh[b, j] * gh[b, j + 2 * n])
                for j in range(n):
                    h_old = hp[b, j]
                    h = (h_old - hq[b, j]) * gh[b, j + n] + hq[b, j]
                    hu[b, j] = h if run else h_old
                for j in range(n):
                    ws[r, j + n] = gh[b, j] if run else zero
                    ws[r, j + 2 * n] = gh[b, j + n] if run else zero
                    ws[r, j + 3 * n] = hq[b, j] if run else zero
                    ws[r, j + 4 * n] = gh[b, j + 2 * n] if run else zero
                continue
            for k in range(gn):
                gh[b, k] = (gx[r, k] + bih[k]) + (gh[b, k] + bhh[k])
            if lstm:
                for k in range(2 * n):  # i and f
                    gh[b, k] = _sig(gh[b, k])
                for k in range(2 * n, 3 * n):  # g
                    gh[b, k] = _tanh(gh[b, k])
                for k in range(3 * n, 4 * n):  # o
                    gh[b, k] = _sig(gh[b, k])
                for j in range(n):
                    c_old = cp[b, j]
                    c = gh[b, j + n] * c_old + gh[b, j] * gh[b, j + 2 * n]
                    hu[b, j] = gh[b, j + 3 * n] * _tanh(c)
                    cp[b, j] = c if run else c_old
                if not (run or proj):
                    # Projected, the kept state is taken after the projection.
                    for j in range(n):
                        hu[b, j] = hp[b, j]
                for j in range(n):
                    ws[r, j + p] = cp[b, j]
                for k in range(gn):
                    ws[r, k + p + n] = gh[b, k] if run else zero
            elif mode == _TANH_MODE:
                for j in range(n):
                    hu[b, j] = _tanh(gh[b, j]) if run else hp[b, j]
            else:
                for j in range(n):
                    a = gh[b, j]
                    hu[b, j] = (a if not (a <= zero) else zero) if run else hp[b, j]
        if proj:
            # h = W_hr (o * tanh(c)), taken (or the old state kept) over (B, P).
            _gemm_at(_NO_TRANS, _TRANS, batch, p, n, hu, 0, n, whr, 0, n, 0.0, hq, 0, p)
            for b in range(batch):
                run = (not has_lens) or t < lens[b]
                for q in range(p):
                    v = hq[b, q] if run else hp[b, q]
                    ws[t * batch + b, q] = v
                    hp[b, q] = v
        else:
            for b in range(batch):
                r = t * batch + b
                for j in range(n):
                    h = hu[b, j]
                    ws[r, j] = h
                    hp[b, j] = h


@cached_njit(nogil=True, error_model="numpy")
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
    dcb = _empty_of(pout, batch * n).reshape((batch, n))  # the step's d_c (GRU: d_n)
    tb = _empty_of(pout, batch * n).reshape((batch, n))  # the LSTM's tanh(c)
    last = t_len - 1
    off = gn if gru else 0
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
            # The gradient of o * tanh(c), the projection's input: d_h @ W_hr.
            _gemm_at(_NO_TRANS, _NO_TRANS, batch, n, p, out, t * batch * k_w + gn, k_w,
                     whr, 0, n, 0.0, du, 0, n)
        else:
            # dh becomes the step's d_h; a step past a sequence's end passes it on whole
            # (the state it kept), a running one through its gates only.
            for b in range(batch):
                r = t * batch + b
                for q in range(p):
                    du[b, q] = dh[b, q] + g[r, q]
        # Short passes, as in the forward; a step past a sequence's end writes zero gate
        # gradients and passes d_h (and the LSTM's d_c) on whole.
        for b in range(batch):
            r = t * batch + b
            rp = pv * batch + b
            run = (not has_lens) or t < lens[b]
            if not run:
                for k in range(gn + off):
                    out[r, k] = zero
                if lstm:
                    for j in range(n):
                        dc[b, j] = dc[b, j] + g[r, j + p] + zero
                if not proj:
                    for j in range(n):
                        dh[b, j] = du[b, j]
                continue
            if lstm:
                for j in range(n):
                    tb[b, j] = _tanh(ws[r, j + p])
                for j in range(n):
                    dcb[b, j] = dc[b, j] + g[r, j + p] + du[b, j] * ws[r, j + p + 4 * n] \
                        * (one - tb[b, j] * tb[b, j])
                for j in range(n):  # i
                    i = ws[r, j + p + n]
                    out[r, j] = (dcb[b, j] * ws[r, j + p + 3 * n] + g[r, j + p + n]) \
                        * i * (one - i)
                if first:
                    for j in range(n):  # f
                        f = ws[r, j + p + 2 * n]
                        out[r, j + n] = (dcb[b, j] * c0[b, j] + g[r, j + p + 2 * n]) \
                            * f * (one - f)
                else:
                    for j in range(n):
                        f = ws[r, j + p + 2 * n]
                        out[r, j + n] = (dcb[b, j] * ws[rp, j + p] + g[r, j + p + 2 * n]) \
                            * f * (one - f)
                for j in range(n):  # g
                    cg = ws[r, j + p + 3 * n]
                    out[r, j + 2 * n] = (dcb[b, j] * ws[r, j + p + n] + g[r, j + p + 3 * n]) \
                        * (one - cg * cg)
                for j in range(n):  # o
                    o = ws[r, j + p + 4 * n]
                    out[r, j + 3 * n] = (du[b, j] * tb[b, j] + g[r, j + p + 4 * n]) \
                        * o * (one - o)
                for j in range(n):
                    dc[b, j] = dcb[b, j] * ws[r, j + p + 2 * n]
                if not proj:
                    for j in range(n):
                        dh[b, j] = zero
            elif gru:
                for j in range(n):  # n
                    z = ws[r, j + 2 * n]
                    new = ws[r, j + 3 * n]
                    dcb[b, j] = (du[b, j] * (one - z) + g[r, j + 3 * n]) * (one - new * new)
                for j in range(n):  # r
                    rg = ws[r, j + n]
                    out[r, j] = (dcb[b, j] * ws[r, j + 4 * n] + g[r, j + n]) * rg * (one - rg)
                if first:
                    for j in range(n):  # z
                        z = ws[r, j + 2 * n]
                        out[r, j + n] = (du[b, j] * (h0[b, j] - ws[r, j + 3 * n])
                                         + g[r, j + 2 * n]) * z * (one - z)
                else:
                    for j in range(n):
                        z = ws[r, j + 2 * n]
                        out[r, j + n] = (du[b, j] * (ws[rp, j] - ws[r, j + 3 * n])
                                         + g[r, j + 2 * n]) * z * (one - z)
                for j in range(n):
                    out[r, j + 2 * n] = dcb[b, j]
                    out[r, j + 3 * n] = out[r, j]
                    out[r, j + 4 * n] = out[r, j + n]
                for j in range(n):  # the hidden side's n: r * (W_hn h + b_hn)
                    out[r, j + 5 * n] = dcb[b, j] * ws[r, j + n] + g[r, j + 4 * n]
                for j in range(n):
                    dh[b, j] = du[b, j] * ws[r, j + 2 * n]
            elif mode == _TANH_MODE:
                for j in range(n):
                    h = ws[r, j]
                    out[r, j] = du[b, j] * (one - h * h)
                    dh[b, j] = zero
            else:
                for j in range(n):
                    out[r, j] = du[b, j] if ws[r, j] > zero else zero
                    dh[b, j] = zero
        # The hidden side's gradient to the state before: d_gates @ W_hh.
        _gemm_at(_NO_TRANS, _NO_TRANS, batch, p, gn, out, t * batch * k_w + off, k_w,
                 whh, 0, p, 0.0, carry, 0, p)
        for b in range(batch):
            for q in range(p):
                dh[b, q] += carry[b, q]
    for b in range(batch):
        for q in range(p):
            out[b, q + k_g + p] = dh[b, q]
        if lstm:
            for j in range(n):
                out[b, j + k_g + 2 * p] = dc[b, j]


@cached_njit(nogil=True, error_model="numpy")
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


def _routine(kind: str, dtype: Any) -> Any:
    """The C function of recurrent routine ``kind`` for the Numba float type ``dtype``."""
    ptr, iptr = types.CPointer(dtype), types.CPointer(types.int64)
    if kind == "forward":
        def entry(x, h0, c0, lens, w_ih, w_hh, w_hr, b_ih, b_hh, ws, geo):
            _forward(x, h0, c0, lens, w_ih, w_hh, w_hr, b_ih, b_hh, ws, geo)

        sig = types.void(ptr, ptr, ptr, iptr, ptr, ptr, ptr, ptr, ptr, ptr, iptr)
    elif kind == "backward":
        def entry(g, ws, h0, c0, w_hh, w_hr, lens, out, geo):
            _backward(g, ws, h0, c0, w_hh, w_hr, lens, out, geo)

        sig = types.void(ptr, ptr, ptr, ptr, ptr, ptr, iptr, ptr, iptr)
    else:
        def entry(back, x, ws, res, geo):
            _weight_grads(back, x, ws, res, geo)

        sig = types.void(ptr, ptr, ptr, ptr, iptr)
    return ROUTINES.cfunc(entry, sig, error_model="numpy")


ROUTINES = Routines("rnn", ("forward", "backward", "weight_grads"), _routine,
                    inlines=("dualgraph.backend.numba.kernels",
                             "dualgraph.backend.numba.blas"))


def need(dtype: str, kind: str | None = None) -> None:
    """Compile (or load from Numba's disk cache) recurrent routine ``kind`` (None: all
    three) for ``dtype`` and register its symbol, once per process
    (`library.Routines.need`)."""
    ROUTINES.need(dtype, kind)


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
    name = ROUTINES.symbol(kind, str(dt))
    need(str(dt), kind)

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
