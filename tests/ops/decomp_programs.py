"""Programs over the matrix decompositions, written once against a ``lib`` that is
``torch`` or ``dualgraph``: each returns named arrays (values, and gradients of losses
that do not depend on the sign or rotation of eigen/singular vectors).
``tests/ops/record_decomp_goldens.py`` records torch's; ``tests/ops/test_decomp.py``
compares dualgraph's."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _inputs() -> dict:
    rng = np.random.default_rng(24)
    b = rng.standard_normal((2, 4, 4))
    return {
        "spd": b @ np.swapaxes(b, -1, -2) + 4 * np.eye(4),  # (2, 4, 4), positive-definite
        "tall": rng.standard_normal((2, 5, 3)),
        "wide": rng.standard_normal((3, 5)),
        "rhs": rng.standard_normal((2, 4, 2)),
    }


INPUTS = _inputs()


def _np(t) -> np.ndarray:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _leaf(lib, name: str):
    return lib.tensor(INPUTS[name], requires_grad=True)


def _grads(lib, loss, leaves: dict) -> dict:
    loss.backward()
    return {f"grad_{k}": _np(v.grad) for k, v in leaves.items()}


def cholesky(lib) -> dict:
    a, r = _leaf(lib, "spd"), _leaf(lib, "rhs")
    L = lib.linalg.cholesky(a)
    U = lib.linalg.cholesky(a, upper=True)
    x = lib.cholesky_solve(r, L)
    inv = lib.cholesky_inverse(L[0])
    ex = lib.linalg.cholesky_ex(a)
    loss = (L * L.sin()).sum() + U.sum() + (x ** 2).sum() + inv.sum()
    return {"L": _np(L), "U": _np(U), "solve": _np(x), "inverse": _np(inv),
            "info": _np(ex.info), **_grads(lib, loss, {"a": a, "r": r})}


def cholesky_solve_factor(lib) -> dict:
    # A factor given directly, not triangular: the solves read one triangle, and the
    # gradient with respect to the factor is PyTorch's, which covers the whole matrix.
    f, r = _leaf(lib, "spd"), _leaf(lib, "rhs")
    x = lib.cholesky_solve(r, f)
    y = lib.cholesky_solve(r, f, upper=True)
    inv = lib.cholesky_inverse(f[1], upper=True)
    loss = (x * x.cos()).sum() + (y ** 2).sum() + inv.sum()
    return {"lower": _np(x), "upper": _np(y), "inverse": _np(inv),
            **_grads(lib, loss, {"f": f, "r": r})}


def triangular(lib) -> dict:
    a, r = _leaf(lib, "spd"), _leaf(lib, "rhs")
    low = a.tril()
    x = lib.linalg.solve_triangular(low, r, upper=False)
    y = lib.linalg.solve_triangular(a, r, upper=True, unitriangular=True)
    z = lib.linalg.solve_triangular(low, r.mT, upper=False, left=False)
    t = lib.triangular_solve(r, a, upper=True).solution
    loss = (x ** 2).sum() + y.sum() + (z * z).sum() + t.sum()
    return {"left": _np(x), "unit": _np(y), "right": _np(z), "old": _np(t),
            **_grads(lib, loss, {"a": a, "r": r})}


def eigh(lib) -> dict:
    a = _leaf(lib, "spd")
    w, v = lib.linalg.eigh(a)
    wu = lib.linalg.eigvalsh(a, UPLO="U")
    # v v^T per eigenvector: independent of each vector's sign
    proj = v[..., :, 1:2] * v[..., :, 1:2].mT
    loss = (w * lib.arange(4.0, dtype=a.dtype)).sum() + (proj * a).sum() + (v ** 4).sum()
    return {"w": _np(w), "wu": _np(wu), "proj": _np(proj), **_grads(lib, loss, {"a": a})}


def svd(lib) -> dict:
    a, b = _leaf(lib, "tall"), _leaf(lib, "wide")
    u, s, vh = lib.linalg.svd(a, full_matrices=False)
    u2, s2, vh2 = lib.linalg.svd(b)
    sv = lib.linalg.svdvals(b)
    old = lib.svd(a)
    rec = u @ lib.diag_embed(s) @ vh
    loss = ((u ** 2) * lib.arange(3.0, dtype=a.dtype)).sum() + (s ** 3).sum() \
        + (vh ** 4).sum() + (u2[:, :3] @ vh2[:3]).sum() + sv.sum() + (old.V ** 2 * 0.5).sum()
    return {"s": _np(s), "s_wide": _np(s2), "svdvals": _np(sv), "rec": _np(rec),
            "U_shape": np.array(u2.shape), "Vh_shape": np.array(vh2.shape),
            "old_S": _np(old.S), **_grads(lib, loss, {"a": a, "b": b})}


def qr(lib) -> dict:
    a, b = _leaf(lib, "tall"), _leaf(lib, "wide")
    q, r = lib.linalg.qr(a)
    qw, rw = lib.linalg.qr(b)
    qc, rc = lib.linalg.qr(b, mode="complete")
    r_only = lib.linalg.qr(a, mode="r").R
    # Q and R are unique up to the signs of R's diagonal: fix them positive.
    sg = lib.sign(r.diagonal(0, -2, -1))
    qf, rf = q * sg[..., None, :], r * sg[..., :, None]
    sgw = lib.sign(rw.diagonal())
    loss = (qf ** 3).sum() + (rf * rf.cos()).sum() + ((qw * sgw) ** 3).sum() \
        + ((rw * sgw[:, None]) ** 2).sum() + (qc @ rc).sum()
    return {"Qf": _np(qf), "Rf": _np(rf), "R_abs": _np(r_only.abs()), "rec": _np(qw @ rw),
            **_grads(lib, loss, {"a": a, "b": b})}


def pinv(lib) -> dict:
    a, b, r = _leaf(lib, "tall"), _leaf(lib, "wide"), _leaf(lib, "rhs")
    p = lib.linalg.pinv(a)
    pw = lib.pinverse(b)
    ls = lib.linalg.lstsq(a, a @ r[:, :3, :] + 0.1)
    rank = lib.linalg.matrix_rank(a)
    rank_low = lib.linalg.matrix_rank(a[0] @ a[0].mT)
    loss = (p ** 2).sum() + (pw * pw.cos()).sum() + ls.solution.sum()
    return {"pinv": _np(p), "pinverse": _np(pw), "lstsq": _np(ls.solution),
            "lstsq_rank": _np(ls.rank), "rank": _np(rank), "rank_low": _np(rank_low),
            **_grads(lib, loss, {"a": a, "b": b, "r": r})}


def least_squares_drivers(lib) -> dict:
    # The residuals each driver fills (m > n; gelsd/gelss only at full rank) and tensor
    # tolerances of matrix_rank, one per matrix.
    a, r = _leaf(lib, "tall"), _leaf(lib, "rhs")
    b = a @ r[:, :3, :] + 0.1 * a[..., :1] * a[..., 1:2]  # off the column space
    low = a[0] @ lib.ones(3, 3, dtype=a.dtype)  # rank 1
    out = {}
    loss = 0.0
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        ls = lib.linalg.lstsq(a, b, driver=driver)
        out[f"residuals_{driver}"] = _np(ls.residuals)
        loss = loss + ls.residuals.sum() * 2.0 + ls.solution.sum()
    vec = lib.linalg.lstsq(a[0], b[0, :, 0], driver="gels")
    deficient = lib.linalg.lstsq(low, b[0], driver="gelsd")
    loss = loss + vec.residuals.sum()
    out.update(residuals_vector=_np(vec.residuals), residuals_deficient=_np(deficient.residuals),
               rank_deficient=_np(deficient.rank))
    tol = lib.tensor([1e-3, 50.0], dtype=a.dtype)
    out.update(rank_atol=_np(lib.linalg.matrix_rank(a, atol=tol)),
               rank_rtol=_np(lib.linalg.matrix_rank(a, rtol=tol * 1e-2)),
               rank_both=_np(lib.linalg.matrix_rank(a, atol=tol, rtol=lib.tensor(0.5))),
               rank_zero_atol=_np(lib.linalg.matrix_rank(low, atol=lib.tensor(0.0))))
    return {**out, **_grads(lib, loss, {"a": a, "r": r})}


def spectral_norms(lib) -> dict:
    a, b = _leaf(lib, "tall"), _leaf(lib, "wide")
    n2 = lib.linalg.matrix_norm(a, 2)
    nm2 = lib.linalg.matrix_norm(a, -2, keepdim=True)
    nuc = lib.linalg.matrix_norm(b, "nuc")
    old = lib.norm(b, "nuc")
    dims = lib.linalg.norm(a, 2, dim=(0, 2))
    loss = n2.sum() + nm2.sum() + nuc + old + dims.sum()
    return {"two": _np(n2), "minus_two": _np(nm2), "nuc": _np(nuc), "old_nuc": _np(old),
            "dims": _np(dims), **_grads(lib, loss, {"a": a, "b": b})}


def matrix_exp(lib) -> dict:
    a, s = _leaf(lib, "rhs"), _leaf(lib, "spd")
    e = lib.linalg.matrix_exp(s * 0.3)  # norms above 1: squarings
    f = lib.matrix_exp(a[:, :2, :] * 0.5)
    loss = (e * e.cos()).sum() + (f ** 2).sum()
    return {"exp": _np(e), "small": _np(f), **_grads(lib, loss, {"a": a, "s": s})}


def lu(lib) -> dict:
    a, b, w, r = _leaf(lib, "spd"), _leaf(lib, "tall"), _leaf(lib, "wide"), _leaf(lib, "rhs")
    P, L, U = lib.linalg.lu(a)  # noqa: N806
    Pt, Lt, Ut = lib.linalg.lu(b)  # noqa: N806
    Pw, Lw, Uw = lib.linalg.lu(w)  # noqa: N806
    LU, piv = lib.linalg.lu_factor(a)  # noqa: N806
    ex = lib.linalg.lu_factor_ex(b)
    x = lib.linalg.lu_solve(LU, piv, r)
    xa = lib.linalg.lu_solve(LU, piv, r, adjoint=True)
    xr = lib.linalg.lu_solve(LU, piv, r.mT, left=False)
    old = lib.lu_solve(r, *lib.lu(a))
    up = lib.lu_unpack(ex.LU, ex.pivots)
    loss = ((L * L.sin()).sum() + (U ** 2).sum() + (Lt * Lt.cos()).sum() + Ut.sum()
            + (Lw ** 3).sum() + (Uw * Uw.sin()).sum() + (x ** 2).sum() + xa.sum()
            + (xr * xr.cos()).sum() + old.sum() + (up.L * up.U[..., :1, :]).sum())
    return {"P": _np(P), "L": _np(L), "U": _np(U), "Pt": _np(Pt), "Lt": _np(Lt), "Ut": _np(Ut),
            "Pw": _np(Pw), "Lw": _np(Lw), "Uw": _np(Uw), "LU": _np(LU), "piv": _np(piv),
            "ex_LU": _np(ex.LU), "ex_piv": _np(ex.pivots), "ex_info": _np(ex.info),
            "solve": _np(x), "adjoint": _np(xa), "right": _np(xr), "old": _np(old),
            "unpack_P": _np(up.P), "unpack_L": _np(up.L), "unpack_U": _np(up.U),
            **_grads(lib, loss, {"a": a, "b": b, "w": w, "r": r})}


PROGRAMS: dict[str, Callable] = {f.__name__: f for f in (cholesky, cholesky_solve_factor,
                                                        triangular, eigh, svd, qr, pinv,
                                                        least_squares_drivers, spectral_norms,
                                                        matrix_exp, lu)}


# One program over every decomposition op, forward and backward, for the compiled tests.


def decompositions(a, x, w, b):
    """Every decomposition op in one program."""
    import dualgraph as dg

    spd = a @ a.mT + 4.0 * dg.eye(4, dtype=a.dtype)
    L = dg.linalg.cholesky(spd)  # noqa: N806
    ev, vec = dg.linalg.eigh(spd)
    s = dg.linalg.svdvals(x)
    u, s_wide, vh = dg.linalg.svd(w, full_matrices=False)
    q, r = dg.linalg.qr(x)
    t = dg.linalg.solve_triangular(L, b, upper=False)
    p = dg.linalg.pinv(x)
    info = dg.linalg.cholesky_ex(spd).info
    sign = r.diagonal(0, -2, -1).sign()
    weighted = vec @ dg.diag_embed(dg.arange(4.0, dtype=a.dtype)) @ vec.mT
    return (L, ev, weighted, s, u @ vh, s_wide, q * sign[..., None, :], t, p,
            info.to(a.dtype), dg.cholesky_solve(b, L), dg.linalg.matrix_exp(a * 0.7))


def decompositions_inputs(rng: np.random.Generator, dtype) -> list:
    return [rng.standard_normal(s).astype(dtype) for s in ((2, 4, 4), (2, 5, 3), (3, 5),
                                                           (2, 4, 2))]
