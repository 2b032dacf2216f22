"""Matrix decompositions in generated kernels through the LAPACKE that NumPy's wheel bundles.

Numba's own ``np.linalg`` calls SciPy's LAPACK (``scipy.linalg.cython_lapack``). NumPy's
wheel ships OpenBLAS with LAPACK and its C interface, LAPACKE, whose row-major entry
points take a matrix as NumPy lays it out and allocate their own workspace. Kernels call
them through external symbols (``dualgraph_lapacke_dpotrf``, ...) registered with LLVM
when this module is imported, as `blas` does for GEMM: Numba can cache the kernels on
disk, and a cached kernel links to wherever the symbol is in the process that loads it.
NumPy's eager ``np.linalg`` runs the same LAPACK routines (``potrf``, ``syevd``,
``gesdd``, ``geqrf`` + ``orgqr``) from the same library, so eager and compiled results
agree to the last bits. Both compute float32 input in float64 and round the results
(NumPy's rule), so only the double-precision routines are used.

``AVAILABLE`` is False when NumPy has no bundled OpenBLAS with LAPACKE (a NumPy built
against another LAPACK); the lowerings then refuse these ops with a clear error.
"""

from __future__ import annotations

import numpy as np
from llvmlite import binding as llvm
from numba import types

from ...ops.matrix import LinAlgError
from .blas import numpy_openblas
from .cache_key import cached_njit

_ROW_MAJOR = 101
_ROUTINES = ("potrf", "trtrs", "syevd", "gesdd", "geqrf", "orgqr")


def _find_lapacke() -> int | None:
    """Register NumPy's LAPACKE routines as LLVM symbols; their integer width, or None."""
    hit = numpy_openblas([("scipy_LAPACKE_{}64_", 64), ("LAPACKE_{}64_", 64),
                          ("scipy_LAPACKE_{}", 32), ("LAPACKE_{}", 32)],
                         tuple("d" + r for r in _ROUTINES))
    if hit is None:
        return None
    found, width = hit
    for name, address in found.items():
        llvm.add_symbol(f"dualgraph_lapacke_{name}", address)
    return width


_WIDTH = _find_lapacke()
AVAILABLE = _WIDTH is not None
_I = types.int64 if _WIDTH != 32 else types.int32
_C = types.int8  # a LAPACK character argument, by value
_P = types.voidptr


def _extern(name: str, *args: types.Type) -> types.ExternalFunction:
    return types.ExternalFunction(f"dualgraph_lapacke_d{name}", _I(types.int32, *args))


_dpotrf = _extern("potrf", _C, _I, _P, _I)
_dtrtrs = _extern("trtrs", _C, _C, _C, _I, _I, _P, _I, _P, _I)
_dsyevd = _extern("syevd", _C, _C, _I, _P, _I, _P)
_dgesdd = _extern("gesdd", _C, _I, _I, _P, _I, _P, _P, _I, _P, _I)
_dgeqrf = _extern("geqrf", _I, _I, _P, _I, _P)
_dorgqr = _extern("orgqr", _I, _I, _I, _P, _I, _P)

_L, _U, _N, _V, _S, _A = (ord(c) for c in "LUNVSA")


# Numba's compile time follows the code it types, and the helpers below are compiled once
# per dtype and layout of their arguments: array slice assignments (``w[:] = a[b]``) and
# string formatting in a raise each type a generic implementation of their own, so copies
# are the element loops of `_load` and `_store`, and messages are built in `_failed` and
# `_not_positive_definite`, compiled once for every caller.


@cached_njit(nogil=True)
def _failed(what):
    raise LinAlgError(what)


@cached_njit(nogil=True)
def _not_positive_definite(info):
    raise LinAlgError("linalg.cholesky: The factorization could not be completed because the "
                      "input is not positive-definite (the leading minor of order "
                      + str(info) + " is not positive-definite).")


@cached_njit(nogil=True)
def _load(a, b, w):
    """Matrix ``b`` of ``a`` (batch, m, n) into ``w`` (m, n), as float64."""
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            w[i, j] = a[b, i, j]


@cached_njit(nogil=True)
def _store(w, out, b, row, col):
    """``w`` (m, n) into ``out[b]`` (batch, ., .) at row ``row``, column ``col``."""
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            out[b, row + i, col + j] = w[i, j]


@cached_njit(nogil=True)
def cholesky(a, out, check):
    """The lower factor of each (n, n) matrix of ``a`` (batch, n, n) into ``out``."""
    n = a.shape[1]
    w = np.empty((n, n), np.float64)
    for b in range(a.shape[0]):
        _load(a, b, w)
        info = _dpotrf(_ROW_MAJOR, _L, n, w.ctypes, n)
        if info > 0 and check:
            _not_positive_definite(info)
        for i in range(n):
            for j in range(i + 1, n):
                w[i, j] = 0
        _store(w, out, b, 0, 0)
    return 0


