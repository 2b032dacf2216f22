"""Python's number operators as one table, for the stand-ins of Python numbers that a trace
hands a program (an int argument traced as a graph input, an optimizer's learning rate).

Each stand-in says what an arithmetic operator, a comparison and a conversion to a plain
value do, given the operator's function; `number_operators` writes every dunder from that.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

# (dunder stem, function, how Python spells it): each also has its reflected ``__r*__``.
ARITHMETIC = (
    ("add", operator.add, "+"),
    ("sub", operator.sub, "-"),
    ("mul", operator.mul, "*"),
    ("truediv", operator.truediv, "/"),
    ("floordiv", operator.floordiv, "//"),
    ("mod", operator.mod, "%"),
    ("pow", operator.pow, "**"),
)
UNARY = (("neg", operator.neg), ("abs", abs))
COMPARISONS = (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
               ("ge", operator.ge), ("eq", operator.eq), ("ne", operator.ne))
# Where Python needs the plain value: (dunder stem, function, how Python spells it).
CONVERSIONS = (
    ("float", float, "float()"),
    ("int", int, "int()"),
    ("index", operator.index, "as an index or a size"),
    ("hash", hash, "hashed"),
    ("round", round, "round()"),
    ("trunc", math.trunc, "math.trunc()"),
    ("floor", math.floor, "math.floor()"),
    ("ceil", math.ceil, "math.ceil()"),
    ("format", format, "formatted"),
)


def number_operators(arithmetic: Callable[[Callable, str, str, bool], Callable],
                     unary: Callable[[Callable, str], Callable],
                     compare: Callable[[Callable, str], Callable],
                     convert: Callable[[Callable, str], Callable]) -> Callable[[type], type]:
    """A class decorator writing the dunders of every row of the tables above, from
    ``arithmetic(fn, stem, spelling, reflected)``, ``unary(fn, stem)``,
    ``compare(fn, stem)`` and ``convert(fn, spelling)`` (each returns the method), and
    ``__pos__`` as the number itself. A dunder the class body defines is kept.

    >>> @number_operators(lambda fn, *_: lambda s, o: fn(s.v, o),
    ...                   lambda fn, _: lambda s: fn(s.v), lambda fn, _: lambda s, o: fn(s.v, o),
    ...                   lambda fn, _: lambda s, *a: fn(s.v, *a))
    ... class N:
    ...     v = 2
    >>> (N() * 3, N() ** 3, -N(), N() < 3, int(N()))
    (6, 8, -2, True, 2)
    """
    def methods() -> dict[str, Any]:
        made: dict[str, Any] = {"__pos__": lambda self: self}
        for stem, fn, spelling in ARITHMETIC:
            made[f"__{stem}__"] = arithmetic(fn, stem, spelling, False)
            made[f"__r{stem}__"] = arithmetic(fn, stem, spelling, True)
        for stem, fn in UNARY:
            made[f"__{stem}__"] = unary(fn, stem)
        for stem, fn in COMPARISONS:
            made[f"__{stem}__"] = compare(fn, stem)
        for stem, fn, spelling in CONVERSIONS:
            made[f"__{stem}__"] = convert(fn, spelling)
        return made

    def decorate(cls: type) -> type:
        for name, method in methods().items():
            if name not in vars(cls):
                method.__name__, method.__qualname__ = name, f"{cls.__qualname__}.{name}"
                setattr(cls, name, method)
        return cls

    return decorate
