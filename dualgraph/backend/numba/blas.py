"""Matrix products in generated kernels through NumPy's own BLAS.

``np.dot`` inside an njit function calls the BLAS that SciPy ships (``scipy.linalg.
cython_blas``). NumPy's wheel ships its own, usually newer, OpenBLAS; measured here on the
MLP's two large float32 GEMMs (64x784 @ 784x256 and 256x64 @ 64x784), SciPy's takes ~400 us
each where NumPy's takes ~330 us, and together they are most of a training step. So when
NumPy's ``cblas_?gemm`` can be found, kernels call it directly (and can fold a bias into the
product with ``beta=1``, which ``np.dot`` cannot); otherwise they fall back to ``np.dot``.

The call goes through an external symbol (``dualgraph_sgemm`` / ``dualgraph_dgemm``) that
is registered with LLVM when this module is imported, not through a ctypes pointer baked
into the code: Numba can then cache the kernels on disk, and a cached kernel links to
whatever address the symbol has in the process that loads it. ``BACKEND`` is part of every
generated module's header, so kernels built for one backend are never loaded under another.
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic, overload

# cblas enum values
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def numpy_openblas(patterns: list[tuple[str, int]], keys: str | tuple) -> tuple[dict, int] | None:
    """The addresses of ``pattern.format(key)`` for every key, from the OpenBLAS bundled
    with NumPy (the first library and the first pattern that has them all), and that
    pattern's integer width; or ``None``."""
    root = os.path.dirname(os.path.dirname(np.__file__))
    libs = sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*")))
    libs += sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas*")))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)  # already loaded by NumPy: this only finds its handle
        except OSError:
            continue
        for pattern, width in patterns:
            try:
                found = {k: getattr(lib, pattern.format(k)) for k in keys}
            except AttributeError:
                continue
            return {k: ctypes.cast(fn, ctypes.c_void_p).value for k, fn in found.items()}, width
    return None


def _find_numpy_gemm() -> tuple[int, int, int] | None:
    """Addresses of NumPy's ``cblas_sgemm`` and ``cblas_dgemm`` and their integer width, or
    ``None``. NumPy >= 2 wheels bundle ``scipy_openblas64_`` (ILP64, ``64_`` suffix)."""
    if os.environ.get("DUALGRAPH_BLAS", "") == "numba":  # opt out: np.dot everywhere
        return None
    hit = numpy_openblas([("scipy_cblas_{}gemm64_", 64), ("cblas_{}gemm64_", 64),
                          ("scipy_cblas_{}gemm", 32), ("cblas_{}gemm", 32)], "sd")
    if hit is None:
        return None
    found, width = hit
    return found["s"], found["d"], width


_FOUND = _find_numpy_gemm()
if _FOUND is not None:
    llvm.add_symbol("dualgraph_sgemm", _FOUND[0])
    llvm.add_symbol("dualgraph_dgemm", _FOUND[1])
    BACKEND = f"numpy-cblas{_FOUND[2]}"
    _INT = ir.IntType(_FOUND[2])
else:
    BACKEND = "np.dot"
    _INT = ir.IntType(64)


def _emit_gemm(context, builder, dtype, ta, tb, m, n, k, pa, lda, pb, ldb, beta, pc, ldc):
    """The call ``cblas_?gemm(RowMajor, ta, tb, m, n, k, 1, pa, lda, pb, ldb, beta, pc,
    ldc)`` in LLVM: ``pa``/``pb``/``pc`` are i8 pointers to the first elements, ``beta``
    is already of ``dtype``, the rest are LLVM integers."""
    fl = ir.FloatType() if dtype == types.float32 else ir.DoubleType()
    i32 = ir.IntType(32)
    ptr = ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, _INT, _INT, _INT, fl, ptr, _INT,
                                           ptr, _INT, fl, ptr, _INT])
    name = "dualgraph_sgemm" if dtype == types.float32 else "dualgraph_dgemm"
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)

    def integer(v):
        return builder.trunc(v, _INT) if _INT.width < 64 else v

    builder.call(fn, [
        ir.Constant(i32, _ROW_MAJOR), builder.trunc(ta, i32), builder.trunc(tb, i32),
        integer(m), integer(n), integer(k), ir.Constant(fl, 1.0), pa, integer(lda), pb,
        integer(ldb), beta, pc, integer(ldc)])


