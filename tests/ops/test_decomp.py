"""The matrix decompositions under PyTorch's names: values and gradients equal torch's
(goldens recorded by ``tests/ops/record_decomp_goldens.py``), gradients equal float64 finite
differences, one compiled function over all of them equals eager, and bad input raises
PyTorch's exception types with clear messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close, gradcheck

from .._support.compiled import B3
from .decomp_programs import PROGRAMS, decompositions, decompositions_inputs

GOLD = np.load(Path(__file__).with_name("decomp_goldens.npz"))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_torch(name: str) -> None:
    got = PROGRAMS[name](dg)
    want = {k.split("/", 1)[1]: GOLD[k] for k in GOLD.files if k.startswith(name + "/")}
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert_close(np.asarray(got[k]), v, rtol=1e-8, atol=1e-10, check_dtype=False)


def test_return_types_are_named_tuples() -> None:
    a = dg.tensor(np.eye(3) * 2.0)
    assert dg.linalg.eigh(a)._fields == ("eigenvalues", "eigenvectors")
    assert dg.linalg.svd(a)._fields == ("U", "S", "Vh")
    assert dg.svd(a)._fields == ("U", "S", "V")
    assert dg.linalg.qr(a)._fields == ("Q", "R")
    assert dg.linalg.cholesky_ex(a)._fields == ("L", "info")
    assert dg.linalg.lstsq(a, a)._fields == ("solution", "residuals", "rank",
                                             "singular_values")
    assert dg.triangular_solve(a, a)._fields == ("solution", "cloned_coefficient")
    U, S, Vh = dg.linalg.svd(a)  # noqa: N806
    assert_close((U @ dg.diag_embed(S) @ Vh).numpy(), a.numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- finite differences
_R = np.random.default_rng(3)
SPD = _R.standard_normal((2, 3, 3))
TALL = _R.standard_normal((2, 4, 3))
WIDE = _R.standard_normal((3, 5))


def _spd(x):
    return x @ x.mT + 3.0 * dg.eye(3, dtype=x.dtype)


GRADIENTS = {
    "cholesky": (lambda x: dg.linalg.cholesky(_spd(x)), SPD),
    "cholesky_upper": (lambda x: dg.linalg.cholesky(_spd(x), upper=True), SPD),
    "cholesky_solve": (lambda x, b: dg.cholesky_solve(b, dg.linalg.cholesky(_spd(x))),
                       SPD, TALL[:, :3, :2]),
    "cholesky_inverse": (lambda x: dg.cholesky_inverse(dg.linalg.cholesky(_spd(x))), SPD),
    "solve_triangular_upper_right": (lambda a, b: dg.linalg.solve_triangular(
        _spd(a), b, upper=True, left=False), SPD, TALL[:, :2, :]),
    "solve_triangular_unit": (lambda a, b: dg.linalg.solve_triangular(
        a, b, upper=False, unitriangular=True), SPD, TALL[:, :3, :]),
    "eigvalsh": (lambda x: dg.linalg.eigvalsh(_spd(x)), SPD),
    # v vᵀ does not depend on each eigenvector's sign
    "eigh_projectors": (lambda x: (lambda v: v @ dg.diag_embed(dg.arange(3.0, dtype=x.dtype))
                                   @ v.mT)(dg.linalg.eigh(_spd(x)).eigenvectors), SPD),
    "svdvals": (lambda x: dg.linalg.svdvals(x), TALL),
    "svd_projectors_tall": (lambda x: (lambda r: r.U @ dg.diag_embed(r.S.exp()) @ r.U.mT)(
        dg.linalg.svd(x, full_matrices=False)), TALL),
    "svd_projectors_wide": (lambda x: (lambda r: r.Vh.mT @ dg.diag_embed(r.S ** 3) @ r.Vh)(
        dg.linalg.svd(x, full_matrices=False)), WIDE),
    "qr_tall": (lambda x: (lambda r: r.Q * r.R.diagonal(0, -2, -1).sign()[..., None, :])(
        dg.linalg.qr(x)), TALL),
    "qr_wide_r": (lambda x: (lambda r: r.R * r.R.diagonal().sign()[:, None])(dg.linalg.qr(x)),
                  WIDE),
    "pinv_tall": (lambda x: dg.linalg.pinv(x), TALL),
    "pinv_wide": (lambda x: dg.pinverse(x), WIDE),
    "lstsq": (lambda a, b: dg.linalg.lstsq(a, b).solution, TALL, TALL[:, :, :2]),
    "matrix_exp": (lambda x: dg.linalg.matrix_exp(x * 2.0), SPD),
    "lu_square": (lambda x: (lambda r: r.L.sin() + r.U * r.U)(dg.linalg.lu(x)), SPD),
    "lu_tall": (lambda x: (lambda r: r.L * r.L.exp())(dg.linalg.lu(x)), TALL),
    "lu_tall_u": (lambda x: dg.linalg.lu(x).U.cos(), TALL),
    "lu_wide": (lambda x: (lambda r: r.L.sin().sum() + (r.U ** 2).sum())(dg.linalg.lu(x)), WIDE),
    "lu_solve": (lambda a, b: dg.linalg.lu_solve(*dg.linalg.lu_factor(a), b, adjoint=True),
                 SPD, TALL[:, :3, :2]),
    "lu_solve_right": (lambda a, b: dg.lu_solve(b, *dg.lu(a)).mT + dg.linalg.lu_solve(
        *dg.linalg.lu_factor(a), b.mT, left=False), SPD, TALL[:, :2, :].mT.copy()),
    "tensorsolve": (lambda a, b: dg.linalg.tensorsolve(_spd(a.reshape(3, 3)).reshape(3, 1, 3)
                                                       .permute(2, 0, 1), b, dims=(0,)),
                    SPD[0], TALL[0, :3, :1]),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradient_matches_finite_differences(name: str) -> None:
    fn, *arrays = GRADIENTS[name]
    assert gradcheck(fn, *arrays)


def test_pinv_gradient_is_finite_for_repeated_singular_values() -> None:
    # An orthogonal matrix has all singular values 1; the SVD's gradient would divide by 0.
    q = np.linalg.qr(_R.standard_normal((3, 3)))[0]
    assert gradcheck(lambda x: dg.linalg.pinv(x), q)


# ------------------------------------------------------------------------- compiled


# Slow: ~45 s of cold Numba compile per dtype. The default run still compiles every
# decomposition with its gradient and checks it against eager: rows-decomp0-f32 (every row)
# and rows-decomp0-f64 (each op's first row) of tests/backend/test_ops_compiled.py, and
# test_compiled_cholesky_of_a_non_positive_definite_matrix_raises below.
@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_compiled_equals_eager(dtype) -> None:
    rng = np.random.default_rng(5)
    arrays = decompositions_inputs(rng, dtype)
    weights = [rng.standard_normal(o.shape) for o in decompositions(*map(dg.tensor, arrays))]

    def run(f):
        leaves = [dg.tensor(v, requires_grad=True) for v in arrays]
        outs = f(*leaves)
        sum(((o * dg.tensor(wt, dtype=o.dtype)).sum() for o, wt in zip(outs, weights))
            ).backward()
        return [o.numpy() for o in outs] + [v.grad.numpy() for v in leaves]

    compiled = dg.compile(decompositions)
    want, got = run(decompositions), run(compiled)
    for g, w in zip(got, want):
        assert_close(g, w, **B3[np.dtype(dtype)])
    assert compiled.stats.traces == 1 and compiled.stats.kernels >= 1


def test_compiled_cholesky_of_a_non_positive_definite_matrix_raises() -> None:
    f = dg.compile(lambda a: dg.linalg.cholesky(a) * 2.0)
    with pytest.raises(dg.linalg.LinAlgError, match="leading minor of order 2"):
        f(dg.tensor([[1.0, 2.0], [2.0, 1.0]]))


# --------------------------------------------------------------------------- errors


def test_non_positive_definite() -> None:
    a = dg.tensor([[[4.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]])
    with pytest.raises(dg.linalg.LinAlgError, match="leading minor of order 2 is not "
                                                    "positive-definite"):
        dg.linalg.cholesky(a)
    L, info = dg.linalg.cholesky_ex(a)  # noqa: N806
    assert info.tolist() == [0, 2] and info.dtype == dg.int32
    assert_close(L.numpy()[0], np.diag([2.0, 1.0]), check_dtype=False)
    with pytest.raises(dg.linalg.LinAlgError):
        dg.linalg.cholesky_ex(a, check_errors=True)


@pytest.mark.parametrize("fn", [dg.linalg.cholesky, dg.linalg.eigh, dg.linalg.eigvalsh,
                                lambda a: dg.linalg.solve_triangular(a, a, upper=True)])
def test_non_square(fn) -> None:
    with pytest.raises(ValueError, match=r"square matrices, but they are 2 by 3"):
        fn(dg.zeros(2, 3))


@pytest.mark.parametrize("fn", [dg.linalg.cholesky, dg.linalg.eigh, dg.linalg.svd,
                                dg.linalg.qr, dg.linalg.pinv, dg.linalg.svdvals])
def test_integer_or_vector_input(fn) -> None:
    with pytest.raises(RuntimeError, match="Expected a floating point tensor"):
        fn(dg.ones(3, 3, dtype=dg.int64))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        fn(dg.ones(3))


def test_bad_arguments() -> None:
    a = dg.eye(3)
    with pytest.raises(RuntimeError, match="unrecognized mode 'full'"):
        dg.linalg.qr(a, mode="full")
    with pytest.raises(RuntimeError, match="UPLO"):
        dg.linalg.eigh(a, UPLO="X")
    with pytest.raises(RuntimeError, match="same dtype"):
        dg.linalg.solve_triangular(a, dg.eye(3, dtype=dg.float64), upper=True)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        dg.linalg.solve_triangular(a, dg.ones(2, 1), upper=True)
    x = dg.randn(4, 3, requires_grad=True)
    q, r = dg.linalg.qr(x, mode="complete")
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete'"):
        (q.sum() + r.sum()).backward()


def test_lu_errors_and_info() -> None:
    with pytest.raises(RuntimeError, match="LU without pivoting is not implemented"):
        dg.linalg.lu(dg.eye(2), pivot=False)
    with pytest.raises(ValueError, match="square matrices"):
        dg.linalg.lu_solve(dg.ones(2, 3), dg.ones(2, dtype=dg.int32), dg.ones(2, 1))
    with pytest.raises(ValueError, match="Incompatible shapes"):
        dg.linalg.lu_solve(*dg.linalg.lu_factor(dg.eye(3)), dg.ones(2, 1))
    singular = dg.tensor([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    assert dg.linalg.lu_factor_ex(singular).info.tolist() == [2, 0]
    assert dg.lu(singular, get_infos=True)[2].tolist() == [2, 0]
    with pytest.raises(dg.linalg.LinAlgError, match=r"U\[2,2\] is zero"):
        dg.linalg.lu_factor_ex(singular, check_errors=True)
    assert dg.linalg.lu(dg.eye(3))._fields == ("P", "L", "U")
    assert dg.lu_unpack(*dg.linalg.lu_factor(dg.eye(3)), unpack_data=False).L.shape == (0,)


def test_tensorsolve_shapes() -> None:
    a = dg.tensor(np.eye(6).reshape(6, 2, 3) * 2.0)
    x = dg.linalg.tensorsolve(a, dg.ones(3, 2), dims=(0,))  # A moved to (2, 3, 6)
    assert_close(x.numpy(), np.full(6, 0.5))
    with pytest.raises(RuntimeError, match="prod"):
        dg.linalg.tensorsolve(dg.ones(2, 3, 5), dg.ones(2, 3))


def test_tensor_methods_and_old_names() -> None:
    a = dg.tensor(SPD[0] @ SPD[0].T + 3 * np.eye(3))
    L = a.cholesky()  # noqa: N806
    assert_close((L @ L.mT).numpy(), a.numpy(), rtol=1e-12, atol=1e-12)
    assert_close(L.cholesky_inverse().numpy(),
                 np.linalg.inv(a.numpy()), rtol=1e-10, atol=1e-12)
    U, S, V = a.svd()  # noqa: N806
    assert_close((U @ dg.diag_embed(S) @ V.mT).numpy(), a.numpy(), rtol=1e-12, atol=1e-12)
    Q, R = a.qr()  # noqa: N806
    assert_close((Q @ R).numpy(), a.numpy(), rtol=1e-12, atol=1e-12)
    assert_close(a.pinverse().numpy(), np.linalg.inv(a.numpy()), rtol=1e-10, atol=1e-12)
    x = a.triangular_solve(L, upper=False).solution
    assert_close((L @ x).numpy(), a.numpy(), rtol=1e-12, atol=1e-12)
