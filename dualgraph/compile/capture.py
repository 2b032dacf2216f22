"""Trace one call of the user's function, leaving eager state as it was.

Tensor and array arguments become graph inputs; so does every eager tensor the function
captures (`TraceContext(lift_as_input=...)` is always true here), so later updates of
parameters are seen. A traced training step may assign ``.grad``: the trace records the
new values and `restore_grads` puts the old ones back, for the compiled call to write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..eager.internal import set_grad
from ..eager.tensor import Tensor
from ..errors import TraceError
from ..trace.tracer import TraceContext, Tracer, _outputs


def trace_call(fn: Callable, args: tuple, with_outputs: bool = True) -> tuple:
    """Trace ``fn(*args)``; returns ``(ctx, outputs, single, grad_writes)``.

    ``outputs`` are the output nodes (``None`` unless ``with_outputs``), ``single`` whether
    ``fn`` returned one value, ``grad_writes`` what `restore_grads` returned.
    """
    ctx = TraceContext(lift_as_input=lambda t: True)
    targs = [ctx.new_input(a.shape, a.dtype, a if isinstance(a, Tensor) else None)
             if isinstance(a, (Tensor, np.ndarray)) else a for a in args]
    outputs = single = None
    try:
        with ctx:
            out = fn(*targs)
        if with_outputs:
            outputs, single = _outputs(ctx, out, fn)
    finally:
        grad_writes = restore_grads(ctx)
    return ctx, outputs, single, grad_writes


def restore_grads(ctx: TraceContext) -> list:
    """Put back every ``.grad`` the trace changed; return what the call must write:
    ``(tensor, "set", node)`` or ``(tensor, "none", None)``."""
    out: list[Any] = []
    for t, before in ctx.grad_before.values():
        after = t.grad
        set_grad(t, before)
        if after is before:
            continue
        if isinstance(after, Tracer):
            out.append((t, "set", ctx.as_node(after)))
        elif after is None:
            out.append((t, "none", None))
        else:
            raise TraceError("a compiled function assigned an eager tensor to .grad; "
                             "assign the result of an op on traced values instead")
    return out
