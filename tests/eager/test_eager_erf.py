"""Eager float32 ``erf`` (and so ``gelu``) is whole-array NumPy passes
(``dualgraph/ops/erf32.py``), not a scalar loop: at most 2 ulp from ``math.erf`` rounded to
float32, its special values exact, without SciPy; float64 stays correctly rounded."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops.erf32 import erf_f32

ULP_BOUND = 2


def _ordered(a: np.ndarray) -> np.ndarray:
    """float32 bits as integers in value order: their distance is the distance in ulp."""
    b = a.view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def _window(center: float, n: int = 2048) -> np.ndarray:
    bits = np.array([abs(center)], np.float32).view(np.int32)[0]
    w = (bits + np.arange(-n, n, dtype=np.int64)).astype(np.int32).view(np.float32)
    return -w if center < 0 else w


def _sweep() -> np.ndarray:
    # Every 1024th finite float32 bit pattern (denormals included), and every value near
    # where the two fits meet (1), where erf becomes 1 (3.92) and near 0.
    x = np.arange(0, 2 ** 32, 1024, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = x[np.isfinite(x)]
    return np.concatenate([x] + [_window(c) for c in (1.0, -1.0, 3.92, -3.92, 1e-3, 0.5)])


def _reference(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float32)


def test_float32_erf_within_the_ulp_bound():
    x = _sweep()
    got = dg.erf(dg.tensor(x)).numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, erf_f32(x))  # the vectorised form, not SciPy's
    ulp = np.abs(_ordered(got) - _ordered(_reference(x)))
    assert ulp.max() <= ULP_BOUND, (ulp.max(), x[ulp.argmax()])


def test_special_values_and_shapes():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.92, -3.93, 1e30, -1e30], np.float32)
    got = dg.erf(dg.tensor(x)).numpy()
    np.testing.assert_array_equal(got, [0, 0, 1, -1, np.nan, 1, -1, 1, -1])
    assert np.signbit(got[1]) and not np.signbit(got[0])
    s = dg.erf(dg.tensor(np.float32(-2.0)))  # 0-d
    assert s.shape == () and s.numpy() == np.float32(math.erf(-2.0))
    # A strided input gives the values of its contiguous copy.
    a = np.random.default_rng(0).standard_normal((6, 8, 5)).astype(np.float32) * 2
    v = dg.tensor(a)[:, ::2].transpose(0, 2)
    np.testing.assert_array_equal(dg.erf(v).numpy(), erf_f32(np.ascontiguousarray(v.numpy())))


def test_other_dtypes():
    assert dg.erf(dg.tensor([1, -2, 0])).dtype == np.float32  # integers: float32 (PyTorch)
    h = dg.erf(dg.tensor(np.array([0.5, -1.5], np.float16)))
    assert h.dtype == np.float16
    dg.testing.assert_close(h.numpy(), [math.erf(0.5), math.erf(-1.5)], rtol=1e-3, atol=0,
                            equal_nan=True, check_dtype=False)
    d = dg.erf(dg.tensor(np.array([0.3, 2.5], np.float64))).numpy()
    assert d.tolist() == [math.erf(0.3), math.erf(2.5)]  # float64 correctly rounded


def test_float32_erf_needs_no_scipy(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # importing it now raises
    x = np.linspace(-5, 5, 101, dtype=np.float32)
    np.testing.assert_array_equal(dg.erf(dg.tensor(x)).numpy(), erf_f32(x))
    with pytest.raises(RuntimeError, match="erf"):  # float64 does import it
        dg.erf(dg.tensor(x.astype(np.float64)))


def test_gelu_gradient_float64_and_float32():
    F = dg.nn.functional
    x64 = np.random.default_rng(1).standard_normal(40) * 2
    assert dg.testing.gradcheck(F.gelu, x64)
    x = dg.tensor(x64.astype(np.float32), requires_grad=True)
    F.gelu(x).sum().backward()
    ref = 0.5 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2))) \
        + x64 * np.exp(-x64 * x64 / 2) / math.sqrt(2 * math.pi)
    dg.testing.assert_close(x.grad.numpy(), ref, rtol=1e-5, atol=1e-6,
                            equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_gelu_backward_from_the_kept_erf_gives_the_bits_of_gelu_backward(dtype):
    # Eagerly the forward keeps erf(x / sqrt(2)) + 1 for the array-form backward; the op
    # form (create_graph) recomputes it: both, and a second backward through the same
    # graph (retain_graph: the kept array is read, not overwritten), agree bit for bit.
    F = dg.nn.functional
    a = (np.random.default_rng(2).standard_normal((7, 33)) * 3).astype(dtype)
    g = np.random.default_rng(3).standard_normal((7, 33)).astype(dtype)
    x = dg.tensor(a, requires_grad=True)
    y = F.gelu(x)
    assert y.grad_fn._kept is not None
    (fast,) = dg.autograd.grad(y, x, dg.tensor(g), retain_graph=True)
    (again,) = dg.autograd.grad(y, x, dg.tensor(g), retain_graph=True)
    (slow,) = dg.autograd.grad(y, x, dg.tensor(g), create_graph=True)
    want = dg.ops.activation.gelu_backward(dg.tensor(g), dg.tensor(a)).numpy()
    for got in (fast, again, slow):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy().view(np.uint8), want.view(np.uint8))
    assert F.gelu(dg.tensor(a)).grad_fn is None  # no gradient: nothing kept


def test_large_float32_gelu_routines_give_the_bits_of_the_numpy_passes(monkeypatch):
    # From `routines.FROM` elements float32 GELU and its backward run as the eager
    # routines' compiled loops around NumPy's exp: the same operations as the NumPy passes,
    # so the same bits, over every 1024th bit pattern (nan, infinities and denormals among
    # them) and around where erf's two fits meet and where it reaches 1: forward, the
    # array-form backward from the kept erf and the op form that recomputes it.
    from dualgraph.eager import routines as eager_routines
    from dualgraph.ops import activation as ACT
    from dualgraph.ops import routines

    x = np.arange(0, 2 ** 32, 1024, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, _window(math.sqrt(2.0)), _window(-3.92 * math.sqrt(2.0))])
    g = np.random.default_rng(4).standard_normal(x.size).astype(np.float32)
    assert x.size >= routines.FROM
    monkeypatch.setattr(routines, "INSTALLED", [eager_routines])

    def run():
        with np.errstate(all="ignore"):
            y, erf1 = ACT._gelu_keep(x)
            return y, erf1, ACT._gelu_grad(g, x, erf1), ACT._gelu_grad(g, x, None)

    fast = run()
    assert "dualgraph.backend.numba.eager_routines" in sys.modules  # the loops ran
    monkeypatch.setattr(routines, "INSTALLED", [])
    slow = run()
    for got, want in zip(fast, slow):
        assert got.dtype == np.float32 and got.shape == x.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # A strided operand or a broadcast gradient takes the NumPy passes: the same bits.
    monkeypatch.setattr(routines, "INSTALLED", [eager_routines])
    monkeypatch.setattr(routines, "FROM", 1)
    xs = x[: 2 * (x.size // 2)].reshape(-1, 2)[::-1].T
    with np.errstate(all="ignore"):
        ys, erf1s = ACT._gelu_keep(xs)
        gs = ACT._gelu_grad(g[:1], xs, erf1s)
    np.testing.assert_array_equal(ys.view(np.uint32),
                                  fast[0][: xs.size].reshape(-1, 2)[::-1].T.view(np.uint32))
    np.testing.assert_array_equal(gs.view(np.uint32), ACT._gelu_grad(
        np.broadcast_to(g[:1], xs.shape).copy(), np.ascontiguousarray(xs),
        np.ascontiguousarray(erf1s)).view(np.uint32))


def test_eager_routines_are_installed_unless_the_environment_says_no(monkeypatch):
    from dualgraph.eager import routines as eager_routines
    from dualgraph.ops import routines

    assert routines.INSTALLED == [eager_routines]  # eager mode's import installed them
    assert routines.for_size(routines.FROM) is eager_routines
    assert routines.for_size(routines.FROM - 1) is None
    monkeypatch.setattr(routines, "INSTALLED", [])
    for var, value in (("DUALGRAPH_EAGER_ROUTINES", "0"), ("NUMBA_DISABLE_JIT", "1")):
        with monkeypatch.context() as m:
            m.setenv(var, value)
            assert not eager_routines.install() and routines.INSTALLED == []
    assert eager_routines.install() and routines.INSTALLED == [eager_routines]


def test_an_eager_program_below_the_routines_size_does_not_import_numba():
    # The routines import the backend (and Numba) on their first call only.
    import subprocess

    code = ("import sys, numpy as np, dualgraph as dg\n"
            "import dualgraph.nn.functional as F\n"
            "x = dg.tensor(np.ones((64, 64), np.float32), requires_grad=True)\n"
            "e = dg.nn.Embedding(10, 64)\n"
            "(F.gelu(x).sum() + e(dg.tensor([1, 2, 2])).sum()).backward()\n"
            "assert x.grad is not None and e.weight.grad is not None\n"
            "print('numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False"]
