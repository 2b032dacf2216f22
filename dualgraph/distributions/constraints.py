"""The sets a distribution's parameters and samples live in, as ``torch.distributions
.constraints``: each `Constraint` checks a value elementwise (``check`` returns a bool
tensor) and prints as PyTorch's does."""

from __future__ import annotations

from typing import Any

from ..ops import elementwise as E
from ..ops import math as M
from ..ops import reduce as R
from ..ops import shape as S

__all__ = [
    "Constraint", "boolean", "greater_than", "greater_than_eq", "half_open_interval",
    "integer_interval", "interval", "lower_cholesky", "nonnegative", "nonnegative_integer",
    "one_hot",
    "positive", "positive_definite", "real", "real_vector", "simplex", "unit_interval",
]


class Constraint:
    """A region of values; ``event_dim`` dims on the right are checked together."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__[1:] + "()"


class _Real(Constraint):
    def check(self, value: Any) -> Any:
        return E.eq(value, value)  # False only for nan


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value: Any) -> Any:
        return M.logical_or(E.eq(value, 0), E.eq(value, 1))


class _GreaterThan(Constraint):
    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return E.gt(value, self.lower_bound)

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value: Any) -> Any:
        return E.ge(value, self.lower_bound)

    def __repr__(self) -> str:
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value: Any) -> Any:
        return M.logical_and(E.ge(value, self.lower_bound), E.le(value, self.upper_bound))

    def __repr__(self) -> str:
        return (f"{type(self).__name__[1:]}(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


class _HalfOpenInterval(_Interval):
    def check(self, value: Any) -> Any:
        return M.logical_and(E.ge(value, self.lower_bound), E.lt(value, self.upper_bound))


class _IntegerInterval(_Interval):
    is_discrete = True

    def check(self, value: Any) -> Any:
        return M.logical_and(E.eq(E.fmod(value, 1), 0), super().check(value))


class _IntegerGreaterThan(_GreaterThanEq):
    is_discrete = True

    def check(self, value: Any) -> Any:
        return M.logical_and(E.eq(E.fmod(value, 1), 0), super().check(value))

    def __repr__(self) -> str:
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value: Any) -> Any:
        nonneg = R.all(E.ge(value, 0), -1)
        return M.logical_and(nonneg, E.lt(E.abs(E.sub(R.sum(value, -1), 1.0)), 1e-6))


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value: Any) -> Any:
        binary = R.all(M.logical_or(E.eq(value, 0), E.eq(value, 1)), -1)
        return M.logical_and(binary, E.eq(R.sum(value, -1), 1))


class _RealVector(Constraint):
    event_dim = 1

    def check(self, value: Any) -> Any:
        return R.all(E.eq(value, value), -1)


class _LowerCholesky(Constraint):
    """Lower-triangular with a positive diagonal."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        lower = R.all(R.all(E.eq(S.triu(value, 1), 0.0), -1), -1)
        return M.logical_and(lower, R.all(E.gt(S.diagonal(value, 0, -2, -1), 0.0), -1))


class _PositiveDefinite(Constraint):
    """Symmetric, with a Cholesky factorization."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        from ..ops.decomp import cholesky_info

        sym = R.all(R.all(M.isclose(value, S.swapaxes(value, -1, -2), atol=1e-6), -1), -1)
        return M.logical_and(sym, E.eq(cholesky_info(value), 0))


real = _Real()
real_vector = _RealVector()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
boolean = _Boolean()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
nonnegative_integer = _IntegerGreaterThan(0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
one_hot = _OneHot()
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
interval = _Interval
half_open_interval = _HalfOpenInterval
integer_interval = _IntegerInterval
