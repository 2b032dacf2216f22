"""Shape ops: reshape, transpose, indexing views, concatenation, stacking, diagonals, flips
and dtype views; and the loop and view helpers the other families share.

Views (reshape, transpose, basic slices) are `kir.View` statements: a reshape of an array
whose layout the kernel does not know is a contiguous copy when Numba runs it, anything
else reads the operand's memory. Everything that makes new values is loops over kernel IR
buffers; a loop over a size-1 dim is index 0 instead (a loop is Numba compile time).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.graph import Node
from ....ops.shape import to_numpy_index
from ... import kir
from . import ishape, lowers

# ------------------------------------------------------------------------ helpers


def nest(shape: tuple, prefix: str, body: Callable[[tuple], Any]) -> list:
    """Loops over ``shape`` (index variables ``{prefix}{d}``; a size-1 dim reads index 0
    and has no loop) around ``body(index)``'s statements."""
    idx = tuple(kir.const(0) if d == 1 else kir.Var(f"{prefix}{k}")
                for k, d in enumerate(shape))
    stmts = tuple(body(idx or (kir.const(0),)))
    for k in reversed(range(len(shape))):
        if shape[k] != 1:
            stmts = (kir.Loop(idx[k], shape[k], stmts),)
    return list(stmts)


def as_dtype(e: kir.Expr, dtype: Any) -> kir.Expr:
    """``e`` cast to ``dtype`` where it has another dtype."""
    return e if e.dtype == np.dtype(dtype) else kir.Cast(e, np.dtype(dtype))


def view(block: kir.Block, base: kir.Buffer, how: str, shape: tuple, name: str,
         arg: Any = None, layout: str = "A") -> kir.Buffer:
    """A view of ``base`` named ``name`` (`kir.View`), added to ``block``."""
    buf = kir.Buffer(name, shape, base.dtype, kir.VIEW, layout)
    block.add(kir.View(buf, base, how, arg))
    return buf


def reshaped(block: kir.Block, base: kir.Buffer, shape: tuple, name: str) -> kir.Buffer:
    """``base`` as ``shape`` (itself when it has that shape already)."""
    shape = tuple(shape) or (1,)
    if tuple(base.shape) == shape:
        return base
    return view(block, base, "reshape", shape, name, layout="C")


def transposed(block: kir.Block, base: kir.Buffer, axes: tuple, name: str) -> kir.Buffer:
    """``base`` with its dims permuted by ``axes`` (itself for the identity)."""
    axes = tuple(axes)
    if axes == tuple(range(len(axes))):
        return base
    rev = axes == tuple(reversed(range(len(axes))))
    layout = "F" if rev and len(axes) == 2 and base.layout == "C" else "A"
    return view(block, base, "transpose", tuple(base.shape[a] for a in axes), name, axes,
                layout)


def line_count(shape: tuple, axis: int) -> int:
    """How many lines along ``axis`` a value of ``shape`` has (nonzero when only the axis
    is empty: a scatter into an empty axis still fills its target's lines)."""
    return math.prod(d for i, d in enumerate(shape) if i != axis)


def lines(block: kir.Block, buf: kir.Buffer, shape: tuple, axis: int | None,
          name: str) -> tuple[kir.Buffer, int, int]:
    """``buf`` (holding a value of ``shape``) as a (lines, length) array with ``axis`` last
    (a flat single line for ``axis`` None), and the two sizes."""
    shape = tuple(shape)
    if axis is None or not shape:
        n = math.prod(shape)
        return reshaped(block, buf, (1, n), name), 1, n
    perm = tuple(d for d in range(len(shape)) if d != axis) + (axis,)
    n, m = shape[axis], line_count(shape, axis)
    moved = transposed(block, buf, perm, f"{name}m")
    return reshaped(block, moved, (m, n), name), m, n


def unlines(block: kir.Block, rows: kir.Buffer, node: Node, axis: int | None,
            out: str) -> kir.Buffer:
    """The (lines, length) result ``rows`` as ``node``'s value named ``out``: the last
    axis moved back to ``axis`` (a view)."""
    shape = tuple(node.shape)
    if not shape or axis is None or axis == len(shape) - 1:
        return view(block, rows, "reshape", ishape(node), out, layout="C")
    moved = tuple(d for i, d in enumerate(shape) if i != axis) + (shape[axis],)
    back = tuple(range(axis)) + (len(shape) - 1,) + tuple(range(axis, len(shape) - 1))
    m = view(block, rows, "reshape", moved, f"{out}_m", layout="C")
    return view(block, m, "transpose", shape, out, back)


