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
from typing import Any

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic, overload

from ...eager.openblas import numpy_cblas, numpy_openblas
from ..kir import Gemm, LibCall, walk
from .cache_key import cached_njit
from .library import HELPER_JIT, Routines
from .raw import alloc as _alloc
from .raw import at as _at
from .raw import free as _free
from .raw import zero as _zero

# cblas enum values
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _find_numpy_gemm() -> tuple[int, int, int] | None:
    """Addresses of NumPy's ``cblas_sgemm`` and ``cblas_dgemm`` and their integer width, or
    ``None`` (then np.dot everywhere). NumPy >= 2 wheels bundle ``scipy_openblas64_``
    (ILP64, ``64_`` suffix)."""
    hit = numpy_cblas("{}gemm", "sd")
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


@cached_njit()
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
# The library routines (`kir.LibCall` names, `printer.LIBRARY`) that call BLAS or LAPACK.
BLAS_ROUTINES = frozenset({"gemm_batched", "inv", "det", "cholesky", "cholesky_info",
                           "solve_triangular", "eigh", "svd", "qr", "pinv", "matrix_exp",
                           "conv_conv2d", "conv_wgrad", "conv_dgrad", "rnn_forward",
                           "rnn_backward", "rnn_weight_grads"})


def calls_blas(stmts: list) -> bool:
    """Whether kernel IR statements (`Lowered.ir`) make a BLAS or LAPACK call: a matrix
    product or one of `BLAS_ROUTINES`."""
    return any(isinstance(s, Gemm) or (isinstance(s, LibCall) and s.fn in BLAS_ROUTINES)
               for s in walk(stmts))


def run_single_threaded(fn: Any) -> Any:
    """``fn(*args)`` with NumPy's OpenBLAS on one thread for the call (a parallel kernel:
    `blas_parallel` spreads its products over Numba's threads instead), then as before;
    ``fn`` itself when the thread count cannot be set.

    Two calls into OpenBLAS per call when BLAS runs more than one thread (none when it runs
    one): setting the count only changes a number (measured: about 1 us for the pair, and
    no CPU spent by OpenBLAS's idle thread). What must not happen is a parallel kernel
    calling OpenBLAS with two threads from Numba's threads: each product then queues work
    to OpenBLAS's own thread and waits for it while Numba's other thread holds the core
    (the batch-1024 MLP step took 4-38x its CPU time on a loaded machine). The control
    is read at each call (`_THREADS`), so a test can count the switches."""
    if _THREADS is None:
        return fn

    def run(*args: Any) -> Any:
        get, put = _THREADS
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
gemm = cached_njit(inline="always")(_gemm_blas if _FOUND is not None else _gemm_dot)


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
    # No ``max`` here: Numba's builtin is a function of its own, compiled once per
    # process and type and linked into each kernel.
    if x.layout == "C":
        return lambda x: (x, _NO_TRANS, x.shape[1] if x.shape[1] > 1 else 1)
    if x.layout == "F":
        return lambda x: (x, _TRANS, x.shape[0] if x.shape[0] > 1 else 1)

    return lambda x: _operand(x)


# ``gemm_call(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)``: cblas_?gemm in generated
# code, after `operand` (NumPy's BLAS only: HAVE_CBLAS).
gemm_call = _gemm_call
HAVE_CBLAS = _FOUND is not None


# ---- batched products
# A batched product is one call from the kernel to a C function compiled once per
# installation (a Numba ``cfunc``, kept in Numba's disk cache) and registered with LLVM
# as an external symbol, as ``cblas_?gemm`` is: a kernel that calls it neither types nor
# links nor optimises its code again. As an njit helper it was compiled once per process
# and argument types (three in the transformer step) and then linked into and optimised
# again with every kernel part calling it: 2-4 s of that step's cold compile.
# The operands reach it as a pointer to their first element and a geometry block
# (`_geometry`): the ranks, then each operand's shape and strides in elements (the
# result's too: it may be a strided view, such as a slice of a concatenation it fills).

_MAXD = 16  # the most axes an operand of a batched product may have
_XS, _XT, _YS, _YT, _CS, _CT = (3 + k * _MAXD for k in range(6))
_GEO = 3 + 6 * _MAXD
# Items of at most this many rows, columns and terms have a transposed right operand
# copied as stored (`_batched`); from 256x256x64 the two forms run within 7%.
_PACK_MAX = 128


@intrinsic
def _load(typingctx, p, off):
    def codegen(context, builder, signature, args):
        return builder.load(builder.gep(args[0], [args[1]]))

    return p.dtype(p, off), codegen


@intrinsic
def _data(typingctx, a):
    """A C-ordered array's data pointer."""
    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return types.CPointer(a.dtype)(a), codegen


