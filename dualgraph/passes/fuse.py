"""Fusion: group connected loop-fusible nodes into ``fused`` nodes whose body is a graph.

The rule (also in docs/passes.md), applied walking the graph from outputs to inputs:

1. A group starts at a *root*: an elementwise node or a broadcast (``kind=elementwise``),
   or a reduction (``kind=reduce``: the group computes the reduction in the same loop as
   its elementwise producers, so ``(x*y).sum()`` is one loop).
2. A producer joins its consumer's group only if **every** consumer of the producer is in
   that group and it is not a graph output. So a value used by two groups is computed once
   and stored, never recomputed: no work is duplicated (dualgraph recomputes nothing here;
   the backward's rematerialization of cheap residuals is a separate, memory-driven choice).
   The same condition keeps groups convex: no path leaves a group and comes back.
3. Loop-fusible producers (elementwise ops and broadcasts) may join any group. A
   contraction (``matmul``/``addmm``) may join an elementwise group as its *anchor*, at
   most one per group, and only if no other member feeds it: the group becomes
   ``kind=matmul``, a BLAS call followed by a fused epilogue (bias add, ReLU, ...).
4. A reduction never joins another group (it ends one), and a group of one node is left
   as it is: fusing it would save nothing.
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ops.registry import OPS
from ._util import consumers


class _Group:
    __slots__ = ("root", "members", "kind", "anchor")

    def __init__(self, root: Node, kind: str) -> None:
        self.root = root
        self.members: set[int] = {id(root)}
        self.kind = kind
        self.anchor: Node | None = None


def fusion_groups(graph: Graph, decisions: list | None = None
                  ) -> list[tuple[Node, list[Node], str]]:
    """``(root, members in graph order, kind)`` for each group of two or more nodes.

    With ``decisions`` (a list), every choice is appended to it as a dict: the node, the
    group it joined or started (``"join"``/``"start"``) or why it stayed out (``"blocked"``),
    and the rule.
    """
    users = consumers(graph)
    outputs = {id(o) for o in graph.outputs}
    group_of: dict[int, _Group] = {}
    groups: list[_Group] = []

    def log(n: Node, action: str, rule: str, g: _Group | None) -> None:
        if decisions is not None:
            decisions.append({"node": n, "action": action, "rule": rule,
                              "group": groups.index(g) if g in groups else None})

    for n in reversed(graph.nodes):
        op = OPS.get(n.op)
        if op is None:
            continue
        cs = users.get(id(n), [])
        target = None
        why = None
        if not cs:
            why = "no consumer in the graph"
        elif id(n) in outputs:
            why = "graph output: its value must be stored"
        else:
            gs = {id(group_of.get(id(c))) for c in cs}
            g = group_of.get(id(cs[0]))
            if g is not None and gs == {id(g)}:
                target = g
            elif len(cs) > 1:
                why = "consumers in different groups: stored once, not recomputed"
            else:
                why = "its consumer is not in a group"
        if op.loop_fusible and target is not None and not _feeds_anchor(n, cs, target):
            target.members.add(id(n))
            group_of[id(n)] = target
            log(n, "join", "elementwise producer whose consumers are all in the group",
                target)
        elif op.contraction and target is not None and target.kind == "elementwise" and (
                target.anchor is None):
            target.members.add(id(n))
            target.anchor = n
            target.kind = "matmul"
            group_of[id(n)] = target
            log(n, "join", "contraction anchor: BLAS product with a fused epilogue", target)
        else:
            if target is not None:
                why = ("feeds the matmul anchor, which reads its operands from memory"
                       if _feeds_anchor(n, cs, target) else
                       "second contraction in a group" if op.contraction else
                       "a reduction ends a group" if op.reduction else
                       f"{n.op} is not loop-fusible")
            if op.loop_fusible or op.reduction:
                g = _Group(n, "reduce" if op.reduction else "elementwise")
                groups.append(g)
                group_of[id(n)] = g
                log(n, "start", f"new group ({why})" if why else "new group", g)
            else:
                log(n, "blocked", why or f"{n.op} is not loop-fusible", None)
    order = {id(n): k for k, n in enumerate(graph.nodes)}
    result = []
    # Kernels are numbered in program order (the order the fused nodes appear in).
    for g in sorted(groups, key=lambda g: order[id(g.root)]):
        if len(g.members) < 2:
            continue
        members = sorted((n for n in graph.nodes if id(n) in g.members), key=lambda n: order[id(n)])
        result.append((g.root, members, g.kind))
    return result


def _feeds_anchor(n: Node, cs: list[Node], g: _Group) -> bool:
    """A producer cannot join a matmul group by feeding the matmul itself: BLAS reads its
    operands from memory."""
    return g.anchor is not None and any(c is g.anchor for c in cs)


def fuse(graph: Graph) -> Graph:
    """Replace each fusion group by one ``fused`` node (``attrs["body"]`` is a `Graph`)."""
    groups = fusion_groups(graph)
    fused_at: dict[int, Node] = {}
    member_of: dict[int, int] = {}
    notes = []
    for gi, (root, members, kind) in enumerate(groups):
        ids = {id(m) for m in members}
        ext: list[Node] = []
        for m in members:
            for i in m.inputs:
                if isinstance(i, Node) and id(i) not in ids and all(i is not e for e in ext):
                    ext.append(i)
        body_inputs = [Node("input", (), {}, tuple(e.shape), e.dtype) for e in ext]
        inner = {id(e): b for e, b in zip(ext, body_inputs)}
        body_nodes = []
        for m in members:
            ins = tuple(inner[id(i)] if isinstance(i, Node) else i for i in m.inputs)
            c = Node(m.op, ins, m.attrs, tuple(m.shape), m.dtype, m.loc, m.uid)
            inner[id(m)] = c
            body_nodes.append(c)
        body = Graph(body_inputs, body_nodes, [inner[id(root)]])
        fused = Node("fused", tuple(ext), {"body": body, "kind": kind}, tuple(root.shape),
                     root.dtype, root.loc)
        fused_at[id(root)] = fused
        for m in members:
            member_of[id(m)] = gi
        notes.append(f"fused {len(members)} nodes ({', '.join(m.op for m in members)}) "
                     f"into kernel {gi} ({kind})")
    mapping: dict[int, Node] = {}
    nodes = []
    for n in graph.nodes:
        if id(n) in fused_at:
            f = fused_at[id(n)]
            ins = tuple(mapping.get(id(i), i) for i in f.inputs)
            f = Node("fused", ins, f.attrs, f.shape, f.dtype, f.loc, f.uid)
            mapping[id(n)] = f
            nodes.append(f)
        elif id(n) in member_of:
            continue
        else:
            ins = tuple(mapping.get(id(i), i) if isinstance(i, Node) else i for i in n.inputs)
            m = n if all(a is b for a, b in zip(ins, n.inputs)) else Node(
                n.op, ins, n.attrs, n.shape, n.dtype, n.loc, n.uid)
            if m is not n:
                mapping[id(n)] = m
            nodes.append(m)
    outputs = [mapping.get(id(o), o) for o in graph.outputs]
    return graph.replace(nodes=nodes, outputs=outputs, notes=notes)
