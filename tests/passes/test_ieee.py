"""Passes keep IEEE semantics bit for bit: signed zeros, inf and nan.

`assert_close` treats -0.0 and +0.0 as equal, so these tests compare sign bits."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import passes

SPECIAL = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1.5, -2.0])


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float64).view(np.int64)


def _same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    # nan payloads may differ: compare nan-ness, then the bits of everything else.
    actual, expected = np.asarray(actual), np.asarray(expected)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(_bits(actual[~nan]), _bits(expected[~nan]))


PROGRAMS = {
    "x_plus_zero": lambda x: x + 0.0,
    "zero_plus_x": lambda x: 0.0 + x,
    "x_plus_int_zero": lambda x: x + 0,
    "x_minus_neg_zero": lambda x: x - (-0.0),
    "x_plus_neg_zero": lambda x: x + (-0.0),
    "x_minus_zero": lambda x: x - 0.0,
    "x_times_one": lambda x: x * 1,
    "x_div_one": lambda x: x / 1.0,
    "x_pow_one": lambda x: x ** 1,
    "x_pow_two": lambda x: x ** 2,
    "neg_neg": lambda x: x.neg().neg(),
    "x_times_zero": lambda x: x * 0.0,
    "both_zeros": lambda x: (x + 0.0, x + (-0.0)),  # CSE must not merge the two literals
}


def _eager(fn, x: np.ndarray) -> list:
    out = fn(dg.tensor(x))
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_optimized_graph_keeps_every_bit(name):
    fn = PROGRAMS[name]
    graph = passes.optimize(dg.trace(fn, dg.tensor(SPECIAL)), verify=True)
    with np.errstate(all="ignore"):
        expected = _eager(fn, SPECIAL)
        got = dg.interpret(graph, SPECIAL)
    for g, e in zip(got, expected):
        _same_bits(g, e)


@pytest.mark.parametrize("name", ["x_plus_zero", "zero_plus_x", "both_zeros"])
def test_compiled_keeps_signed_zero(name):
    fn = PROGRAMS[name]
    with np.errstate(all="ignore"):
        expected = _eager(fn, SPECIAL)
        out = dg.compile(fn)(dg.tensor(SPECIAL))
    for g, e in zip(out if isinstance(out, tuple) else (out,), expected):
        _same_bits(g.numpy(), e)
    assert not np.signbit(expected[0][0])  # -0.0 + 0.0 is +0.0 (IEEE round to nearest)


def test_add_zero_is_kept_and_neg_zero_folded():
    x = dg.tensor(SPECIAL)
    kept = passes.simplify(dg.trace(lambda x: x + 0.0, x))
    assert [n.op for n in kept.nodes] == ["add"] and not kept.notes
    folded = passes.simplify(dg.trace(lambda x: x + -0.0, x))
    assert folded.notes == ["fold_add_zero: add f64[7]"]
    # int + 0 is exact on integers
    ints = passes.simplify(dg.trace(lambda k: k + 0, dg.tensor([1, 2])))
    assert ints.notes == ["fold_add_zero: add i64[2]"]


def test_finite_math_may_drop_add_zero():
    g = passes.simplify(dg.trace(lambda x: x + 0.0, dg.tensor(SPECIAL)), finite_math=True)
    assert g.notes == ["fold_add_pos_zero: add f64[7]"]


def test_cse_keeps_signed_zero_literals_apart():
    g = passes.cse(dg.trace(lambda x: (x + 0.0, x + (-0.0)), dg.tensor(SPECIAL)))
    assert [n.op for n in g.nodes] == ["add", "add"]


# ------------------------------------------------------------- int ** negative int


def _int_pow(x):
    return x ** -1


def test_int_pow_negative_raises_in_every_mode():
    x = dg.tensor([1, 2, 3])
    msg = "Integers to negative integer powers are not allowed"
    with pytest.raises(RuntimeError, match=msg):
        _int_pow(x)
    with pytest.raises(RuntimeError, match=msg):
        dg.trace(_int_pow, x)
    with pytest.raises(RuntimeError, match=msg):
        dg.compile(_int_pow)(x)
    # float bases and non-negative exponents are fine
    np.testing.assert_array_equal(dg.compile(_int_pow)(dg.tensor([1.0, 2.0])).numpy(),
                                  [1.0, 0.5])
    np.testing.assert_array_equal((x ** 2).numpy(), [1, 4, 9])
