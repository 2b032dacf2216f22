"""`dg.testing.assert_close`: PyTorch's ``torch.testing.assert_close`` semantics."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close


def _fails(actual, expected, **kw) -> str:
    with pytest.raises(AssertionError) as info:
        assert_close(actual, expected, **kw)
    return str(info.value)


def test_is_public_as_dg_testing_assert_close():
    assert dg.testing.assert_close is assert_close


# dtype -> (rtol, atol) as PyTorch documents them.
DEFAULTS = [(np.float16, 1e-3, 1e-5), (np.float32, 1.3e-6, 1e-5), (np.float64, 1e-7, 1e-7)]


@pytest.mark.parametrize(("dtype", "rtol", "atol"), DEFAULTS)
def test_default_tolerances_by_dtype(dtype, rtol, atol):
    # Expected 0: only atol counts; expected 1000: rtol dominates.
    zero = np.zeros(2, dtype)
    assert_close(np.array([atol * 0.5, 0.0], dtype), zero)
    assert "Mismatched elements: 1 / 2" in _fails(np.array([atol * 4, 0.0], dtype), zero)
    big = np.array([1000.0, 1.0], dtype)
    assert_close((big * (1 + rtol * 0.5)).astype(dtype), big)
    assert "not close" in _fails((big * (1 + rtol * 4)).astype(dtype), big)


def test_float32_defaults_are_looser_than_float64():
    x = np.array([1.0, 2.0]) * (1 + 1e-6)
    assert_close(x.astype(np.float32), np.array([1.0, 2.0], np.float32))
    assert "not close" in _fails(x, np.array([1.0, 2.0]))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integers_and_bools_are_exact(dtype):
    a = np.array([1, 0, 1], dtype)
    assert_close(a, a.copy())
    b = a.copy()
    b[1] = 1
    text = _fails(b, a)
    assert text.startswith("Tensor-likes are not equal!")
    assert "Mismatched elements: 1 / 3 (33.3%)" in text
    assert "allowed" not in text


def test_explicit_tolerances_replace_the_defaults():
    assert_close(np.array([1.1]), np.array([1.0]), rtol=0.2, atol=0.0)
    assert_close(np.array([1.1]), np.array([1.0]), rtol=0.0, atol=0.2)
    _fails(np.array([1.1]), np.array([1.0]), rtol=0.05, atol=0.05)
    # Integers with a tolerance compare by it.
    assert_close(np.array([10]), np.array([11]), rtol=0.0, atol=1.0)


def test_rtol_and_atol_go_together():
    with pytest.raises(ValueError, match="both"):
        assert_close(1.0, 1.0, rtol=1e-3)
    with pytest.raises(ValueError, match="both"):
        assert_close(1.0, 1.0, atol=1e-3)


def test_shape_and_dtype_are_checked():
    assert "'shape' do not match: (2,) != (3,)" in _fails(np.zeros(2), np.zeros(3))
    assert "'shape' do not match: () != (1,)" in _fails(np.zeros(()), np.zeros(1))
    text = _fails(np.zeros(2, np.float32), np.zeros(2))
    assert "'dtype' do not match: float32 != float64" in text
    assert_close(np.zeros(2, np.float32), np.zeros(2), check_dtype=False)
    # Without the dtype check the defaults are the larger of the two (float32's here).
    assert_close(np.array([1e-6], np.float32), np.zeros(1), check_dtype=False)


def test_nan_inf_and_signed_zero():
    nan = np.array([1.0, np.nan])
    assert "Mismatched elements: 1 / 2" in _fails(nan, nan.copy())
    assert_close(nan, nan.copy(), equal_nan=True)
    inf = np.array([np.inf, -np.inf])
    assert_close(inf, inf.copy())
    assert "Mismatched elements: 2 / 2" in _fails(inf, -inf)
    _fails(np.array([np.inf]), np.array([1e308]))
    assert_close(np.array([-0.0]), np.array([0.0]))


def test_accepts_tensors_arrays_numbers_and_nested_sequences():
    t = dg.tensor([1.0, 2.0])
    assert_close(t, np.array([1.0, 2.0], np.float32))
    assert_close(np.array([1.0, 2.0], np.float32), t)
    assert_close(2.0, 2.0 + 1e-9)
    assert_close(3, 3)
    assert_close(np.float32(1.0), np.float32(1.0))
    assert_close((t, [np.ones(2), 1.0], None), (t, (np.ones(2), 1.0), None))
    assert_close({"a": t, "b": [1, 2]}, {"b": [1, 2], "a": t})
    with pytest.raises(TypeError, match="cannot compare"):
        assert_close(object(), object())


def test_python_number_types_are_dtypes():
    assert "'dtype' do not match: int64 != float64" in _fails(1, 1.0)
    assert_close(1, 1.0, check_dtype=False)


def test_sequences_report_where_they_differ():
    text = _fails([np.ones(2), (np.zeros(3), np.zeros(1))],
                  [np.ones(2), (np.zeros(3), np.ones(1))])
    assert text.endswith("The failure occurred for item [1][1]")
    assert "The length of the sequences mismatch: 1 != 2" in _fails([1.0], [1.0, 2.0])
    text = _fails({"w": np.ones(1)}, {"b": np.ones(1)})
    assert "Missing keys in the actual mapping: 'b'" in text
    assert "Extra keys in the actual mapping: 'w'" in text
    assert "item ['w']" in _fails({"w": np.ones(1)}, {"w": np.zeros(1)})
    assert "None mismatch" in _fails(None, np.ones(1))


def test_message_counts_and_locates_the_greatest_differences():
    expected = np.array([[1.0, 2.0, 3.0], [4.0, 0.0, 6.0]])
    actual = expected.copy()
    actual[0, 2] = 3.5  # absolute 0.5, relative 1/6
    actual[1, 1] = 0.1  # absolute 0.1, relative inf (expected 0)
    actual[1, 2] = 6.4  # absolute 0.4 (nearly), relative 1/15
    text = _fails(actual, expected)
    assert text.startswith("Tensor-likes are not close!\n\n")
    assert "Mismatched elements: 3 / 6 (50.0%)" in text
    assert re.search(r"Greatest absolute difference: 0\.5 at index \(0, 2\) "
                     r"\(up to 1e-07 allowed\)", text)
    assert re.search(r"Greatest relative difference: inf at index \(1, 1\) "
                     r"\(up to 1e-07 allowed\)", text)


def test_scalars_say_expected_and_got():
    text = _fails(1.5, 1.0)
    assert text.startswith("Scalars are not close!\n\nExpected 1.0 but got 1.5.")
    assert "Absolute difference: 0.5 (up to 1e-07 allowed)" in text
    assert "Relative difference: 0.5 (up to 1e-07 allowed)" in text


def test_msg_string_is_prepended_and_callable_replaces():
    text = _fails(np.ones(2), np.zeros(2), msg="gradient 1")
    assert text.startswith("gradient 1\n\nTensor-likes are not close!")
    text = _fails(np.ones(2), np.zeros(2), msg=lambda m: "custom: " + m.splitlines()[0])
    assert text == "custom: Tensor-likes are not close!"


def test_wide_arithmetic_for_small_dtypes():
    # An int8 difference would wrap (127 - -128) if computed in int8.
    text = _fails(np.array([127], np.int8), np.array([-128], np.int8))
    assert "Absolute difference: 255" in text


def test_the_tests_compare_through_assert_close_only():
    # One comparison idiom: NumPy's allclose assertions have other defaults (atol 0, no
    # dtype check) and other failure messages, so a second idiom hides tolerance choices.
    from pathlib import Path

    root = Path(__file__).parent
    spelled = "np.testing." + "assert_allclose("
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if "_support" not in p.parts and spelled in p.read_text())
    assert users == [], f"use dg.testing.assert_close instead in {users}"