@cached_njit(nogil=True)
def cholesky_info(a, out):
    """The int32 ``info`` of each matrix's factorization into ``out`` (batch,)."""
    n = a.shape[1]
    w = np.empty((n, n), np.float64)
    for b in range(a.shape[0]):
        _load(a, b, w)
        out[b] = _dpotrf(_ROW_MAJOR, _L, n, w.ctypes, n)
    return 0


@cached_njit(nogil=True)
def solve_triangular(a, rhs, out, upper, unit):
    """``A X = B`` for each triangular A of ``a`` (batch, n, n), B of ``rhs`` (batch, n, k).
    A zero pivot gives inf/nan, as a substitution does (LAPACK's trtrs would refuse)."""
    n = a.shape[1]
    k = rhs.shape[2]
    w = np.empty((n, n), np.float64)
    x = np.empty((n, k), np.float64)
    for b in range(a.shape[0]):
        _load(a, b, w)
        _load(rhs, b, x)
        singular = False
        if not unit:
            for i in range(n):
                if w[i, i] == 0:
                    singular = True
        if singular:
            # trtrs stops at a zero pivot; substitute by hand for LAPACK-like inf/nan.
            rows = range(n - 1, -1, -1) if upper else range(n)
            for i in rows:
                for c in range(k):
                    s = x[i, c]
                    if upper:
                        for j in range(i + 1, n):
                            s -= w[i, j] * x[j, c]
                    else:
                        for j in range(i):
                            s -= w[i, j] * x[j, c]
                    x[i, c] = s / w[i, i]
        else:
            uplo = _U if upper else _L
            diag = _U if unit else _N
            _dtrtrs(_ROW_MAJOR, uplo, _N, diag, n, k, w.ctypes, n, x.ctypes, k)
        _store(x, out, b, 0, 0)
    return 0


@cached_njit(nogil=True)
def eigh(a, out, lower):
    """Each symmetric matrix of ``a`` (batch, n, n) into ``out`` (batch, n + 1, n): the
    eigenvalues in row 0, the eigenvectors as columns below."""
    n = a.shape[1]
    w = np.empty((n, n), np.float64)
    vals = np.empty(n, np.float64)
    for b in range(a.shape[0]):
        _load(a, b, w)
        uplo = _L if lower else _U
        info = _dsyevd(_ROW_MAJOR, _V, uplo, n, w.ctypes, n, vals.ctypes)
        if info > 0:
            _failed("linalg.eigh: The algorithm failed to converge because the input matrix "
                    "is ill-conditioned or has too many repeated eigenvalues")
        for j in range(n):
            out[b, 0, j] = vals[j]
        _store(w, out, b, 1, 0)
    return 0


@cached_njit(nogil=True)
def svd(a, out, full):
    """Each (m, n) matrix of ``a`` into ``out`` (batch, m*ku + k + kv*n): U, S, Vh
    flattened (`dualgraph.ops.decomp`'s layout)."""
    m, n = a.shape[1], a.shape[2]
    k = min(m, n)
    ku = m if full else k
    kv = n if full else k
    w = np.empty((m, n), np.float64)
    u = np.empty((m, ku), np.float64)
    s = np.empty(k, np.float64)
    vt = np.empty((kv, n), np.float64)
    job = _A if full else _S
    for b in range(a.shape[0]):
        _load(a, b, w)
        info = _dgesdd(_ROW_MAJOR, job, m, n, w.ctypes, n, s.ctypes, u.ctypes, ku,
                           vt.ctypes, n)
        if info > 0:
            _failed("linalg.svd: The algorithm failed to converge because the input matrix "
                    "is ill-conditioned or has too many repeated singular values")
        for i in range(m):
            for j in range(ku):
                out[b, i * ku + j] = u[i, j]
        for j in range(k):
            out[b, m * ku + j] = s[j]
        for i in range(kv):
            for j in range(n):
                out[b, m * ku + k + i * n + j] = vt[i, j]
    return 0


@cached_njit(nogil=True)
def qr(a, out, complete):
    """Each (m, n) matrix of ``a`` into ``out`` (batch, m, kq + n): Q, then R on top."""
    m, n = a.shape[1], a.shape[2]
    k = min(m, n)
    kq = m if complete else k
    w = np.empty((m, n), np.float64)
    tau = np.empty(max(k, 1), np.float64)
    q = np.empty((m, kq), np.float64)
    for b in range(a.shape[0]):
        _load(a, b, w)
        _dgeqrf(_ROW_MAJOR, m, n, w.ctypes, n, tau.ctypes)
        for i in range(m):
            for j in range(kq + n):
                out[b, i, j] = 0
        for i in range(kq):
            for j in range(i, n):
                out[b, i, kq + j] = w[i, j]
        for i in range(m):
            for j in range(kq):
                q[i, j] = w[i, j] if j < n else 0
        _dorgqr(_ROW_MAJOR, m, kq, k, q.ctypes, kq, tau.ctypes)
        _store(q, out, b, 0, 0)
    return 0


