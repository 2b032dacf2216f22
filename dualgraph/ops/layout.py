"""`Tensor.view`'s layout rule, as PyTorch's: a view of a new shape exists only when each
run of the new dimensions covers whole runs of the old ones that are laid out as one
contiguous block (splitting and merging dimensions, size-1 dimensions anywhere).

Eager tensors read their array's strides. A traced value's layout is followed through
the layout ops (transpose, basic indexing, broadcast, reshape) and elementwise ops from
the arguments' own layouts (read, and so guarded), as the eager tensors the trace stands
for would have it; any other value is contiguous, as the op computing it makes it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .registry import OPS

VIEW_ERROR = (
    "view size is not compatible with input tensor's size and stride (at least one dimension "
    "spans across two contiguous subspaces). Use .reshape(...) instead.")


def view_strides(shape: tuple, strides: tuple, new: tuple) -> tuple | None:
    """The strides of a view of shape ``new`` of a tensor of ``shape`` and element
    ``strides``, or None when no view has that shape."""
    if not shape:
        return (1,) * len(new)
    if math.prod(shape) == 0:
        return tuple(strides) if tuple(shape) == tuple(new) else _contiguous(new)
    out = [0] * len(new)
    v = len(new) - 1
    # Walk the old dimensions from the last, cutting them into blocks: a block ends where
    # the next dimension up is not laid out right after it (size-1 dimensions never end
    # one). The new dimensions taken for a block must hold exactly its elements.
    base = strides[-1]
    block = 1
    for d in range(len(shape) - 1, -1, -1):
        block *= shape[d]
        if d > 0 and (shape[d - 1] == 1 or strides[d - 1] == block * base):
            continue
        taken = 1
        while v >= 0 and (taken < block or new[v] == 1):
            out[v] = taken * base
            taken *= new[v]
            v -= 1
        if taken != block:
            return None
        if d > 0:
            base = strides[d - 1]
            block = 1
    return tuple(out) if v == -1 else None


def _contiguous(shape: tuple) -> tuple:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


def check_view(t: Any, new: tuple) -> None:
    """Raise PyTorch's RuntimeError when ``t`` (a tensor or a traced value) has no view of
    shape ``new`` (already resolved: no -1)."""
    shape = tuple(t.shape)
    if tuple(new) == shape or sum(d != 1 for d in shape) <= 1:
        return  # one dimension (and size-1 ones) always views
    strides = layout_of(t)
    if strides is not None and view_strides(shape, strides, tuple(new)) is None:
        raise RuntimeError(VIEW_ERROR)


def layout_of(t: Any) -> tuple | None:
    """``t``'s element strides (None: contiguous, nothing to check)."""
    ctx = getattr(t, "_ctx", None)
    node = getattr(t, "node", None)
    if ctx is None or node is None:
        a = np.asarray(t)  # an eager tensor's own array (no copy): its strides
        if a.flags.c_contiguous:
            return None
        return tuple(s // a.itemsize for s in a.strides)
    strides = _traced(node, ctx, _memo(ctx), type(t))
    return None if strides == _contiguous(tuple(node.shape)) else strides


def contiguous_copy(t: Any) -> Any:
    """A traced value's ``contiguous()``: itself when the layout eager mode would give it
    is C-ordered, else a copy that is (as eager mode's copy is)."""
    if layout_of(t) is None:
        return t
    out = t.clone()
    _memo(out._ctx)[id(out.node)] = _contiguous(tuple(out.node.shape))
    return out


def _memo(ctx: Any) -> dict:
    """The layouts worked out in the trace ``ctx`` (nodes never change: one walk each)."""
    memo = getattr(ctx, "_layouts", None)
    if memo is None:
        memo = {}
        try:
            ctx._layouts = memo
        except AttributeError:
            pass
    return memo


def _traced(node: Any, ctx: Any, memo: dict, wrap: type) -> tuple:
    """The element strides eager mode would give the value of traced ``node`` (``wrap``:
    the traced-value class, to hand an argument's node to the trace's context)."""
    got = memo.get(id(node))
    if got is not None:
        return got
    # Its inputs first, without recursion (a trace may chain thousands of ops).
    stack, seen = [node], set()
    while stack:
        n = stack[-1]
        pending = [i for i in _sources(n) if id(i) not in memo and id(i) not in seen]
        if pending and id(n) not in seen:
            seen.add(id(n))
            stack.extend(pending)
            continue
        stack.pop()
        if id(n) not in memo:
            memo[id(n)] = _strides(n, ctx, memo, wrap)
    return memo[id(node)]


def _sources(node: Any) -> list:
    """The inputs of ``node`` whose layout decides its own."""
    if node.op in ("transpose", "getitem", "broadcast_to", "reshape") or getattr(
            OPS.get(node.op), "elementwise", False):
        return [i for i in node.inputs if hasattr(i, "shape") and hasattr(i, "op")]
    return []


def _strides(node: Any, ctx: Any, memo: dict, wrap: type) -> tuple:
    """``node``'s strides, its inputs' known (``memo``)."""
    shape = tuple(node.shape)
    out = None
    ins = _sources(node)
    if node.op == "input":
        out = _argument(wrap(node, ctx), ctx)
    elif node.op == "transpose" and ins:
        src = memo[id(ins[0])]
        out = tuple(src[a] for a in node.attrs["axes"])
    elif node.op == "getitem" and ins:
        out = _indexed(tuple(ins[0].shape), memo[id(ins[0])], node.attrs["index"],
                       shape)
    elif node.op == "broadcast_to" and ins:
        src_shape, src = tuple(ins[0].shape), memo[id(ins[0])]
        lead = len(shape) - len(src_shape)
        out = tuple(0 if k < lead or src_shape[k - lead] != shape[k] else src[k - lead]
                    for k in range(len(shape)))
    elif node.op == "reshape" and ins:
        out = view_strides(tuple(ins[0].shape), memo[id(ins[0])], shape)
    elif getattr(OPS.get(node.op), "elementwise", False) and ins:
        out = _elementwise(shape, [(tuple(i.shape), memo[id(i)]) for i in ins])
    return _contiguous(shape) if out is None else out


def _argument(value: Any, ctx: Any) -> tuple | None:
    """A tensor argument's strides (its layout read, so the entry is guarded on it)."""
    read = getattr(ctx, "argument_layout", None)
    if read is None:
        return None
    arg = read(value)
    if arg is None:
        return None
    a = np.asarray(arg)
    return tuple(s // a.itemsize for s in a.strides)


def _indexed(shape: tuple, strides: tuple, index: tuple, out_shape: tuple) -> tuple | None:
    """The strides of a basic index (`getitem`'s ``index``: an int, a ``(start, stop,
    step)`` triple or None per position) of a tensor of ``shape`` and ``strides``."""
    out = []
    d = 0
    for ix in index:
        if ix is None:
            out.append(0)
            continue
        if d >= len(shape):
            return None
        if isinstance(ix, (int, np.integer)):
            d += 1
            continue
        if not (isinstance(ix, tuple) and len(ix) == 3):
            return None  # an index of another kind: contiguous
        out.append(strides[d] * ix[2])
        d += 1
    out.extend(strides[d:])
    if len(out) != len(out_shape):
        return None
    return tuple(out)


def _elementwise(shape: tuple, operands: list) -> tuple | None:
    """An elementwise result's strides: dense, its dimensions ordered as the operands'
    strides order them (the first operand that tells two dimensions apart decides;
    broadcast dimensions tell nothing), as PyTorch's iterator lays its output out."""
    full = []
    for s, st in operands:
        lead = len(shape) - len(s)
        if lead < 0:
            return None
        full.append(tuple(0 if k < lead or s[k - lead] == 1 else st[k - lead]
                          for k in range(len(shape))))
    if all(st == _contiguous(shape) or not any(st) for st in full):
        return None

    def after(a: int, b: int) -> bool | None:
        """Whether dimension ``a`` goes inside ``b`` (smaller stride), None: no operand
        tells."""
        for st in full:
            if st[a] == 0 or st[b] == 0:
                continue
            if st[a] != st[b]:
                return st[a] < st[b]
        return None

    # Innermost first; an insertion sort keeps the original order where nothing tells.
    order = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(order)):
        j = i
        while j > 0 and after(order[j], order[j - 1]) and shape[order[j]] != 1:
            order[j - 1], order[j] = order[j], order[j - 1]
            j -= 1
    out = [0] * len(shape)
    step = 1
    for dim in order:
        out[dim] = step
        step *= max(shape[dim], 1)
    return tuple(out)