@intrinsic
def _gemm_ptr(typingctx, ta, tb, m, n, k, a, ia, lda, b, ib, ldb, c, ic, ldc):
    """cblas_?gemm with beta 0 on matrices starting ``ia``/``ib``/``ic`` elements past
    the pointers ``a``/``b``/``c``."""
    sig = types.void(ta, tb, m, n, k, a, ia, lda, b, ib, ldb, c, ic, ldc)

    def codegen(context, builder, signature, args):
        ta_, tb_, m_, n_, k_, a_, ia_, lda_, b_, ib_, ldb_, c_, ic_, ldc_ = args
        dtype = signature.args[11].dtype
        ptr = ir.IntType(8).as_pointer()

        def at(p, off):
            return builder.bitcast(builder.gep(p, [off]), ptr)

        beta = context.get_constant(dtype, 0.0)
        _emit_gemm(context, builder, dtype, ta_, tb_, m_, n_, k_, at(a_, ia_), lda_,
                   at(b_, ib_), ldb_, beta, at(c_, ic_), ldc_)
        return context.get_dummy_value()

    return sig, codegen


def _empty_of(p, n):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_empty_of)
def _empty_of_ptr(p, n):
    """An array of ``n`` elements of ``p``'s dtype (the recurrent routines' work rows)."""
    dtype = p.dtype
    return lambda p, n: np.empty(n, dtype)


# The helpers take an operand's shape and strides as pointers into the geometry block, not
# the block and their offsets: Numba compiles a function called with a literal integer
# once per value, and the offsets are literals.
@cached_njit(**HELPER_JIT)
def _layout(strides, nd, rows, cols):
    """(cblas transpose flag, leading dimension) of the matrices in the last two axes of
    the operand with ``strides``; flag -1 when BLAS cannot read them in place."""
    s0, s1 = strides[nd - 2], strides[nd - 1]
    if (s1 == 1 or cols <= 1) and s0 >= (cols if cols > 1 else 1):
        return _NO_TRANS, s0
    if (s0 == 1 or rows <= 1) and s1 >= (rows if rows > 1 else 1):
        return _TRANS, s1
    return -1, 0


