"""`bind()`: the single entry point every op goes through.

The active mode decides what binding means: the eager mode runs the op's NumPy kernel and
records a tape node; the tracing mode (a later layer) appends a graph node. Because both
modes receive exactly the same `bind` calls, a program's tape and its trace hold the same
sequence of ops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# A mode is a function process(op, args, attrs) -> value. The eager mode registers itself at
# import (the first push: the base mode); tracers push and pop theirs.
_BASE: list[Callable[..., Any]] = []


class _Modes(threading.local):
    """The mode stack, one per thread: a trace running in one thread must not record (or
    swallow) the eager ops of another. Every thread starts in the base (eager) mode."""

    def __init__(self) -> None:
        self.stack = list(_BASE)


_LOCAL = _Modes()


def bind(op: Any, *args: Any, **attrs: Any) -> Any:
    """Apply registry op ``op`` to ``args`` in the active mode."""
    return _LOCAL.stack[-1](op, args, attrs)


def push_mode(process: Callable[..., Any]) -> None:
    if not _BASE:
        _BASE.append(process)
    _LOCAL.stack.append(process)


def pop_mode() -> None:
    stack = _LOCAL.stack
    if len(stack) <= 1:
        raise RuntimeError("cannot pop the eager mode")
    stack.pop()


def current_mode() -> Callable[..., Any]:
    return _LOCAL.stack[-1]


def current_context() -> Any:
    """The active trace context, or ``None`` in eager mode."""
    return getattr(_LOCAL.stack[-1], "__self__", None)
