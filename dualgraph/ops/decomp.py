"""Matrix decompositions as primitives: ``cholesky``, ``solve_triangular``, ``eigh``,
``svd``, ``qr`` and ``pinv``, batched over leading dims, each with its VJP written in
dualgraph ops (so it traces and differentiates again).

A graph node has one output, and a decomposition has several (``eigh``: values and
vectors). Such an op returns them *packed* into one array, and the public functions in
``dualgraph/linalg.py`` slice the pieces out: the slices' VJPs scatter the incoming
gradients back into the packed layout (zeros where a piece is unused), so the op's VJP
sees every piece's gradient at once and a piece nobody reads costs nothing but its
zeros. The layouts:

- ``eigh``: ``(..., n + 1, n)``: row 0 the eigenvalues (ascending), rows 1.. the
  eigenvectors as columns.
- ``svd``: ``(..., m*ku + k + kv*n)``: ``U`` (m, ku), ``S`` (k), ``Vh`` (kv, n), each
  flattened, with ``k = min(m, n)``, ``ku = m`` and ``kv = n`` when ``full_matrices``,
  else ``k``.
- ``qr``: ``(..., m, kq + n)``: ``Q`` in the first ``kq`` columns, ``R`` (kq, n) in the top
  ``kq`` rows of the rest (zeros below), ``kq = m`` for ``mode='complete'``, else ``k``.

The gradient formulas are the standard ones (the same as PyTorch's, so their gradients
agree): Cholesky ``A = L Lᵀ``: ``gA = sym(L⁻ᵀ Φ(Lᵀ gL) L⁻¹)`` with Φ the lower triangle
with the diagonal halved; ``eigh``: ``gA = V (diag(gw) + skew(Vᵀ gV) / 2E) Vᵀ`` with
``E_ij = w_j - w_i``; ``svd``: the same with ``E_ij = s_j² - s_i²`` plus the projections
for the rectangular parts; ``qr`` (``m >= n``): ``gA = (gQ + Q copyltu(M)) R⁻ᵀ`` with
``M = R gRᵀ - gQᵀ Q``, and for ``m < n`` that rule on the leading square block. Eigen- and
singular-vector gradients need distinct eigen/singular values (they divide by their
differences): with repeated ones the result is inf or nan, as in PyTorch.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind, current_trace
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .index import take_along_dim
from .linalg import matmul
from .matrix import LinAlgError, _mT
from .registry import OpDef, register

# ----------------------------------------------------------------------- checks


def check_matrix(fn: str, A: Any, square: bool = False) -> tuple:  # noqa: N803
    """``A``'s shape and dtype after the checks every decomposition makes: at least 2
    dims, square when ``square``, a floating dtype."""
    shape = tuple(A.shape)
    if len(shape) < 2:
        raise ShapeError(f"linalg.{fn}: The input tensor A must have at least 2 dimensions, "
                         f"got shape {shape}")
    if square and shape[-1] != shape[-2]:
        raise ShapeError(f"linalg.{fn}: A must be batches of square matrices, but they are "
                         f"{shape[-2]} by {shape[-1]} matrices (shape {shape})")
    dtype = np.dtype(A.dtype)
    if dtype.kind != "f":
        raise RuntimeError(f"linalg.{fn}: Expected a floating point tensor as input (float32 "
                           f"or float64). Got {dtype}")
    return shape, dtype


def _sym(x: Any) -> Any:
    return E.mul(E.add(x, _mT(x)), 0.5)


def _unsqueeze(x: Any, dim: int) -> Any:
    """``x`` with a new dim of size 1 at ``dim`` (-1 or -2)."""
    shape = tuple(x.shape)
    return S.reshape(x, shape + (1,) if dim == -1 else shape[:-1] + (1, shape[-1]))


def _eye_like(n: int, dtype: Any) -> np.ndarray:
    return np.eye(n, dtype=np.dtype(dtype))


def _cols(x: Any, start: int, stop: int) -> Any:
    return S._select(x, len(x.shape) - 1, slice(start, stop))


def _rows(x: Any, start: int, stop: int) -> Any:
    return S._select(x, len(x.shape) - 2, slice(start, stop))


# --------------------------------------------------------------------- cholesky
# Attribute ``check``: raise LinAlgError on a matrix that is not positive-definite (False
# for cholesky_ex, which returns LAPACK's partial factor and the failing order instead).


def cholesky_failure(info: int) -> LinAlgError:
    """The error for a factorization that stopped at leading minor ``info``."""
    return LinAlgError(f"linalg.cholesky: The factorization could not be completed because "
                       f"the input is not positive-definite (the leading minor of order "
                       f"{info} is not positive-definite).")


def _factor_one(a: np.ndarray) -> tuple[np.ndarray, int]:
    """The lower Cholesky factor of one matrix by columns (LAPACK's order), and the order
    of the first leading minor that is not positive-definite (0: none)."""
    n = a.shape[0]
    L = np.tril(a).astype(a.dtype, copy=True)  # noqa: N806
    for j in range(n):
        d = L[j, j] - L[j, :j] @ L[j, :j]
        if not d > 0:
            L[j, j] = d
            return L, j + 1
        L[j, j] = np.sqrt(d)
        L[j + 1:, j] = (L[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L, 0


def cholesky_info_impl(A: np.ndarray) -> np.ndarray:  # noqa: N803
    """The int32 ``info`` of each matrix's factorization (0, or the failing order)."""
    batch = A.shape[:-2]
    flat = A.reshape((math.prod(batch),) + A.shape[-2:])
    info = np.zeros(len(flat), np.int32)
    for i, a in enumerate(flat):
        try:
            np.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            info[i] = _factor_one(a)[1]
    return info.reshape(batch)


def _cholesky_impl(A: np.ndarray, check: bool) -> np.ndarray:  # noqa: N803
    try:
        return np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        pass
    flat = A.reshape((math.prod(A.shape[:-2]),) + A.shape[-2:])
    out = np.empty_like(flat)
    for i, a in enumerate(flat):
        try:
            out[i] = np.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            out[i], info = _factor_one(a)
            if check:
                raise cholesky_failure(info) from None
    return out.reshape(A.shape)


def _cholesky_infer(A: Any, check: bool) -> tuple:  # noqa: N803
    return check_matrix("cholesky", A, square=True)


def _cholesky_vjp(ctx, g):
    L = ctx.out  # noqa: N806
    Lt = _mT(L)  # noqa: N806
    P = S.tril(matmul(Lt, S.tril(g)))  # noqa: N806
    P = E.sub(P, E.mul(S.diag_embed(S.diagonal(P, 0, -2, -1)), 0.5))  # noqa: N806
    X = solve_triangular_left(Lt, P, upper=True)  # noqa: N806  L⁻ᵀ P
    Sm = _mT(solve_triangular_left(Lt, _mT(X), upper=True))  # noqa: N806  L⁻ᵀ P L⁻¹
    return (_sym(Sm),)


CHOLESKY = register(OpDef("cholesky", _cholesky_impl, _cholesky_infer, _cholesky_vjp,
                          "LinalgCholeskyExBackward0", saves_out=True))


def _cholesky_info_infer(A: Any) -> tuple:  # noqa: N803
    shape, _ = check_matrix("cholesky_ex", A, square=True)
    return shape[:-2], np.dtype(np.int32)


CHOLESKY_INFO = register(OpDef("cholesky_info", cholesky_info_impl, _cholesky_info_infer, None,
                               "LinalgCholeskyExBackward0", differentiable=False))


def cholesky_lower(A: Any, check: bool = True) -> Any:  # noqa: N803
    """The lower Cholesky factor of each matrix of ``A`` (read from its lower triangle)."""
    try:
        return bind(CHOLESKY, A, check=bool(check))
    except RuntimeError as e:
        # The eager engine wraps a kernel's error; a failed factorization keeps its type.
        if isinstance(e.__cause__, LinAlgError):
            raise e.__cause__ from None
        raise


def cholesky_info(A: Any) -> Any:  # noqa: N803
    """The int32 ``info`` of ``cholesky_ex``: 0, or the order of the first leading minor
    that is not positive-definite."""
    return bind(CHOLESKY_INFO, A)


# -------------------------------------------------------------- solve_triangular
# ``A X = B`` for triangular ``A`` (..., n, n) and ``B`` (..., n, k) with the same batch
# dims (the public function broadcasts). Attributes: ``upper``, ``unitriangular`` (the
# diagonal is taken as ones and not read). Only A's triangle is read.


def _substitute(A: np.ndarray, B: np.ndarray, upper: bool, unit: bool) -> np.ndarray:  # noqa: N803
    """Forward or back substitution in float64 (as NumPy's LAPACK calls compute float32)."""
    n = A.shape[-1]
    X = np.empty(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + B.shape[-2:],  # noqa: N806
                 np.float64)
    order = range(n - 1, -1, -1) if upper else range(n)
    for i in order:
        done = slice(i + 1, n) if upper else slice(0, i)
        r = B[..., i, :] - np.einsum("...j,...jk->...k", A[..., i, done], X[..., done, :])
        X[..., i, :] = r if unit else r / A[..., i, i][..., None]
    return X


def _solve_triangular_impl(A: np.ndarray, B: np.ndarray, upper: bool,  # noqa: N803
                           unitriangular: bool) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero pivot gives inf, as LAPACK
        return _substitute(A, B, upper, unitriangular).astype(A.dtype, copy=False)


def _solve_triangular_infer(A: Any, B: Any, upper: bool, unitriangular: bool) -> tuple:  # noqa: N803
    sa, da = check_matrix("solve_triangular", A, square=True)
    sb, db = check_matrix("solve_triangular", B)
    if da != db:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, "
                           f"but found A of type {da} and B of type {db} instead")
    if sa[:-2] != sb[:-2] or sb[-2] != sa[-1]:
        raise ShapeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the "
                         f"equation AX = B ({sa} and {sb})")
    return sb, da


