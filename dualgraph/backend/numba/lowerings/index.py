"""The gather/scatter family (dualgraph/ops/gather.py): index and index_put, gather and
scatter-add along an axis, the basic-index and diagonal scatters, writes through views,
pool_gather/pool_scatter and pad_index."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import Arg, _reshaped, ishape, kernel_lowering, lowers, missing
from .pool import batch_size, zero_loops
from .shape import (
    as_dtype,
    diag_body,
    diag_loop,
    diag_planes,
    finish_lines,
    fresh,
    is_last,
    line_count,
    line_result,
    lines,
    nest,
    one_element,
    reshaped,
    sliced_shape,
    transposed,
    view,
)

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
    from ....ops.gather import indexed_shape

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


# ---- gather and scatter-add along one axis
# The operand as lines (`shape.lines`: its axis last), one small loop per line.


def _squeezed_index(idx: Node, full: Node) -> bool:
    return len(full.shape) > 0 and len(idx.shape) == len(full.shape) - 1


def _index_lines(block: kir.Block, idx: Node, buf: kir.Buffer, axis: int, m: int,
                 squeezed: bool, name: str) -> kir.Buffer:
    """Indices as (lines, count); a squeezed index (the axis dropped) has one per line."""
    if squeezed:
        return reshaped(block, buf, (m, 1), name)
    return lines(block, buf, tuple(idx.shape), axis, name)[0]


@lowers("gather_axis")
def _gather_axis(node: Node, args: list, out: str) -> kir.Block:
    x, idx = node.inputs
    axis = node.attrs["axis"]
    squeezed = _squeezed_index(idx, x)
    m = line_count(tuple(x.shape), axis) if x.shape else 1
    k = 1 if squeezed or not idx.shape else idx.shape[axis]
    block, r = line_result(node, squeezed or is_last(node, axis), out, m, k)
    t, _, _ = lines(block, args[0].buf, tuple(x.shape), axis, f"{out}_t")
    ks = _index_lines(block, idx, args[1].buf, axis, m, squeezed, f"{out}_k")
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    block.add(kir.Loop(i, m, (kir.Loop(j, k, (
        kir.Store(r, (i, j), as_dtype(t[i, ks[i, j]], node.dtype)),)),)))
    return finish_lines(block, r, node, axis, out)


@lowers("scatter_add_axis")
def _scatter_add_axis(node: Node, args: list, out: str) -> kir.Block:
    src, idx = node.inputs
    axis, size = node.attrs["axis"], node.attrs["size"]
    squeezed = node.attrs.get("squeezed", False)
    if squeezed:
        m, k = math.prod(src.shape), 1
    else:
        k = src.shape[axis] if src.shape else 1
        m = line_count(tuple(src.shape), axis) if src.shape else 1
    block, r = line_result(node, is_last(node, axis), out, m, size, fill=0)
    if squeezed:
        t = reshaped(block, args[0].buf, (m, 1), f"{out}_t")
    else:
        t = lines(block, args[0].buf, tuple(src.shape), axis, f"{out}_t")[0]
    ks = _index_lines(block, idx, args[1].buf, axis, m, squeezed, f"{out}_k")
    i, j = kir.Var(f"{out}_i"), kir.Var(f"{out}_j")
    block.add(kir.Loop(i, m, (kir.Loop(j, k, (
        kir.Store(r, (i, ks[i, j]), as_dtype(t[i, j], node.dtype), "+"),)),)))
    return finish_lines(block, r, node, axis, out)


# ---- zeros with a basic index or a diagonal filled in, writes through views


@lowers("scatter")
def _scatter(node: Node, args: list, out: str) -> kir.Block:
    index = tuple(e for e in node.attrs["index"] if e is not None)
    g = args[0].buf
    if not index:
        block, res = fresh(node, out)
        src = reshaped(block, g, res.shape, f"{out}_g")
        return block.add(*nest(res.shape, f"{out}_i", lambda at: [
            kir.Store(res, at, as_dtype(src[at], res.dtype))]))
    block, res = fresh(node, out, fill=0)
    if one_element(index, node):
        zeros = tuple(kir.const(0) for _ in g.shape)
        return block.add(kir.Store(res, tuple(kir.const(e) for e in index), g[zeros]))
    shape = sliced_shape(tuple(node.attrs["shape"]), index)
    dst = view(block, res, "slice", shape, f"{out}_s", index)
    src = reshaped(block, g, shape, f"{out}_g")
    return block.add(*nest(shape, f"{out}_i", lambda at: [kir.Store(dst, at, src[at])]))


def _broadcast_block(node: Node, args: list, out: str) -> kir.Block:
    """A broadcast (the fusible view) as a copy: a view chain's step over an index map."""
    block, res = fresh(node, out)
    x = args[0].buf
    lead = len(res.shape) - len(x.shape)

    def body(at: tuple) -> list:
        src = tuple(kir.const(0) if d == 1 else at[lead + k] for k, d in enumerate(x.shape))
        return [kir.Store(res, at, x[src or (kir.const(0),)])]

    return block.add(*nest(res.shape, f"{out}_i", body))


