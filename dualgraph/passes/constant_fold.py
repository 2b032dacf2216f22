"""Constant folding: evaluate nodes whose tensor inputs are all constants."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ops.registry import OPS
from ._util import rebuild

# A fold that would turn a small constant into a big one (broadcasting a scalar to a
# matrix) trades a cheap op for memory and cache traffic: only fold when the result is at
# most this many bytes, or no bigger than its inputs.
MAX_GROWTH_BYTES = 1 << 16


def constant_fold(graph: Graph) -> Graph:
    """Replace each node whose node inputs are all ``const`` by a ``const`` of its value,
    computed with the registry's NumPy kernel: the one eager mode runs, so a folded value
    is eager's bit for bit (``dg.exp(dg.tensor(0.25))`` inside a compiled function)."""
    notes: list[str] = []

    def visit(n: Node, mapping: dict) -> Node:
        op = OPS.get(n.op)
        nodes = [i for i in n.inputs if isinstance(i, Node)]
        if op is None or not nodes or any(i.op != "const" for i in nodes):
            return n
        in_bytes = sum(i.attrs["value"].nbytes for i in nodes)
        out_bytes = int(np.prod(n.shape, dtype=np.int64)) * n.dtype.itemsize
        if out_bytes > max(in_bytes, MAX_GROWTH_BYTES):
            return n
        args = [i.attrs["value"] if isinstance(i, Node) else i for i in n.inputs]
        # As eager mode runs it: the same kernel, silent about inf and NaN (log(0)).
        with np.errstate(all="ignore"):
            value = np.asarray(op.impl(*args, **n.attrs))
        notes.append(f"folded {n.op} {n.type_str}")
        return Node("const", (), {"value": value}, tuple(value.shape), value.dtype, n.loc, n.uid)

    return rebuild(graph, visit, notes)
