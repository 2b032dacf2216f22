"""Common-subexpression elimination."""

from __future__ import annotations

from typing import Any

from ..ir.graph import Graph, Node, attr_key
from ..ops.registry import OPS
from ._util import rebuild


def cse(graph: Graph) -> Graph:
    """Merge nodes with the same op, attributes and inputs.

    Inputs of commutative ops are compared as a sorted multiset, so ``a*b`` and ``b*a`` are
    one node; equal constants (same shape, dtype and bytes) are one node.
    """
    seen: dict[Any, Node] = {}
    notes: list[str] = []

    def ref(x: Any) -> Any:
        if isinstance(x, Node):
            return ("v", id(x))
        # repr, not the value: 0.0 == -0.0, so ``x + 0.0`` and ``x + -0.0`` (which differ
        # for x = -0.0) would otherwise be merged.
        return ("lit", type(x).__name__, repr(x))

    def visit(n: Node, mapping: dict) -> Node:
        ins = tuple(ref(i) for i in n.inputs)
        op = OPS.get(n.op)
        if op is not None and op.commutative:
            ins = tuple(sorted(ins, key=repr))
        key = (n.op, ins, attr_key(n.attrs), tuple(n.shape), n.dtype.str)
        first = seen.get(key)
        if first is not None:
            notes.append(f"merged {n.op} {n.type_str} into an equal node")
            return first
        seen[key] = n
        return n

    return rebuild(graph, visit, notes)
