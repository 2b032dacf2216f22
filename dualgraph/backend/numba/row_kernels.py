"""The row kernels (softmax and log_softmax and their backward ops, layer_norm and its
input and weight gradients, a column sum) as C functions compiled once per installation
and dtype.

A generated kernel calls them by symbol (``dgw.row_softmax_float32(...)``), as it calls
the convolution's window copies (`blas.conv_im2col`): the row loops are not typed,
lowered or optimised with the kernel, so each of a program's layers costs one call line
of its cold compile. The functions sit in Numba's disk cache (compiled on the first use
in an installation, loaded after).

Each function takes its operands' data pointers, a geometry block and ``eps``. An
operand is up to 4-D (padded in front to 4-D), described by four extents, four strides in
elements and its origin (the offset of element zero from the lowest address it spans,
which is where its pointer points, so negative strides need no copy); after the operands
come the row axis and the flags. The rows are every index of the other three axes; a row
whose elements are not adjacent is gathered into a work row (and its result scattered),
so every pass runs over contiguous memory and vectorises.

The arithmetic is that of the generated row loops (`lowerings.norm`), so a kernel gives
the same bits whichever it uses: sums in float64 (float32 rows 16 float64 lanes at a time,
the additions of `kernels.fold_lanes`, then the lanes and the rest in order; here the
lanes stay in vector registers, `row_simd.lane_sum`), the float32 ``exp`` of
`kernels.exp_f32`. A softmax row's max is taken 16 lanes at a time (`row_simd.lane_max`):
a max does not depend on the order of its compares, so the outputs are those of the
serial loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from . import kernels as dgk
from .cache_key import cached_njit
from .library import HELPER_JIT, Routines
from .raw import alloc, at, free
from .row_simd import lane_max, lane_sum

_AT = 9  # per operand: four extents, four strides, the origin
_LOG, _WEIGHT, _BIAS = 1, 2, 4
_WEIGHT_GRAD, _BIAS_GRAD = 8, 16
LANES = dgk.LANES


def _exp(v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


# Below this `kernels.exp_f32` gives 0 (its clamp's bound scales to 0).
_EXP_ZERO = dgk._EXP_LO  # noqa: SLF001 - the bound of the function it stands in for
_ZERO32 = np.float32(0.0)


# The per-element helpers (`_exp`, `_row_sum`) are functions LLVM always inlines, not
# Numba IR inlines: Numba copies and types an IR inline again at each call site, a fifth
# of a routine's build. Their float32 arithmetic carries the routine's ``contract`` flag
# of its own (a helper compiled once keeps the flags it was compiled with).
_INLINE = {"forceinline": True, "fastmath": {"contract"}, **HELPER_JIT}


@cached_njit(**_INLINE)
def _exp_f32(v):
    # `kernels.exp_f32`'s bits. A lane below its range (a masked score at -inf) would
    # scale the clamped bound's polynomial by 2**-150: a multiply that underflows, slow
    # on x86 (microcode per lane). It takes exp(0) and is zeroed instead.
    low = v < _EXP_ZERO
    res = dgk.exp_f32(_ZERO32 if low else v)
    return _ZERO32 if low else res


@overload(_exp, jit_options={"forceinline": True})
def _exp_of(v):
    # The function the generated loops call (`printer.MATH`), so a row rounds as there.
    if v == types.float32:
        return lambda v: _exp_f32(v)
    return lambda v: np.exp(v)


def _of(a, v):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


# `_of` is compiled once as a function, not inlined into the Numba IR at each call (which
# copies and retypes it per call): LLVM inlines the calls anyway.
@overload(_of)
def _of_dtype(a, v):
    """``v`` as a scalar of ``a``'s dtype: float32 arithmetic stays float32."""
    dt = a.dtype
    return lambda a, v: dt(v)


