"""Graph passes: each a pure function ``Graph -> Graph`` that never mutates its input.

``optimize`` runs the default pipeline and records per-pass statistics on the result's
``.pass_stats``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..ir.graph import Graph
from .constant_fold import constant_fold
from .cse import cse
from .dce import dce
from .fuse import fuse, fusion_groups
from .simplify import simplify


@dataclass
class PassStat:
    """What one pass did: node counts before and after, and its notes."""

    name: str
    nodes_before: int
    nodes_after: int
    notes: list[str] = field(default_factory=list)
    graph: Graph | None = None

    def __str__(self) -> str:
        return f"{self.name:14s} {self.nodes_before:4d} -> {self.nodes_after:4d} nodes"


# Cleanup first (simplify exposes constants and duplicates, CSE and DCE then shrink the
# graph), fusion last: it works on the final set of nodes.
DEFAULT_PIPELINE: tuple[tuple[str, Callable[[Graph], Graph]], ...] = (
    ("simplify", simplify),
    ("constant_fold", constant_fold),
    ("cse", cse),
    ("dce", dce),
    ("fuse", fuse),
)


def op_count(graph: Graph) -> int:
    """Nodes that compute something (constants excluded)."""
    return sum(1 for n in graph.nodes if n.op != "const")


def optimize(
    graph: Graph,
    passes: Sequence[tuple[str, Callable[[Graph], Graph]]] | None = None,
    skip: Sequence[str] = (),
    verify: bool = False,
) -> Graph:
    """Run the pipeline (default: simplify, constant_fold, cse, dce, fuse).

    ``skip`` names passes to leave out (for ablations); ``verify=True`` checks the graph
    after every pass and names the pass that broke it. The result carries ``.pass_stats``.
    """
    stats = []
    for name, fn in passes or DEFAULT_PIPELINE:
        if name in skip:
            continue
        before = op_count(graph)
        out = fn(graph)
        if verify:
            out.verify(name)
        stats.append(PassStat(name, before, op_count(out), getattr(out, "notes", []), out))
        graph = out
    graph.pass_stats = stats
    return graph


__all__ = [
    "DEFAULT_PIPELINE", "PassStat", "constant_fold", "cse", "dce", "fuse", "fusion_groups",
    "op_count", "optimize", "simplify",
]