@cached_njit(nogil=True)
def pinv(a, out, atol, rtol):
    """The pseudoinverse of each (m, n) matrix of ``a`` into ``out`` (batch, n, m), from
    its SVD with singular values at most ``max(atol, rtol * largest)`` taken as zero."""
    m, n = a.shape[1], a.shape[2]
    k = min(m, n)
    packed = np.empty((a.shape[0], m * k + k + k * n), np.float64)
    svd(a, packed, False)
    su, vu = m * k, m * k + k  # where S and Vh start in a row of packed
    for b in range(a.shape[0]):
        cut = max(atol, rtol * packed[b, su]) if k else atol
        # out = V diag(1/s) Uᵀ by loops: np.dot in a kernel would need SciPy's BLAS.
        for i in range(n):
            for j in range(m):
                acc = 0.0
                for p in range(k):
                    s = packed[b, su + p]
                    if s > cut:
                        acc += packed[b, vu + p * n + i] * packed[b, j * k + p] / s
                out[b, i, j] = acc
    return 0


@cached_njit(nogil=True)
def matrix_exp(a, out):
    """exp of each (n, n) matrix of ``a``: `dualgraph.ops.decomp`'s scaling and squaring
    with the same degree-18 Taylor polynomial, in float64, by loops (np.dot in a kernel
    would need SciPy's BLAS)."""
    n = a.shape[1]
    x = np.empty((n, n))
    acc = np.empty((n, n))
    tmp = np.empty((n, n))
    for b in range(a.shape[0]):
        norm1 = 0.0
        for j in range(n):
            c = 0.0
            for i in range(n):
                c += abs(np.float64(a[b, i, j]))
            norm1 = max(norm1, c)
        s = max(0, int(np.ceil(np.log2(norm1)))) if norm1 > 1 else 0
        scale = 2.0 ** s
        for i in range(n):
            for j in range(n):
                x[i, j] = np.float64(a[b, i, j]) / scale
                acc[i, j] = 1.0 if i == j else 0.0
        for k in range(18, 0, -1):
            _matmul_into(x, acc, tmp)
            for i in range(n):
                for j in range(n):
                    acc[i, j] = (1.0 if i == j else 0.0) + tmp[i, j] / k
        for _ in range(s):
            _matmul_into(acc, acc, tmp)
            acc, tmp = tmp, acc
        for i in range(n):
            for j in range(n):
                out[b, i, j] = acc[i, j]
    return 0


@cached_njit(nogil=True)
def _matmul_into(x, y, out):
    n, k, m = x.shape[0], x.shape[1], y.shape[1]
    for i in range(n):
        for j in range(m):
            out[i, j] = 0.0
        for p in range(k):
            xv = x[i, p]
            for j in range(m):
                out[i, j] += xv * y[p, j]


@cached_njit(nogil=True)
def lu(a, out):
    """LU with partial pivoting of each (m, n) matrix of ``a`` into ``out`` (batch, m + 1,
    m + k + n) in `dualgraph.ops.decomp`'s layout, by loops: the same steps in the same
    order as the eager kernel, so both give the same bits (getrf's pivots, no LAPACK)."""
    m, n = a.shape[1], a.shape[2]
    k = min(m, n)
    w = np.empty((m, n), np.float64)
    perm = np.empty(m, np.int64)
    for b in range(a.shape[0]):
        for i in range(out.shape[1]):
            for c in range(out.shape[2]):
                out[b, i, c] = 0
        for i in range(m):
            perm[i] = i
            for c in range(n):
                w[i, c] = a[b, i, c]
        for j in range(k):
            p, big = j, abs(w[j, j])
            for i in range(j + 1, m):
                if abs(w[i, j]) > big:
                    p, big = i, abs(w[i, j])
            out[b, 0, j] = p + 1
            if p != j:
                for c in range(n):
                    w[j, c], w[p, c] = w[p, c], w[j, c]
                perm[j], perm[p] = perm[p], perm[j]
            d = w[j, j] if w[j, j] != 0 else 1.0
            for i in range(j + 1, m):
                w[i, j] /= d
            for i in range(j + 1, m):
                for c in range(j + 1, n):
                    w[i, c] -= w[i, j] * w[j, c]
        for i in range(m):
            out[b, 1 + perm[i], i] = 1.0
            for c in range(k):
                out[b, 1 + i, m + c] = 1.0 if i == c else (w[i, c] if i > c else 0.0)
        for i in range(k):
            for c in range(i, n):
                out[b, 1 + i, m + k + c] = w[i, c]
    return 0
