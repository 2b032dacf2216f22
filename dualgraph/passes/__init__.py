"""Graph passes: each a pure function ``Graph -> Graph`` that never mutates its input.

``optimize`` runs the default pipeline and records per-pass statistics on the result's
``.pass_stats``, where reports find a stage by name: ``.pass_stats.before("fuse")``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir.graph import Graph
from ..ir.stages import PassStat, PassStats
from .constant_fold import constant_fold
from .cse import cse
from .dce import dce
from .fuse import fuse, fusion_groups
from .simplify import simplify

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
    after every pass and names the pass that broke it. The result carries ``.pass_stats``
    (a `PassStats`: look a stage up by pass name, never by position).
    """
    stats = PassStats()
    for name, fn in passes or DEFAULT_PIPELINE:
        if name in skip:
            continue
        before = op_count(graph)
        out = fn(graph)
        if verify:
            out.verify(name)
        stats.append(PassStat(name, before, op_count(out), out.notes, out, graph))
        graph = out
    # A new graph object sharing the last one's nodes (the input is never mutated, even
    # when every pass is skipped), which stands as the last pass's result.
    result = graph.replace(notes=graph.notes, pass_stats=stats)
    if stats:
        stats[-1].graph = result
    return result


__all__ = [
    "DEFAULT_PIPELINE", "PassStat", "PassStats", "constant_fold", "cse", "dce", "fuse",
    "fusion_groups", "op_count", "optimize", "simplify",
]
