"""`bind()`: the single entry point every op goes through.

The active mode decides what binding means: the eager mode runs the op's NumPy kernel and
records a tape node; the tracing mode (a later layer) appends a graph node. Because both
modes receive exactly the same `bind` calls, a program's tape and its trace hold the same
sequence of ops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A mode is a function process(op, args, attrs) -> value. The eager mode registers itself at
# import; tracers push and pop theirs.
_STACK: list[Callable[..., Any]] = []


def bind(op: Any, *args: Any, **attrs: Any) -> Any:
    """Apply registry op ``op`` to ``args`` in the active mode."""
    return _STACK[-1](op, args, attrs)


def push_mode(process: Callable[..., Any]) -> None:
    _STACK.append(process)


def pop_mode() -> None:
    if len(_STACK) <= 1:
        raise RuntimeError("cannot pop the eager mode")
    _STACK.pop()


def current_mode() -> Callable[..., Any]:
    return _STACK[-1]


def current_context() -> Any:
    """The active trace context, or ``None`` in eager mode."""
    return getattr(_STACK[-1], "__self__", None)
