"""Helpers shared by the passes: rebuild a graph through a node mapping, count uses."""

from __future__ import annotations

from collections.abc import Callable

from ..ir.graph import Graph, Node


def rebuild(graph: Graph, visit: Callable[[Node, dict], Node | None],
            notes: list[str] | None = None) -> Graph:
    """A new graph: each node (inputs already remapped) goes through ``visit``, which
    returns its replacement (any existing value, or a new node), or ``None`` to drop it.

    Input nodes and untouched nodes are shared with the old graph, never mutated: passes
    are pure functions. ``notes`` (which ``visit`` may still be filling) become the new
    graph's notes.
    """
    mapping: dict[int, Node] = {}
    nodes: list[Node] = []
    emitted: set[int] = {id(n) for n in graph.inputs}
    old = {id(n) for n in graph.nodes}
    for n in graph.nodes:
        ins = tuple(mapping.get(id(i), i) if isinstance(i, Node) else i for i in n.inputs)
        m = n if all(a is b for a, b in zip(ins, n.inputs)) else Node(
            n.op, ins, n.attrs, n.shape, n.dtype, n.loc, n.uid)
        r = visit(m, mapping)
        if r is None:
            continue
        if r is not n:
            mapping[id(n)] = r
        _emit(r, emitted, nodes, old)
    outputs = [mapping.get(id(o), o) for o in graph.outputs]
    return graph.replace(nodes=nodes, outputs=outputs, notes=notes or ())


def _emit(r: Node, emitted: set[int], nodes: list[Node], old: set[int]) -> None:
    """Append ``r``, after the nodes it reads that a rewrite built with it (not nodes of
    the old graph, whose place is theirs), so the order stays topological."""
    if id(r) in emitted:
        return
    emitted.add(id(r))
    for i in r.inputs:
        if isinstance(i, Node) and id(i) not in old:
            _emit(i, emitted, nodes, old)
    nodes.append(r)


def consumers(graph: Graph) -> dict[int, list[Node]]:
    out: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for i in n.inputs:
            if isinstance(i, Node):
                out.setdefault(id(i), []).append(n)
    return out