@intrinsic
def _gemm_call(typingctx, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc):
    """cblas_?gemm(RowMajor, ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, ldc): a, b, c
    are arrays (pointers to their first element), the rest integers; beta a float."""
    dtype = c.dtype
    sig = types.void(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        ta_, tb_, m_, n_, k_, a_, lda_, b_, ldb_, beta_, c_, ldc_ = args
        ptr = ir.IntType(8).as_pointer()

        def data(arr, ty):
            ary = context.make_array(ty)(context, builder, arr)
            return builder.bitcast(ary.data, ptr)

        s = signature.args
        beta_v = context.cast(builder, beta_, s[9], s[10].dtype)
        _emit_gemm(context, builder, dtype, ta_, tb_, m_, n_, k_, data(a_, s[5]), lda_,
                   data(b_, s[7]), ldb_, beta_v, data(c_, s[10]), ldc_)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _gemm_at(typingctx, ta, tb, m, n, k, a, ia, lda, b, ib, ldb, beta, c, ic, ldc):
    """`_gemm_call` with each matrix starting ``ia``/``ib``/``ic`` elements into its
    array's memory (an item of a batch), whatever the array's shape and strides."""
    sig = types.void(ta, tb, m, n, k, a, ia, lda, b, ib, ldb, beta, c, ic, ldc)

    def codegen(context, builder, signature, args):
        ta_, tb_, m_, n_, k_, a_, ia_, lda_, b_, ib_, ldb_, beta_, c_, ic_, ldc_ = args
        dtype = signature.args[12].dtype
        ptr = ir.IntType(8).as_pointer()

        def data(arr, ty, off, offty):
            ary = context.make_array(ty)(context, builder, arr)
            off = context.cast(builder, off, offty, types.intp)
            return builder.bitcast(builder.gep(ary.data, [off]), ptr)

        s = signature.args
        beta_v = context.cast(builder, beta_, s[11], dtype)
        _emit_gemm(context, builder, dtype, ta_, tb_, m_, n_, k_, data(a_, s[5], ia_, s[6]),
                   lda_, data(b_, s[8], ib_, s[9]), ldb_, beta_v, data(c_, s[12], ic_, s[13]),
                   ldc_)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True)
def _operand(x):
    """(array, transpose flag, leading dimension) for a row-major BLAS operand: a C-ordered
    matrix as is, an F-ordered one (a transposed view) as its transpose, else a copy.

    Called, not inlined into the kernel: inlined, its copy path cost Numba about 0.4 s of
    compile per strided operand (a batched product's item views: 0.8 s per product,
    against 0.2 s called, same process); the call costs nothing beside the product."""
    if x.strides[1] == x.itemsize and x.strides[0] >= max(x.shape[1], 1) * x.itemsize:
        return x, _NO_TRANS, x.strides[0] // x.itemsize
    if x.strides[0] == x.itemsize and x.strides[1] >= max(x.shape[0], 1) * x.itemsize:
        return x, _TRANS, x.strides[1] // x.itemsize
    c = np.ascontiguousarray(x)
    return c, _NO_TRANS, max(c.shape[1], 1)


def _find_thread_control() -> tuple | None:
    """``(get, set)`` of the thread count of NumPy's OpenBLAS (ctypes functions), or
    ``None``."""
    hit = numpy_openblas([("scipy_openblas_{}_num_threads64_", 64),
                          ("openblas_{}_num_threads64_", 64),
                          ("scipy_openblas_{}_num_threads", 32),
                          ("openblas_{}_num_threads", 32)], ("get", "set"))
    if hit is None:
        return None
    found, _ = hit
    get = ctypes.CFUNCTYPE(ctypes.c_int)(found["get"])
    put = ctypes.CFUNCTYPE(None, ctypes.c_int)(found["set"])
    return get, put


_THREADS = _find_thread_control()


