"""Staleness checks (``verify=True``): is the compiled trace still the Python program?"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..eager import grad_mode
from ..eager.internal import array_of
from ..errors import TraceError
from ..trace.tracer import flatten_outputs
from .capture import trace_call
from .plan import Kind, Plan
from .random_state import generator_preserved, random_outputs


class StaleTraceError(TraceError):
    """``verify=True`` found that the compiled trace no longer matches the Python program."""


def check_stale(fn: Callable, entry: Plan, args: tuple) -> None:
    """Trace again and compare with the compiled trace: a Python branch baked into the
    trace that now goes the other way changes the op sequence. Functions without side
    effects also run eagerly, and their results are compared."""
    ctx = trace_call(fn, args, with_outputs=False)[0]
    old = [(n.op, n.loc) for n in entry.graph.nodes if n.op != "const"]
    new = [(n.op, n.loc) for n in ctx.nodes if n.op != "const"]
    if old != new:
        k = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old),
                                                                               len(new)))
        where = (new[k] if k < len(new) else old[k - 1] if old else (None, None))[1]
        # The branch itself records no op: it lies after the last op both programs
        # share and before the first where they part.
        after = f" (the Python branch is after {old[k - 1][1]})" if k and old[k - 1][1] \
            else " (the Python branch is before it)"
        raise StaleTraceError(
            f"the compiled trace of {getattr(fn, '__name__', 'the function')} is "
            f"stale: running it now gives a different program from {where or 'the end'} "
            f"on{after} ({old[k][0] if k < len(old) else 'nothing'} was compiled, "
            f"{new[k][0] if k < len(new) else 'nothing'} runs now). A Python branch or "
            "value baked into the trace changed; make it a tensor input or use dg.where."
        )
    if entry.mode is not Kind.STEP:
        # The check must not change what the program draws next; and values that depend
        # on random ops differ between eager and compiled by design: not compared.
        with grad_mode.no_grad(), generator_preserved():
            expected = fn(*args)
            got = entry.code.run(args)
        exp = flatten_outputs(expected)
        res = flatten_outputs(got)
        random = random_outputs(entry.graph) if entry.random else [False] * len(res)
        for k, (e, r) in enumerate(zip(exp, res)):
            if random[k] or not hasattr(e, "dtype") and not isinstance(e, (int, float)):
                continue
            # A number read with .item() may come from a float32 value: float32's tolerance.
            tol = 1e-4 if getattr(e, "dtype", np.float32) == np.float32 else 1e-9
            if not np.allclose(_values(r), _values(e), rtol=tol, atol=tol, equal_nan=True):
                raise StaleTraceError(
                    f"the compiled result {k} of {getattr(fn, '__name__', 'fn')} no "
                    "longer matches the eager one: a Python value baked into the trace "
                    "(a hyperparameter, a global) has changed; pass it as a tensor.")


def _values(v: Any) -> Any:
    """A result's values: a tensor's array, or the number itself."""
    return v if isinstance(v, (int, float)) else array_of(v)
