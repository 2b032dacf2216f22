"""The number stand-ins a trace hands a program (an int argument traced as a graph input, an
optimizer's hyperparameter) get every operator of one table."""

from __future__ import annotations

import operator

import pytest

from dualgraph.compile.symbolic import NeedsValue, SymbolicInt
from dualgraph.ops.number_operators import (
    ARITHMETIC,
    COMPARISONS,
    CONVERSIONS,
    UNARY,
    number_operators,
)
from dualgraph.optim._tracing import TracedNumber


def _dunders() -> list[str]:
    names = ["__pos__"]
    for stem, *_ in ARITHMETIC:
        names += [f"__{stem}__", f"__r{stem}__"]
    names += [f"__{stem}__" for stem, *_ in (*UNARY, *COMPARISONS, *CONVERSIONS)]
    return names


@pytest.mark.parametrize("cls", [SymbolicInt, TracedNumber])
def test_each_stand_in_has_every_operator_of_the_table(cls):
    for name in _dunders():
        assert callable(vars(cls).get(name)), name


def test_a_dunder_the_class_writes_itself_is_kept():
    @number_operators(lambda fn, stem, spelling, reflected: lambda s, o: (stem, reflected),
                      lambda fn, stem: lambda s: stem, lambda fn, stem: lambda s, o: stem,
                      lambda fn, spelling: lambda s, *a: spelling)
    class Number:
        def __pow__(self, o):
            return "own"

    n = Number()
    assert (n + 1, 1 - n, n ** 2, -n, n < 1, +n is n) == (
        ("add", False), ("sub", True), "own", "neg", "lt", True)
    assert (n.__index__(), format(n, "")) == ("as an index or a size", "formatted")


def _symbolic() -> SymbolicInt:
    return SymbolicInt(object(), [])


@pytest.mark.parametrize(("use", "reason"), [
    (lambda i: i == 1, "a comparison"), (lambda i: i >= 1, "a comparison"),
    (lambda i: hash(i), "hashed"), (lambda i: operator.index(i), "as an index or a size"),
    (lambda i: round(i, 2), "round()"), (lambda i: f"{i:>3}", "formatted"),
    (lambda i: i ** 2, "**"), (lambda i: i / 2, "/"), (lambda i: i + 1.5, "+ with a float"),
])
def test_a_symbolic_int_used_as_a_value_says_where(use, reason):
    i = _symbolic()
    with pytest.raises(NeedsValue) as e:
        use(i)
    assert e.value.reason == reason and i._needs == [reason]
