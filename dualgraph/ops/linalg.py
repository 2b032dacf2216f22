"""Matrix products: ``matmul`` (NumPy semantics) and ``addmm`` (``nn.Linear`` on 2-D input)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..ir.graph import Node
from ..modes import bind
from .broadcast import broadcast_shapes, promote_arrays, result_dtype
from .elementwise import mul
from .registry import OpDef, register
from .shape import reshape, transpose


def _matmul_infer(a: Any, b: Any) -> tuple:
    sa, sb = tuple(a.shape), tuple(b.shape)
    if not sa or not sb:
        raise ShapeError(f"matmul: both operands need at least 1 dimension, got {sa} and {sb}")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ShapeError(
            f"matmul: shapes {sa} and {sb} are not aligned: {ka} (dim {len(sa) - 1} of the "
            f"first) != {kb} (dim {max(len(sb) - 2, 0)} of the second)"
        )
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        # Name the operands' shapes, not just their batch parts (API.md A2).
        raise ShapeError(
            f"matmul: the batch dimensions of shapes {sa} and {sb} cannot be broadcast together"
        ) from None
    out = batch + (sa[-2:-1] if len(sa) > 1 else ()) + (sb[-1:] if len(sb) > 1 else ())
    return out, result_dtype(a, b)


def _swap(x: Any) -> Any:
    n = len(x.shape)
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_vjp(ctx, g):
    a, b = ctx.args
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) == 1 and len(sb) == 1:
        return mul(g, b), mul(g, a)
    # Promote 1-D operands to matrices, as matmul does, and undo it on the gradients.
    a2 = reshape(a, (1, sa[0])) if len(sa) == 1 else a
    b2 = reshape(b, (sb[0], 1)) if len(sb) == 1 else b
    gshape = tuple(g.shape)
    if len(sa) == 1:
        gshape = gshape[:-1] + (1,) + gshape[-1:]
    if len(sb) == 1:
        gshape = gshape + (1,)
    g2 = reshape(g, gshape)
    na, nb = ctx.needs_input_grad
    ga = gb = None
    if na:
        ga = matmul(g2, _swap(b2))
        if len(sa) == 1:
            ga = reshape(ga, tuple(ga.shape[:-2]) + (sa[0],))
    if nb:
        gb = _rhs_grad(ctx, a2, g2, 1) if len(sa) == len(sb) == 2 else matmul(_swap(a2), g2)
        if len(sb) == 1:
            gb = reshape(gb, tuple(gb.shape[:-1]))
    return ga, gb


def _matmul_name(node: Any) -> str:
    ra, rb = (len(x.shape) for x in node.inputs)
    return {(2, 2): "MmBackward0", (1, 1): "DotBackward0", (2, 1): "MvBackward0",
            (3, 3): "BmmBackward0"}.get((ra, rb), "MatmulBackward0")


def _addmm_infer(bias: Any, a: Any, b: Any) -> tuple:
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) != 2 or len(sb) != 2:
        raise ShapeError(f"addmm: needs 2-D matrices, got shapes {sa} and {sb}")
    out, dtype = _matmul_infer(a, b)
    # The bias must broadcast *to* the product's shape (as in torch.addmm), not merely with
    # it: a (2, 5) bias on a (1, 5) product would widen the output, which the kernel's
    # in-place add (and this rule's answer) does not allow.
    if len(bias.shape) > 2 or broadcast_shapes("addmm", tuple(bias.shape), out) != out:
        raise ShapeError(
            f"addmm: bias of shape {tuple(bias.shape)} does not broadcast to the output shape "
            f"{out} of {sa} @ {sb}"
        )
    return out, result_dtype(bias, a, b)


def _matmul_impl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype != b.dtype:
        a, b = promote_arrays(a, b)
    return np.matmul(a, b)


def _addmm_impl(bias: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.ndim != 2 or b.ndim != 2 or bias.ndim > 2:
        raise ValueError("addmm: bad ranks")  # replaced by the infer rule's message
    if not a.dtype == b.dtype == bias.dtype:
        bias, a, b = promote_arrays(bias, a, b)
    out = a @ b
    if out.dtype == np.result_type(out, bias):
        out += bias  # in place: saves one output-sized temporary
        return out
    return out + bias


def _rhs_grad(ctx, a, g, b_index):
    """``a^T @ g``; when b is itself a transpose (``x @ W.T``), as ``(g^T @ a)^T`` so that
    the gradient reaching W through the transpose's VJP is contiguous like W (both forms
    are the same product; the other one leaves W.grad Fortran-ordered and every later
    elementwise pass over it slow)."""
    if ctx.inputs[b_index].op == "transpose":
        return _swap(matmul(_swap(g), a))
    return matmul(_swap(a), g)


def _addmm_vjp(ctx, g):
    _, a, b = ctx.args
    _, na, nb = ctx.needs_input_grad
    return g, (matmul(g, _swap(b)) if na else None), (_rhs_grad(ctx, a, g, 2) if nb else None)


# ------------------------------------------------------------------- Numba lowerings


# Below this many multiply-adds a plain loop beats a BLAS call (whose fixed cost is ~1 us).
SMALL_MATMUL = 4096


def _loop_matmul(out: str, x: str, y: str, m: int, k: int, n: int, dtype: np.dtype) -> list:
    return [
        f"{out} = np.zeros(({m}, {n}), np.{dtype.name})",
        f"for _i in range({m}):",
        f"    for _p in range({k}):",
        f"        _x = {x}[_i, _p]",
        f"        for _j in range({n}):",
        f"            {out}[_i, _j] += _x * {y}[_p, _j]",
    ]


def _cast(var: str, node_dtype: np.dtype, x) -> str:
    return var if x.dtype == node_dtype else f"{var}.astype(np.{node_dtype.name})"


def _matmul_lower(node, args, out, ishape):
    a, b = node.inputs
    x, y = _cast(args[0], node.dtype, a), _cast(args[1], node.dtype, b)
    ra, rb = len(a.shape), len(b.shape)
    if ra == rb == 2 and math.prod(a.shape) * b.shape[1] <= SMALL_MATMUL:
        return _loop_matmul(out, x, y, a.shape[0], a.shape[1], b.shape[1], node.dtype)
    if ra <= 2 and rb <= 2:
        if ra == rb == 1:  # np.dot of vectors is a scalar; values are stored as (1,)
            return [f"{out} = np.full((1,), np.dot({x}, {y}), np.{node.dtype.name})"]
        if ra == rb == 2:  # the backend's GEMM (NumPy's BLAS where it can find it)
            m, n = a.shape[0], b.shape[1]
            return [f"{out} = dgb.gemm({x}, {y}, np.empty(({m}, {n}), "
                    f"np.{node.dtype.name}), 0.0)"]
        return [f"{out} = np.dot({x}, {y})"]
    # Batched: one BLAS call per batch element, operands broadcast over the batch dims.
    sa = (1,) + tuple(a.shape) if ra == 1 else tuple(a.shape)
    sb = tuple(b.shape) + (1,) if rb == 1 else tuple(b.shape)
    batch = tuple(node.shape[: len(node.shape) - (ra > 1) - (rb > 1)])
    m, n = sa[-2], sb[-1]
    lines = [
        f"_a = np.ascontiguousarray({x}).reshape({sa})",
        f"_b = np.ascontiguousarray({y}).reshape({sb})",
        f"{out}3 = np.empty({batch + (m, n)}, np.{node.dtype.name})",
        f"for _k in np.ndindex({batch}):",
    ]
    ia = _batch_index(sa[:-2], batch)
    ib = _batch_index(sb[:-2], batch)
    opa = f"_a[{ia}]" if ia else "_a"
    opb = f"_b[{ib}]" if ib else "_b"
    lines.append(f"    {out}3[_k] = np.dot({opa}, {opb})")
    lines.append(f"{out} = {out}3.reshape({ishape(node)})")
    return lines


def _batch_index(shape: tuple, batch: tuple) -> str:
    """Index expression into an operand's batch dims (broadcast ones read index 0); empty
    for an operand without batch dims, which is used whole (Numba cannot index ``x[...]``)."""
    lead = len(batch) - len(shape)
    parts = [("0" if d == 1 and batch[lead + j] != 1 else f"_k[{lead + j}]")
             for j, d in enumerate(shape)]
    return ", ".join(parts + [":", ":"]) if parts else ""


def _addmm_lower(node, args, out, ishape):
    bias, a, b = node.inputs
    x, y = _cast(args[1], node.dtype, a), _cast(args[2], node.dtype, b)
    prod = Node("matmul", (a, b), {}, tuple(node.shape), node.dtype)
    return _matmul_lower(prod, [x, y], out, ishape) + [
        f"{out} = {out} + {_cast(args[0], node.dtype, bias)}"]


MATMUL = register(OpDef(
    "matmul", _matmul_impl, _matmul_infer, _matmul_vjp, _matmul_name, saves=(0, 1),
    contraction=True, lower=_matmul_lower,
))
ADDMM = register(OpDef(
    "addmm", _addmm_impl, _addmm_infer, _addmm_vjp, "AddmmBackward0", saves=(1, 2),
    contraction=True, contraction_bias=True, lower=_addmm_lower,
))


def matmul(a: Any, b: Any) -> Any:
    """Matrix product with NumPy's rules (1-D operands, batch broadcasting); ``a @ b``."""
    return bind(MATMUL, a, b)


def addmm(bias: Any, a: Any, b: Any) -> Any:
    """``bias + a @ b`` for 2-D ``a`` and ``b`` in one op (what ``nn.Linear`` records)."""
    return bind(ADDMM, bias, a, b)