def _triangle(x: Any, upper: bool, unit: bool) -> Any:
    k = 1 if unit else 0
    return S.triu(x, k) if upper else S.tril(x, -k)


def _solve_triangular_vjp(ctx, g):
    A, _ = ctx.args  # noqa: N806
    a = ctx.attrs
    X = ctx.out  # noqa: N806
    gB = solve_triangular_left(_mT(A), g, upper=not a["upper"],  # noqa: N806
                               unitriangular=a["unitriangular"])
    gA = E.neg(matmul(gB, _mT(X)))  # noqa: N806
    return _triangle(gA, a["upper"], a["unitriangular"]), gB


SOLVE_TRIANGULAR = register(OpDef(
    "solve_triangular", _solve_triangular_impl, _solve_triangular_infer, _solve_triangular_vjp,
    "LinalgSolveTriangularBackward0", saves=(0,), saves_out=True))


def solve_triangular_left(A: Any, B: Any, *, upper: bool,  # noqa: N803
                          unitriangular: bool = False) -> Any:
    """``A⁻¹ B`` for triangular ``A``, batch dims broadcast."""
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    if tuple(A.shape[:-2]) != batch:
        A = S.broadcast_to(A, batch + tuple(A.shape[-2:]))  # noqa: N806
    if tuple(B.shape[:-2]) != batch:
        B = S.broadcast_to(B, batch + tuple(B.shape[-2:]))  # noqa: N806
    return bind(SOLVE_TRIANGULAR, A, B, upper=bool(upper), unitriangular=bool(unitriangular))


# ------------------------------------------------------------------------- eigh


def _eigh_impl(A: np.ndarray, lower: bool) -> np.ndarray:  # noqa: N803
    w, V = np.linalg.eigh(A, UPLO="L" if lower else "U")  # noqa: N806
    return np.concatenate([w[..., None, :], V], -2)


def _eigh_infer(A: Any, lower: bool) -> tuple:  # noqa: N803
    shape, dtype = check_matrix("eigh", A, square=True)
    return shape[:-2] + (shape[-1] + 1, shape[-1]), dtype


def eigh_parts(packed: Any) -> tuple:
    """``(eigenvalues, eigenvectors)`` from `EIGH`'s packed output."""
    n = packed.shape[-1]
    return S._select(_rows(packed, 0, 1), len(packed.shape) - 2, 0), _rows(packed, 1, n + 1)


def _eigh_vjp(ctx, g):
    w, V = eigh_parts(ctx.out)  # noqa: N806
    gw, gV = eigh_parts(g)  # noqa: N806
    n = w.shape[-1]
    VtgV = matmul(_mT(V), gV)  # noqa: N806
    gap = E.sub(_unsqueeze(w, -2), _unsqueeze(w, -1))  # gap[i, j] = w_j - w_i
    off = ~np.eye(n, dtype=bool)
    # Off the diagonal skew/(2 gap); on it gw (a where, so the zero gap never divides).
    inner = E.div(E.sub(VtgV, _mT(VtgV)), E.mul(E.where(off, gap, 1.0), 2.0))
    inner = E.add(E.where(off, inner, 0.0), S.diag_embed(gw))
    return (matmul(matmul(V, inner), _mT(V)),)


EIGH = register(OpDef("eigh", _eigh_impl, _eigh_infer, _eigh_vjp, "LinalgEighBackward0",
                      saves_out=True))


def eigh_packed(A: Any, UPLO: str = "L") -> Any:  # noqa: N803
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return bind(EIGH, A, lower=UPLO == "L")


# -------------------------------------------------------------------------- svd


def svd_sizes(m: int, n: int, full: bool) -> tuple[int, int, int]:
    """``(k, ku, kv)``: the number of singular values and of columns of U / rows of Vh."""
    k = min(m, n)
    return (k, m, n) if full else (k, k, k)