@cached_njit(**HELPER_JIT)
def _copied(p, shape, strides, nd):
    """The operand's elements copied C-ordered into a new buffer (`_alloc`); its
    ``strides`` become the copy's. Rows along the last axis, the other axes stepped as
    an odometer (no division per element)."""
    total = 1
    for d in range(nd):
        total *= shape[d]
    out = _alloc(p, total)
    inner, step = shape[nd - 1], strides[nd - 1]
    if total > 0:
        idx = _alloc(strides, nd)
        for d in range(nd):
            _store(idx, d, 0)
        off = 0
        for row in range(total // inner):
            base = row * inner
            for j in range(inner):
                _store(out, base + j, _load(p, off + j * step))
            d = nd - 2
            while d >= 0:
                i = _load(idx, d) + 1
                _store(idx, d, i)
                off += strides[d]
                if i < shape[d]:
                    break
                off -= i * strides[d]
                _store(idx, d, 0)
                d -= 1
        _free(idx)
    size = 1
    for d in range(nd - 1, -1, -1):
        strides[d] = size
        size *= shape[d]
    return out


@cached_njit(**HELPER_JIT)
def _item_offset(shape, strides, nd, item, cshape, nc):
    """Element offset of batch item ``item`` (numbered over the result's batch axes, of
    ``cshape``) in the operand, whose batch axes align with the result's trailing ones;
    an axis of size 1 is broadcast (read at 0)."""
    lead = (nc - 2) - (nd - 2)
    off = 0
    for d in range(nc - 3, -1, -1):
        i = item % cshape[d]
        item //= cshape[d]
        if d >= lead and shape[d - lead] != 1:
            off += i * strides[d - lead]
    return off


def _batched(x, y, c, geo):
    """``c[...] = x @ y`` over the batch, the operands as `_geometry` describes them: the
    C function itself (no entry function calling it, which Numba would compile too)."""
    g = geo
    nx, ny, nc = g[0], g[1], g[2]
    m, k = g[_XS + nx - 2], g[_XS + nx - 1]
    n = g[_YS + ny - 1]
    count = 1
    for d in range(nc - 2):
        count *= g[_CS + d]
    if m == 0 or n == 0 or count == 0:
        return
    xs, xt, ys, yt = _at(g, _XS), _at(g, _XT), _at(g, _YS), _at(g, _YT)
    cs, ct = _at(g, _CS), _at(g, _CT)
    if k == 0:
        zero = _zero_of(c)
        s0, s1 = ct[nc - 2], ct[nc - 1]
        for item in range(count):
            ic = _item_offset(cs, ct, nc, item, cs, nc)
            for i in range(m):
                for j in range(n):
                    _store(c, ic + i * s0 + j * s1, zero)
        return
    tx, lx = _layout(xt, nx, m, k)
    copy_x = tx < 0
    if copy_x:
        x = _copied(x, xs, xt, nx)
        tx, lx = _NO_TRANS, (k if k > 1 else 1)
    ty, ly = _layout(yt, ny, k, n)
    copy_y = ty < 0
    if copy_y:
        y = _copied(y, ys, yt, ny)
        ty, ly = _NO_TRANS, (n if n > 1 else 1)
    tc, lc = _layout(ct, nc, m, n)
    copy_c = tc < 0
    out = c
    if copy_c:  # neither rows nor columns of a result item are contiguous: via a copy
        out = _alloc(c, count * m * n)
        tc, lc = _NO_TRANS, (n if n > 1 else 1)
    # OpenBLAS multiplies small items whose right operand it reads transposed at about
    # 60% of the speed of the same items read as stored (attention's 64x64x32 scores:
    # 61 against 99 GFLOP/s): such an item's operand is copied transposed into one k x n
    # buffer, which stays in L1, and multiplied as stored.
    pack = (ty == _TRANS and tc == _NO_TRANS and m <= _PACK_MAX and n <= _PACK_MAX
            and k <= _PACK_MAX)
    yb = y
    if pack:
        yb = _alloc(y, k * n)
    for item in range(count):
        ix = _item_offset(xs, xt, nx, item, cs, nc)
        iy = _item_offset(ys, yt, ny, item, cs, nc)
        ic = item * m * n if copy_c else _item_offset(cs, ct, nc, item, cs, nc)
        if pack:
            for j in range(n):
                row = iy + j * ly
                for i in range(k):
                    _store(yb, i * n + j, _load(y, row + i))
            _gemm_ptr(tx, _NO_TRANS, m, n, k, x, ix, lx, yb, 0, n, out, ic, lc)
        elif tc == _NO_TRANS:
            _gemm_ptr(tx, ty, m, n, k, x, ix, lx, y, iy, ly, out, ic, lc)
        else:
            # A column-major result item is the row-major item of c.T = y.T @ x.T.
            _gemm_ptr(_TRANS + _NO_TRANS - ty, _TRANS + _NO_TRANS - tx, n, m, k, y, iy,
                      ly, x, ix, lx, out, ic, lc)
    if copy_c:
        s0, s1 = ct[nc - 2], ct[nc - 1]
        for item in range(count):
            ic = _item_offset(cs, ct, nc, item, cs, nc)
            for i in range(m):
                for j in range(n):
                    _store(c, ic + i * s0 + j * s1, _load(out, (item * m + i) * n + j))
        _free(out)
    if copy_x:
        _free(x)
    if copy_y:
        _free(y)
    if pack:
        _free(yb)


def _make_batched(kind: str, dtype: Any) -> Any:  # noqa: ARG001 - the family's one kind
    ptr = types.CPointer(dtype)
    return GEMM_ROUTINES.cfunc(_batched, types.void(ptr, ptr, ptr, types.CPointer(types.int64)),
                               error_model="numpy")


# The batched product is a library unit as the convolution's routines are: built per dtype
# on first need, its disk cache entry keyed on this module's source, and queued ahead of
# the kernels when a cold compile is shared among processes.
GEMM_ROUTINES = Routines("gemm", ("batched",), _make_batched,
                         inlines=("dualgraph.backend.numba.raw",))


def need_batched(dtype: str) -> None:
    """Compile (or load from Numba's disk cache) the batched product's C function for
    ``dtype`` ("float32" or "float64") and register its symbol, once per process: before
    a kernel calling it is compiled (its typing does this) or loaded (its module's
    header does)."""
    GEMM_ROUTINES.need(dtype, "batched")


@intrinsic
def gemm_batched(typingctx, x, y, c):
    """``c[...] = x @ y`` for batched float operands (each with its own batch axes,
    aligned to the right, a size-1 axis broadcast; ``c`` any strided array with the whole
    batch): one BLAS call per item on the operands' memory, each operand's layout
    (transpose flag, leading dimension) decided once for the whole batch, an operand BLAS
    cannot read in place copied C-ordered once; a result whose items are column-major
    computed as ``c.T = y.T @ x.T``, one BLAS cannot write through a copy (in generated
    code ``dgb.gemm_batched``; NumPy's BLAS only: HAVE_CBLAS). A call into the
    registered C function: nothing of it is compiled with the kernel."""
    if not (all(isinstance(a, types.Array) for a in (x, y, c)) and x.dtype == y.dtype
            == c.dtype and c.dtype in (types.float32, types.float64) and 2 <= x.ndim <= _MAXD
            and 2 <= y.ndim <= _MAXD and 2 <= c.ndim <= _MAXD):
        return None
    name = GEMM_ROUTINES.symbol("batched", str(c.dtype))
    need_batched(str(c.dtype))

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        geo = cgutils.alloca_once(builder, i64, size=_GEO)
        fl = context.get_value_type(signature.args[2].dtype).as_pointer()

        def put(k, v):
            builder.store(v, builder.gep(geo, [ir.Constant(i64, k)]))

        ptrs = []
        for j, (ty, val, s, t) in enumerate(zip(signature.args, args, (_XS, _YS, _CS),
                                                (_XT, _YT, _CT))):
            ary = context.make_array(ty)(context, builder, val)
            put(j, ir.Constant(i64, ty.ndim))
            size = ir.Constant(i64, context.get_abi_sizeof(context.get_value_type(ty.dtype)))
            shape = cgutils.unpack_tuple(builder, ary.shape, ty.ndim)
            strides = cgutils.unpack_tuple(builder, ary.strides, ty.ndim)
            for d in range(ty.ndim):
                put(s + d, shape[d])
                put(t + d, builder.sdiv(strides[d], size))
            ptrs.append(builder.bitcast(ary.data, fl))
        fnty = ir.FunctionType(ir.VoidType(), [fl, fl, fl, i64.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, ptrs + [geo])
        return context.get_dummy_value()

    return types.void(x, y, c), codegen


# ---- max pooling loops
# Generated kernels call these once per op instead of carrying their loop nests: each is
# compiled once per process and argument types (and kept in Numba's disk cache). The
# window geometry comes in a small int64 array (a kernel constant), not as integer
# arguments: Numba compiles a function called with literal integers once per distinct
# value.


# Called by kernels alone (the kernel IR's reference executor runs their Python source):
# neither a Python nor a C entry, which a fresh installation would compile for no caller.
_POOL_JIT = HELPER_JIT


@cached_njit(**_POOL_JIT)
def max_pool_indices(x, out, geo):
    """Each window's first largest value's flat position in its plane, for windows that
    all lie inside the plane: ``x`` (B, H, W), ``out`` (B, oH, oW); window (i, j) reads
    rows ``h0 + i*sh + a*dh`` (a < kh) and columns ``w0 + j*sw + b*dw`` (b < kw), ``geo``
    = (h0, sh, kh, dh, w0, sw, kw, dw). A larger value or any nan takes over (PyTorch's
    rule: ties keep the first max, the last nan wins)."""
    h0, sh, kh, dh, w0, sw, kw, dw = (geo[0], geo[1], geo[2], geo[3], geo[4], geo[5],
                                      geo[6], geo[7])
    width = x.shape[2]
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


@cached_njit(**_POOL_JIT)
def max_pool_indices_2x2(x, out, geo):
    """`max_pool_indices` for 2x2 windows without dilation (MaxPool2d(2) and its
    overlapping kin; ``geo`` as there), the four reads unrolled: a function of its own, so
    a program pooling 2x2 compiles only these loops."""
    h0, sh, w0, sw = geo[0], geo[1], geo[4], geo[5]
    width = x.shape[2]
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


@cached_njit(**_POOL_JIT)
def pool_gather(x, idx, out):
    """``out[b, m] = x[b, idx[b, m]]`` (``idx`` with one row: the same for every b)."""
    per_row = idx.shape[0] > 1
    for n in range(out.shape[0]):
        t = n if per_row else 0
        for m in range(out.shape[1]):
            out[n, m] = x[n, idx[t, m]]


@cached_njit(**_POOL_JIT)
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


# The names generated code calls, one per dtype (`cache.module_source` registers the C
# function a kernel's module names).
gemm_batched_float32 = gemm_batched_float64 = gemm_batched


# ---- convolution
# The sliding-window copies of a convolution (im2col, col2im, and conv2d's per-sample
# columns and product) as C functions compiled once per installation and dtype and
# called by symbol, as the batched product is: a kernel holding a convolution neither
# types nor optimises its window loops again. The operands reach them as pointers and a
# geometry block (each operand's shape and strides in elements, `_CONV_AT`), the window
# geometry as a small int64 table (a kernel constant, `conv_table`). Stride 1 along a
# row is a loop of its own, a contiguous copy that LLVM vectorises.

_CONV_AT = 8  # per operand: four extents, then four strides (a 1-D operand: its first)


def conv_table(attrs: dict, out_hw: tuple, mode: int = 0, bias: bool = False) -> tuple:
    """The window geometry the convolution's C functions read: (kh, kw, dh, dw, sh, sw,
    top padding, left padding, oh, ow, mode, has bias, any padding); ``mode`` 1 lays
    im2col's columns out (K, N, L) instead of (N, K, L)."""
    (kh, kw), (dh, dw), (sh, sw) = attrs["kernel_size"], attrs["dilation"], attrs["stride"]
    (pt, _), (pl, _) = attrs["padding"]
    padded = any(p for pair in attrs["padding"] for p in pair)
    return (kh, kw, dh, dw, sh, sw, pt, pl, out_hw[0], out_hw[1], mode, int(bias),
            int(padded))


@intrinsic
def _store(typingctx, p, off, v):
    def codegen(context, builder, signature, args):
        builder.store(args[2], builder.gep(args[0], [args[1]]))
        return context.get_dummy_value()

    return types.void(p, off, v), codegen


@intrinsic
def _gemm_add(typingctx, m, n, k, a, ia, b, ib, c, ic):
    """``c += a @ b`` (cblas_?gemm, beta 1) on C-ordered matrices starting ``ia``/``ib``/
    ``ic`` elements past the pointers, leading dimensions k, n and n."""
    sig = types.void(m, n, k, a, ia, b, ib, c, ic)

    def codegen(context, builder, signature, args):
        m_, n_, k_, a_, ia_, b_, ib_, c_, ic_ = args
        dtype = signature.args[3].dtype
        ptr = ir.IntType(8).as_pointer()
        i64 = ir.IntType(64)

        def at(p, off):
            return builder.bitcast(builder.gep(p, [off]), ptr)

        flag = ir.Constant(i64, _NO_TRANS)
        _emit_gemm(context, builder, dtype, flag, flag, m_, n_, k_, at(a_, ia_), k_,
                   at(b_, ib_), n_, context.get_constant(dtype, 1.0), at(c_, ic_), n_)
        return context.get_dummy_value()

    return sig, codegen


def _zero_of(p):  # noqa: ARG001 - typed by the overload below
    raise NotImplementedError


@overload(_zero_of)
def _zero_of_ptr(p):
    zero = numba.np.numpy_support.as_dtype(p.dtype).type(0)
    return lambda p: zero


@cached_njit(nogil=True, error_model="numpy", inline="always")
def _window_columns(kj, t, w_):
    """Kernel column ``kj``'s offset ``b`` into the image row and the range [lo, hi) of
    window columns whose element lies inside the image (of width ``w_``)."""
    dw, sw, pl, ow = t[3], t[5], t[7], t[9]
    b = kj * dw - pl
    # Conditionals, not ``max`` and ``min``: Numba's builtins are functions of their own,
    # each compiled on a fresh installation's first build.
    lo = (sw - 1 - b) // sw
    hi = (w_ - 1 - b) // sw + 1
    return b, lo if lo > 0 else 0, hi if hi < ow else ow


def _gather(x, xn, g, t, cols, base, rs, zero):
    """One sample's windows (its image at ``x + xn``, operand 0 of ``g``) into rows ``r``
    of ``cols`` starting ``base + r * rs`` (each ``oh * ow`` long); ``zero``: write zeros
    first where there is padding (window elements there are never written)."""
    c_, h_, w_ = g[1], g[2], g[3]
    s1, s2, s3 = g[5], g[6], g[7]
    kh, kw, dh, sh, sw, pt, oh, ow = t[0], t[1], t[2], t[4], t[5], t[6], t[8], t[9]
    length = oh * ow
    for c in range(c_):
        for ki in range(kh):
            for kj in range(kw):
                row = base + ((c * kh + ki) * kw + kj) * rs
                if zero:
                    _zero(cols, row, length)
                b, lo, hi = _window_columns(kj, t, w_)
                for oy in range(oh):
                    h = oy * sh + ki * dh - pt
                    if h < 0 or h >= h_:
                        continue
                    src = xn + c * s1 + h * s2
                    dst = row + oy * ow
                    if sw == 1 and s3 == 1:
                        src += b
                        for ox in range(lo, hi):
                            _store(cols, dst + ox, _load(x, src + ox))
                    else:
                        for ox in range(lo, hi):
                            _store(cols, dst + ox, _load(x, src + (ox * sw + b) * s3))


def _unit_call(kind: str, args: tuple) -> Any:
    """The typing and code of a call of the convolution's C function ``kind`` by its
    symbol (its unit built first): pointers passed as they are, integers and booleans as
    int64. The window copies are units of their own, called once per sample, so a
    routine using them neither compiles nor optimises their loops again."""
    dtype = next(a.dtype for a in args if isinstance(a, types.CPointer)
                 and a.dtype in (types.float32, types.float64))
    need_conv(str(dtype), kind)
    name = ROUTINES.symbol(kind, str(dtype))

    def codegen(context, builder, signature, args_):
        values = [v if isinstance(ty, types.CPointer)
                  else context.cast(builder, v, ty, types.int64)
                  for ty, v in zip(signature.args, args_)]
        fnty = ir.FunctionType(ir.VoidType(), [v.type for v in values])
        builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), values)
        return context.get_dummy_value()

    return types.void(*args), codegen


