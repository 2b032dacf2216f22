"""How optimizer code talks to a compiled call's trace.

Everything an optimizer or scheduler reads from ``param_groups`` while a call is traced is
reported here: a number becomes a `TracedNumber` (a runtime input when it meets a tensor, a
guard when Python branches on it), any other value a guard. The two trace hooks are
reached only through `trace_hooks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import EagerOnlyError
from ..modes import Mode, current_trace
from ..ops.mixin import TensorOps
from ..ops.number_operators import number_operators

_NUMBER = (int, float, np.integer, np.floating)


def trace_hooks() -> tuple[Callable[..., None], Callable[..., Any]] | None:
    """``(guard_value, runtime_scalar)`` of the call being traced, or ``None`` eagerly (and
    under a plain `dg.trace`, which guards nothing and bakes values in)."""
    trace = current_trace()
    # A mode that keeps the base defaults (a plain `dg.trace`) bakes values in.
    if trace is None or type(trace).runtime_scalar is Mode.runtime_scalar:
        return None
    return trace.guard_value, trace.runtime_scalar


def tracing() -> bool:
    """Whether a trace is recording (ops are not run now, so Python side effects happen
    once, not on every compiled call)."""
    return current_trace() is not None


def eager_only(what: str) -> EagerOnlyError:
    return EagerOnlyError(
        f"{what} inside a compiled function: a Python side effect happens once, when the "
        "call is traced, not on every compiled call. Do it outside the compiled function.")


def is_number(v: Any) -> bool:
    return isinstance(v, (*_NUMBER, TracedNumber)) and not isinstance(v, (bool, np.bool_))


def read(hooks: tuple, owner: Any, key: Any, value: Any, get: Callable[[], Any],
         where: str) -> Any:
    """What a traced read of ``value`` (``get()`` reads it again on a later call) returns:
    numbers as `TracedNumber`, tuples element by element, anything else guarded by value
    (or by identity when it cannot be compared)."""
    guard, _ = hooks
    if isinstance(value, TracedNumber):
        return value
    if isinstance(value, _NUMBER) and not isinstance(value, (bool, np.bool_)):
        return TracedNumber(hooks, ("read", id(owner), key), get, where, owner)
    if isinstance(value, tuple):
        guard(lambda: _len(get()), len(value), f"{where} changed length", owner)
        return tuple(read(hooks, owner, (key, i), v, lambda i=i: get()[i], f"{where}[{i}]")
                     for i, v in enumerate(value))
    if value is None or isinstance(value, (bool, np.bool_, str)):
        guard(lambda: _plain(get()), value, f"{where} changed (traced with {value!r})", owner)
        return value
    # A tensor (``lr=dg.tensor(0.1)``) is read as itself: another one there retraces.
    guard(lambda: id(get()), id(value), f"{where} was rebound", (owner, value))
    return value


def _len(v: Any) -> int:
    return len(v) if isinstance(v, tuple) else -1


def _plain(v: Any) -> Any:
    return v if v is None or isinstance(v, (bool, np.bool_, str)) else ("other", id(v))


_MISSING = object()


class Joined(tuple):
    """What a value computed from two traced numbers of different parameter groups keeps:
    both groups (a compiled call re-reads it when either group changes)."""

    __slots__ = ()


def _join(a: Any, b: Any) -> Any:
    return a if a is b else Joined((a, b))


def guarded_get(owner: dict, key: Any) -> Any:
    """``owner[key]`` for a later call's guard: a missing key reads as a marker."""
    return dict.get(owner, key, _MISSING)


def _arithmetic(fn: Callable, stem: str, spelling: str, reflected: bool) -> Callable:
    return lambda self, o: self._bin(o, fn, stem, reflected)


def _unary(fn: Callable, stem: str) -> Callable:
    return lambda self: self._un(fn, stem)


def _compare(fn: Callable, stem: str) -> Callable:
    return lambda self, o: self._cmp(o, fn)


def _convert(fn: Callable, spelling: str) -> Callable:
    return lambda self, *args: fn(self._concrete(), *args)


