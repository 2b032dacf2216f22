"""Matrix products: ``matmul`` (NumPy semantics), ``addmm`` (``nn.Linear`` on 2-D input), and
the compositions ``outer``, ``kron``, ``cross`` and the matrix ``trace``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from . import elementwise as E
from . import lengths as L
from . import reduce as R
from . import shape as S
from .broadcast import broadcast_shapes, normalize_dim, promote_arrays, result_dtype
from .elementwise import mul
from .precision import AUTOCAST, lower
from .registry import OpDef, register
from .shape import TRANSPOSE, reshape


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
    # The axes are canonical already: bound directly, without `transpose`'s argument checks
    # (a VJP calls this up to three times per product, on the eager per-op hot path).
    n = len(x.shape)
    return bind(TRANSPOSE, x, axes=(1, 0) if n == 2 else tuple(range(n - 2)) + (n - 1, n - 2))


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


def _swapped(x: np.ndarray) -> np.ndarray:
    """`_swap`'s view on an array (the same strides, so the same BLAS calls)."""
    n = x.ndim
    return x.transpose((1, 0) if n == 2 else tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_vjp_arrays(ctx, args, out, g):
    """`_matmul_vjp`'s products on arrays for operands of at least two dimensions and one
    dtype (attention's batched products): the kernels and views the op-by-op VJP runs, so
    the same bits, without its transpose, matmul and tensor per gradient. Batch
    broadcasting is summed back by the engine, as for the op-by-op gradients."""
    a, b = args
    dt = g.dtype
    if a.ndim < 2 or b.ndim < 2 or a.dtype != dt or b.dtype != dt:
        return None  # 1-D operands' reshapes and mixed dtypes' promotion: op by op
    na, nb = ctx.needs_input_grad
    ga = np.matmul(g, _swapped(b)) if na else None
    gb = None
    if nb:
        if a.ndim == b.ndim == 2 and ctx.inputs[1].op == "transpose":
            gb = np.matmul(g.T, a).T  # `_rhs_grad`'s layout
        else:
            gb = np.matmul(_swapped(a), g)
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
    m, k = a.shape
    n = b.shape[1]
    if (m <= n and k >= 256 and m * n * k >= 1 << 20 and b.flags.f_contiguous
            and a.flags.c_contiguous and bias.dtype == a.dtype):
        # ``x @ W.T`` (nn.Linear): OpenBLAS runs the same product as ``(W @ x.T).T`` up to
        # 2x faster when the batch is the short side and the inner dimension long (measured
        # 64x784x256: 0.78x the time; it loses on small or tall products, hence the guard).
        # The transposed product is added to the bias straight into a C-ordered result.
        out = np.empty((m, n), a.dtype)
        np.add(np.matmul(b.T, a.T).T, bias, out=out)
        return out
    out = a @ b
    # Same dtype as the bias (promoted above): added in place, which saves an output-sized
    # temporary (and raises if the bias would widen the output, as the shape rule says).
    out += bias
    return out


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


def _addmm_vjp_arrays(ctx, args, out, g):
    """`_addmm_vjp`'s products on arrays (the kernels ``matmul`` runs, so the same bits)."""
    _, a, b = args
    dt = g.dtype
    if (a is not None and a.dtype != dt) or (b is not None and b.dtype != dt):
        return None  # mixed dtypes: matmul's promotion, op by op
    _, na, nb = ctx.needs_input_grad
    ga = np.matmul(g, b.T) if na else None
    gb = None
    if nb:
        gb = np.matmul(g.T, a).T if ctx.inputs[2].op == "transpose" else np.matmul(a.T, g)
    return g, ga, gb


def _matmul_lengths(node: Any, ins: list, follows: tuple) -> tuple:
    """``a @ b``: a symbol on a batch axis (broadcast as elementwise ops are), on the rows
    of ``a`` or the columns of ``b``, or the same symbol on both contracted axes (a sum
    over it: zeros at length 0)."""
    (a, da), (b, db) = ins
    if len(a.shape) < 2 or len(b.shape) < 2:
        if L.symbolic(da + db):
            raise L.refuse(node, "multiplies a vector with a symbolic length")
        return (None,) * len(node.shape)
    if da[-1] != db[-2]:
        raise L.refuse(node, "contracts a symbolic length against another length")
    batch = L.broadcast_dims(node, node.shape[:-2],
                             [(tuple(a.shape[:-2]), da[:-2]), (tuple(b.shape[:-2]), db[:-2])])
    return batch + (da[-2], db[-1])


MATMUL = register(OpDef(
    "matmul", _matmul_impl, _matmul_infer, _matmul_vjp, _matmul_name, saves=(0, 1),
    contraction=True, vjp_arrays=_matmul_vjp_arrays, lengths=_matmul_lengths,
))
ADDMM = register(OpDef(
    "addmm", _addmm_impl, _addmm_infer, _addmm_vjp, "AddmmBackward0", saves=(1, 2),
    saves_for=(2, 1), vjp_arrays=_addmm_vjp_arrays,
    contraction=True, contraction_bias=True,
))


def matmul(a: Any, b: Any) -> Any:
    """Matrix product with NumPy's rules (1-D operands, batch broadcasting); ``a @ b``."""
    if AUTOCAST.value is not None:  # on autocast's lower-precision list
        return lower(bind(MATMUL, lower(a), lower(b)))
    return bind(MATMUL, a, b)


def addmm(bias: Any, a: Any, b: Any) -> Any:
    """``bias + a @ b`` for 2-D ``a`` and ``b`` in one op (what ``nn.Linear`` records)."""
    if AUTOCAST.value is not None:
        return lower(bind(ADDMM, lower(bias), lower(a), lower(b)))
    return bind(ADDMM, bias, a, b)


# --------------------------------------------------- outer, Kronecker and cross products


def outer(a: Any, b: Any) -> Any:
    """The outer product of two 1-D tensors: ``a[i] * b[j]``."""
    if len(a.shape) != 1 or len(b.shape) != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got shapes {tuple(a.shape)} and "
                           f"{tuple(b.shape)}")
    return E.mul(S.reshape(a, (a.shape[0], 1)), b)