def line_result(node: Node, last: bool, out: str, m: int, n: int, dtype: Any = None,
                fill: Any = None) -> tuple[kir.Block, kir.Buffer]:
    """A block starting with the allocation of a (lines, length) result of ``m`` by ``n``:
    ``node``'s own array viewed as lines when the lines' axis is last (``last``; the
    block's result is then set), else a scratch array that `finish_lines` moves back."""
    dtype = np.dtype(dtype or node.dtype)
    if last:
        res = kir.Buffer(out, ishape(node), dtype)
        block = kir.Block([kir.Alloc(res, fill)], res)
        return block, reshaped(block, res, (m, n), f"{out}_r")
    rows = kir.Buffer(f"{out}_r", (m, n), dtype)
    return kir.Block([kir.Alloc(rows, fill)]), rows


def finish_lines(block: kir.Block, rows: kir.Buffer, node: Node, axis: int | None,
                 out: str) -> kir.Block:
    """`line_result`'s block with its result: the lines moved back to ``axis``."""
    if block.result is None:
        block.result = unlines(block, rows, node, axis, out)
    return block


def is_last(node: Node, axis: int | None) -> bool:
    """The lines of ``node`` along ``axis`` are its own C order."""
    return not node.shape or axis is None or axis == len(node.shape) - 1


def fresh(node: Node, out: str, fill: Any = None) -> tuple[kir.Block, kir.Buffer]:
    """A block whose first statement allocates ``node``'s result ``out``."""
    res = kir.Buffer(out, ishape(node), node.dtype)
    return kir.Block([kir.Alloc(res, fill)], res), res


# ----------------------------------------------------------------------- shape ops


def split_groups(base: tuple, shape: tuple) -> tuple | None:
    """How many consecutive dims of ``shape`` each dim of ``base`` splits into, when
    reshaping ``base`` to ``shape`` only splits dims (None otherwise). Such a reshape is
    a view of any strided array: the new dims' strides follow from the old dim's."""
    if len(shape) <= len(base) or 0 in base or 0 in shape:
        return None
    groups, j = [], 0
    for b in base:
        start, prod = j, 1
        while j < len(shape) and (j == start or prod < b):
            prod *= shape[j]
            j += 1
        if prod != b:
            return None
        groups.append(j - start)
    if any(d != 1 for d in shape[j:]):
        return None
    groups[-1] += len(shape) - j
    return tuple(groups)


@lowers("reshape")
def _reshape(node: Node, args: list, out: str) -> kir.Block:
    block = kir.Block()
    x = args[0].buf
    groups = None
    if x.role == kir.VIEW and x.layout != "C":
        groups = split_groups(tuple(x.shape), ishape(node))
    if groups is not None:
        # Splitting the dims of a strided view (attention's heads out of a slice of the
        # fused q/k/v product) needs no copy: the result is strided as well.
        res = kir.Buffer(out, ishape(node), x.dtype, kir.VIEW, "A")
        block.add(kir.View(res, x, "reshape", groups))
        block.result = res
        return block
    block.result = view(block, x, "reshape", ishape(node), out, layout="C")
    return block


@lowers("custom_function")
def _custom_function(node: Node, args: list, out: str) -> kir.Block:
    """A user-defined autograd Function: its value is its first input (its forward was
    traced into the graph; the other inputs only carry gradients and saved values)."""
    return _reshape(node, args, out)


@lowers("transpose")
def _transpose(node: Node, args: list, out: str) -> kir.Block:
    block = kir.Block()
    base = args[0].buf
    axes = tuple(node.attrs["axes"])
    if len(node.shape) < 2:
        block.result = view(block, base, "alias", base.shape, out, layout=base.layout)
        return block
    rev = axes == tuple(reversed(range(len(axes))))
    # .T of a C array is F-ordered: Numba then calls BLAS on it directly.
    layout = "F" if rev and len(axes) == 2 and base.layout == "C" else "A"
    block.result = view(block, base, "transpose", ishape(node), out, axes, layout)
    return block


def one_element(index: tuple, source: Any) -> bool:
    """An index of one int per dimension (plus new axes) selects a single element, which
    Numba returns as a scalar, not an array."""
    ints = sum(1 for e in index if isinstance(e, int))
    return ints == len(source.shape) and all(isinstance(e, int) or e is None for e in index)


def sliced_shape(shape: tuple, index: tuple) -> tuple:
    """The shape of ``x[index]`` without its new axes."""
    return np.empty(shape, np.bool_)[to_numpy_index(index)].shape


@lowers("getitem")
def _getitem(node: Node, args: list, out: str) -> kir.Block:
    """A strided view of the operand (a copy only where the result's shape needs a
    reshape of a view that is not contiguous)."""
    index = tuple(e for e in node.attrs["index"] if e is not None)
    x = args[0].buf
    if one_element(index, node.inputs[0]) and index:
        block, res = fresh(node, out)
        zeros = tuple(kir.const(0) for _ in res.shape)
        return block.add(kir.Store(res, zeros, x[tuple(kir.const(e) for e in index)]))
    block = kir.Block()
    if not index:
        how = "alias" if x.shape == ishape(node) else "reshape"
        block.result = view(block, x, how, ishape(node), out, layout="C" if how == "reshape"
                            else x.layout)
        return block
    shape = sliced_shape(tuple(node.inputs[0].shape), index)
    if shape == ishape(node):
        block.result = view(block, x, "slice", shape, out, index)
        return block
    src = view(block, x, "slice", shape, f"{out}_s", index)
    block.result = view(block, src, "reshape", ishape(node), out, layout="C")
    return block