# The geometry helpers take one operand's block (a pointer ``geo + a * _AT``), not the
# whole block and the operand's number: Numba compiles a function called with a literal
# integer once per value, and the operands' numbers are literals.
@cached_njit(**HELPER_JIT)
def _outer(ga, axis):
    """The extents and strides of the operand's three outer axes (every axis but
    ``axis``), outermost first: the rows in order."""
    e0, e1, e2, s0, s1, s2 = 1, 1, 1, 0, 0, 0
    k = 0
    for d in range(4):
        if d != axis:
            if k == 0:
                e0, s0 = ga[d], ga[4 + d]
            elif k == 1:
                e1, s1 = ga[d], ga[4 + d]
            else:
                e2, s2 = ga[d], ga[4 + d]
            k += 1
    return e0, e1, e2, s0, s1, s2


@cached_njit(**HELPER_JIT)
def _row_ptr(p, base, step, n, work):
    """The row of ``n`` elements of ``p`` from ``base`` on, ``step`` apart, as a pointer:
    into ``p`` itself when they are adjacent, else ``work`` with them copied in."""
    if step == 1:
        return at(p, base)
    for j in range(n):
        work[j] = p[base + j * step]
    return work


@cached_njit(**HELPER_JIT)
def _scatter(p, base, step, n, row):
    """``row`` written back to elements ``base + j * step`` of ``p``."""
    for j in range(n):
        p[base + j * step] = row[j]


@cached_njit(**HELPER_JIT)
def _param(p, ga, n, given, work):
    """A weight or bias (a row along the last axis of its own 1-D geometry) copied into
    ``work``; ones when not ``given`` (a product by one changes no bit)."""
    for j in range(n):
        work[j] = p[ga[8] + j * ga[7]] if given else 1
    return work


@cached_njit(**HELPER_JIT)
def _put_totals(p, ga, total, n):
    """The float64 column totals ``total[:n]`` cast into the 1-D operand at ``p``."""
    s, b = ga[7], ga[8]
    for j in range(n):
        p[b + j * s] = _of(p, total[j])


def _row_sum(row, n):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_row_sum, jit_options={"forceinline": True})
def _row_sum_of(row, n):
    """The float64 sum of ``row[:n]`` in the generated loops' order (`lowerings.norm`):
    a float32 row of 16 or more 16 lanes at a time, then the lanes and the rest."""
    if row.dtype == types.float32:
        def by_lanes(row, n):
            acc = 0.0
            start = 0
            if n >= LANES:
                start = n - n % LANES
                acc = lane_sum(row, start)
            for j in range(start, n):
                acc += np.float64(row[j])
            return acc

        return by_lanes

    def ordered(row, n):
        acc = 0.0
        for j in range(n):
            acc += row[j]
        return acc

    return ordered


@cached_njit(**HELPER_JIT)
def _row_max(xr, n):
    """The max of ``xr[:n]``, LANES at a time (`row_simd.lane_max`). The order of the
    compares is not the serial one, which changes nothing the softmax writes: without a
    nan every order gives the same max (up to the sign of a zero, which ``exp`` and the
    shifted row do not see but for a lone zero's sign), and a nan anywhere makes its row
    nan."""
    start = 0
    m = xr[0]
    if n >= LANES:
        start = n - n % LANES
        m = lane_max(xr, start)
    for j in range(start, n):
        v = xr[j]
        if v > m:
            m = v
    return m


def _softmax(px, pout, geo, eps):
    axis, flags = geo[2 * _AT], geo[2 * _AT + 1]
    at_x, at_o = geo, at(geo, _AT)
    n = at_x[axis]
    e0, e1, e2, x0, x1, x2 = _outer(at_x, axis)
    if n == 0 or e0 * e1 * e2 == 0:
        return
    _, _, _, o0, o1, o2 = _outer(at_o, axis)
    sx, so = at_x[4 + axis], at_o[4 + axis]
    xw, ow, e = alloc(pout, n), alloc(pout, n), alloc(pout, n)
    log = (flags & _LOG) != 0
    for i0 in range(e0):
        for i1 in range(e1):
            for i2 in range(e2):
                xr = _row_ptr(px, at_x[8] + i0 * x0 + i1 * x1 + i2 * x2, sx, n, xw)
                ob = at_o[8] + i0 * o0 + i1 * o1 + i2 * o2
                orow = at(pout, ob) if so == 1 else ow
                m = _row_max(xr, n)
                for j in range(n):
                    e[j] = _exp(xr[j] - m)
                s = _row_sum(e, n)
                if log:
                    t = _of(e, np.log(s))
                    for j in range(n):
                        orow[j] = (xr[j] - m) - t
                else:
                    t = _of(e, s)
                    for j in range(n):
                        orow[j] = e[j] / t
                if so != 1:
                    _scatter(pout, ob, so, n, orow)
    free(xw)
    free(ow)
    free(e)


