"""Shape ops: reshape, transpose, indexing views and their scatters, concatenation, stacking,
diagonals, flips and dtype views."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....ir.graph import Node
from ....ops.shape import to_numpy_index
from . import ishape, kernel_lowering, lowers, missing, np_dtype

# ----------------------------------------------------------------------- shape ops


@lowers("reshape")
def _reshape(node: Node, args: list, out: str) -> list:
    return [f"{out} = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]


@lowers("custom_function")
def _custom_function(node: Node, args: list, out: str) -> list:
    """A user-defined autograd Function: its value is its first input (its forward was
    traced into the graph; the other inputs only carry gradients and saved values)."""
    return [f"{out} = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]


@lowers("transpose")
def _transpose(node: Node, args: list, out: str) -> list:
    axes = node.attrs["axes"]
    if len(node.shape) < 2:
        return [f"{out} = {args[0]}"]
    if axes == tuple(reversed(range(len(axes)))):
        # .T keeps Numba's layout exact (C becomes F): np.dot then calls BLAS directly
        # instead of copying an 'A'-layout operand.
        return [f"{out} = {args[0]}.T"]
    return [f"{out} = np.transpose({args[0]}, {axes})"]


def _index_code(index: tuple) -> str:
    parts = []
    for e in index:
        if e is None:
            continue
        if isinstance(e, tuple):
            start, stop, step = e
            parts.append(f"{start}:{'' if stop is None else stop}:{step}")
        else:
            parts.append(str(e))
    return ", ".join(parts)


def _one_element(index: tuple, source: Any) -> bool:
    """An index of one int per dimension (plus new axes) selects a single element, which
    Numba returns as a scalar, not an array."""
    ints = sum(1 for e in index if isinstance(e, int))
    return ints == len(source.shape) and all(isinstance(e, int) or e is None for e in index)


@lowers("getitem")
def _getitem(node: Node, args: list, out: str) -> list:
    index = node.attrs["index"]
    code = _index_code(index)
    if not code:
        return [f"{out} = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]
    if _one_element(index, node.inputs[0]):
        return [f"{out} = np.full({ishape(node)}, {args[0]}[{code}], "
                f"{np_dtype(node.dtype)})"]
    return [f"{out} = np.ascontiguousarray({args[0]}[{code}]).reshape({ishape(node)})"]


@lowers("scatter")
def _scatter(node: Node, args: list, out: str) -> list:
    index, shape = node.attrs["index"], node.attrs["shape"]
    code = _index_code(index)
    lines = [f"{out} = np.zeros({ishape(node)}, {np_dtype(node.dtype)})"]
    if not code:
        return lines + [f"{out}[:] = np.ascontiguousarray({args[0]}).reshape({ishape(node)})"]
    if _one_element(index, node):
        return lines + [f"{out}[{code}] = {args[0]}.ravel()[0]"]
    target = np.zeros(shape, np.bool_)[to_numpy_index(tuple(e for e in index if e is not None))]
    return lines + [f"{out}[{code}] = np.ascontiguousarray({args[0]}).reshape({target.shape})"]


@lowers("view_scatter")
def _view_scatter(node: Node, args: list, out: str) -> list:
    """Copy the base, then write the value through the view's flat index map: the map is
    the view chain replayed (by the view ops' own lowerings) on ``arange(base.size)``, so
    any chain of slices, transposes and reshapes writes exactly where eager would."""
    from ....ops.registry import OPS

    base, value = node.inputs
    n = math.prod(node.shape)
    int64 = np.dtype(np.int64)
    lines = [f"{out} = np.empty({ishape(node)}, {np_dtype(node.dtype)})",
             f"{out}_f = {out}.reshape({n})",
             f"{out}_f[:] = np.ascontiguousarray({args[0]}).reshape({n})"]
    cur = Node("input", (), {}, tuple(node.shape), int64)
    var = f"{out}_i0"
    lines.append(f"{var} = np.arange({n}).reshape({ishape(node)})")
    for k, (name, attrs) in enumerate(node.attrs["chain"]):
        attrs = dict(attrs)
        shape = tuple(OPS[name].infer(cur, **attrs)[0])
        step = Node(name, (cur,), attrs, shape, int64)
        nxt = f"{out}_i{k + 1}"
        if name == "broadcast_to":
            lines.append(f"{nxt} = np.ascontiguousarray(np.broadcast_to({var}, {ishape(step)}))")
        else:
            lines += kernel_lowering(name)(step, [var], nxt)
        cur, var = step, nxt
    m = math.prod(cur.shape)
    lines.append(f"{out}_k = np.ascontiguousarray({var}).reshape({m})")
    if isinstance(value, Node):
        if math.prod(value.shape) != m:
            raise missing("view_scatter", "a value that is broadcast to the view")
        src = f"{out}_v[_j]"
        lines.append(f"{out}_v = np.ascontiguousarray({args[1]}).reshape({m})")
    else:
        src = args[1]
    lines += [f"for _j in range({m}):",
              f"    {out}_f[{out}_k[_j]] = {src}"]
    return lines


def _same_dtype(node: Node, args: list) -> list:
    """Operands cast to the node's dtype (an int beside a float tensor: `result_dtype`)."""
    return [a if i.dtype == node.dtype else f"{a}.astype(np.{node.dtype.name})"
            for i, a in zip(node.inputs, args)]


@lowers("concatenate")
def _concatenate(node: Node, args: list, out: str) -> list:
    args = _same_dtype(node, args)
    return [f"{out} = np.concatenate(({', '.join(args)},), {node.attrs['axis']})"]


@lowers("stack")
def _stack(node: Node, args: list, out: str) -> list:
    args = _same_dtype(node, args)
    if not node.inputs[0].shape:  # 0-d values are stored as (1,): join them flat
        return [f"{out} = np.concatenate(({', '.join(args)},), 0)"]
    return [f"{out} = np.ascontiguousarray(np.stack(({', '.join(args)},), "
            f"{node.attrs['axis']})).reshape({ishape(node)})"]


# ---- shape
# diagonal / diag_scatter move (dim1, dim2) last and view the operand as (planes, n, m);
# each is one loop over the planes' diagonals. flip is a negative-step slice, copied.


def _planes(shape: tuple, dim1: int, dim2: int) -> tuple[tuple, int, int, int]:
    """The permutation moving (dim1, dim2) last, and the (planes, n, m) sizes after it."""
    perm = tuple(d for d in range(len(shape)) if d not in (dim1, dim2)) + (dim1, dim2)
    n, m = shape[dim1], shape[dim2]
    return perm, math.prod(shape) // (n * m) if n * m else 0, n, m


def _diag_loop(node_attrs: dict, n: int, m: int) -> tuple[int, int, int]:
    """Start row, start column and length of diagonal ``offset`` of an (n, m) plane."""
    k = node_attrs["offset"]
    r0, c0 = max(-k, 0), max(k, 0)
    return r0, c0, max(min(n - r0, m - c0), 0)


@lowers("diagonal")
def _diagonal(node: Node, args: list, out: str) -> list:
    src = node.inputs[0]
    perm, b, n, m = _planes(tuple(src.shape), node.attrs["dim1"], node.attrs["dim2"])
    r0, c0, ln = _diag_loop(node.attrs, n, m)
    moved = args[0] if perm == tuple(range(len(perm))) else f"np.transpose({args[0]}, {perm})"
    return [
        f"{out}_t = np.ascontiguousarray({moved}).reshape(({b}, {n}, {m}))",
        f"{out} = np.empty(({b}, {ln}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({b}):",
        f"    for {out}_i in range({ln}):",
        f"        {out}[{out}_b, {out}_i] = {out}_t[{out}_b, {out}_i + {r0}, {out}_i + {c0}]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("diag_scatter")
def _diag_scatter(node: Node, args: list, out: str) -> list:
    shape = tuple(node.shape)
    perm, b, n, m = _planes(shape, node.attrs["dim1"], node.attrs["dim2"])
    r0, c0, ln = _diag_loop(node.attrs, n, m)
    lines = [
        f"{out}_g = np.ascontiguousarray({args[0]}).reshape(({b}, {ln}))",
        f"{out}_t = np.zeros(({b}, {n}, {m}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({b}):",
        f"    for {out}_i in range({ln}):",
        f"        {out}_t[{out}_b, {out}_i + {r0}, {out}_i + {c0}] = {out}_g[{out}_b, {out}_i]",
    ]
    if perm == tuple(range(len(perm))):
        return lines + [f"{out} = {out}_t.reshape({ishape(node)})"]
    inverse = tuple(perm.index(d) for d in range(len(perm)))
    moved = tuple(shape[d] for d in perm)
    return lines + [f"{out} = np.ascontiguousarray(np.transpose({out}_t.reshape({moved}), "
                    f"{inverse}))"]


@lowers("flip")
def _flip(node: Node, args: list, out: str) -> list:
    axes = node.attrs["axes"]
    if not axes or not node.shape:
        return [f"{out} = {args[0]}.copy()"]
    code = ", ".join("::-1" if d in axes else ":" for d in range(len(node.shape)))
    return [f"{out} = np.ascontiguousarray({args[0]}[{code}])"]


@lowers("view_dtype")
def _view_dtype(node: Node, args: list, out: str) -> list:
    n = math.prod(node.inputs[0].shape)
    return [f"{out} = np.ascontiguousarray({args[0]}).reshape({n}).view("
            f"{np_dtype(node.dtype)}).reshape({ishape(node)}).copy()"]