def _join(node: Node, args: list, out: str, at: Callable[[int, tuple], tuple]) -> kir.Block:
    """Each operand copied (cast to the result's dtype) into the result at ``at(k, i)``."""
    block, res = fresh(node, out)
    for k, a in enumerate(args):
        x = a.buf
        block.add(*nest(x.shape, f"{out}_{k}i", lambda i, x=x, k=k: [
            kir.Store(res, at(k, i), as_dtype(x[i], res.dtype))]))
    return block


@lowers("concatenate")
def _concatenate(node: Node, args: list, out: str) -> kir.Block:
    axis = node.attrs["axis"]
    starts = np.cumsum([0] + [i.shape[axis] for i in node.inputs]).tolist()

    def at(k: int, i: tuple) -> tuple:
        j = i[axis]
        if starts[k]:
            j = kir.const(j.value + starts[k]) if isinstance(j, kir.Const) else j + starts[k]
        return i[:axis] + (j,) + i[axis + 1:]

    return _join(node, args, out, at)


@lowers("stack")
def _stack(node: Node, args: list, out: str) -> kir.Block:
    axis = node.attrs["axis"]
    if not node.inputs[0].shape:  # 0-d values are stored as (1,): join them flat
        return _join(node, args, out, lambda k, i: (kir.const(k),))
    return _join(node, args, out, lambda k, i: i[:axis] + (kir.const(k),) + i[axis:])


# ---- diagonals, flips, dtype views
# diagonal / diag_scatter move (dim1, dim2) last and view the operand as (planes, n, m);
# each is one loop over the planes' diagonals.


def diag_planes(shape: tuple, dim1: int, dim2: int) -> tuple[tuple, int, int, int]:
    """The permutation moving (dim1, dim2) last, and the (planes, n, m) sizes after it."""
    perm = tuple(d for d in range(len(shape)) if d not in (dim1, dim2)) + (dim1, dim2)
    n, m = shape[dim1], shape[dim2]
    return perm, math.prod(shape) // (n * m) if n * m else 0, n, m


def diag_loop(node_attrs: dict, n: int, m: int) -> tuple[int, int, int]:
    """Start row, start column and length of diagonal ``offset`` of an (n, m) plane."""
    k = node_attrs["offset"]
    r0, c0 = max(-k, 0), max(k, 0)
    return r0, c0, max(min(n - r0, m - c0), 0)


def diag_body(out: str, b: int, ln: int, stmt: Callable[[kir.Var, kir.Var], Any]) -> list:
    pb, pi = kir.Var(f"{out}_b"), kir.Var(f"{out}_i")
    return [kir.Loop(pb, b, (kir.Loop(pi, ln, (stmt(pb, pi),)),))]


@lowers("diagonal")
def _diagonal(node: Node, args: list, out: str) -> kir.Block:
    src = node.inputs[0]
    perm, b, n, m = diag_planes(tuple(src.shape), node.attrs["dim1"], node.attrs["dim2"])
    r0, c0, ln = diag_loop(node.attrs, n, m)
    block, res = fresh(node, out)
    planes = reshaped(block, transposed(block, args[0].buf, perm, f"{out}_p"), (b, n, m),
                      f"{out}_t")
    diag = reshaped(block, res, (b, ln), f"{out}_d")
    return block.add(*diag_body(out, b, ln, lambda pb, pi: kir.Store(
        diag, (pb, pi), planes[pb, pi + r0 if r0 else pi, pi + c0 if c0 else pi])))


@lowers("flip")
def _flip(node: Node, args: list, out: str) -> kir.Block:
    axes = node.attrs["axes"] if node.shape else ()
    block, res = fresh(node, out)
    x = args[0].buf
    last = [d - 1 for d in res.shape]

    def body(at: tuple) -> list:
        src = tuple(kir.const(last[d]) - i if d in axes else i for d, i in enumerate(at))
        return [kir.Store(res, at, x[src])]

    return block.add(*nest(res.shape, f"{out}_i", body))


@lowers("view_dtype")
def _view_dtype(node: Node, args: list, out: str) -> kir.Block:
    """The operand's bytes read as the new dtype, copied (the op makes a new array)."""
    block, res = fresh(node, out)
    bits = kir.Buffer(f"{out}_v", ishape(node), node.dtype, kir.VIEW)
    return block.add(kir.View(bits, args[0].buf, "bitcast"),
                     kir.LibCall("copy", (bits,), (res,)))