@lowers("view_scatter")
def _view_scatter(node: Node, args: list, out: str) -> kir.Block:
    """Copy the base, then write the value through the view's flat index map: the map is
    the view chain replayed (by the view ops' own lowerings) on ``arange(base.size)``, so
    any chain of slices, transposes and reshapes writes exactly where eager would."""
    from ....ops.registry import OPS

    value = node.inputs[1]
    n = math.prod(node.shape)
    int64 = np.dtype(np.int64)
    block, res = fresh(node, out)
    block.add(kir.LibCall("copy", (args[0].buf,), (res,)))
    flat = view(block, res, "reshape", (n,), f"{out}_f", layout="C")
    imap = kir.Buffer(f"{out}_i0", ishape(node), int64)
    iflat = kir.Buffer(f"{out}_i0f", (n,), int64, kir.VIEW)
    j = kir.Var(f"{out}_j")
    block.add(kir.Alloc(imap), kir.View(iflat, imap, "reshape"),
              kir.Loop(j, n, (kir.Store(iflat, (j,), j),)))
    cur = Node("input", (), {}, tuple(node.shape), int64)
    buf = imap
    for k, (name, attrs) in enumerate(node.attrs["chain"]):
        attrs = dict(attrs)
        shape = tuple(OPS[name].infer(cur, **attrs)[0])
        step = Node(name, (cur,), attrs, shape, int64)
        nxt = f"{out}_i{k + 1}"
        # A fusible view (a broadcast) is index arithmetic inside fused loops, with no
        # kernel lowering of its own: replayed here as a copy.
        lower = _broadcast_block if OPS[name].fusible else kernel_lowering(name)
        built = lower(step, [Arg(buf)], nxt)
        block.add(*built.stmts)
        cur, buf = step, built.result
    m = math.prod(cur.shape)
    keys = view(block, buf, "reshape", (m,), f"{out}_k", layout="C")
    if isinstance(value, Node):
        if math.prod(value.shape) != m:
            raise missing("view_scatter", "a value that is broadcast to the view")
        vals = view(block, args[1].buf, "reshape", (m,), f"{out}_v", layout="C")
        src: kir.Expr = as_dtype(vals[j], node.dtype)
    else:
        src = kir.Const(args[1].value, np.dtype(node.dtype))
    return block.add(kir.Loop(j, m, (kir.Store(flat, (keys[j],), src),)))


