"""The float32 ``exp``, ``tanh``, ``sigmoid`` and ``erf`` that compiled float32 code uses
(``dualgraph/backend/numba/kernels.py``), measured in ulp against float64 NumPy rounded to
float32, over a dense sweep of float32 and its edges.

The sweep runs through `dg.compile`, so it measures what users get (the generated kernel
inlines the backend's functions), not a copy of them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg

F32 = np.finfo(np.float32)
EXP_OVERFLOW = np.float32(88.72284)  # exp(x) > float32 max above this
EXP_UNDERFLOW = np.float32(-103.97208)  # exp(x) rounds to 0 below this
EXP_DENORMAL = np.float32(-87.33655)  # exp(x) is denormal below this


def _window(center: float, n: int = 4096) -> np.ndarray:
    """The ``2 n`` float32 values nearest ``center``, every one of them."""
    bits = np.array([center], np.float32).view(np.int32)[0]
    offs = np.arange(-n, n, dtype=np.int64)
    if center < 0:
        offs = -offs
    return (bits + offs).astype(np.int32).view(np.float32)


def _inputs() -> np.ndarray:
    # Every 1024th bit pattern: about 4.2 million finite float32 values of both signs,
    # denormals included.
    sweep = np.arange(0, 2 ** 32, 1024, dtype=np.uint64).astype(np.uint32).view(np.float32)
    sweep = sweep[np.isfinite(sweep)]  # the NaN patterns are checked once, in the edges
    edges = np.array([0.0, -0.0, F32.smallest_subnormal, -F32.smallest_subnormal,
                      F32.tiny, -F32.tiny, F32.max, -F32.max, 1.0, -1.0,
                      np.inf, -np.inf, np.nan], np.float32)
    windows = [_window(c) for c in (EXP_OVERFLOW, EXP_UNDERFLOW, EXP_DENORMAL,
                                    -EXP_OVERFLOW, 0.625, -0.625, 9.0, -9.0, 1e-3,
                                    9.05, -9.05, 9.5, -9.5,
                                    # erf's two fits meet at 1; it is 1 past 3.92
                                    1.0, -1.0, 3.92, -3.92)]
    # Past the point where tanh and sigmoid saturate, and the smallest denormals.
    windows += [np.float32([v]) for v in (10.0, 20.0, 50.0, 1e10, -1e10, 1e30)]
    windows.append(np.arange(1, 4096, dtype=np.int32).view(np.float32))
    return np.concatenate([sweep, edges, *windows]).astype(np.float32)


def _ordered(a: np.ndarray) -> np.ndarray:
    """float32 bit patterns as integers in the order of the values, so that the distance of
    two of them is their distance in ulp (+0 and -0 coincide, denormals count as ulps)."""
    b = a.view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def _ulp(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    d = np.abs(_ordered(got) - _ordered(ref))
    d[np.isnan(got) & np.isnan(ref)] = 0
    d[np.isnan(got) != np.isnan(ref)] = np.iinfo(np.int64).max
    return d


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        ref = {"exp": np.exp, "tanh": np.tanh,
               "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
               "erf": lambda v: np.frompyfunc(math.erf, 1, 1)(v).astype(np.float64),
               }[name](x64)
        return ref.astype(np.float32)


@pytest.fixture(scope="module")
def measured() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """name -> (inputs, compiled float32 result, float64 reference rounded to float32)."""
    x = _inputs()
    f = dg.compile(lambda t: (dg.exp(t), dg.tanh(t), dg.sigmoid(t), dg.erf(t)))
    with dg.no_grad():
        outs = f(dg.tensor(x))
    assert f.stats.kernels >= 1, "the sweep must run compiled code"
    out = {}
    for name, o in zip(("exp", "tanh", "sigmoid", "erf"), outs):
        got = o.numpy()
        assert got.dtype == np.float32
        out[name] = (x, got, _reference(name, x))
    return out


def _worst(x: np.ndarray, got: np.ndarray, ref: np.ndarray, mask: np.ndarray) -> str:
    d = np.where(mask, _ulp(got, ref), 0)
    k = int(np.argmax(d))
    return f"{d[k]} ulp at x={x[k]!r}: got {got[k]!r}, expected {ref[k]!r}"


# The claims of kernels.py's docstring: the maximum ulp error of each function.
@pytest.mark.parametrize(("name", "max_ulp"), [("exp", 1), ("tanh", 4), ("sigmoid", 2),
                                                  ("erf", 3)])
def test_ulp_error_where_the_result_is_normal(measured, name, max_ulp):
    x, got, ref = measured[name]
    normal = ~np.isfinite(ref) | (ref == 0) | (np.abs(ref) >= F32.tiny)
    assert _ulp(got, ref)[normal].max() <= max_ulp, _worst(x, got, ref, normal)


def test_exp_is_within_one_unit_in_the_denormal_range(measured):
    x, got, ref = measured["exp"]
    denormal = (ref != 0) & (ref < F32.tiny)
    assert denormal.sum() > 1000
    assert _ulp(got, ref)[denormal].max() <= 1, _worst(x, got, ref, denormal)


def test_sigmoid_flushes_to_zero_where_exp_overflows(measured):
    """sigmoid(x) = 1 / (1 + exp(-x)): once float32 exp(-x) overflows (x < -88.72) the
    result is 0 instead of the denormal e^x, an absolute error below the smallest normal
    float32. Above that it is within 2 ulp (the denormal results included)."""
    x, got, ref = measured["sigmoid"]
    flushed = x <= -EXP_OVERFLOW
    assert (got[flushed] == 0).all()
    assert np.abs(ref[flushed]).max() < F32.tiny
    rest = ~flushed
    assert _ulp(got, ref)[rest].max() <= 2, _worst(x, got, ref, rest)


def test_special_values_are_exact(measured):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 89.0, 1e30, -104.0, -1e30], np.float32)
    f = dg.compile(lambda t: (dg.exp(t), dg.tanh(t), dg.sigmoid(t)))
    with dg.no_grad():
        e, t, s = (o.numpy() for o in f(dg.tensor(x)))
    np.testing.assert_array_equal(e, [1, 1, np.inf, 0, np.nan, np.inf, np.inf, 0, 0])
    np.testing.assert_array_equal(t, [0, 0, 1, -1, np.nan, 1, 1, -1, -1])
    # tanh keeps the sign of zero, as NumPy does: x P(x^2) / Q(x^2) is -0 for x = -0.
    np.testing.assert_array_equal(np.signbit(t[:2]), [False, True])
    np.testing.assert_array_equal(s, [0.5, 0.5, 1, 0, np.nan, 1, 1, 0, 0])


def test_erf_special_values_are_exact():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.92, 4.0, -1e30], np.float32)
    f = dg.compile(lambda t: dg.erf(t))
    with dg.no_grad():
        got = f(dg.tensor(x)).numpy()
    np.testing.assert_array_equal(got, [0, 0, 1, -1, np.nan, 1, 1, -1])
    np.testing.assert_array_equal(np.signbit(got[:2]), [False, True])


def test_float64_erf_is_libm():
    """Only float32 gets the approximation: float64 erf is math.erf, bit for bit."""
    x = np.linspace(-5, 5, 10001)
    f = dg.compile(lambda t: dg.erf(t))
    with dg.no_grad():
        got = f(dg.tensor(x)).numpy()
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [math.erf(v) for v in x])


def test_fma_contraction_only_for_float32_kernels():
    """A kernel whose float values are all float32 may contract ``a * b + c`` to an FMA
    (one rounding instead of two); any float64 value keeps NumPy's rounding exactly, since
    float64 is the referee of every numerics test."""
    from dualgraph.backend.numba import build, float32_only

    def fn(x, y):
        return x * y + 1.0

    f32 = dg.trace(fn, dg.ones(4, dtype=dg.float32), dg.ones(4, dtype=dg.float32))
    f64 = dg.trace(fn, dg.ones(4, dtype=dg.float64), dg.ones(4, dtype=dg.float64))
    mixed = dg.trace(fn, dg.ones(4, dtype=dg.float32), dg.ones(4, dtype=dg.float64))
    ints = dg.trace(lambda x: x * 3 + 1, dg.tensor([1, 2, 3]))
    assert float32_only(f32)
    assert not float32_only(f64) and not float32_only(mixed) and not float32_only(ints)
    assert "fastmath={'contract'}" in build(f32).source
    # without the disk cache too (the in-memory module is generated separately)
    assert "fastmath={'contract'}" in build(f32, use_cache=False).source
    for g in (f64, mixed, ints):
        assert "fastmath" not in build(g).source