def _svd_impl(A: np.ndarray, full_matrices: bool) -> np.ndarray:  # noqa: N803
    U, s, Vh = np.linalg.svd(A, full_matrices=full_matrices)  # noqa: N806
    batch = A.shape[:-2]
    # Sizes written out: a -1 cannot be resolved when the batch is empty.
    return np.concatenate([U.reshape(batch + (U.shape[-2] * U.shape[-1],)), s,
                           Vh.reshape(batch + (Vh.shape[-2] * Vh.shape[-1],))], -1)


def _svd_infer(A: Any, full_matrices: bool) -> tuple:  # noqa: N803
    shape, dtype = check_matrix("svd", A)
    m, n = shape[-2:]
    k, ku, kv = svd_sizes(m, n, full_matrices)
    return shape[:-2] + (m * ku + k + kv * n,), dtype


def svd_parts(packed: Any, m: int, n: int, full: bool) -> tuple:
    """``(U, S, Vh)`` from `SVD`'s packed output."""
    k, ku, kv = svd_sizes(m, n, full)
    batch = tuple(packed.shape[:-1])
    U = S.reshape(_cols(packed, 0, m * ku), batch + (m, ku))  # noqa: N806
    s = _cols(packed, m * ku, m * ku + k)
    Vh = S.reshape(_cols(packed, m * ku + k, m * ku + k + kv * n), batch + (kv, n))  # noqa: N806
    return U, s, Vh


def _svd_vjp(ctx, g):
    full = ctx.attrs["full_matrices"]
    m, n = ctx.inputs[0].shape[-2:]
    k = min(m, n)
    U, s, Vh = svd_parts(ctx.out, m, n, full)  # noqa: N806
    gU, gs, gVh = svd_parts(g, m, n, full)  # noqa: N806
    if full:
        # The columns beyond k are not determined by A: only the first k carry a gradient.
        U, gU, Vh, gVh = (_cols(U, 0, k), _cols(gU, 0, k),  # noqa: N806
                          _rows(Vh, 0, k), _rows(gVh, 0, k))
    V, gV = _mT(Vh), _mT(gVh)  # noqa: N806
    UtgU = matmul(_mT(U), gU)  # noqa: N806
    VtgV = matmul(_mT(V), gV)  # noqa: N806
    s2 = E.mul(s, s)
    gap = E.sub(_unsqueeze(s2, -2), _unsqueeze(s2, -1))  # s_j² - s_i²
    off = ~np.eye(k, dtype=bool)
    num = E.add(E.mul(E.sub(UtgU, _mT(UtgU)), _unsqueeze(s, -2)),
                E.mul(_unsqueeze(s, -1), E.sub(VtgV, _mT(VtgV))))
    inner = E.where(off, E.div(num, E.where(off, gap, 1.0)), 0.0)
    inner = E.add(inner, S.diag_embed(gs))
    gA = matmul(matmul(U, inner), Vh)  # noqa: N806
    srow = _unsqueeze(s, -2)
    if m > k:
        gA = E.add(gA, matmul(E.div(E.sub(gU, matmul(U, UtgU)), srow), Vh))  # noqa: N806
    if n > k:
        gA = E.add(gA, matmul(U, _mT(E.div(E.sub(gV, matmul(V, VtgV)), srow))))  # noqa: N806
    return (gA,)


SVD = register(OpDef("svd", _svd_impl, _svd_infer, _svd_vjp, "LinalgSvdBackward0",
                     saves_out=True))


def svd_packed(A: Any, full_matrices: bool) -> Any:  # noqa: N803
    return bind(SVD, A, full_matrices=bool(full_matrices))


# --------------------------------------------------------------------------- qr


def _qr_impl(A: np.ndarray, complete: bool) -> np.ndarray:  # noqa: N803
    Q, R = np.linalg.qr(A, mode="complete" if complete else "reduced")  # noqa: N806
    m = A.shape[-2]
    kq = Q.shape[-1]
    out = np.zeros(A.shape[:-2] + (m, kq + A.shape[-1]), A.dtype)
    out[..., :kq] = Q
    out[..., :kq, kq:] = R
    return out


def _qr_infer(A: Any, complete: bool) -> tuple:  # noqa: N803
    shape, dtype = check_matrix("qr", A)
    m, n = shape[-2:]
    kq = m if complete else min(m, n)
    return shape[:-2] + (m, kq + n), dtype


def qr_parts(packed: Any, n: int) -> tuple:
    """``(Q, R)`` from `QR`'s packed output (``n``: A's column count)."""
    kq = packed.shape[-1] - n
    return _cols(packed, 0, kq), _rows(_cols(packed, kq, kq + n), 0, kq)


def _qr_square_vjp(Q: Any, R: Any, gQ: Any, gR: Any) -> Any:  # noqa: N803
    """The gradient for ``A = QR`` with ``m >= n`` (R square and invertible)."""
    M = E.sub(matmul(R, _mT(gR)), matmul(_mT(gQ), Q))  # noqa: N806
    Mlu = E.add(S.tril(M), _mT(S.tril(M, -1)))  # noqa: N806  M's lower triangle, mirrored
    # (gQ + Q Mlu) R⁻ᵀ, as the solve Rᵀ... on the right: ((R⁻¹ (gQ + Q Mlu)ᵀ))ᵀ.
    rhs = E.add(gQ, matmul(Q, Mlu))
    return _mT(solve_triangular_left(R, _mT(rhs), upper=True))


def _qr_vjp(ctx, g):
    m, n = ctx.inputs[0].shape[-2:]
    complete = ctx.attrs["complete"]
    if complete and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    Q, R = qr_parts(ctx.out, n)  # noqa: N806
    gQ, gR = qr_parts(g, n)  # noqa: N806
    gR = S.triu(gR)  # noqa: N806  R's lower part is constant zero
    if m >= n:
        return (_qr_square_vjp(Q, R, gQ, gR),)
    # A = [X | Y] with X square: X = Q R1, Y = Q R2; Y's gradient reaches Q too.
    (A,) = ctx.args  # noqa: N806
    Y = _cols(A, m, n)  # noqa: N806
    gR1, gR2 = _cols(gR, 0, m), _cols(gR, m, n)  # noqa: N806
    gX = _qr_square_vjp(Q, _cols(R, 0, m), E.add(gQ, matmul(Y, _mT(gR2))), gR1)  # noqa: N806
    return (S.concatenate([gX, matmul(Q, gR2)], -1),)


QR = register(OpDef("qr", _qr_impl, _qr_infer, _qr_vjp, "LinalgQrBackward0", saves=(0,),
                    saves_out=True))


def qr_packed(A: Any, complete: bool) -> Any:  # noqa: N803
    return bind(QR, A, complete=bool(complete))


# ------------------------------------------------------------------------- pinv
# A primitive rather than a composition through the SVD: its gradient (Golub and
# Pereyra's, for a constant rank) needs no distinct singular values, so the pseudoinverse
# of an orthogonal or identity-like matrix has a finite gradient as in PyTorch. The cut-off:
# singular values at most ``max(atol, rtol * s_max)`` are treated as zero.