@intrinsic
def _gather_unit(typingctx, x, xn, g, t, cols, base, rs, zero):
    """`_gather` through its unit's symbol."""
    return _unit_call("gather", (x, xn, g, t, cols, base, rs, zero))


@intrinsic
def _scatter_unit(typingctx, cols, base, s1, s2, res, n, c_, h_, w_, t):
    """`_scatter` through its unit's symbol."""
    return _unit_call("scatter", (cols, base, s1, s2, res, n, c_, h_, w_, t))


def _im2col(x, cols, g, t):
    """Operand 0 (N, C, H, W) into ``cols`` (C-ordered): (N, K, L) (mode 0) or (K, N, L)
    (mode 1)."""
    n_, s0 = g[0], g[4]
    length = t[8] * t[9]
    zero = t[12] != 0
    for n in range(n_):
        if t[10] == 0:
            _gather_unit(x, n * s0, g, t, cols, n * (g[1] * t[0] * t[1]) * length, length,
                         zero)
        else:
            _gather_unit(x, n * s0, g, t, cols, n * length, n_ * length, zero)


def _scatter(cols, base, s1, s2, res, n, c_, h_, w_, t):
    """Sample ``n``'s columns (K, L), column element (r, l) at ``cols + base + r * s1 +
    l * s2``, each added where its window reads it in ``res`` (N, C, H, W) (C-ordered):
    for each image element, in kernel-offset order."""
    kh, kw, dh, sh, sw, pt, oh, ow = t[0], t[1], t[2], t[4], t[5], t[6], t[8], t[9]
    for c in range(c_):
        for ki in range(kh):
            for kj in range(kw):
                r = (c * kh + ki) * kw + kj
                b, lo, hi = _window_columns(kj, t, w_)
                for oy in range(oh):
                    h = oy * sh + ki * dh - pt
                    if h < 0 or h >= h_:
                        continue
                    dst = ((n * c_ + c) * h_ + h) * w_ + b
                    src = base + r * s1 + oy * ow * s2
                    if sw == 1 and s2 == 1:
                        for ox in range(lo, hi):
                            _store(res, dst + ox, _load(res, dst + ox) + _load(cols, src + ox))
                    else:
                        for ox in range(lo, hi):
                            _store(res, dst + ox * sw,
                                   _load(res, dst + ox * sw) + _load(cols, src + ox * s2))


