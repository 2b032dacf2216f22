"""Square-matrix functions: ``inv`` and ``det`` as library calls over (batch, n, n) views.

Numba's LAPACK wrappers find SciPy's routines on their first call, which needs the GIL;
kernels run without it (``nogil=True``) and would abort with "unresolved symbol". So a
lowering of these ops first calls the two routines once, on a 1 x 1 matrix, in this
process (`_resolve_lapack`)."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ... import kir
from . import ishape, lowers
from .shape import reshaped

_RESOLVED: list = []


def _resolve_lapack() -> None:
    if _RESOLVED:
        return
    from .. import kernels

    one = np.ones((1, 1, 1))
    for dtype in (np.float32, np.float64):
        kernels.batched_inv(one.astype(dtype), np.empty((1, 1, 1), dtype))
        kernels.batched_det(one.astype(dtype), np.empty(1, dtype))
    _RESOLVED.append(True)


def _batched(node: Node, args: list, out: str, fn: str, per_matrix: tuple) -> kir.Block:
    _resolve_lapack()
    x = node.inputs[0]
    n = x.shape[-1]
    batch = math.prod(x.shape[:-2])
    res = kir.Buffer(out, ishape(node), np.dtype(node.dtype))
    block = kir.Block([kir.Alloc(res)], res)
    src = reshaped(block, args[0].buf, (batch, n, n), f"{out}_a")
    dst = reshaped(block, res, (batch,) + per_matrix, f"{out}_o")
    block.add(kir.LibCall(fn, (src,), (dst,)))
    return block


@lowers("inv")
def _inv(node: Node, args: list, out: str) -> kir.Block:
    n = node.shape[-1]
    return _batched(node, args, out, "inv", (n, n))


@lowers("det")
def _det(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "det", ())