def pinv_cutoff(s: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """The per-matrix threshold below which singular values count as zero."""
    return np.maximum(atol, rtol * s[..., :1])


def _pinv_impl(A: np.ndarray, atol: float, rtol: float) -> np.ndarray:  # noqa: N803
    U, s, Vh = np.linalg.svd(A, full_matrices=False)  # noqa: N806
    keep = s > pinv_cutoff(s, atol, rtol)
    with np.errstate(divide="ignore"):
        sinv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0).astype(A.dtype)
    return np.matmul(np.swapaxes(Vh, -1, -2) * sinv[..., None, :], np.swapaxes(U, -1, -2))


def _pinv_infer(A: Any, atol: float, rtol: float) -> tuple:  # noqa: N803
    shape, dtype = check_matrix("pinv", A)
    return shape[:-2] + (shape[-1], shape[-2]), dtype


def _pinv_vjp(ctx, g):
    (A,) = ctx.args  # noqa: N806
    P = ctx.out  # noqa: N806
    m, n = A.shape[-2:]
    dtype = A.dtype
    Pt = _mT(P)  # noqa: N806
    term1 = E.neg(matmul(matmul(Pt, g), Pt))
    left = E.sub(_eye_like(m, dtype), matmul(A, P))  # I - A P
    right = E.sub(_eye_like(n, dtype), matmul(P, A))  # I - P A
    term2 = matmul(matmul(left, _mT(g)), matmul(P, Pt))
    term3 = matmul(matmul(Pt, P), matmul(_mT(g), right))
    return (E.add(E.add(term1, term2), term3),)


PINV = register(OpDef("pinv", _pinv_impl, _pinv_infer, _pinv_vjp, "LinalgPinvBackward0",
                      saves=(0,), saves_out=True))


def pinv_primitive(A: Any, atol: float, rtol: float) -> Any:  # noqa: N803
    return bind(PINV, A, atol=float(atol), rtol=float(rtol))


# --------------------------------------------------------------------------- lu
# LU with partial pivoting, as LAPACK's getrf pivots: at step j the row with the largest
# magnitude in column j (the first on ties) is swapped up. Packed layout, for A (m, n) and
# k = min(m, n): (..., m + 1, m + k + n): row 0 holds the 1-based pivots (LAPACK's ipiv)
# in its first k entries; rows 1.. hold P (m, m), then L (m, k, unit lower), then U
# (k, n) in the top k rows of the last n columns, with A = P L U.


def _lu_impl(A: np.ndarray) -> np.ndarray:  # noqa: N803
    m, n = A.shape[-2:]
    k = min(m, n)
    a = A.astype(np.float64).reshape((-1, m, n))  # float32 computed in float64, as NumPy does
    batch = np.arange(a.shape[0])
    perm = np.tile(np.arange(m), (a.shape[0], 1))
    out = np.zeros((a.shape[0], m + 1, m + k + n))
    for j in range(k):
        p = j + np.argmax(np.abs(a[:, j:, j]), axis=1)
        out[:, 0, j] = p + 1
        a[batch, j], a[batch, p] = a[batch, p], a[batch, j].copy()
        perm[batch, j], perm[batch, p] = perm[batch, p], perm[batch, j].copy()
        d = a[:, j, j]
        # A zero pivot leaves its column unscaled (LAPACK reports it in info and goes on).
        a[:, j + 1:, j] /= np.where(d == 0, 1.0, d)[:, None]
        a[:, j + 1:, j + 1:] -= a[:, j + 1:, j, None] * a[:, None, j, j + 1:]
    out[batch[:, None], 1 + perm, np.arange(m)] = 1.0  # P[perm[i], i] = 1
    out[:, 1:, m:m + k] = np.tril(a[:, :, :k], -1) + np.eye(m, k)
    out[:, 1:1 + k, m + k:] = np.triu(a[:, :k, :])
    return out.reshape(A.shape[:-2] + (m + 1, m + k + n)).astype(A.dtype)


def _lu_infer(A: Any) -> tuple:  # noqa: N803
    shape, dtype = check_matrix("lu_factor", A)
    m, n = shape[-2:]
    return shape[:-2] + (m + 1, m + min(m, n) + n), dtype


def lu_parts(packed: Any, m: int, n: int) -> tuple:
    """``(pivots, P, L, U)`` from `LU`'s packed output for an (m, n) ``A``: pivots as
    floats."""
    k = min(m, n)
    body = _rows(packed, 1, m + 1)
    return (_cols(_rows(packed, 0, 1), 0, k), _cols(body, 0, m), _cols(body, m, m + k),
            _rows(_cols(body, m + k, m + k + n), 0, k))


def _right_solve_transposed(X: Any, T: Any, upper: bool, unit: bool = False) -> Any:  # noqa: N803
    """``X T⁻ᵀ`` for triangular ``T``: the transpose of ``T⁻¹ Xᵀ``."""
    return _mT(solve_triangular_left(T, _mT(X), upper=upper, unitriangular=unit))


def _lu_square_vjp(L: Any, U: Any, gL: Any, gU: Any) -> Any:  # noqa: N803
    """The gradient of ``B = L U`` (square L, no pivoting): with X = L⁻¹ dB U⁻¹, dL = L
    tril(X, -1) and dU = triu(X) U, so gB = L⁻ᵀ (tril(Lᵀ gL, -1) + triu(gU Uᵀ)) U⁻ᵀ."""
    # L's diagonal and upper part and U's lower part are constants: their gradients drop.
    gL, gU = S.tril(gL, -1), S.triu(gU)  # noqa: N806
    phi = E.add(S.tril(matmul(_mT(L), gL), -1), S.triu(matmul(gU, _mT(U))))
    left = solve_triangular_left(_mT(L), phi, upper=True, unitriangular=True)
    return _right_solve_transposed(left, U, upper=True)


def _lu_vjp(ctx, g):
    m, n = ctx.inputs[0].shape[-2:]
    _, P, L, U = lu_parts(ctx.out, m, n)  # noqa: N806
    _, _, gL, gU = lu_parts(g, m, n)  # noqa: N806  P and the pivots are piecewise constant
    # With B = Pᵀ A: a tall B = [L1; L2] U has L2 = B2 U⁻¹, a wide B = L [U1 U2] has
    # U2 = L⁻¹ B2; each adds its term to the square block's gradients and its own block.
    if m > n:
        L1, L2, gL1, gL2 = _rows(L, 0, n), _rows(L, n, m), _rows(gL, 0, n), _rows(gL, n, m)  # noqa: N806
        gB2 = _right_solve_transposed(gL2, U, upper=True)  # noqa: N806
        gU = E.sub(gU, matmul(_mT(L2), gB2))  # noqa: N806
        gB = S.concatenate([_lu_square_vjp(L1, U, gL1, gU), gB2], -2)  # noqa: N806
    elif m < n:
        U1, U2, gU1, gU2 = _cols(U, 0, m), _cols(U, m, n), _cols(gU, 0, m), _cols(gU, m, n)  # noqa: N806
        gB2 = solve_triangular_left(_mT(L), gU2, upper=True, unitriangular=True)  # noqa: N806
        gL = E.sub(gL, matmul(gB2, _mT(U2)))  # noqa: N806
        gB = S.concatenate([_lu_square_vjp(L, U1, gL, gU1), gB2], -1)  # noqa: N806
    else:
        gB = _lu_square_vjp(L, U, gL, gU)  # noqa: N806
    return (matmul(P, gB),)


