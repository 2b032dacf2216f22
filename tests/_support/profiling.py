"""The calls a piece of code makes, counted with ``sys.setprofile`` or by wrapping an op's VJP
(tests count calls; they never time them)."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable, Iterator
from typing import Any

_SWITCH_OFF = ("", "setprofile")  # the C call that ends the profiling


def python_calls(fn: Callable[[], object], c_calls: bool = False) -> list[tuple[str, str]]:
    """``(file name, function name)`` of every Python function ``fn()`` calls (``fn`` itself
    first), in order; with ``c_calls``, C functions too, as ``("", qualified name)``.
    File names use ``/`` on every system."""
    calls: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            calls.append((code.co_filename.replace("\\", "/"), code.co_name))
        elif event == "c_call" and c_calls:
            calls.append(("", getattr(arg, "__qualname__", repr(arg))))

    # A garbage collection starting inside ``fn`` would run the `gc.callbacks` (JAX and
    # Hypothesis install Python ones, so whether another test imported them changes the
    # count) and the finalizers of whatever earlier tests left in cycles: collect first,
    # and none while counting.
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        if enabled:
            gc.enable()
    if calls and calls[-1] == _SWITCH_OFF:
        calls.pop()
    return calls


@contextlib.contextmanager
def vjp_runs(*ops: Any) -> Iterator[list[str]]:
    """The names of the ops ``ops`` (`OpDef`) whose op-by-op VJP runs while the block runs,
    one entry a run (how a test tells a fused array form from the op-by-op one)."""
    runs: list[str] = []
    real = [op.vjp for op in ops]

    def counting(op: Any, vjp: Callable) -> Callable:
        def counted(ctx, g):
            runs.append(op.name)
            return vjp(ctx, g)
        return counted

    for op, vjp in zip(ops, real, strict=True):
        object.__setattr__(op, "vjp", counting(op, vjp))  # an OpDef is frozen
    try:
        yield runs
    finally:
        for op, vjp in zip(ops, real, strict=True):
            object.__setattr__(op, "vjp", vjp)