def _col2im(cols, res, g, t):
    """``res`` (N, C, H, W) (operand 1, C-ordered) zeroed, then each column element of
    ``cols`` (N, K, L) (operand 0, any strides) added where its window reads it."""
    n_, c_, h_, w_ = g[_CONV_AT], g[_CONV_AT + 1], g[_CONV_AT + 2], g[_CONV_AT + 3]
    _zero(res, 0, n_ * c_ * h_ * w_)
    for n in range(n_):
        _scatter_unit(cols, n * g[4], g[5], g[6], res, n, c_, h_, w_, t)


def _conv2d(x, w, bias, out, g, t):
    """Ungrouped ``out`` (N, O, oH, oW) (operand 3, C-ordered) = conv of ``x`` (operand 0)
    with ``w`` (O, K) (C-ordered): sample by sample, its columns into a (K, L) buffer that
    stays in cache, its output started at the bias (``t[11]``: there is one) or zero,
    then one product adding to it."""
    n_, o_ = g[3 * _CONV_AT], g[3 * _CONV_AT + 1]
    k = g[1] * t[0] * t[1]
    length = t[8] * t[9]
    cols = _alloc(x, k * length)
    for n in range(n_):
        # The positions a window leaves unwritten are the same in every sample.
        _gather_unit(x, n * g[4], g, t, cols, 0, length, n == 0 and t[12] != 0)
        at = n * o_ * length
        if t[11] != 0:
            for o in range(o_):
                v = _load(bias, o)
                for j in range(length):
                    _store(out, at + o * length + j, v)
        else:
            _zero(out, at, o_ * length)
        if k:
            _gemm_add(o_, length, k, w, 0, cols, 0, out, at)
    _free(cols)