LU = register(OpDef("lu", _lu_impl, _lu_infer, _lu_vjp, "LinalgLuBackward0", saves_out=True))


def lu_packed(A: Any) -> Any:  # noqa: N803
    return bind(LU, A)


# ----------------------------------------------------------- the public functions
# ``torch.linalg``'s names (re-exported by ``dualgraph/linalg.py``) and the older top-level
# ones (``torch.cholesky_solve``, ``torch.svd`` with ``some=`` and V, ...).

linalg_cholesky_ex = namedtuple("linalg_cholesky_ex", ["L", "info"])
linalg_eigh = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_svd = namedtuple("linalg_svd", ["U", "S", "Vh"])
linalg_qr = namedtuple("linalg_qr", ["Q", "R"])
linalg_lstsq = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
svd_result = namedtuple("svd", ["U", "S", "V"])
qr_result = namedtuple("qr", ["Q", "R"])
triangular_solve_result = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def _no_out(fn: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"{fn}(): out= is not supported; assign the result instead")


def cholesky(A: Any, *, upper: bool = False, out: Any = None) -> Any:  # noqa: N803
    """The Cholesky factor of each symmetric positive-definite matrix of ``A`` (lower, or
    upper with ``upper=True``); one that is not positive-definite raises `LinAlgError`.

        >>> dg.linalg.cholesky(dg.tensor([[4.0, 2.0], [2.0, 5.0]]))
        tensor([[2., 0.],
                [1., 2.]])
    """
    _no_out("linalg.cholesky", out)
    L = cholesky_lower(A)  # noqa: N806
    return _mT(L) if upper else L


def cholesky_ex(A: Any, *, upper: bool = False, check_errors: bool = False,  # noqa: N803
                out: Any = None) -> Any:
    """``(L, info)``: `cholesky` that reports failure in ``info`` (int32: 0, or the order
    of the first leading minor that is not positive-definite) instead of raising, unless
    ``check_errors``."""
    _no_out("linalg.cholesky_ex", out)
    L = cholesky_lower(A, check=check_errors)  # noqa: N806
    return linalg_cholesky_ex(_mT(L) if upper else L, cholesky_info(A))


def torch_cholesky(input: Any, upper: bool = False, *, out: Any = None) -> Any:  # noqa: A002
    """``torch.cholesky``: `cholesky` with ``upper`` positional."""
    return cholesky(input, upper=upper, out=out)


def solve_triangular(A: Any, B: Any, *, upper: bool, left: bool = True,  # noqa: N803
                     unitriangular: bool = False, out: Any = None) -> Any:
    """The solution ``X`` of ``A X = B`` (``left=False``: ``X A = B``) for triangular
    ``A`` (only its ``upper`` or lower triangle is read; ``unitriangular``: its diagonal
    is taken as ones), batch dims broadcast."""
    _no_out("linalg.solve_triangular", out)
    check_matrix("solve_triangular", A, square=True)
    check_matrix("solve_triangular", B)
    if left:
        return solve_triangular_left(A, B, upper=upper, unitriangular=unitriangular)
    # X A = B  <=>  Aᵀ Xᵀ = Bᵀ, and Aᵀ's triangle is the other one.
    return _mT(solve_triangular_left(_mT(A), _mT(B), upper=not upper,
                                     unitriangular=unitriangular))


def triangular_solve(b: Any, A: Any, upper: bool = True, transpose: bool = False,  # noqa: N803
                     unitriangular: bool = False) -> Any:
    """``torch.triangular_solve``: ``(solution, cloned_coefficient)`` of ``A X = b`` (of
    ``Aᵀ X = b`` with ``transpose``)."""
    Ak = _mT(A) if transpose else A  # noqa: N806
    X = solve_triangular_left(Ak, b, upper=upper != transpose,  # noqa: N806
                              unitriangular=unitriangular)
    return triangular_solve_result(X, E.add(A, 0.0) if np.dtype(A.dtype).kind == "f" else A)


linalg_lu = namedtuple("linalg_lu", ["P", "L", "U"])
linalg_lu_factor = namedtuple("linalg_lu_factor", ["LU", "pivots"])
linalg_lu_factor_ex = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
lu_unpack_result = namedtuple("lu_unpack", ["P", "L", "U"])


def _lu(fn: str, A: Any, pivot: bool) -> tuple:  # noqa: N803
    if not pivot:
        raise RuntimeError(f"linalg.{fn}: LU without pivoting is not implemented on the CPU")
    check_matrix(fn, A)
    m, n = A.shape[-2:]
    return lu_parts(lu_packed(A), m, n)


def _compact(L: Any, U: Any) -> Any:  # noqa: N803
    """L's strict lower part and U in one (m, n) matrix, as LAPACK stores them."""
    (m, k), n = L.shape[-2:], U.shape[-1]
    strict = E.sub(L, np.eye(m, k, dtype=np.dtype(L.dtype)))
    if m >= n:
        pad = np.zeros(tuple(U.shape[:-2]) + (m - k, n), np.dtype(U.dtype))
        return E.add(strict, S.concatenate([U, pad], -2))
    pad = np.zeros(tuple(L.shape[:-2]) + (m, n - k), np.dtype(L.dtype))
    return E.add(U, S.concatenate([strict, pad], -1))


def lu(A: Any, *, pivot: bool = True, out: Any = None) -> Any:  # noqa: N803
    """``(P, L, U)`` with ``A = P L U``: P a permutation matrix, L unit lower triangular
    (m, k), U upper triangular (k, n), k = min(m, n); partial pivoting as LAPACK's getrf.

    >>> P, L, U = dg.linalg.lu(dg.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> U
    tensor([[3.0000, 4.0000],
            [0.0000, 0.6667]])
    """
    _no_out("linalg.lu", out)
    _, P, L, U = _lu("lu", A, pivot)  # noqa: N806
    return linalg_lu(S.stop_gradient(P), L, U)  # a permutation: no gradient, as in PyTorch


def lu_factor(A: Any, *, pivot: bool = True, out: Any = None) -> Any:  # noqa: N803
    """``(LU, pivots)``: `lu`'s L (without its unit diagonal) and U in one matrix, and the
    int32 1-based row swaps (LAPACK's ``ipiv``), for `lu_solve` and `lu_unpack`."""
    _no_out("linalg.lu_factor", out)
    piv, _, L, U = _lu("lu_factor", A, pivot)  # noqa: N806
    return linalg_lu_factor(_compact(L, U), S.reshape(S.astype(piv, np.int32), piv.shape[:-2]
                                                      + (piv.shape[-1],)))


