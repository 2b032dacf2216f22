"""Advanced indexing: index, index_put and their flat positions."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import ishape, lowers
from .shape import as_dtype, fresh, nest, reshaped, transposed, view

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


def _flat_position(out: str, keys: kir.Buffer, b: kir.Var, shape: tuple,
                   dims: tuple) -> tuple[kir.Var, list]:
    """Statements setting ``{out}_a``, the flat position among the indexed dims of the
    ``b``-th index, each index wrapped if negative and bounds-checked."""
    a, i = kir.Var(f"{out}_a"), kir.Var(f"{out}_i")
    stmts: list = [kir.Let(a, kir.const(0))]
    for j, d in enumerate(dims):
        n = shape[d]
        stmts += [
            kir.Let(i, keys[kir.const(j), b]),
            kir.If(kir.Bin("<", i, kir.const(0)), (kir.Let(i, i + n),)),
            kir.If(kir.Bin("or", kir.Bin("<", i, kir.const(0)), kir.Bin(">=", i, kir.const(n))),
                   (kir.Raise("IndexError",
                              f"index out of bounds for dimension {d} with size {n}"),)),
            kir.Let(a, a * n + i),
        ]
    return a, stmts


def _operand_pqa(block: kir.Block, buf: kir.Buffer, perm: tuple, p: int, a: int, q: int,
                 name: str) -> kir.Buffer:
    return reshaped(block, transposed(block, buf, perm, f"{name}m"), (p, a, q), name)


@lowers("index")
def _index(node: Node, args: list, out: str) -> kir.Block:
    x, idx = node.inputs
    dims = node.attrs["dims"]
    perm, p, a, q = _index_layout(tuple(x.shape), dims)
    nb = math.prod(idx.shape[1:])
    block, res = fresh(node, out)
    r = reshaped(block, res, (p, nb, q), f"{out}_r")
    xs = _operand_pqa(block, args[0].buf, perm, p, a, q, f"{out}_x")
    keys = reshaped(block, args[1].buf, (len(dims), nb), f"{out}_k")
    b, pv, qv = kir.Var(f"{out}_b"), kir.Var(f"{out}_p"), kir.Var(f"{out}_q")
    pos, find = _flat_position(out, keys, b, tuple(x.shape), dims)
    return block.add(kir.Loop(b, nb, (*find, kir.Loop(pv, p, (kir.Loop(qv, q, (
        kir.Store(r, (pv, b, qv), xs[pv, pos, qv]),)),)))))


@lowers("index_put")
def _index_put(node: Node, args: list, out: str) -> kir.Block:
    from ....ops.index import indexed_shape

    x, v, idx = node.inputs
    dims = node.attrs["dims"]
    shape = tuple(node.shape)
    perm, p, a, q = _index_layout(shape, dims)
    nb = math.prod(idx.shape[1:])
    dt = np.dtype(node.dtype)
    o = kir.Buffer(f"{out}_o", (p, a, q), dt)
    block = kir.Block()
    if isinstance(x, Node):
        block.add(kir.Alloc(o), kir.LibCall(
            "copy", (_operand_pqa(block, args[0].buf, perm, p, a, q, f"{out}_x"),), (o,)))
    else:  # a number filling the new array (index's gradient: zeros)
        block.add(kir.Alloc(o, fill=args[0].value))
    keys = reshaped(block, args[2].buf, (len(dims), nb), f"{out}_k")
    b, pv, qv = kir.Var(f"{out}_b"), kir.Var(f"{out}_p"), kir.Var(f"{out}_q")
    if isinstance(v, Node):
        # v broadcasts to the indexed shape, whose (P, B, Q) order is the loop's.
        full = indexed_shape(shape, dims, tuple(idx.shape[1:])) or (1,)
        vshape = (1,) * (len(full) - len(v.shape)) + tuple(v.shape) if v.shape else (1,)
        vb = args[1].buf
        if vshape != full:
            vb = kir.Buffer(f"{out}_vb", full, v.dtype)
            src = reshaped(block, args[1].buf, vshape, f"{out}_vs")
            block.add(kir.Alloc(vb), *nest(full, f"{out}_v", lambda at: [kir.Store(
                vb, at, src[tuple(kir.const(0) if d == 1 else i
                                  for d, i in zip(vshape, at))])]))
        vals = reshaped(block, vb, (p, nb, q), f"{out}_v")
        value: kir.Expr = as_dtype(vals[pv, b, qv], dt)
    else:
        value = kir.Const(args[1].value, dt)
    pos, find = _flat_position(out, keys, b, shape, dims)
    block.add(kir.Loop(b, nb, (*find, kir.Loop(pv, p, (kir.Loop(qv, q, (
        kir.Store(o, (pv, pos, qv), value, "+" if node.attrs.get("accumulate") else None),
    )),)))))
    if perm == tuple(range(len(perm))):
        block.result = view(block, o, "reshape", ishape(node), out, layout="C")
        return block
    inverse = tuple(perm.index(d) for d in range(len(perm)))
    moved = reshaped(block, o, tuple(shape[d] for d in perm), f"{out}_m")
    block.result = view(block, moved, "transpose", shape, out, inverse)
    return block
