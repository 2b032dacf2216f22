"""Dead-code elimination: drop nodes no output needs."""

from __future__ import annotations

from ..ir.graph import Graph, Node


def dce(graph: Graph) -> Graph:
    """Keep only nodes some output depends on (inputs always stay: they are the signature)."""
    live = {id(o) for o in graph.outputs}
    for n in reversed(graph.nodes):
        if id(n) in live:
            live.update(id(i) for i in n.inputs if isinstance(i, Node))
    kept = [n for n in graph.nodes if id(n) in live]
    notes = [f"removed {n.op} {n.type_str}" for n in graph.nodes if id(n) not in live]
    return graph.replace(nodes=kept, notes=notes)