def lu_factor_ex(A: Any, *, pivot: bool = True, check_errors: bool = False,  # noqa: N803
                 out: Any = None) -> Any:
    """``(LU, pivots, info)``: `lu_factor` with an int32 ``info``, the 1-based index of
    U's first zero diagonal entry (0 when there is none; the factorization is still
    returned). ``check_errors=True`` raises `LinAlgError` instead."""
    _no_out("linalg.lu_factor_ex", out)
    LU, piv = lu_factor(A, pivot=pivot)  # noqa: N806
    zero = E.eq(S.diagonal(LU, 0, -2, -1), 0.0)
    k = zero.shape[-1]
    # the first zero's index + 1: the smallest of (index + 1 where zero, else k + 1)
    first = R.min(E.where(zero, np.arange(1, k + 1), k + 1), -1)[0]
    info = S.astype(E.where(E.le(first, k), first, 0), np.int32)
    if check_errors and current_trace() is None and np.any(np.asarray(info)):
        bad = int(np.asarray(info).reshape(-1)[np.flatnonzero(np.asarray(info))[0]])
        raise LinAlgError(f"linalg.lu_factor_ex: U[{bad},{bad}] is zero and using it on "
                          "lu_solve would result in a division by zero. If you still want "
                          "to perform the factorization, consider calling linalg.lu(A, "
                          "pivot) or linalg.lu_factor_ex(A, pivot)")
    return linalg_lu_factor_ex(LU, piv, info)


def torch_lu(A: Any, pivot: bool = True, get_infos: bool = False, out: Any = None) -> Any:  # noqa: N803
    """``torch.lu``: ``(LU, pivots)``, or ``(LU, pivots, infos)`` with ``get_infos``."""
    _no_out("lu", out)
    LU, piv, info = lu_factor_ex(A, pivot=pivot)  # noqa: N806
    return (LU, piv, info) if get_infos else (LU, piv)


def _permutation(pivots: Any, m: int, dtype: Any) -> Any:
    """The permutation matrix P (m, m) of LAPACK's 1-based row swaps: swap j with
    ``pivots[j] - 1`` for j in order, on the identity's row order, then P[perm[i], i] = 1."""
    k = pivots.shape[-1]
    rows = np.arange(m)
    piv = E.sub(S.astype(pivots, np.int64), 1)
    perm = S.broadcast_to(rows, tuple(pivots.shape[:-1]) + (m,))
    for j in range(k):
        pj = _cols(piv, j, j + 1)
        here, there = _cols(perm, j, j + 1), take_along_dim(perm, pj, -1)
        perm = E.where(E.eq(rows, j), there, E.where(E.eq(rows, pj), here, perm))
    return S.astype(E.eq(_unsqueeze(rows, -1), _unsqueeze(perm, -2)), np.dtype(dtype))


def lu_unpack(LU_data: Any, LU_pivots: Any, unpack_data: bool = True,  # noqa: N803
              unpack_pivots: bool = True, *, out: Any = None) -> Any:
    """``(P, L, U)`` from `lu_factor`'s ``(LU, pivots)``; the parts not asked for are empty
    tensors, as in PyTorch."""
    _no_out("lu_unpack", out)
    shape, dtype = check_matrix("lu_unpack", LU_data)
    m, n = shape[-2:]
    k = min(m, n)
    empty = np.zeros((0,), np.dtype(dtype))
    L = U = P = S.stop_gradient(empty)  # noqa: N806
    if unpack_data:
        L = E.add(S.tril(_cols(LU_data, 0, k), -1), np.eye(m, k, dtype=np.dtype(dtype)))  # noqa: N806
        U = S.triu(_rows(LU_data, 0, k))  # noqa: N806
    if unpack_pivots:
        P = _permutation(LU_pivots, m, dtype)  # noqa: N806
    return lu_unpack_result(P, L, U)


def lu_solve(LU: Any, pivots: Any, B: Any, *, left: bool = True, adjoint: bool = False,  # noqa: N803
             out: Any = None) -> Any:
    """The solution X of ``A X = B`` (``left=False``: ``X A = B``; ``adjoint=True``: with
    Aᵀ) from `lu_factor`'s ``(LU, pivots)`` of a square A."""
    _no_out("linalg.lu_solve", out)
    shape, _ = check_matrix("lu_solve", LU, square=True)
    if not left:  # X A = B is Aᵀ Xᵀ = Bᵀ
        return _mT(lu_solve(LU, pivots, _mT(B), adjoint=not adjoint))
    if tuple(B.shape[-2:-1]) != tuple(shape[-1:]):
        raise ShapeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                         f"AX = B ({shape[-2]}x{shape[-1]} and "
                         f"{'x'.join(map(str, B.shape[-2:]))})")
    P, L, U = lu_unpack(LU, pivots)  # noqa: N806
    if adjoint:  # Aᵀ = Uᵀ Lᵀ Pᵀ: X = P L⁻ᵀ U⁻ᵀ B
        y = solve_triangular_left(_mT(U), B, upper=False)
        return matmul(P, solve_triangular_left(_mT(L), y, upper=True, unitriangular=True))
    y = solve_triangular_left(L, matmul(_mT(P), B), upper=False, unitriangular=True)
    return solve_triangular_left(U, y, upper=True)


def torch_lu_solve(b: Any, LU_data: Any, LU_pivots: Any, *, out: Any = None) -> Any:  # noqa: N803
    """``torch.lu_solve(b, LU_data, LU_pivots)``: `lu_solve` with the old argument order."""
    _no_out("lu_solve", out)
    return lu_solve(LU_data, LU_pivots, b)


def cholesky_solve(B: Any, L: Any, upper: bool = False, *, out: Any = None) -> Any:  # noqa: N803
    """The solution ``X`` of ``A X = B`` given the Cholesky factor ``L`` of ``A``
    (``upper``: ``L`` is the upper factor ``Aᵀ = Uᵀ U``)."""
    _no_out("cholesky_solve", out)
    check_matrix("cholesky_solve", L, square=True)
    Lo = _mT(L) if upper else L  # noqa: N806
    if not getattr(L, "requires_grad", False):
        return _cholesky_solve_lower(B, Lo)
    # The solve reads one triangle of L, but PyTorch's gradient differentiates A = L Lᵀ
    # with the whole of L: -(G Xᵀ + X Gᵀ) L, upper triangle included. X takes no gradient
    # from L; the term h - stop(h), zero in value, carries that gradient, since
    # h = -A⁻¹ (L Lᵀ) X with A⁻¹ and X held fixed has exactly that vector-Jacobian product.
    L_fixed = S.stop_gradient(Lo)  # noqa: N806
    X = _cholesky_solve_lower(B, L_fixed)  # noqa: N806
    h = E.neg(_cholesky_solve_lower(matmul(Lo, matmul(_mT(Lo), S.stop_gradient(X))), L_fixed))
    return E.add(X, E.sub(h, S.stop_gradient(h)))


def _cholesky_solve_lower(B: Any, L: Any) -> Any:  # noqa: N803
    Y = solve_triangular_left(L, B, upper=False)  # noqa: N806
    return solve_triangular_left(_mT(L), Y, upper=True)