def _softmax_backward(pg, py, pout, geo, eps):
    axis, flags = geo[3 * _AT], geo[3 * _AT + 1]
    at_g, at_y, at_o = geo, at(geo, _AT), at(geo, 2 * _AT)
    n = at_g[axis]
    e0, e1, e2, g0, g1, g2 = _outer(at_g, axis)
    if n == 0 or e0 * e1 * e2 == 0:
        return
    _, _, _, y0, y1, y2 = _outer(at_y, axis)
    _, _, _, o0, o1, o2 = _outer(at_o, axis)
    sg, sy, so = at_g[4 + axis], at_y[4 + axis], at_o[4 + axis]
    gw, yw, ow, e = alloc(pout, n), alloc(pout, n), alloc(pout, n), alloc(pout, n)
    log = (flags & _LOG) != 0
    for i0 in range(e0):
        for i1 in range(e1):
            for i2 in range(e2):
                gr = _row_ptr(pg, at_g[8] + i0 * g0 + i1 * g1 + i2 * g2, sg, n, gw)
                yr = _row_ptr(py, at_y[8] + i0 * y0 + i1 * y1 + i2 * y2, sy, n, yw)
                ob = at_o[8] + i0 * o0 + i1 * o1 + i2 * o2
                orow = at(pout, ob) if so == 1 else ow
                if log:
                    for j in range(n):
                        e[j] = gr[j]
                else:
                    for j in range(n):
                        e[j] = gr[j] * yr[j]
                t = _of(e, _row_sum(e, n))
                if log:
                    for j in range(n):
                        orow[j] = gr[j] - _exp(yr[j]) * t
                else:
                    for j in range(n):
                        orow[j] = yr[j] * (gr[j] - t)
                if so != 1:
                    _scatter(pout, ob, so, n, orow)
    free(gw)
    free(yw)
    free(ow)
    free(e)


@cached_njit(**HELPER_JIT)
def _stats(xr, n, row, eps):
    """A row's mean, ``1 / sqrt(var + eps)`` in the row's dtype and in float64, as the
    generated row loops make them (two passes: no cancellation when the mean is large
    against the spread); ``row`` is left holding the squared deviations. The row is
    contiguous (gathered when strided), so its sum reads it in place: the generated loops'
    copy into the work row changes no bit of it."""
    count = np.float64(n)
    mu = _of(row, _row_sum(xr, n) / count)
    for j in range(n):
        d = xr[j] - mu
        row[j] = d * d
    v = _row_sum(row, n)
    r64 = 1.0 / np.sqrt(v / count + eps)
    return mu, _of(row, r64), r64