@intrinsic
def _gemm_sample(typingctx, ta, tb, m, n, k, a, b, ib, beta, c):
    """``c = op(a) @ op(b) + beta * c`` (cblas_?gemm, row-major, the transpose flags ``ta``
    and ``tb``) on C-ordered matrices: ``a`` and ``c`` at their pointers, ``b`` ``ib``
    elements past its pointer, each matrix's rows as long as it is stored."""
    sig = types.void(ta, tb, m, n, k, a, b, ib, beta, c)

    def codegen(context, builder, signature, args):
        ta_, tb_, m_, n_, k_, a_, b_, ib_, beta_, c_ = args
        dtype = signature.args[5].dtype
        ptr = ir.IntType(8).as_pointer()
        trans = ir.Constant(ta_.type, _TRANS)
        lda = builder.select(builder.icmp_signed("==", ta_, trans), m_, k_)
        ldb = builder.select(builder.icmp_signed("==", tb_, trans), k_, n_)
        b_at = builder.bitcast(builder.gep(b_, [ib_]), ptr)
        _emit_gemm(context, builder, dtype, ta_, tb_, m_, n_, k_, builder.bitcast(a_, ptr),
                   lda, b_at, ldb, context.cast(builder, beta_, signature.args[8], dtype),
                   builder.bitcast(c_, ptr), n_)
        return context.get_dummy_value()

    return sig, codegen


