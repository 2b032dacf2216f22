"""Training batch norm's routines (its statistics, forward, input gradient and parameter
gradients) as C functions compiled once per installation and dtype.

Each takes its operands' data pointers, the input's extents viewed as ``(N, C, L)``
(``L`` the product of the dims after the channel dim), flags and ``eps``: the channel
count is an argument, so a network's layers of every width call the same function, and a
kernel's cold compile holds one call line per op instead of loops generated for each
channel count. Operands are C-ordered (the lowering views them as ``(N, C, L)``,
`lowerings.batch_norm`); per-channel operands are 1-D of ``C`` elements, and a pair of
per-channel results is one ``(2, C)`` array.

The arithmetic is that of the generated reduction loops: each channel's sums are float64,
taken in order (sample by sample, then along ``L``), the mean rounded to the dtype, then
the squared deviations (of the dtype) summed; ``1 / sqrt(var + eps)`` in float64, then
rounded to the dtype.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .cache_key import cached_njit
from .library import Routines
from .row_kernels import _of

_WEIGHT, _BIAS = 2, 4


@cached_njit(inline="always", nogil=True, error_model="numpy")
def _moments(x, c, nn, cc, ll, eps):
    """Channel ``c``'s mean (the dtype), ``1 / sqrt(var + eps)`` in the dtype and in
    float64, and the biased variance (float64)."""
    count = np.float64(nn * ll)
    s = 0.0
    for i in range(nn):
        base = (i * cc + c) * ll
        for j in range(ll):
            s += np.float64(x[base + j])
    mu = _of(x, s / count)
    v = 0.0
    for i in range(nn):
        base = (i * cc + c) * ll
        for j in range(ll):
            d = x[base + j] - mu
            v += np.float64(d * d)
    var = v / count
    r64 = 1.0 / np.sqrt(var + eps)
    return mu, _of(x, r64), r64, var


@cached_njit(inline="always", nogil=True, error_model="numpy")
def _stats(x, out, nn, cc, ll):
    for c in range(cc):
        mu, _, _, var = _moments(x, c, nn, cc, ll, 0.0)
        out[c] = mu
        out[cc + c] = _of(out, var)


@cached_njit(inline="always", nogil=True, error_model="numpy")
def _norm(x, w, b, out, nn, cc, ll, flags, eps):
    has_w, has_b = (flags & _WEIGHT) != 0, (flags & _BIAS) != 0
    for c in range(cc):
        mu, r, _, _ = _moments(x, c, nn, cc, ll, eps)
        # (x - mu) * r, then times the weight and plus the bias, as the ops' loops do.
        wc = w[c] if has_w else _of(out, 1.0)
        bc = b[c] if has_b else _of(out, 0.0)
        for i in range(nn):
            base = (i * cc + c) * ll
            for j in range(ll):
                v = (x[base + j] - mu) * r
                if has_w:
                    v = v * wc
                if has_b:
                    v = v + bc
                out[base + j] = v


@cached_njit(inline="always", nogil=True, error_model="numpy")
def _backward(g, x, w, out, nn, cc, ll, flags, eps):
    """``r * (a - mean(a) - xhat * mean(a * xhat))`` per channel, ``a = g * w``."""
    has_w = (flags & _WEIGHT) != 0
    count = np.float64(nn * ll)
    for c in range(cc):
        mu, r, r64, _ = _moments(x, c, nn, cc, ll, eps)
        wc = w[c] if has_w else _of(out, 1.0)
        sa = 0.0
        sb = 0.0
        for i in range(nn):
            base = (i * cc + c) * ll
            for j in range(ll):
                a = g[base + j] * wc if has_w else g[base + j]
                sa += np.float64(a)
                sb += np.float64(a * (x[base + j] - mu))
        ma = _of(out, sa / count)
        k = _of(out, r64 * sb / count)  # mean(a * xhat)
        for i in range(nn):
            base = (i * cc + c) * ll
            for j in range(ll):
                a = g[base + j] * wc if has_w else g[base + j]
                out[base + j] = r * (a - ma - (x[base + j] - mu) * r * k)


@cached_njit(inline="always", nogil=True, error_model="numpy")
def _param_grads(g, x, out, nn, cc, ll, eps):
    """``sum(g * xhat)`` into ``out[0]`` and ``sum(g)`` into ``out[1]`` per channel."""
    for c in range(cc):
        mu, r, _, _ = _moments(x, c, nn, cc, ll, eps)
        tw = 0.0
        tb = 0.0
        for i in range(nn):
            base = (i * cc + c) * ll
            for j in range(ll):
                tw += np.float64(g[base + j] * ((x[base + j] - mu) * r))
                tb += np.float64(g[base + j])
        out[c] = _of(out, tw)
        out[cc + c] = _of(out, tb)


# Each routine's number of array operands (the input first, the result last).
_ARITY = {"stats": 2, "norm": 4, "backward": 4, "param_grads": 3}


def _routine(kind: str, dtype: Any) -> Any:
    """The C function of routine ``kind`` for the Numba float type ``dtype``."""
    p, i8, f8 = types.CPointer(dtype), types.int64, types.float64

    # Each entry views its pointers as flat arrays of the extents it is given and calls
    # its inlined body; the entries name no closure variable (whose hash would differ in
    # every process and miss Numba's disk cache).
    if kind == "stats":
        def entry(px, pout, nn, cc, ll, flags, eps):
            size = nn * cc * ll
            _stats(numba.carray(px, (size,)), numba.carray(pout, (2 * cc,)), nn, cc, ll)
    elif kind == "norm":
        def entry(px, pw, pb, pout, nn, cc, ll, flags, eps):
            size = nn * cc * ll
            _norm(numba.carray(px, (size,)), numba.carray(pw, (cc,)),
                  numba.carray(pb, (cc,)), numba.carray(pout, (size,)), nn, cc, ll, flags,
                  eps)
    elif kind == "backward":
        def entry(pg, px, pw, pout, nn, cc, ll, flags, eps):
            size = nn * cc * ll
            _backward(numba.carray(pg, (size,)), numba.carray(px, (size,)),
                      numba.carray(pw, (cc,)), numba.carray(pout, (size,)), nn, cc, ll,
                      flags, eps)
    else:
        def entry(pg, px, pout, nn, cc, ll, flags, eps):
            size = nn * cc * ll
            _param_grads(numba.carray(pg, (size,)), numba.carray(px, (size,)),
                         numba.carray(pout, (2 * cc,)), nn, cc, ll, eps)

    # float32 contracts ``a * b + c`` as a float32 kernel does (`row_kernels`).
    fast = {"fastmath": {"contract"}} if dtype == types.float32 else {}
    opts = {"cache": True, "nopython": True, "error_model": "numpy", **fast}
    return numba.cfunc(types.void(*([p] * _ARITY[kind]), i8, i8, i8, i8, f8), **opts)(entry)


ROUTINES = Routines("chan", _ARITY, _routine)


def _call(kind: str, arrays: tuple, flags: Any, eps: Any) -> Any:
    """The typing and code of a call of routine ``kind``: each array's data pointer, the
    first array's extents as (N, C, L), then ``flags`` and ``eps``; None unless the
    arrays are C-ordered float32 or float64 arrays of one dtype, the first 3-D."""
    dtype = arrays[0].dtype
    if not (all(isinstance(a, types.Array) and a.layout == "C" and a.dtype == dtype
                for a in arrays) and arrays[0].ndim == 3
            and dtype in (types.float32, types.float64)
            and isinstance(flags, types.Integer)
            and isinstance(eps, (types.Float, types.Integer))):
        return None
    ROUTINES.need(str(dtype), kind)
    name = ROUTINES.symbol(kind, str(dtype))

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fl = context.get_value_type(dtype).as_pointer()
        n = len(arrays)
        ptrs = [builder.bitcast(context.make_array(ty)(context, builder, val).data, fl)
                for ty, val in zip(arrays, args)]
        first = context.make_array(arrays[0])(context, builder, args[0])
        extents = cgutils.unpack_tuple(builder, first.shape, 3)
        flag = context.cast(builder, args[n], signature.args[n], types.int64)
        e = context.cast(builder, args[n + 1], signature.args[n + 1], types.float64)
        fnty = ir.FunctionType(ir.VoidType(), [fl] * n + [i64] * 4 + [ir.DoubleType()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, ptrs + list(extents) + [flag, e])
        return context.get_dummy_value()

    return types.void(*arrays, flags, eps), codegen


@intrinsic
def chan_stats(typingctx, x, out, flags, eps):
    """Each channel's mean and biased variance of ``x`` (N, C, L) into ``out`` (2, C)."""
    return _call("stats", (x, out), flags, eps)


@intrinsic
def chan_norm(typingctx, x, w, b, out, flags, eps):
    """Batch norm of ``x`` (N, C, L) into ``out``; flags 2: ``w`` is the weight, 4: ``b``
    the bias (an absent one is any array of the dtype, not read)."""
    return _call("norm", (x, w, b, out), flags, eps)


@intrinsic
def chan_backward(typingctx, g, x, w, out, flags, eps):
    """Batch norm's input gradient into ``out`` (flags 2: ``w`` is the weight)."""
    return _call("backward", (g, x, w, out), flags, eps)


@intrinsic
def chan_param_grads(typingctx, g, x, out, flags, eps):
    """Batch norm's weight gradient ``sum(g * xhat)`` and bias gradient ``sum(g)`` per
    channel into the rows of ``out`` (2, C)."""
    return _call("param_grads", (g, x, out), flags, eps)


# The names generated code calls, one per dtype (`library.needed_lines` registers the C
# functions a kernel's module names).
chan_stats_float32 = chan_stats_float64 = chan_stats
chan_norm_float32 = chan_norm_float64 = chan_norm
chan_backward_float32 = chan_backward_float64 = chan_backward
chan_param_grads_float32 = chan_param_grads_float64 = chan_param_grads
