"""Calling conventions of compiled functions (API.md B3): keyword arguments
and defaults, methods, compiled functions calling compiled functions, non-tensor constant
arguments, the tracer's eager API, IEEE and dtype edges of the key, option checks."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def _x():
    return dg.tensor([1.0, 2.0, 3.0])


# ------------------------------------------------------------------ keywords and defaults
def test_keyword_arguments_defaults_and_keyword_only():
    def fn(x, scale=2.0, *, shift=1.0):
        return x * scale + shift

    f = dg.compile(fn)
    x = _x()
    assert f(x).tolist() == fn(x).tolist()
    assert f(x, 2.0).tolist() == fn(x).tolist()
    assert f(x, scale=2.0).tolist() == fn(x).tolist()
    assert f(x=x, shift=1.0).tolist() == fn(x).tolist()
    assert f.stats.traces == 1  # the same bound call: one signature
    assert f(x, shift=5.0).tolist() == fn(x, shift=5.0).tolist()
    assert f(x, 3.0, shift=0.5).tolist() == fn(x, 3.0, shift=0.5).tolist()
    assert f.stats.traces == 1  # floats are inputs, given or defaulted
    with pytest.raises(TypeError):
        f(x, bogus=1.0)


def test_tensor_passed_by_keyword_is_an_input():
    f = dg.compile(lambda x, *, w: x * w)
    assert f(_x(), w=dg.tensor([2.0, 2.0, 2.0])).tolist() == [2.0, 4.0, 6.0]
    assert f(_x(), w=dg.tensor([3.0, 3.0, 3.0])).tolist() == [3.0, 6.0, 9.0]
    assert f.stats.traces == 1


# ------------------------------------------------------------------------------- methods
class _Scaler(dg.nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = dg.nn.Parameter(np.full(3, k, np.float32))

    @dg.compile
    def scaled(self, x, offset=0.0):
        return x * self.k + offset


def test_compile_on_a_method_binds_the_instance():
    a, b = _Scaler(2.0), _Scaler(3.0)
    assert a.scaled(_x()).tolist() == [2.0, 4.0, 6.0]
    assert b.scaled(_x(), offset=1.0).tolist() == [4.0, 7.0, 10.0]
    assert a.scaled(_x()).tolist() == [2.0, 4.0, 6.0]
    assert _Scaler.scaled.stats.traces == 2  # one per instance (keyed by identity)
    assert _Scaler.scaled.stats.cache_hits >= 1


# ------------------------------------------------------------------ nested compiled calls
def test_compiled_function_calling_a_compiled_function_is_inlined():
    @dg.compile
    def inner(x):
        return x * 2

    @dg.compile
    def outer(x):
        return inner(x) + 1

    assert outer(_x()).tolist() == [3.0, 5.0, 7.0]
    assert outer.stats.traces == 1 and outer.stats.kernels == 1
    assert inner.stats.calls == 0  # it ran as Python inside outer's trace


def test_recursive_compiled_function_with_a_python_base_case():
    @dg.compile
    def power(x, n):
        return x if n == 0 else x * power(x, n - 1)

    assert power(dg.tensor([2.0, 3.0]), 3).tolist() == [16.0, 81.0]  # x ** (n + 1)
    assert power.stats.traces == 1


# --------------------------------------------------------------------- constant arguments
def test_non_tensor_arguments_are_constants_in_the_key():
    def fn(x, mode, shape, dtype, act, extra, scale):
        y = act(x).astype(dtype).reshape(shape) * scale
        return y + 1 if mode == "plus" and extra is None else y

    f = dg.compile(fn)
    x = _x()
    args = ("plus", (3, 1), np.float64, dg.exp, None, np.float32(2.0))
    for _ in range(2):
        dg.testing.assert_close(f(x, *args).numpy(), fn(x, *args).numpy(), rtol=1e-7, atol=0,
                                equal_nan=True, check_dtype=False)
    assert f.stats.traces == 1
    other = ("minus", [1, 3], np.float32, dg.tanh, [1, 2], np.float32(3.0))
    dg.testing.assert_close(f(x, *other).numpy(), fn(x, *other).numpy(), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    assert f(x, *other).dtype == np.float32
    assert f.stats.traces == 2
    f(x, "minus", [1, 3], np.float32, dg.tanh, [1, 2], np.float32(3.0))  # equal lists
    assert f.stats.traces == 2


def test_negative_zero_is_not_served_the_positive_zero_kernel():
    # A float input carries its sign; keyed by value (used in Python), -0.0 is a key
    # of its own.
    f = dg.compile(lambda x, s: x * s)
    assert not np.signbit(f(_x(), 0.0).numpy()).any()
    assert np.signbit(f(_x(), -0.0).numpy()).all()
    assert f.stats.traces == 1
    g = dg.compile(lambda x, s: x * s if s == 0 else x)
    assert not np.signbit(g(_x(), 0.0).numpy()).any()
    assert np.signbit(g(_x(), -0.0).numpy()).all()
    assert g.stats.traces == 2
    assert "-0.0" in g.stats.retrace_reasons[-1]


def test_nan_argument_does_not_retrace_every_call():
    f = dg.compile(lambda x, s: x + s)
    for _ in range(3):
        assert np.isnan(f(_x(), float("nan")).numpy()).all()
    assert f.stats.traces == 1


def test_int_beyond_int64_is_a_clear_error():
    f = dg.compile(lambda x, n: x * n)
    with pytest.raises(OverflowError, match="int64"):
        f(_x(), 2 ** 70)
    with pytest.raises(OverflowError, match="int64"):
        f(_x(), (1, -(2 ** 64)))
    assert f.stats.traces == 0


@pytest.mark.parametrize("array, word", [
    (np.ones(3, np.float16), "float16"),
    (np.ones(3, ">f4"), "byte order"),
    (np.ones(3, object), "object"),
    (np.zeros(3, "datetime64[s]"), "datetime64"),
], ids=["float16", "big_endian", "object", "datetime"])
@pytest.mark.parametrize("as_tensor", [False, True], ids=["array", "tensor"])
def test_unsupported_dtypes_are_named_before_numba(array, word, as_tensor):
    if as_tensor and array.dtype.kind in "OM":
        pytest.skip("dg.tensor itself decides about these dtypes")
    f = dg.compile(lambda x: x * 1)
    with pytest.raises(TypeError, match=word) as info:
        f(dg.from_numpy(array) if as_tensor else array)
    assert "numba" not in type(info.value).__module__
    assert f.stats.traces == 0


# ---------------------------------------------------------------------- the tracer's API
def test_tracer_has_clone_data_detach_and_requires_grad_():
    def fn(x):
        return x.clone() * 2 + x.data * 3 + x.detach().requires_grad_(False) + \
            x.requires_grad_()

    x = dg.tensor([1.0, 2.0], requires_grad=True)
    f = dg.compile(fn)
    y = f(x)
    y.sum().backward()
    assert y.tolist() == fn(x).tolist()
    assert x.grad.tolist() == [3.0, 3.0]  # clone (2) and x (1); data and detach are constants


def test_dg_grad_inside_a_compiled_function_is_traced():
    def fn(x):
        (g,) = dg.grad((x ** 3).sum(), [x], create_graph=True)
        return g

    x = dg.tensor([1.0, 3.0], requires_grad=True)
    y = dg.compile(fn)(x)
    assert y.tolist() == [3.0, 27.0]
    y.sum().backward()  # through the compiled call's backward: d(3x^2)/dx = 6x
    assert x.grad.tolist() == [6.0, 18.0]


# ------------------------------------------------------------------------------ options
@pytest.mark.parametrize("options, error", [
    ({"max_retraces": "a"}, TypeError), ({"max_retraces": -1}, ValueError),
    ({"parallel": "x"}, TypeError), ({"cache": 3}, TypeError),
    ({"strict": None}, TypeError), ({"verify": "yes"}, TypeError),
    ({"dynamic": "a"}, TypeError), ({"dynamic": (1.5,)}, TypeError),
    ({"dynamic": (-1,)}, ValueError),
])
def test_compile_options_are_checked_when_applied(options, error):
    with pytest.raises(error):
        dg.compile(lambda x: x, **options)
    with pytest.raises(error):
        dg.compile(**options)


# -------------------------------------------------------- backward after in-place changes
def test_backward_after_an_unrelated_in_place_change_of_an_argument():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    w = dg.tensor([3.0, 4.0])
    f = dg.compile(lambda x, w: (x * 2 + w).sum())
    y = f(x, w)
    w.mul_(5)  # the backward does not read w
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_backward_after_changing_a_saved_argument_still_raises():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    w = dg.tensor([3.0, 4.0])
    y = dg.compile(lambda x, w: (x * w).sum())(x, w)
    w.mul_(5)  # the backward reads w (the gradient of x is w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_nested_and_named_tuple_outputs_keep_their_structure():
    """A compiled function returns what the eager one does: nested tuples, lists and named
    tuples (max(dim) gives (values, indices)) keep their shape and type."""
    def f(x):
        return x.max(dim=1), [x.sum(), (x * 2, x.min())]

    x = dg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    cf = dg.compile(f)
    got, want = cf(x), f(x)
    assert type(got[0]) is type(want[0]) and got[0].indices.tolist() == [1, 0]
    assert isinstance(got[1], list) and isinstance(got[1][1], tuple)
    assert got[0].values.tolist() == want[0].values.tolist()
    assert got[1][1][0].tolist() == want[1][1][0].tolist()
    assert got[1][1][1].item() == want[1][1][1].item() == 0.0
