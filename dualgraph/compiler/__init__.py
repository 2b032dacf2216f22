"""`dg.compiler`: PyTorch's ``torch.compiler`` controls for `dg.compile`.

``disable`` marks a function that must not be traced: called while `dg.compile` traces,
it makes that call signature run eagerly (a whole-call fallback where PyTorch splits the
graph; the answers are the same). ``is_compiling`` tells a function whether it is being
traced.

>>> @dg.compiler.disable
... def log_stats(x):
...     return float(x.mean())
>>> dg.compiler.is_compiling()
False
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import EagerOnlyError
from ..modes import current_trace

__all__ = ["allow_in_graph", "assume_constant_result", "cudagraph_mark_step_begin", "disable",
           "is_compiling", "is_dynamo_compiling", "reset"]


def is_compiling() -> bool:
    """True while `dg.compile` traces the calling code."""
    return current_trace() is not None


is_dynamo_compiling = is_compiling


def disable(fn: Callable | None = None, recursive: bool = True, *,
            reason: str | None = None) -> Any:
    """``fn`` marked to run eagerly: called while `dg.compile` traces, it raises
    `EagerOnlyError`, so the compiled function runs that signature eagerly (with a
    warning; under ``fullgraph=True`` it raises). Outside a trace it is ``fn``'s call.
    Also a decorator, bare or with arguments."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if not callable(fn):
        raise TypeError(f"dg.compiler.disable expects a callable, got {type(fn).__name__}")
    if getattr(fn, "_dg_compiler_disabled", False):
        return fn

    @functools.wraps(fn)
    def eager(*args: Any, **kwargs: Any) -> Any:
        if current_trace() is not None:
            why = f" ({reason})" if reason else ""
            raise EagerOnlyError(
                f"{getattr(fn, '__qualname__', 'a function')} is marked "
                f"dg.compiler.disable{why}, so it is not traced.")
        return fn(*args, **kwargs)

    eager._dg_compiler_disabled = True  # type: ignore[attr-defined]
    return eager


def allow_in_graph(fn: Callable) -> Callable:
    """``fn`` itself: dualgraph traces every function's tensor operations."""
    return fn


def assume_constant_result(fn: Callable) -> Callable:
    """``fn`` itself (its Python result is baked into the trace as any Python value is)."""
    return fn


def reset() -> None:
    """Accepted; each compiled function keeps its own cache (see `dg.compile`)."""


def cudagraph_mark_step_begin() -> None:
    """Accepted and does nothing (there are no CUDA graphs)."""
