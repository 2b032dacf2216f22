"""Advanced indexing: index, index_put and their flat positions."""

from __future__ import annotations

import math

from ....ir.graph import Node
from . import ishape, lowers, np_dtype

# ---- indexing
# `index` and `index_put` (dualgraph/ops/index.py) view the operand as (P, A, Q): the
# result's leading kept dims, the indexed dims (flattened), the trailing kept dims. With
# adjacent indexed dims that is a plain reshape; separated ones go first (PyTorch's rule),
# so the operand is transposed to (indexed, kept) order. One loop per index then copies
# (or adds) a Q-long row.


def _index_layout(shape: tuple, dims: tuple) -> tuple[tuple, int, int, int]:
    """``(perm, P, A, Q)`` for an operand of ``shape`` indexed at ``dims``."""
    rest = [d for d in range(len(shape)) if d not in dims]
    if dims == tuple(range(dims[0], dims[0] + len(dims))):
        pre = [d for d in rest if d < dims[0]]
        post = [d for d in rest if d > dims[0]]
    else:
        pre, post = [], rest
    perm = tuple(pre) + tuple(dims) + tuple(post)
    return (perm, math.prod(shape[d] for d in pre), math.prod(shape[d] for d in dims),
            math.prod(shape[d] for d in post))


def _flat_position(out: str, shape: tuple, dims: tuple) -> list:
    """Lines (indented for the loop over ``{out}_b``) setting ``{out}_a``: the flat
    position among the indexed dims, each index wrapped if negative and bounds-checked."""
    lines = [f"    {out}_a = 0"]
    for j, d in enumerate(dims):
        n = shape[d]
        lines += [f"    {out}_i = {out}_k[{j}, {out}_b]",
                  f"    if {out}_i < 0:",
                  f"        {out}_i += {n}",
                  f"    if {out}_i < 0 or {out}_i >= {n}:",
                  f"        raise IndexError('index out of bounds for dimension {d} with "
                  f"size {n}')",
                  f"    {out}_a = {out}_a * {n} + {out}_i"]
    return lines


def _operand_pqa(var: str, perm: tuple, p: int, a: int, q: int) -> str:
    moved = var if perm == tuple(range(len(perm))) else f"np.transpose({var}, {perm})"
    return f"np.ascontiguousarray({moved}).reshape(({p}, {a}, {q}))"


@lowers("index")
def _index(node: Node, args: list, out: str) -> list:
    x, idx = node.inputs
    dims = node.attrs["dims"]
    perm, p, a, q = _index_layout(tuple(x.shape), dims)
    nb = math.prod(idx.shape[1:])
    return [
        f"{out}_x = {_operand_pqa(args[0], perm, p, a, q)}",
        f"{out}_k = np.ascontiguousarray({args[1]}).reshape(({len(dims)}, {nb}))",
        f"{out} = np.empty(({p}, {nb}, {q}), {np_dtype(node.dtype)})",
        f"for {out}_b in range({nb}):",
        *_flat_position(out, tuple(x.shape), dims),
        f"    for {out}_p in range({p}):",
        f"        for {out}_q in range({q}):",
        f"            {out}[{out}_p, {out}_b, {out}_q] = {out}_x[{out}_p, {out}_a, {out}_q]",
        f"{out} = {out}.reshape({ishape(node)})",
    ]


@lowers("index_put")
def _index_put(node: Node, args: list, out: str) -> list:
    x, v, idx = node.inputs
    dims = node.attrs["dims"]
    shape = tuple(node.shape)
    perm, p, a, q = _index_layout(shape, dims)
    nb = math.prod(idx.shape[1:])
    dt = np_dtype(node.dtype)
    if isinstance(x, Node):
        start = f"{_operand_pqa(args[0], perm, p, a, q)}.copy()"
    else:  # a number filling the new array (index's gradient: zeros)
        start = f"np.full(({p}, {a}, {q}), {dt}({args[0]}))"
    lines = [f"{out}_o = {start}",
             f"{out}_k = np.ascontiguousarray({args[2]}).reshape(({len(dims)}, {nb}))"]
    if isinstance(v, Node):
        target = (p, nb, q)
        val = args[1] if v.dtype == node.dtype else f"{args[1]}.astype({dt})"
        # v broadcasts to the indexed shape, whose (P, B, Q) order is the loop's.
        from ....ops.index import indexed_shape

        full = indexed_shape(shape, dims, tuple(idx.shape[1:])) or (1,)
        vshape = (1,) * (len(full) - len(v.shape)) + tuple(v.shape) if v.shape else (1,)
        if vshape == full:
            lines.append(f"{out}_v = np.ascontiguousarray({val}).reshape({target})")
        else:
            lines.append(f"{out}_v = np.ascontiguousarray(np.broadcast_to("
                         f"np.ascontiguousarray({val}).reshape({vshape}), {full}))"
                         f".reshape({target})")
        src = f"{out}_v[{out}_p, {out}_b, {out}_q]"
    else:
        src = f"{dt}({args[1]})"
    op = "+=" if node.attrs.get("accumulate") else "="
    lines += [
        f"for {out}_b in range({nb}):",
        *_flat_position(out, shape, dims),
        f"    for {out}_p in range({p}):",
        f"        for {out}_q in range({q}):",
        f"            {out}_o[{out}_p, {out}_a, {out}_q] {op} {src}",
    ]
    if perm == tuple(range(len(perm))):
        return lines + [f"{out} = {out}_o.reshape({ishape(node)})"]
    inverse = tuple(perm.index(d) for d in range(len(perm)))
    moved = tuple(shape[d] for d in perm)
    return lines + [f"{out} = np.ascontiguousarray(np.transpose({out}_o.reshape({moved}), "
                    f"{inverse})).reshape({ishape(node)})"]
