"""The GEMM generated kernels call (NumPy's BLAS through a registered symbol, or np.dot)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import blas, cache
from dualgraph.testing import assert_close


@numba.njit
def _product(a, b, c, beta):
    return blas.gemm(a, b, c, beta)


def _layouts(a: np.ndarray) -> dict:
    return {"C": a, "F": np.asfortranarray(a), "strided": np.repeat(a, 2, axis=1)[:, ::2]}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la", ["C", "F", "strided"])
@pytest.mark.parametrize("lb", ["C", "F", "strided"])
def test_gemm_matches_numpy_for_every_operand_layout(dtype, la, lb):
    rng = np.random.default_rng(0)
    a = _layouts(rng.standard_normal((7, 33)).astype(dtype))[la]
    b = _layouts(rng.standard_normal((33, 5)).astype(dtype))[lb]
    got = _product(a, b, np.empty((7, 5), dtype), 0.0)
    assert_close(got, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=0, equal_nan=True,
                 check_dtype=False)


def test_beta_one_adds_the_product_to_c():
    # The bias fold: c holds the bias, beta=1 accumulates the product onto it.
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))
    c = np.tile(np.arange(3.0), (4, 1))
    assert_close(_product(a, b, c.copy(), 1.0), a @ b + c, rtol=1e-12, atol=0, equal_nan=True,
                 check_dtype=False)


def test_zero_sized_operands():
    empty_k = _product(np.ones((2, 0)), np.ones((0, 3)), np.full((2, 3), 7.0), 0.0)
    np.testing.assert_array_equal(empty_k, np.zeros((2, 3)))
    assert _product(np.ones((0, 4)), np.ones((4, 3)), np.empty((0, 3)), 0.0).shape == (0, 3)


def test_backend_is_named_in_every_generated_module():
    # Kernels built against NumPy's BLAS symbol must never be loaded where it is missing.
    assert blas.BACKEND in ("np.dot",) or blas.BACKEND.startswith("numpy-cblas")
    assert f"({blas.BACKEND})" in cache.module_source("def k():\n    pass\n", "k", False, True)


def test_small_product_of_mixed_dtypes_compiles_and_equals_eager():
    """A product small enough for loops whose operand is converted to the result dtype
    first: the converted copy and the loop's row element must not share a name."""
    a = dg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = dg.tensor(np.arange(6, dtype=np.float64).reshape(3, 2))
    f = dg.compile(lambda a, b: a @ b, tiered=False)
    dg.testing.assert_close(f(a, b), a @ b, rtol=0, atol=0)