def _conv2d_weight(x, g, gw, geo, t):
    """Ungrouped weight gradient ``gw`` (O, K) (operand 2, C-ordered) of the convolution
    of ``x`` (operand 0) whose output's gradient is ``g`` (N, O, L) (operand 1,
    C-ordered): sample by sample, its columns into a (K, L) buffer that stays in cache
    and one product adding ``columns @ g[n]^T`` into a (K, O) sum, transposed at the end.
    Over the whole batch the columns are 5 MB for LeNet's first layer and the product a
    long thin shape that OpenBLAS runs at a fraction of its speed."""
    n_, o_ = geo[0], geo[_CONV_AT + 1]
    k = geo[1] * t[0] * t[1]
    length = t[8] * t[9]
    cols = _alloc(x, k * length)
    sums = _alloc(x, k * o_)
    _zero(sums, 0, k * o_)
    for n in range(n_):
        # The positions a window leaves unwritten are the same in every sample.
        _gather_unit(x, n * geo[4], geo, t, cols, 0, length, n == 0 and t[12] != 0)
        if length:
            _gemm_sample(_NO_TRANS, _TRANS, k, o_, length, cols, g, n * o_ * length, 1.0,
                         sums)
    for o in range(o_):
        for r in range(k):
            _store(gw, o * k + r, _load(sums, r * o_ + o))
    _free(cols)
    _free(sums)


def _conv2d_input(g, w, res, geo, t):
    """Ungrouped input gradient ``res`` (N, C, H, W) (operand 2, C-ordered) of the
    convolution with ``w`` (O, K) (operand 1, C-ordered) whose output's gradient is ``g``
    (N, O, L) (operand 0, C-ordered): sample by sample, the columns' gradient
    ``w^T @ g[n]`` into a (K, L) buffer that stays in cache, each column element then
    added where its window reads it (in `_col2im`'s order)."""
    n_, o_ = geo[0], geo[1]
    c_, h_, w_ = geo[2 * _CONV_AT + 1], geo[2 * _CONV_AT + 2], geo[2 * _CONV_AT + 3]
    k = c_ * t[0] * t[1]
    length = t[8] * t[9]
    _zero(res, 0, n_ * c_ * h_ * w_)
    if not (o_ and length):
        return
    cols = _alloc(res, k * length)
    for n in range(n_):
        _gemm_sample(_TRANS, _NO_TRANS, k, length, o_, w, g, n * o_ * length, 0.0, cols)
        _scatter_unit(cols, 0, length, 1, res, n, c_, h_, w_, t)
    _free(cols)


def _make_conv(kind: str, dtype: Any) -> Any:
    """The C function of convolution routine ``kind`` for the Numba float type ``dtype``:
    the routine's function itself (no entry function calling it, which Numba would
    compile too)."""
    body, arity, args = _CONV_KINDS[kind]
    ptr, i64 = types.CPointer(dtype), types.CPointer(types.int64)
    if args is None:  # the routines kernels call: the arrays, their geometry, the table
        sig = types.void(*([ptr] * arity), i64, i64)
    else:  # the window copies: their own arguments, in order
        sig = types.void(*(ptr if a == "p" else i64 if a == "g" else types.int64
                           for a in args))
    return ROUTINES.cfunc(body, sig, error_model="numpy")


# Each routine's function, number of arrays and, for the window copies the others call,
# their arguments (p: a float pointer, g: an int64 pointer, i: an int64).
_CONV_KINDS = {"im2col": (_im2col, 2, None), "col2im": (_col2im, 2, None),
               "conv2d": (_conv2d, 4, None), "wgrad": (_conv2d_weight, 3, None),
               "dgrad": (_conv2d_input, 3, None),
               "gather": (_gather, 0, "piggpiii"), "scatter": (_scatter, 0, "piiipiiiig")}
CONV_KINDS = tuple(_CONV_KINDS)
# A routine's machine code calls the window copies by symbol: they are registered first.
ROUTINES = Routines("conv", CONV_KINDS, _make_conv,
                    requires={"im2col": ("gather",), "conv2d": ("gather",),
                              "wgrad": ("gather",), "col2im": ("scatter",),
                              "dgrad": ("scatter",)},
                    inlines=("dualgraph.backend.numba.raw",))