@number_operators(_arithmetic, _unary, _compare, _convert)
class TracedNumber:
    """A Python number read from a parameter group while a compiled call traces.

    Arithmetic with Python numbers gives another `TracedNumber` (computed in double
    precision on every call, as eager mode computes it); meeting a tensor it becomes a 0-d
    runtime input of the call, so a new value takes effect without a retrace. Where Python
    needs a plain value (``if lr > 0``, ``float(lr)``, ``math.sqrt``) the trace guards that
    value and retraces when it changes.
    """

    __slots__ = ("_hooks", "_key", "_get", "_where", "_keep")

    def __init__(self, hooks: tuple, key: Any, get: Callable[[], Any], where: str,
                 keep: Any) -> None:
        self._hooks, self._key, self._get, self._where, self._keep = hooks, key, get, where, keep

    @property
    def getter(self) -> Callable[[], Any]:
        """The function that computes the value on each call."""
        return self._get

    def guarded_by(self, guard: Callable) -> bool:
        """Whether this number's value guards go to ``guard`` (the trace that read it)."""
        return self._hooks[0] == guard

    @property
    def value(self) -> Any:
        """The value now (eager semantics: what the untraced program would compute)."""
        return self._get()

    # -------------------------------------------------------------- into the graph
    def lift(self, dtype: Any = None) -> Any:
        """The value as a 0-d ``dtype`` input the compiled call reads on every call
        (``dtype``: float64 for a float, int64 for an int)."""
        v = self._get()
        is_float = isinstance(v, (float, np.floating))
        if dtype is None or (is_float and np.dtype(dtype).kind != "f"):
            dtype = np.float64 if is_float else np.int64
        dtype = np.dtype(dtype)
        guard, lift = self._hooks
        # The input's dtype was chosen from the value's kind: a float becoming an int (or
        # the reverse) changes what eager mode computes, so it retraces.
        guard(lambda: isinstance(self._get(), (float, np.floating)), is_float,
              f"{self._where} changed between int and float", self._keep)
        return lift(("traced", self._key, dtype.str), self._get, dtype, self._keep)

    def trace_value(self) -> Any:
        """The tracer's hook: this number used as an op operand (``t.mul_(lr)``)."""
        return self.lift()

    def _concrete(self) -> Any:
        v = self._get()
        guard, _ = self._hooks
        guard(self._get, v, f"{self._where} changed (a Python value the trace used: "
              f"{v!r})", self._keep)
        return v

    # -------------------------------------------------------------- arithmetic
    def _bin(self, other: Any, fn: Callable, name: str, reflected: bool = False) -> Any:
        if isinstance(other, TensorOps):
            dtype = other.dtype if other.dtype.kind == "f" else None
            a = self.lift(dtype)
            return fn(other, a) if reflected else fn(a, other)
        keep = self._keep
        if isinstance(other, TracedNumber):
            og, okey, keep = other._get, other._key, _join(keep, other._keep)
        elif isinstance(other, _NUMBER) and not isinstance(other, (bool, np.bool_)):
            og, okey = (lambda: other), ("const", type(other).__name__, repr(other))
        else:
            return NotImplemented
        sg = self._get
        get = (lambda: fn(og(), sg())) if reflected else (lambda: fn(sg(), og()))
        key = (name, okey, self._key) if reflected else (name, self._key, okey)
        return TracedNumber(self._hooks, key, get, self._where, keep)

    def _un(self, fn: Callable, name: str) -> TracedNumber:
        sg = self._get
        return TracedNumber(self._hooks, (name, self._key), lambda: fn(sg()), self._where,
                            self._keep)

    # ------------------------------------------------- where Python needs the value
    def _cmp(self, other: Any, fn: Callable) -> Any:
        if isinstance(other, TensorOps):
            return fn(self.lift(other.dtype if other.dtype.kind == "f" else None), other)
        keep = self._keep
        if isinstance(other, TracedNumber):
            og, keep = other._get, _join(keep, other._keep)
        elif isinstance(other, _NUMBER):
            og = lambda: other  # noqa: E731
        else:
            return NotImplemented
        sg = self._get
        now = bool(fn(sg(), og()))
        guard, _ = self._hooks
        guard(lambda: bool(fn(sg(), og())), now,
              f"{self._where} changed a Python comparison the trace branched on", keep)
        return now

    def __bool__(self) -> bool:
        sg = self._get
        now = bool(sg())
        guard, _ = self._hooks
        guard(lambda: bool(sg()), now,
              f"{self._where} became {'non-' if not now else ''}zero", self._keep)
        return now

    def __repr__(self) -> str:
        return f"TracedNumber({self._where}={self._get()!r})"