def run_single_threaded(fn: Any) -> Any:
    """``fn(*args)`` with NumPy's OpenBLAS on one thread for the call (a parallel kernel:
    `blas_parallel` spreads its products over Numba's threads instead), then as before;
    ``fn`` itself when the thread count cannot be set."""
    if _THREADS is None:
        return fn
    get, put = _THREADS

    def run(*args: Any) -> Any:
        before = get()
        if before == 1:
            return fn(*args)
        put(1)
        try:
            return fn(*args)
        finally:
            put(before)
    return run


def _gemm_blas(a, b, c, beta):
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return c
    if k == 0:
        if beta == 0:
            c[:] = 0
        return c
    aa, ta, lda = _operand(a)
    bb, tb, ldb = _operand(b)
    _gemm_call(ta, tb, m, n, k, aa, lda, bb, ldb, beta, c, n)
    return c


def _gemm_dot(a, b, c, beta):
    if beta == 0:
        np.dot(a, b, c)
    else:
        c += np.dot(a, b)
    return c


# ``c = a @ b + beta * c`` for 2-D float arrays (``beta`` 0 or 1; ``c`` C-ordered), in
# generated code ``dgb.gemm``.
gemm = numba.njit(inline="always", cache=True)(_gemm_blas if _FOUND is not None else _gemm_dot)


def operand(x):  # noqa: ARG001 - typed by the overload below
    """``(array, cblas transpose flag, leading dimension)`` of a row-major BLAS operand."""
    raise NotImplementedError("dgb.operand is only callable from generated kernels")


@overload(operand)
def _operand_by_layout(x):
    """Chosen when the kernel is typed, by the operand's layout: a C-ordered matrix goes as
    it is, an F-ordered one (a transposed view) as its transpose; only an 'A' array (a
    strided view) is checked at run time, and copied when BLAS cannot read it.

    Generated code calls this and `gemm_call` itself: the old ``gemm`` helper, inlined
    into each call site, cost Numba ~0.3 s of compile per matrix product; this costs
    ~30 ms (measured on the MLP step, 5 products)."""
    if x.layout == "C":
        return lambda x: (x, _NO_TRANS, max(x.shape[1], 1))
    if x.layout == "F":
        return lambda x: (x, _TRANS, max(x.shape[0], 1))

    return lambda x: _operand(x)


# ``gemm_call(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)``: cblas_?gemm in generated
# code, after `operand` (NumPy's BLAS only: HAVE_CBLAS).
gemm_call = _gemm_call
HAVE_CBLAS = _FOUND is not None


@numba.njit(cache=True)
def _layout(x, rows, cols):
    """(array, cblas transpose flag, leading dimension) for the matrices in the last two
    axes of ``x`` (``rows`` x ``cols``): read in place when every item is row-major or
    every item column-major (a transposed view), else ``x`` copied C-ordered once."""
    size = x.itemsize
    s0, s1 = x.strides[x.ndim - 2], x.strides[x.ndim - 1]
    if (s1 == size or cols <= 1) and s0 % size == 0 and s0 >= max(cols, 1) * size:
        return x, _NO_TRANS, s0 // size
    if (s0 == size or rows <= 1) and s1 % size == 0 and s1 >= max(rows, 1) * size:
        return x, _TRANS, s1 // size
    c = np.ascontiguousarray(x)
    return c, _NO_TRANS, max(cols, 1)


