"""How an optimized graph was made: one `PassStat` per pass, looked up by pass name.

`optimize` (in `dualgraph.passes`) fills these; they live beside `Graph` because a graph
carries them (``graph.pass_stats``). Reports ask for a stage by name ("the graph before
fuse") rather than by position, so adding a pass to the pipeline cannot make them report
the wrong graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import Graph


@dataclass
class PassStat:
    """What one pass did: node counts before and after, its notes, and the graphs it read
    (``graph_before``) and produced (``graph``)."""

    name: str
    nodes_before: int
    nodes_after: int
    notes: list[str] = field(default_factory=list)
    graph: Graph | None = None
    graph_before: Graph | None = None

    def __str__(self) -> str:
        return f"{self.name:14s} {self.nodes_before:4d} -> {self.nodes_after:4d} nodes"


class PassStats(list):
    """The `PassStat` of every pass that ran, in order (a list), with lookups by name.

    >>> g = dg.passes.optimize(dg.trace(lambda x: (x * 2).exp(), dg.ones(3)))
    >>> g.pass_stats.before("fuse") is g.pass_stats.stat("dce").graph
    True
    """

    def stat(self, name: str) -> PassStat:
        """The first run of pass ``name``; `LookupError` if it did not run (skipped in an
        ablation, not in the pipeline, or the graph was never optimized)."""
        for s in self:
            if s.name == name:
                return s
        ran = ", ".join(s.name for s in self) or "no passes"
        raise LookupError(f"pass {name!r} did not run on this graph (ran: {ran})")

    def before(self, name: str) -> Graph:
        """The graph pass ``name`` was given."""
        graph = self.stat(name).graph_before
        assert graph is not None, "optimize records the graph each pass is given"
        return graph

    def after(self, name: str) -> Graph:
        """The graph pass ``name`` produced."""
        graph = self.stat(name).graph
        assert graph is not None, "optimize records the graph each pass produces"
        return graph