def _layer_norm(px, pw, pb, pout, geo, eps):
    axis, flags = geo[4 * _AT], geo[4 * _AT + 1]
    at_x, at_o = geo, at(geo, 3 * _AT)
    n = at_x[axis]
    e0, e1, e2, x0, x1, x2 = _outer(at_x, axis)
    if n == 0 or e0 * e1 * e2 == 0:
        return
    _, _, _, o0, o1, o2 = _outer(at_o, axis)
    sx, so = at_x[4 + axis], at_o[4 + axis]
    xw, ow, row = alloc(pout, n), alloc(pout, n), alloc(pout, n)
    has_w, has_b = (flags & _WEIGHT) != 0, (flags & _BIAS) != 0
    w = _param(pw, at(geo, _AT), n, has_w, alloc(pout, n))
    b = _param(pb, at(geo, 2 * _AT), n, has_b, alloc(pout, n))
    for i0 in range(e0):
        for i1 in range(e1):
            for i2 in range(e2):
                xr = _row_ptr(px, at_x[8] + i0 * x0 + i1 * x1 + i2 * x2, sx, n, xw)
                ob = at_o[8] + i0 * o0 + i1 * o1 + i2 * o2
                orow = at(pout, ob) if so == 1 else ow
                mu, r, _ = _stats(xr, n, row, eps)
                # Without a weight ``w`` is ones: the product by it changes no bit. A bias
                # alone keeps its own loop (``x * r + b`` is one FMA in float32, the
                # product by one would round before the add).
                if has_w and has_b:
                    for j in range(n):
                        orow[j] = (xr[j] - mu) * r * w[j] + b[j]
                elif has_b:
                    for j in range(n):
                        orow[j] = (xr[j] - mu) * r + b[j]
                else:
                    for j in range(n):
                        orow[j] = (xr[j] - mu) * r * w[j]
                if so != 1:
                    _scatter(pout, ob, so, n, orow)
    free(xw)
    free(ow)
    free(row)
    free(w)
    free(b)


def _layer_norm_grads(pg, px, pw, pout, pdw, pdb, geo, eps):
    """The input gradient of rows of ``x`` into ``out``; with flags 8 also the weight's
    (``sum(g * xhat)`` over the rows) into ``dw``, with 16 the bias's (``sum(g)``) into
    ``db``, in the pass that reads each row for the input's (without either flag, the
    input gradient alone: layer_norm_backward). The columns' float64 totals take the
    rows in order, the additions of `_layer_norm_weight_grad` and of the generated sum
    loop, so the parameters' gradients are those of the separate ops bit for bit."""
    axis, flags = geo[6 * _AT], geo[6 * _AT + 1]
    at_g, at_x, at_o = geo, at(geo, _AT), at(geo, 3 * _AT)
    n = at_g[axis]
    e0, e1, e2, g0, g1, g2 = _outer(at_g, axis)
    if n == 0:
        return
    _, _, _, x0, x1, x2 = _outer(at_x, axis)
    _, _, _, o0, o1, o2 = _outer(at_o, axis)
    has_w = (flags & _WEIGHT) != 0
    want_w, want_b = (flags & _WEIGHT_GRAD) != 0, (flags & _BIAS_GRAD) != 0
    tw, tb = alloc(eps, n), alloc(eps, n)
    for j in range(n):
        tw[j] = 0.0
        tb[j] = 0.0
    sg, sx, so = at_g[4 + axis], at_x[4 + axis], at_o[4 + axis]
    gw, xw, ow = alloc(pout, n), alloc(pout, n), alloc(pout, n)
    row, a = alloc(pout, n), alloc(pout, n)
    count = np.float64(n)
    w = _param(pw, at(geo, 2 * _AT), n, has_w, alloc(pout, n))
    for i0 in range(e0):
        for i1 in range(e1):
            for i2 in range(e2):
                gr = _row_ptr(pg, at_g[8] + i0 * g0 + i1 * g1 + i2 * g2, sg, n, gw)
                xr = _row_ptr(px, at_x[8] + i0 * x0 + i1 * x1 + i2 * x2, sx, n, xw)
                ob = at_o[8] + i0 * o0 + i1 * o1 + i2 * o2
                orow = at(pout, ob) if so == 1 else ow
                # a = g * w; the row's statistics, then the sums of a and of
                # a * (x - mu).
                for j in range(n):
                    a[j] = gr[j] * w[j]
                mu, r, r64 = _stats(xr, n, row, eps)
                sa = _row_sum(a, n)
                for j in range(n):
                    row[j] = a[j] * (xr[j] - mu)
                sb = _row_sum(row, n)
                ma = _of(row, sa / count)
                c = _of(row, r64 * sb / count)  # mean(a * xhat)
                for j in range(n):
                    orow[j] = r * (a[j] - ma - (xr[j] - mu) * r * c)
                if want_w:
                    for j in range(n):
                        tw[j] += np.float64(gr[j] * ((xr[j] - mu) * r))
                if want_b:
                    for j in range(n):
                        tb[j] += np.float64(gr[j])
                if so != 1:
                    _scatter(pout, ob, so, n, orow)
    if want_w:
        _put_totals(pdw, at(geo, 4 * _AT), tw, n)
    if want_b:
        _put_totals(pdb, at(geo, 5 * _AT), tb, n)
    free(tw)
    free(tb)
    free(gw)
    free(xw)
    free(ow)
    free(row)
    free(a)
    free(w)