@numba.njit(cache=True)
def _item_offset(x, t, shape):
    """Element offset of batch item ``t`` (numbered over the result's batch ``shape``) in
    ``x``, whose batch axes align with the trailing ones of ``shape``; an axis of size
    1 is broadcast (read at 0)."""
    nb = x.ndim - 2
    lead = len(shape) - nb
    off = 0
    for d in range(len(shape) - 1, -1, -1):
        i = t % shape[d]
        t //= shape[d]
        if d >= lead and x.shape[d - lead] != 1:
            off += i * (x.strides[d - lead] // x.itemsize)
    return off


@numba.njit(cache=True)
def gemm_batched(x, y, c):
    """``c[...] = x @ y`` for batched float operands (each with its own batch axes,
    aligned to the right, a size-1 axis broadcast; ``c`` C-ordered): one BLAS call per
    item on the operands' memory, each operand's layout decided once for the whole batch
    (in generated code ``dgb.gemm_batched``; NumPy's BLAS only: HAVE_CBLAS)."""
    m, k = x.shape[-2], x.shape[-1]
    n = y.shape[-1]
    batch = c.shape[:-2]
    count = c.size // max(m * n, 1)
    if m == 0 or n == 0 or count == 0:
        return
    if k == 0:
        c.reshape(c.size)[:] = 0
        return
    xa, tx, lx = _layout(x, m, k)
    ya, ty, ly = _layout(y, k, n)
    for t in range(count):
        _gemm_at(tx, ty, m, n, k, xa, _item_offset(xa, t, batch), lx,
                 ya, _item_offset(ya, t, batch), ly, 0.0, c, t * m * n, n)




# ---- max pooling loops
# Generated kernels call these once per op instead of carrying their loop nests: each is
# compiled once per process and argument types (and kept in Numba's disk cache). The
# window geometry comes in a small int64 array (a kernel constant), not as integer
# arguments: Numba compiles a function called with literal integers once per distinct
# value.


@numba.njit(cache=True, nogil=True, error_model="numpy")
def max_pool_indices(x, out, geo):
    """Each window's first largest value's flat position in its plane, for windows that
    all lie inside the plane: ``x`` (B, H, W), ``out`` (B, oH, oW); window (i, j) reads
    rows ``h0 + i*sh + a*dh`` (a < kh) and columns ``w0 + j*sw + b*dw`` (b < kw), ``geo``
    = (h0, sh, kh, dh, w0, sw, kw, dw). A larger value or any nan takes over (PyTorch's
    rule: ties keep the first max, the last nan wins)."""
    h0, sh, kh, dh, w0, sw, kw, dw = (geo[0], geo[1], geo[2], geo[3], geo[4], geo[5],
                                      geo[6], geo[7])
    width = x.shape[2]
    if kh == 2 and kw == 2 and dh == 1 and dw == 1:
        # 2x2 windows (MaxPool2d(2) and its overlapping kin): the four reads unrolled.
        for n in range(x.shape[0]):
            for i in range(out.shape[1]):
                p0 = h0 + i * sh
                r0, r1 = x[n, p0], x[n, p0 + 1]
                for j in range(out.shape[2]):
                    q0 = w0 + j * sw
                    v = r0[q0]
                    k = p0 * width + q0
                    e = r0[q0 + 1]
                    if e > v or e != e:
                        v = e
                        k = p0 * width + q0 + 1
                    e = r1[q0]
                    if e > v or e != e:
                        v = e
                        k = (p0 + 1) * width + q0
                    e = r1[q0 + 1]
                    if e > v or e != e:
                        k = (p0 + 1) * width + q0 + 1
                    out[n, i, j] = k
        return
    for n in range(x.shape[0]):
        for i in range(out.shape[1]):
            p0 = h0 + i * sh
            for j in range(out.shape[2]):
                q0 = w0 + j * sw
                v = x[n, p0, q0]
                k = p0 * width + q0
                for a in range(kh):
                    p = p0 + a * dh
                    for b in range(kw):
                        q = q0 + b * dw
                        e = x[n, p, q]
                        if e > v or e != e:
                            v = e
                            k = p * width + q
                out[n, i, j] = k


@numba.njit(cache=True, nogil=True, error_model="numpy")
def pool_gather(x, idx, out):
    """``out[b, m] = x[b, idx[b, m]]`` (``idx`` with one row: the same for every b)."""
    per_row = idx.shape[0] > 1
    for n in range(out.shape[0]):
        t = n if per_row else 0
        for m in range(out.shape[1]):
            out[n, m] = x[n, idx[t, m]]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def pool_scatter(g, idx, out):
    """The transpose of `pool_gather`: ``out`` (B, P) zeros, then ``g[b, m]`` added at
    ``out[b, idx[b, m]]``."""
    per_row = idx.shape[0] > 1
    for n in range(out.shape[0]):
        for p in range(out.shape[1]):
            out[n, p] = 0
        t = n if per_row else 0
        for m in range(g.shape[1]):
            out[n, idx[t, m]] += g[n, m]