def cholesky_inverse(L: Any, upper: bool = False, *, out: Any = None) -> Any:  # noqa: N803
    """The inverse of ``A`` from its Cholesky factor ``L`` (``upper``: ``A = Uᵀ U``)."""
    _no_out("cholesky_inverse", out)
    shape, dtype = check_matrix("cholesky_inverse", L, square=True)
    eye = E.add(E.mul(L, 0.0), _eye_like(shape[-1], dtype))
    return cholesky_solve(eye, L, upper)


def eigh(A: Any, UPLO: str = "L", *, out: Any = None) -> Any:  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix of ``A`` (only its ``UPLO``
    triangle is read), the values ascending, the vectors as columns."""
    _no_out("linalg.eigh", out)
    return linalg_eigh(*eigh_parts(eigh_packed(A, UPLO)))


def eigvalsh(A: Any, UPLO: str = "L", *, out: Any = None) -> Any:  # noqa: N803
    """The eigenvalues of each symmetric matrix of ``A``, ascending."""
    _no_out("linalg.eigvalsh", out)
    return eigh_parts(eigh_packed(A, UPLO))[0]


def _driver(fn: str, driver: Any) -> None:
    if driver is not None:
        raise RuntimeError(f"linalg.{fn}: driver= is only for CUDA inputs; got {driver!r}")


def svd(A: Any, full_matrices: bool = True, *, driver: Any = None,  # noqa: N803
        out: Any = None) -> Any:
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, ``S`` descending. ``full_matrices``:
    ``U`` is (m, m) and ``Vh`` (n, n); otherwise (m, k) and (k, n), ``k = min(m, n)``."""
    _no_out("linalg.svd", out)
    _driver("svd", driver)
    shape, _ = check_matrix("svd", A)
    m, n = shape[-2:]
    return linalg_svd(*svd_parts(svd_packed(A, full_matrices), m, n, bool(full_matrices)))


def svdvals(A: Any, *, driver: Any = None, out: Any = None) -> Any:  # noqa: N803
    """The singular values of each matrix of ``A``, descending."""
    _no_out("linalg.svdvals", out)
    _driver("svdvals", driver)
    shape, _ = check_matrix("svdvals", A)
    m, n = shape[-2:]
    return svd_parts(svd_packed(A, False), m, n, False)[1]


def torch_svd(input: Any, some: bool = True, compute_uv: bool = True, *,  # noqa: A002
              out: Any = None) -> Any:
    """``torch.svd``: ``(U, S, V)`` (V, not its transpose); ``some=False`` gives the full
    square ``U`` and ``V``. ``compute_uv=False`` gives zero ``U`` and ``V``, as PyTorch."""
    _no_out("svd", out)
    U, s, Vh = svd(input, full_matrices=not some)  # noqa: N806
    if not compute_uv:
        return svd_result(E.mul(S.stop_gradient(U), 0.0), s, E.mul(S.stop_gradient(_mT(Vh)), 0.0))
    return svd_result(U, s, _mT(Vh))


def qr(A: Any, mode: str = "reduced", *, out: Any = None) -> Any:  # noqa: N803
    """``(Q, R)`` with ``A = Q R``, ``Q`` orthonormal columns, ``R`` upper triangular.
    ``mode``: ``'reduced'`` (``Q`` m x k), ``'complete'`` (``Q`` m x m) or ``'r'`` (``R``
    only; ``Q`` is empty)."""
    _no_out("linalg.qr", out)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    shape, dtype = check_matrix("qr", A)
    Q, R = qr_parts(qr_packed(A, mode == "complete"), shape[-1])  # noqa: N806
    if mode == "r":
        Q = S.stop_gradient(np.zeros((0,), dtype))  # noqa: N806
    return linalg_qr(Q, R)


def torch_qr(input: Any, some: bool = True, *, out: Any = None) -> Any:  # noqa: A002
    """``torch.qr``: `qr` with ``some=False`` meaning ``mode='complete'``."""
    _no_out("qr", out)
    return qr_result(*qr(input, "reduced" if some else "complete"))


def householder_product(A: Any, tau: Any, *, out: Any = None) -> Any:  # noqa: N803
    """The first ``n`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T``, where
    ``v_i`` is column ``i`` of ``A`` (m x n) below the diagonal with a 1 on it: the ``Q`` of
    a QR decomposition stored as LAPACK's ``geqrf`` stores it. Differentiable in ``A``
    and ``tau`` (a composition of products)."""
    _no_out("linalg.householder_product", out)
    shape, dtype = check_matrix("householder_product", A)
    m, n = shape[-2:]
    tshape = tuple(tau.shape)
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater "
                           "than or equal to input.shape[-1]")
    if not tshape or tshape[-1] > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater "
                           "than or equal to tau.shape[-1]")
    if tshape[:-1] != tuple(shape[:-2]):
        raise RuntimeError("torch.linalg.householder_product: Expected batch dimensions of tau "
                           f"to be equal to input.shape[:-2], but got {list(tshape[:-1])}")
    eye = np.eye(m, n, dtype=np.dtype(dtype))
    V = E.add(S.tril(A, -1), eye)  # noqa: N806
    Q: Any = eye  # noqa: N806
    # Applied right to left, H_i (H_{i+1} ... I), so each step is a rank-one update.
    for i in reversed(range(tshape[-1])):
        v = _cols(V, i, i + 1)
        t = _unsqueeze(_cols(tau, i, i + 1), -1)
        Q = E.sub(Q, E.mul(t, matmul(v, matmul(_mT(v), Q))))  # noqa: N806
    return E.add(Q, E.mul(A, 0.0)) if isinstance(Q, np.ndarray) else Q


def _tolerances(fn: str, A: Any, atol: Any, rtol: Any) -> tuple[float, float]:
    """PyTorch's defaults: ``rtol = eps * max(m, n)`` when neither is given, 0 when only
    ``atol`` is."""
    shape, dtype = check_matrix(fn, A)
    for name, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"linalg.{fn}: {name} must be a number (tensor tolerances are not "
                            f"supported), got {type(v).__name__}")
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else np.finfo(dtype).eps * max(shape[-2:])
    return float(atol or 0.0), float(rtol)


def pinv(A: Any, *, atol: Any = None, rtol: Any = None, hermitian: bool = False,  # noqa: N803
         out: Any = None) -> Any:
    """The Moore-Penrose pseudoinverse of each matrix of ``A``: singular values at most
    ``max(atol, rtol * largest)`` count as zero. ``hermitian`` is accepted (the result is
    the same; the SVD is used either way)."""
    _no_out("linalg.pinv", out)
    atol, rtol = _tolerances("pinv", A, atol, rtol)
    return pinv_primitive(A, atol, rtol)


def pinverse(input: Any, rcond: float = 1e-15) -> Any:  # noqa: A002
    """``torch.pinverse``: `pinv` with a relative cut-off ``rcond``."""
    return pinv(input, rtol=rcond)


def matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, atol: Any = None,  # noqa: N803
                rtol: Any = None, out: Any = None) -> Any:
    """The number of singular values of each matrix above ``max(atol, rtol * largest)``
    (int64; ``tol`` is the older name of ``atol``)."""
    _no_out("linalg.matrix_rank", out)
    if tol is not None:
        atol = tol
    if _is_tensor(atol) or _is_tensor(rtol):
        return _matrix_rank_per_matrix(A, atol, rtol)
    atol, rtol = _tolerances("matrix_rank", A, atol, rtol)
    s = S.stop_gradient(svdvals(A))
    cut = E.maximum(E.mul(S._select(s, len(s.shape) - 1, slice(0, 1)), rtol), atol) \
        if s.shape[-1] else atol
    return R.sum(S.astype(E.gt(s, cut), np.int64), -1)


def _is_tensor(v: Any) -> bool:
    return v is not None and not isinstance(v, (int, float, np.integer, np.floating))


def _matrix_rank_per_matrix(A: Any, atol: Any, rtol: Any) -> Any:  # noqa: N803
    """`matrix_rank` with tensor tolerances, one per matrix (broadcast over the batch), and
    PyTorch's default: ``rtol = eps * max(m, n)``, or 0 where ``atol`` is positive."""
    shape, dtype = check_matrix("matrix_rank", A)
    s = S.stop_gradient(svdvals(A))
    default = float(np.finfo(dtype).eps * max(shape[-2:]))
    if rtol is None:
        rtol = default if atol is None else E.where(E.gt(atol, 0.0), 0.0, default)
    atol = 0.0 if atol is None else atol

    def per_matrix(t: Any) -> Any:
        return S.reshape(t, tuple(t.shape) + (1,)) if _is_tensor(t) else t

    largest = S._select(s, len(s.shape) - 1, slice(0, 1))
    cut = E.maximum(E.mul(largest, per_matrix(rtol)), per_matrix(atol))
    return R.sum(S.astype(E.gt(s, cut), np.int64), -1)


def lstsq(A: Any, B: Any, rcond: Any = None, *, driver: Any = None) -> Any:  # noqa: N803
    """``(solution, residuals, rank, singular_values)``: the least-squares solution of
    ``A X = B`` (the minimum-norm one when ``A`` is rank-deficient), computed as
    ``pinv(A) @ B`` with relative cut-off ``rcond`` (default ``eps * max(m, n)``), and the
    rank under that cut-off. ``residuals``, the squared residual of each column, is filled
    as PyTorch fills it: for ``m > n`` with ``driver='gels'``, or ``'gelsd'``/``'gelss'``
    when every matrix has full rank; it is empty for the default ``gelsy``.
    ``singular_values`` is filled for ``driver='gelsd'`` or ``'gelss'`` only."""
    if driver not in (None, "gelsy", "gelsd", "gelss", "gels"):
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, "
                           f"gelsy, gelsd, gelss), got {driver!r}")
    sa, dtype = check_matrix("lstsq", A)
    if np.dtype(B.dtype) != dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {dtype} and other's dtype "
                           f"{np.dtype(B.dtype)}")
    vector = len(B.shape) == len(A.shape) - 1
    Bm = S.reshape(B, tuple(B.shape) + (1,)) if vector else B  # noqa: N806
    if len(Bm.shape) < 2 or Bm.shape[-2] != sa[-2]:
        raise ShapeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2), "
                         f"got shapes {sa} and {tuple(B.shape)}")
    X = matmul(pinv(A, rtol=rcond), Bm)  # noqa: N806
    empty = S.stop_gradient(np.zeros((0,), dtype))
    rank = matrix_rank(A, rtol=rcond) if driver != "gels" else S.stop_gradient(
        np.zeros((0,), np.int64))
    values = S.stop_gradient(svdvals(A)) if driver in ("gelsd", "gelss") else empty
    # Empty, but on the solution's tape, as PyTorch's empty residuals require grad.
    residuals = S.getitem(S.reshape(X, (-1,)), slice(0, 0))
    m, n = sa[-2], sa[-1]
    # PyTorch's rule: the squared residual of each column when m > n, for every driver but
    # gelsy, and for gelsd/gelss only when every matrix has full rank n.
    if m > n and driver in ("gels", "gelsd", "gelss") and (
            driver == "gels" or bool(R.all(E.eq(rank, n)))):
        r = E.sub(matmul(A, X), Bm)
        residuals = R.sum(E.mul(r, r), -2)
    if vector:
        X = S.reshape(X, tuple(X.shape[:-1]))  # noqa: N806
    return linalg_lstsq(X, residuals, rank, values)


# ------------------------------------------------------------------- matrix_exp
# Scaling and squaring: X = A / 2^s with ``|A|_1 / 2^s <= 1``, the degree-18 Taylor
# polynomial of exp(X) by Horner's rule (its truncation error is below 1/19! ~ 8e-18 for
# |X| <= 1), then s squarings. Computed in float64. The gradient is the upper-right block
# of exp([[Aᵀ, g], [0, Aᵀ]]) (the Fréchet derivative's adjoint), so it is matrix_exp again.

EXP_DEGREE = 18


def squarings(norm1: float) -> int:
    """How many times to halve a matrix of 1-norm ``norm1`` to bring it within 1."""
    return max(0, int(np.ceil(np.log2(norm1)))) if norm1 > 1 else 0


def _matrix_exp_one(a: np.ndarray) -> np.ndarray:
    n = a.shape[0]
    s = squarings(float(np.abs(a).sum(0).max()) if n else 0.0)
    x = a / 2.0 ** s
    eye = np.eye(n)
    out = eye.copy()
    for k in range(EXP_DEGREE, 0, -1):
        out = eye + (x @ out) / k
    for _ in range(s):
        out = out @ out
    return out


def _matrix_exp_impl(A: np.ndarray) -> np.ndarray:  # noqa: N803
    flat = A.reshape((-1,) + A.shape[-2:]).astype(np.float64)
    out = np.stack([_matrix_exp_one(a) for a in flat]) if len(flat) else flat
    return out.reshape(A.shape).astype(A.dtype, copy=False)


def _matrix_exp_infer(A: Any) -> tuple:  # noqa: N803
    return check_matrix("matrix_exp", A, square=True)


def _matrix_exp_vjp(ctx, g):
    (A,) = ctx.args  # noqa: N806
    n = A.shape[-1]
    At = _mT(A)  # noqa: N806
    top = S.concatenate([At, g], -1)
    bottom = S.concatenate([E.mul(At, 0.0), At], -1)
    big = bind(MATRIX_EXP, S.concatenate([top, bottom], -2))
    return (_cols(_rows(big, 0, n), n, 2 * n),)


MATRIX_EXP = register(OpDef("matrix_exp", _matrix_exp_impl, _matrix_exp_infer,
                            _matrix_exp_vjp, "LinalgMatrixExpBackward0", saves=(0,)))


def matrix_exp(A: Any) -> Any:  # noqa: N803
    """The matrix exponential of each square matrix of ``A``."""
    return bind(MATRIX_EXP, A)