def _layer_norm_weight_grad(pg, px, pout, geo, eps):
    axis = geo[3 * _AT]
    at_g, at_x = geo, at(geo, _AT)
    n = at_g[axis]
    if n == 0:
        return
    e0, e1, e2, g0, g1, g2 = _outer(at_g, axis)
    _, _, _, x0, x1, x2 = _outer(at_x, axis)
    total = alloc(eps, n)
    for j in range(n):
        total[j] = 0.0
    sg, sx = at_g[4 + axis], at_x[4 + axis]
    gw, xw, row = alloc(pout, n), alloc(pout, n), alloc(pout, n)
    for i0 in range(e0):
        for i1 in range(e1):
            for i2 in range(e2):
                gr = _row_ptr(pg, at_g[8] + i0 * g0 + i1 * g1 + i2 * g2, sg, n, gw)
                xr = _row_ptr(px, at_x[8] + i0 * x0 + i1 * x1 + i2 * x2, sx, n, xw)
                mu, r, _ = _stats(xr, n, row, eps)
                for j in range(n):
                    total[j] += np.float64(gr[j] * ((xr[j] - mu) * r))
    _put_totals(pout, at(geo, 2 * _AT), total, n)
    free(total)
    free(gw)
    free(xw)
    free(row)


def _column_sum(pg, pout, geo, eps):  # noqa: ARG001 - every routine takes eps
    """``sum(g)`` over every row along the last axis (every index of the first three)
    into the 1-D ``out``: each column's float64 total takes the rows in order, as the
    generated reduction loops add them (`lowerings.norm.column_sums`), then is cast.
    The geometry is read in place, with no helper: a program whose one row routine this
    is (a classifier's bias gradients) builds nothing else of the family."""
    n = geo[3]
    if n == 0:
        return
    sg = geo[7]
    total = alloc(eps, n)
    for j in range(n):
        total[j] = 0.0
    for i0 in range(geo[0]):
        for i1 in range(geo[1]):
            for i2 in range(geo[2]):
                base = geo[8] + i0 * geo[4] + i1 * geo[5] + i2 * geo[6]
                if sg == 1:
                    for j in range(n):
                        total[j] += np.float64(pg[base + j])
                else:
                    for j in range(n):
                        total[j] += np.float64(pg[base + j * sg])
    so, bo = geo[_AT + 7], geo[_AT + 8]
    for j in range(n):
        pout[bo + j * so] = total[j]
    free(total)


def _routine(kind: str, dtype: Any) -> Any:
    """The C function of row routine ``kind`` for the Numba float type ``dtype``."""
    p, g, f8 = types.CPointer(dtype), types.CPointer(types.int64), types.float64
    # float32 contracts ``a * b + c`` to an FMA as a float32 kernel does
    # (`float32_only`), so the call and the loops written into a kernel round alike;
    # float64 keeps NumPy's rounding. Each dtype has its own signature, so the two
    # builds are two entries of Numba's disk cache. The row function is the C function
    # itself (not inlined into an entry: Numba's inlining copies the function's IR, a
    # tenth of the build).
    fast = {"fastmath": {"contract"}} if dtype == types.float32 else {}
    body, arity = _KINDS[kind]
    return ROUTINES.cfunc(body, types.void(*([p] * arity), g, f8), error_model="numpy",
                          **fast)