@lowers("diag_scatter")
def _diag_scatter(node: Node, args: list, out: str) -> kir.Block:
    shape = tuple(node.shape)
    perm, b, n, m = diag_planes(shape, node.attrs["dim1"], node.attrs["dim2"])
    r0, c0, ln = diag_loop(node.attrs, n, m)
    block = kir.Block()
    planes = kir.Buffer(f"{out}_t", (b, n, m), node.dtype)
    block.add(kir.Alloc(planes, fill=0))
    g = reshaped(block, args[0].buf, (b, ln), f"{out}_g")
    block.add(*diag_body(out, b, ln, lambda pb, pi: kir.Store(
        planes, (pb, pi + r0 if r0 else pi, pi + c0 if c0 else pi), g[pb, pi])))
    if perm == tuple(range(len(perm))):
        block.result = view(block, planes, "reshape", ishape(node), out, layout="C")
        return block
    inverse = tuple(perm.index(d) for d in range(len(perm)))
    moved = view(block, planes, "reshape", tuple(shape[d] for d in perm), f"{out}_m",
                 layout="C")
    block.result = view(block, moved, "transpose", shape, out, inverse)
    return block


# ---- pool_gather / pool_scatter and pad_index
# The operand viewed as (batch, plane) (or (batch, ...) for padding).


@lowers("pool_gather", "pool_scatter")
def _pool_gather(node: Node, args: list, out: str) -> kir.Block:
    """``pool_gather``: ``out[b, m] = x[b, idx[b, m]]``, the values at the saved argmax
    positions; ``pool_scatter``, its gradient: each value added at its position, no dense
    mask (per plane: zeros, then one scatter-add per value). Each is one call of its
    compiled routine (`blas.pool_gather`, `blas.pool_scatter`) over the operand as (batch,
    plane) and the indices as (batch or 1, m)."""
    src, idx = node.inputs
    scatter = "size" in node.attrs
    shape = tuple(src.shape)
    b = batch_size(shape, 2)
    m = math.prod(idx.shape[-2:])
    width = math.prod(node.attrs["size"]) if scatter else m
    res = kir.Buffer(out, ishape(node), node.dtype)
    block = kir.Block([kir.Alloc(res)], res)
    x = _reshaped(block, args[0].buf, (b, math.prod(shape[-2:])), f"{out}_x")
    k = _reshaped(block, args[1].buf, (b if len(idx.shape) > 2 else 1, m), f"{out}_k")
    if not (b and width):
        return block
    r2 = _reshaped(block, res, (b, width), f"{out}_r")
    call = "pool_scatter" if scatter else "pool_gather"
    return block.add(kir.LibCall(call, (x, k), (r2,)))


@lowers("pad_index", "pad_index_backward")
def _pad_index(node: Node, args: list, out: str) -> kir.Block:
    """Reflect, replicate and circular padding as a copy through one position table per
    padded dim (`pad_map`, the NumPy kernel's); the backward op adds each element of the
    padded gradient into the input position it copied."""
    from ....ops.gather import pad_map

    pad, mode = node.attrs["pad"], node.attrs["mode"]
    k = len(pad)
    backward = "size" in node.attrs
    small = tuple(node.attrs["size"]) if backward else tuple(node.inputs[0].shape[-k:])
    big = tuple(s + b + a for s, (b, a) in zip(small, pad))
    lead = batch_size(tuple(node.shape), k)
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    block = kir.Block([kir.Alloc(res)], res)
    r = _reshaped(block, res, (lead,) + (small if backward else big), f"{out}_r")
    if backward:
        block.add(*zero_loops(r, f"{out}_z"))
    if not math.prod((lead,) + big):
        return block
    maps = []
    for d, (b, a) in enumerate(pad):
        stmt, buf = kir.table(f"{out}_m{d}", pad_map(small[d], b, a, mode))
        block.add(stmt)
        maps.append(buf)
    src = _reshaped(block, args[0].buf, (lead,) + (big if backward else small), f"{out}_x")

    def body(at: tuple) -> list:
        mapped = at[:1] + tuple(m[i] for m, i in zip(maps, at[1:]))
        if backward:
            return [kir.Store(r, mapped, as_dtype(src[at], dt), "+")]
        return [kir.Store(r, at, as_dtype(src[mapped], dt))]

    return block.add(*nest((lead,) + big, f"{out}_i", body))