ger = outer


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product: blocks ``a[i, j] * b``; the ranks are padded to the larger."""
    n = max(len(a.shape), len(b.shape))
    sa = (1,) * (n - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (n - len(b.shape)) + tuple(b.shape)
    ia = tuple(v for s in sa for v in (s, 1))
    ib = tuple(v for s in sb for v in (1, s))
    prod = E.mul(S.reshape(a, ia), S.reshape(b, ib))
    return S.reshape(prod, tuple(x * y for x, y in zip(sa, sb)))


def cross(a: Any, b: Any, dim: int | None = None) -> Any:
    """The 3-vector cross product along ``dim`` (default: the first dim of size 3), with
    broadcasting between inputs of the same rank."""
    if len(a.shape) != len(b.shape):
        raise ShapeError(f"linalg.cross: inputs must have the same number of dimensions, got "
                         f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
    shape = broadcast_shapes("cross", tuple(a.shape), tuple(b.shape))
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    d = normalize_dim("cross", dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
    a = S.broadcast_to(a, shape) if tuple(a.shape) != shape else a
    b = S.broadcast_to(b, shape) if tuple(b.shape) != shape else b
    a0, a1, a2 = (S._select(a, d, i) for i in range(3))
    b0, b1, b2 = (S._select(b, d, i) for i in range(3))
    return S.stack([E.sub(E.mul(a1, b2), E.mul(a2, b1)), E.sub(E.mul(a2, b0), E.mul(a0, b2)),
                    E.sub(E.mul(a0, b1), E.mul(a1, b0))], d)


def trace(x: Any) -> Any:
    """The sum of a matrix's main diagonal."""
    if len(x.shape) != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {len(x.shape)}")
    return R.sum(S.diagonal(x))