def need_conv(dtype: str, kind: str | None = None) -> None:
    """Compile (or load from Numba's disk cache) the convolution's C function ``kind``
    (None: all five) for ``dtype`` and register its symbol, once per process
    (`library.Routines.need`)."""
    ROUTINES.need(dtype, kind)


def _conv_codegen(kind: str, dtype: Any) -> Any:
    """The call of the registered C function ``kind``: each array's data pointer, one
    geometry block of their extents and strides (in elements), the table's pointer."""
    name = ROUTINES.symbol(kind, str(dtype))

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        arrays = signature.args[:-1]
        geo = cgutils.alloca_once(builder, i64, size=_CONV_AT * len(arrays))
        fl = context.get_value_type(dtype).as_pointer()
        size = ir.Constant(i64, context.get_abi_sizeof(context.get_value_type(dtype)))
        ptrs = []
        for j, (ty, val) in enumerate(zip(arrays, args)):
            ary = context.make_array(ty)(context, builder, val)
            shape = cgutils.unpack_tuple(builder, ary.shape, ty.ndim)
            strides = cgutils.unpack_tuple(builder, ary.strides, ty.ndim)
            for d in range(4):
                at = builder.gep(geo, [ir.Constant(i64, j * _CONV_AT + d)])
                builder.store(shape[d] if d < ty.ndim else ir.Constant(i64, 1), at)
                at = builder.gep(geo, [ir.Constant(i64, j * _CONV_AT + 4 + d)])
                builder.store(builder.sdiv(strides[d], size) if d < ty.ndim
                              else ir.Constant(i64, 0), at)
            ptrs.append(builder.bitcast(ary.data, fl))
        table = context.make_array(signature.args[-1])(context, builder, args[-1]).data
        fnty = ir.FunctionType(ir.VoidType(), [fl] * len(arrays) + [i64.as_pointer()] * 2)
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, ptrs + [geo, table])
        return context.get_dummy_value()

    return codegen


def _conv_call(kind: str, arrays: tuple, table: Any) -> Any:
    """The typing of a call of the C function ``kind`` over ``arrays`` (float arrays of
    one dtype, at most 4-D) and ``table`` (a C-ordered int64 array), or None."""
    dtype = arrays[0].dtype
    if not (all(isinstance(a, types.Array) and a.ndim <= 4 and a.dtype == dtype
                for a in arrays) and dtype in (types.float32, types.float64)
            and isinstance(table, types.Array) and table.dtype == types.int64
            and table.layout == "C"):
        return None
    need_conv(str(dtype), kind)
    return types.void(*arrays, table), _conv_codegen(kind, dtype)


@intrinsic
def conv_im2col(typingctx, x, cols, table):
    """``x`` (N, C, H, W) as columns into C-ordered ``cols`` (in generated code
    ``dgb.conv_im2col_<dtype>``): the registered C function `_im2col`."""
    return _conv_call("im2col", (x, cols), table)


@intrinsic
def conv_col2im(typingctx, cols, res, table):
    """Columns (N, K, L) summed into C-ordered ``res`` (N, C, H, W) (in generated code
    ``dgb.conv_col2im_<dtype>``): the registered C function `_col2im`."""
    return _conv_call("col2im", (cols, res), table)


@intrinsic
def conv_conv2d(typingctx, x, w, bias, out, table):
    """An ungrouped convolution into C-ordered ``out`` (in generated code
    ``dgb.conv_conv2d_<dtype>``; NumPy's BLAS only: HAVE_CBLAS): the registered C
    function `_conv2d`."""
    return _conv_call("conv2d", (x, w, bias, out), table)


@intrinsic
def conv_wgrad(typingctx, x, g, gw, table):
    """An ungrouped convolution's weight gradient into C-ordered ``gw`` (O, K) from its
    input ``x`` and its output's C-ordered gradient ``g`` (in generated code
    ``dgb.conv_wgrad_<dtype>``; NumPy's BLAS only: HAVE_CBLAS): the registered C function
    `_conv2d_weight`."""
    return _conv_call("wgrad", (x, g, gw), table)


@intrinsic
def conv_dgrad(typingctx, g, w, res, table):
    """An ungrouped convolution's input gradient into C-ordered ``res`` (N, C, H, W) from
    its output's C-ordered gradient ``g`` and its C-ordered weight ``w`` (in generated
    code ``dgb.conv_dgrad_<dtype>``; NumPy's BLAS only: HAVE_CBLAS): the registered C
    function `_conv2d_input`."""
    return _conv_call("dgrad", (g, w, res), table)


conv_im2col_float32 = conv_im2col_float64 = conv_im2col
conv_col2im_float32 = conv_col2im_float64 = conv_col2im
conv_conv2d_float32 = conv_conv2d_float64 = conv_conv2d
conv_wgrad_float32 = conv_wgrad_float64 = conv_wgrad
conv_dgrad_float32 = conv_dgrad_float64 = conv_dgrad
