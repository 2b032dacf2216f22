"""The retrace policy: a budget of retraces; past it, warn once and run eagerly, or raise."""

from __future__ import annotations

import warnings
from typing import Any


class RetraceLimitError(RuntimeError):
    """A compiled function with ``strict=True`` went over its retrace budget."""


def retrace_allowed(name: str, stats: Any, max_retraces: int, strict: bool,
                    reason: str | None) -> bool:
    """Whether function ``name`` (its `CompileStats` ``stats``) may trace again; ``reason``
    says why it must.

    Past the budget: raise `RetraceLimitError` when ``strict``, else warn (once: the caller
    then runs eagerly for good) and return False.
    """
    if stats.traces - 1 < max_retraces:
        return True
    reasons = stats.retrace_reasons + [reason or "unknown"]
    shown = "\n  ".join(reasons[-8:])
    msg = (
        f"{name} was retraced {stats.traces - 1} times (budget {max_retraces}). Why:\n"
        f"  {shown}\n"
        "Fix: mark a changing Python number dynamic (dg.compile(fn, dynamic=(position,))) "
        "or pass it as a tensor (dg.tensor(value)) so it is an input, not a baked "
        "constant; keep shapes and dtypes fixed (pad the last batch); "
        "or raise the budget with dg.compile(fn, max_retraces=N)."
    )
    if strict:
        raise RetraceLimitError(msg)
    # stacklevel 3: past this function and CompiledFunction.__call__, to the user's call.
    warnings.warn(msg + " Running eagerly from now on.", RuntimeWarning, stacklevel=3)
    return False
