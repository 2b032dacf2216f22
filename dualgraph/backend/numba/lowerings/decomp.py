"""Matrix decompositions (``cholesky``, ``solve_triangular``, ``eigh``, ``svd``, ``qr``,
``pinv``) and ``matrix_exp`` as library calls over (batch, m, n) views: each is a loop
over the batch in `dualgraph.backend.numba.lapack`, calling the LAPACKE routines of
NumPy's bundled OpenBLAS (no SciPy; ``matrix_exp`` and ``lu`` by loops). The outputs are the ops'
packed layouts, written whole."""

from __future__ import annotations

import math

import numpy as np

from ....ir.graph import Node
from ... import kir
from .. import lapack
from . import ishape, lowers, missing
from .shape import reshaped


def _batched(node: Node, args: list, out: str, fn: str, attrs: tuple,
             needs_lapack: bool = True) -> kir.Block:
    if needs_lapack and not lapack.AVAILABLE:
        raise missing(node.op, "NumPy's bundled OpenBLAS with LAPACKE was not found; run this "
                               "part eagerly")
    res = kir.Buffer(out, ishape(node), np.dtype(node.dtype))
    block = kir.Block([kir.Alloc(res)], res)
    batch = math.prod(node.inputs[0].shape[:-2])
    srcs = tuple(reshaped(block, a.buf, (batch,) + tuple(x.shape[-2:]), f"{out}_a{i}")
                 for i, (a, x) in enumerate(zip(args, node.inputs)))
    per_matrix = tuple(node.shape[len(node.inputs[0].shape) - 2:])
    dst = reshaped(block, res, (batch,) + per_matrix, f"{out}_o")
    block.add(kir.LibCall(fn, srcs + attrs, (dst,)))
    return block


@lowers("cholesky")
def _cholesky(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "cholesky", (bool(node.attrs["check"]),))


@lowers("cholesky_info")
def _cholesky_info(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "cholesky_info", ())


@lowers("solve_triangular")
def _solve_triangular(node: Node, args: list, out: str) -> kir.Block:
    a = node.attrs
    return _batched(node, args, out, "solve_triangular",
                    (bool(a["upper"]), bool(a["unitriangular"])))


@lowers("eigh")
def _eigh(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "eigh", (bool(node.attrs["lower"]),))


@lowers("svd")
def _svd(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "svd", (bool(node.attrs["full_matrices"]),))


@lowers("qr")
def _qr(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "qr", (bool(node.attrs["complete"]),))


@lowers("pinv")
def _pinv(node: Node, args: list, out: str) -> kir.Block:
    a = node.attrs
    return _batched(node, args, out, "pinv", (float(a["atol"]), float(a["rtol"])))


@lowers("matrix_exp")
def _matrix_exp(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "matrix_exp", ())


@lowers("lu")
def _lu(node: Node, args: list, out: str) -> kir.Block:
    return _batched(node, args, out, "lu", (), needs_lapack=False)
