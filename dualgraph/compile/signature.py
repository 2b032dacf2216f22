"""Which compiled entry a call may use: its signature key, and guards on captured tensors.

A call's key is ``(per-argument keys, grad mode)``, built inline in
`CompiledFunction.__call__` because it runs on every call. An argument's key is
``(shape, dtype, requires_grad)`` for a tensor, ``(shape, dtype)`` for a NumPy array and
``(type, value)`` for a Python scalar or ``None`` (baked into the graph as a constant).

Tensors the function captures (module parameters, globals) are not arguments: each entry
keeps guards on them, checked before the entry is reused.
"""

from __future__ import annotations

from ..eager.internal import array_of
from ..trace.tracer import TraceContext


def describe_change(old: tuple, new: tuple, args: tuple) -> str:
    """Why a call's signature differs from the previous one, in words."""
    (old_args, old_grad), (new_args, new_grad) = old, new
    if len(old_args) != len(new_args):
        return f"{len(new_args)} arguments instead of {len(old_args)}"
    for i, (a, b) in enumerate(zip(old_args, new_args)):
        if a == b:
            continue
        const_a = len(a) == 2 and isinstance(a[0], type)
        const_b = len(b) == 2 and isinstance(b[0], type)
        if len(a) != len(b) or const_a != const_b:
            return f"argument {i}: a {type(args[i]).__name__} now"
        if const_a:
            return f"argument {i}: Python value {b[1]!r} instead of {a[1]!r} (baked constant)"
        kind = "tensor" if len(a) == 3 else "array"
        for k, what in ((0, "shape"), (1, "dtype")):
            if a[k] != b[k]:
                return f"argument {i} ({kind}): {what} {b[k]} instead of {a[k]}"
        return f"argument {i}: requires_grad={b[2]} instead of {a[2]}"
    return f"grad mode {'on' if new_grad else 'off'} instead of {'on' if old_grad else 'off'}"


def capture_guards(ctx: TraceContext) -> tuple[list, list]:
    """Where each captured input comes from, and what must hold to reuse the trace.

    Returns ``(sources, guards)``: per captured input ``("tensor", t)`` (its data) or
    ``("grad", p)`` (the ``.grad`` of ``p``); guards ``(kind, tensor, expected)`` with kind
    ``"type"`` (shape and dtype) or ``"grad_none"`` (whether ``.grad`` is ``None``).
    Call it after the trace has put every ``.grad`` back.
    """
    entry_grads = {id(t): before for t, before in ctx.grad_before.values()}
    sources, guards = [], []
    for t, _ in ctx.captured:
        owner = next((p for p, _ in ctx.captured + list(ctx.grad_before.values())
                      if entry_grads.get(id(p), p.grad) is t and p is not t), None)
        if owner is not None:
            sources.append(("grad", owner))
            guards.append(("grad_none", owner, False))
            guards.append(("type", t, (t.shape, t.dtype)))
        else:
            sources.append(("tensor", t))
            guards.append(("type", t, (t.shape, t.dtype)))
    for t in ctx.grad_assumed_none:
        guards.append(("grad_none", t, True))
    return sources, guards


def guard_failure(guards: list) -> str | None:
    """Why an entry's guards fail now (``None`` when they all hold)."""
    for kind, t, expected in guards:
        if kind == "grad_none":
            if (t.grad is None) != expected:
                state = "None" if t.grad is None else "set"
                return f"the .grad of a {t.shape} tensor is {state} (it was not at trace time)"
        elif kind == "type":
            d = array_of(t)
            if d.shape != expected[0] or d.dtype != expected[1]:
                return (f"a captured tensor is {t.shape} {t.dtype} instead of "
                        f"{expected[0]} {expected[1]}")
    return None