# Each routine's row function and number of array operands.
_KINDS = {"softmax": (_softmax, 2), "softmax_backward": (_softmax_backward, 3),
          "layer_norm": (_layer_norm, 4), "layer_norm_grads": (_layer_norm_grads, 6),
          "layer_norm_weight_grad": (_layer_norm_weight_grad, 3),
          "column_sum": (_column_sum, 2)}
# layer_norm's input gradient alone is layer_norm_grads with neither parameter's flag
# (the same code): one unit for the two calls.
ROUTINES = Routines("row", _KINDS, _routine, aliases={"layer_norm_backward": "layer_norm_grads"},
                    inlines=("dualgraph.backend.numba.raw",
                             "dualgraph.backend.numba.row_simd",
                             "dualgraph.backend.numba.kernels"))


def need(dtype: str, kind: str | None = None) -> None:
    """Compile (or load from Numba's disk cache) row routine ``kind`` (None: all of them)
    for ``dtype`` and register its symbol, once per process (`library.Routines.need`)."""
    ROUTINES.need(dtype, kind)


def _call(kind: str, arrays: tuple, axis: Any, flags: Any, eps: Any,
          operands: tuple | None = None) -> Any:
    """The typing and code of a call of the C function ``kind``: each operand's pointer
    to the lowest address it spans and its geometry (`_AT`), then ``axis`` and ``flags``,
    then ``eps``; None when the arrays are not float32 or float64 arrays of one dtype of
    at most 4 dims. ``operands``: the arrays the function takes, by position (default:
    each once, in order)."""
    dtype = arrays[0].dtype
    if not (all(isinstance(a, types.Array) and a.ndim <= 4 and a.dtype == dtype
                for a in arrays) and dtype in (types.float32, types.float64)
            and isinstance(axis, types.Integer) and isinstance(flags, types.Integer)
            and isinstance(eps, (types.Float, types.Integer))):
        return None
    need(str(dtype), kind)
    name = ROUTINES.symbol(kind, str(dtype))

    order = tuple(range(len(arrays))) if operands is None else operands
    m = len(arrays)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        zero, one = ir.Constant(i64, 0), ir.Constant(i64, 1)
        n = len(order)
        geo = cgutils.alloca_once(builder, i64, size=_AT * n + 2)

        def put(k, v):
            builder.store(v, builder.gep(geo, [ir.Constant(i64, k)]))

        fl = context.get_value_type(dtype).as_pointer()
        size = ir.Constant(i64, context.get_abi_sizeof(context.get_value_type(dtype)))
        ptrs = []
        for a, (ty, val) in enumerate((arrays[i], args[i]) for i in order):
            ary = context.make_array(ty)(context, builder, val)
            shape = cgutils.unpack_tuple(builder, ary.shape, ty.ndim)
            strides = cgutils.unpack_tuple(builder, ary.strides, ty.ndim)
            pad = 4 - ty.ndim
            origin = zero
            for d in range(4):
                if d < pad:
                    put(a * _AT + d, one)
                    put(a * _AT + 4 + d, zero)
                    continue
                e, s = shape[d - pad], builder.sdiv(strides[d - pad], size)
                put(a * _AT + d, e)
                put(a * _AT + 4 + d, s)
                # A negative stride puts the lowest address (e - 1) * |s| before element 0.
                back = builder.mul(builder.sub(e, one), builder.neg(s))
                neg = builder.icmp_signed("<", s, zero)
                full = builder.icmp_signed(">", e, zero)
                origin = builder.add(origin, builder.select(builder.and_(neg, full), back,
                                                            zero))
            put(a * _AT + 8, origin)
            ptrs.append(builder.gep(builder.bitcast(ary.data, fl), [builder.neg(origin)]))
        put(_AT * n, context.cast(builder, args[m], signature.args[m], types.int64))
        put(_AT * n + 1, context.cast(builder, args[m + 1], signature.args[m + 1],
                                      types.int64))
        e = context.cast(builder, args[m + 2], signature.args[m + 2], types.float64)
        fnty = ir.FunctionType(ir.VoidType(), [fl] * n + [i64.as_pointer(), ir.DoubleType()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, ptrs + [geo, e])
        return context.get_dummy_value()

    return types.void(*arrays, axis, flags, eps), codegen


@intrinsic
def row_softmax(typingctx, x, out, axis, flags, eps):
    """softmax (flags 1: log_softmax) of ``x`` along ``axis`` (of its 4-D padding) into
    ``out``; ``eps`` is not read."""
    return _call("softmax", (x, out), axis, flags, eps)


@intrinsic
def row_softmax_backward(typingctx, g, y, out, axis, flags, eps):
    """softmax's (flags 1: log_softmax's) gradient from ``g`` and the output ``y`` into
    ``out``; ``eps`` is not read."""
    return _call("softmax_backward", (g, y, out), axis, flags, eps)


@intrinsic
def row_layer_norm(typingctx, x, w, b, out, axis, flags, eps):
    """layer_norm of the rows of ``x`` along ``axis`` into ``out``; flags 2: ``w`` is the
    weight, 4: ``b`` is the bias (an absent one is any array of the dtype, not read)."""
    return _call("layer_norm", (x, w, b, out), axis, flags, eps)


@intrinsic
def row_layer_norm_backward(typingctx, g, x, w, out, axis, flags, eps):
    """layer_norm's input gradient into ``out`` (flags 2: ``w`` is the weight): the
    routine of `row_layer_norm_grads` with ``out`` for the parameters' gradients, which
    it does not write without their flags."""
    return _call("layer_norm_grads", (g, x, w, out), axis, flags, eps, (0, 1, 2, 3, 3, 3))


@intrinsic
def row_layer_norm_grads(typingctx, g, x, w, out, dw, db, axis, flags, eps):
    """layer_norm's input gradient into ``out`` (flags 2: ``w`` is the weight) and, in the
    same pass over the rows, flags 8: the weight's gradient into the 1-D ``dw``, flags 16:
    the bias's into the 1-D ``db`` (an absent one is any array of the dtype, not
    written)."""
    return _call("layer_norm_grads", (g, x, w, out, dw, db), axis, flags, eps)


@intrinsic
def row_layer_norm_weight_grad(typingctx, g, x, out, axis, flags, eps):
    """layer_norm's weight gradient ``sum(g * xhat)`` over the rows into the 1-D
    ``out``."""
    return _call("layer_norm_weight_grad", (g, x, out), axis, flags, eps)


@intrinsic
def row_column_sum(typingctx, g, out, axis, flags, eps):
    """``sum(g)`` over the rows along ``axis`` into the 1-D ``out`` (a bias's gradient);
    ``axis`` is the literal 3 (rows along the last axis of the 4-D padding), ``flags``
    and ``eps`` are not read."""
    if not isinstance(axis, types.IntegerLiteral):
        return None  # Numba types the call again with the literal
    if axis.literal_value != 3:
        raise TypeError(f"row_column_sum sums rows along axis 3, not {axis.literal_value}")
    return _call("column_sum", (g, out), axis, flags, eps)


# The names generated code calls, one per dtype (`cache.module_source` registers the C
# functions a kernel's module names).
row_softmax_float32 = row_softmax_float64 = row_softmax
row_softmax_backward_float32 = row_softmax_backward_float64 = row_softmax_backward
row_layer_norm_float32 = row_layer_norm_float64 = row_layer_norm
row_layer_norm_backward_float32 = row_layer_norm_backward_float64 = row_layer_norm_backward
row_layer_norm_grads_float32 = row_layer_norm_grads_float64 = row_layer_norm_grads
row_layer_norm_weight_grad_float32 = row_layer_norm_weight_grad_float64 = \
    row_layer_norm_weight_grad
row_column_sum_float32 = row_column_sum_float64 = row_column_sum
