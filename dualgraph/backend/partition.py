"""Split a large optimized graph into segments, each compiled as its own function.

Numba's compile time grows faster than the size of the function it compiles, and a very
large generated function can exhaust its recursion limit. A graph whose one-function
lowering would be large is therefore cut, in topological order, into segments of a
bounded size. Each segment is a small `Graph` of its own, so it goes through the same
lowering as any graph, and values crossing a cut become arrays passed from one segment to
the next.

Cuts are placed by content (content-defined chunking, as deduplicating backup tools cut
files): a cut falls after a node when a hash of the structure of the last few nodes hits a
fixed pattern, within a minimum and maximum segment size. A layer repeated four times, the
forward and backward of each block, the same optimizer update for parameters of one shape:
the same run of nodes gets the same cuts wherever it appears, so it becomes identical
segments. Each segment's inputs are numbered by first use and its nodes renumbered, so
identical segments lower to identical source, which the kernel cache content-addresses:
they are compiled once and shared.

Views (reshape, transpose, slices) and constants are not cut points: a segment that reads
one recomputes it from its source, so no copy of a view crosses a cut.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..ir.graph import Graph, Node
from ..ops.registry import OPS

__all__ = ["Plan", "Segment", "partition"]

# Structure hashes of this many consecutive nodes decide a cut.
WINDOW = 4


@dataclass
class Segment:
    """One function of a split graph.

    ``graph``'s inputs come from ``sources`` (``("in", j)``: graph input ``j``;
    ``("val", v)``: value ``v`` computed by an earlier segment); its outputs go to
    ``dests`` (``("in", j)``: written in place into graph input ``j``, also listed in
    ``write_to``; ``("out", k)``: graph output ``k``, which later segments read as value
    ``id(graph.outputs[k])``; ``("val", v)``: a value later segments read).
    """

    graph: Graph
    write_to: dict[int, int]
    sources: list[tuple[str, int]]
    dests: list[tuple[str, int]]


@dataclass
class Plan:
    """A graph as segments run in order; ``values`` gives each value passed between
    segments its (shape, dtype)."""

    segments: list[Segment]
    values: dict[int, tuple[tuple, np.dtype]] = field(default_factory=dict)


def _free(n: Node) -> bool:
    """A node recomputed wherever it is read instead of being passed across a cut."""
    return n.op == "const" or (n.op in OPS and OPS[n.op].view)


def _pattern(shape: tuple) -> tuple:
    """A shape without its sizes: its rank and which axes are 1 (broadcast)."""
    return tuple(1 if d == 1 else 2 for d in shape)


def _structure(n: Node) -> bytes:
    """A hash of what ``n`` computes (its op, dtype, rank and broadcast axes), not of
    where it sits nor of its sizes: kernels read their sizes from their arguments'
    shapes (`numba.printer.Sizes`), so the same run of nodes at other sizes (the
    optimizer's update of parameters of another shape) is cut the same way and becomes
    the same function. Attributes are left out too: measured on the transformer step's
    graphs, cuts by op alone (over a window of four) repeat more often, one block
    (1,463 distinct lines, against 1,701 hashing attributes and shapes over three) and
    four blocks (1,986 against 2,127)."""
    return hashlib.sha1(repr((n.op, _pattern(n.shape), n.dtype.str)).encode()).digest()


def _chunks(units: list[Node], weight: dict[int, int], target: int) -> list[list[Node]]:
    """``units`` cut by content: after a unit whose window hash hits the pattern, once
    the segment holds ``target // 2``, and always at ``2 * target``."""
    lo, hi = target // 2, 2 * target
    mean = max(1.0, sum(weight.get(id(u), 1) for u in units) / max(1, len(units)))
    # One unit in ``modulus`` hits: a segment then ends about ``target`` on average.
    modulus = max(1, round((target - lo) / mean))
    hashes = [_structure(u) for u in units]
    out: list[list[Node]] = [[]]
    size = 0
    for k, u in enumerate(units):
        out[-1].append(u)
        size += weight.get(id(u), 1)
        window = b"".join(hashes[max(0, k - WINDOW + 1):k + 1])
        hit = int.from_bytes(hashlib.sha1(window).digest()[:8], "big") % modulus == 0
        if k + 1 < len(units) and (size >= hi or (size >= lo and hit)):
            out.append([])
            size = 0
    return out


def partition(graph: Graph, write_to: dict[int, int], weight: dict[int, int],
              target: int) -> Plan | None:
    """``graph`` as segments of about ``target`` (in units of ``weight``: node id ->
    its share of the one-function lowering, such as source lines; 1 when missing), or
    ``None`` when it would be one segment anyway. ``write_to`` maps graph outputs to the
    inputs their values are written into in place."""
    units = [n for n in graph.nodes if not _free(n)]
    chunks = _chunks(units, weight, target)
    if len(chunks) < 2:
        return None
    home = {id(n): c for c, chunk in enumerate(chunks) for n in chunk}
    input_index = {id(n): j for j, n in enumerate(graph.inputs)}

    # What each chunk reads from outside (graph inputs, values of earlier chunks), with
    # views and constants recomputed where read.
    reads: list[dict[tuple[str, int], None]] = [{} for _ in chunks]

    def visit(x: Node, c: int) -> None:
        if id(x) in input_index:
            reads[c].setdefault(("in", input_index[id(x)]))
        elif id(x) in home:
            if home[id(x)] != c:
                reads[c].setdefault(("val", id(x)))
        else:  # a view or constant
            for i in x.inputs:
                if isinstance(i, Node):
                    visit(i, c)

    for c, chunk in enumerate(chunks):
        for n in chunk:
            for i in n.inputs:
                if isinstance(i, Node):
                    visit(i, c)

    # Where each graph output is produced: the chunk computing it, or, for an in-place
    # write whose input a later chunk still reads, that last reader (the value is passed
    # to it); outputs that are inputs, constants or views go to the last chunk. Placing
    # an output may add reads to its chunk, so this repeats until nothing moves.
    last = len(chunks) - 1
    owner: dict[int, int] = {}
    while True:
        last_reader: dict[int, int] = {}
        for c, rs in enumerate(reads):
            for kind, j in rs:
                if kind == "in":
                    last_reader[j] = c
        moved = False
        for k, o in enumerate(graph.outputs):
            c = home.get(id(o), last)
            if k in write_to:
                c = max(c, last_reader.get(write_to[k], -1))
            if owner.get(k) != c:
                owner[k] = c
                moved = True
                visit(o, c)
        if not moved:
            break
    needed: dict[int, set[int]] = {}  # value -> chunks that read it from another chunk
    for c, rs in enumerate(reads):
        for kind, v in rs:
            if kind == "val":
                needed.setdefault(v, set()).add(c)
    by_id = {id(n): n for n in graph.nodes}
    plan = Plan([])
    for c, chunk in enumerate(chunks):
        plan.segments.append(_segment(graph, c, chunk, list(reads[c]), owner, needed,
                                      write_to, home, input_index, by_id))
    for seg in plan.segments:
        for kind, v in seg.dests:
            if kind == "val":
                n = by_id[v]
                plan.values[v] = (tuple(n.shape), n.dtype)
    return plan


def _segment(graph: Graph, c: int, chunk: list[Node], reads: list, owner: dict,
             needed: dict, write_to: dict, home: dict, input_index: dict,
             by_id: dict) -> Segment:
    """Chunk ``c`` as a graph: inputs numbered by first use, views and constants cloned."""
    readable = set(reads)
    new: dict[int, Node] = {}
    inputs: list[Node] = []
    sources: list[tuple[str, int]] = []
    nodes: list[Node] = []

    def source_of(x: Node) -> tuple[str, int] | None:
        if id(x) in input_index:
            return ("in", input_index[id(x)])
        if id(x) in home and home[id(x)] != c and ("val", id(x)) in readable:
            return ("val", id(x))
        return None

    def get(x: Node) -> Node:
        if id(x) in new:
            return new[id(x)]
        src = source_of(x)
        if src is not None:
            p = Node("input", (), {}, tuple(x.shape), x.dtype)
            inputs.append(p)
            sources.append(src)
        else:  # a view or constant of this segment's own, recomputed here
            assert _free(x) or home.get(id(x)) == c, "a value read across a cut unplanned"
            p = clone(x)
        new[id(x)] = p
        return p

    def clone(n: Node) -> Node:
        ins = tuple(get(i) if isinstance(i, Node) else i for i in n.inputs)
        p = Node(n.op, ins, n.attrs, n.shape, n.dtype, n.loc)
        nodes.append(p)
        return p

    for n in chunk:
        new[id(n)] = clone(n)
    outputs: list[Node] = []
    dests: list[tuple[str, int]] = []
    seg_write: dict[int, int] = {}
    mine = [k for k, o in enumerate(graph.outputs) if owner[k] == c]
    # Outputs in the order of the nodes computing them (then graph order), so that
    # identical chunks list them identically.
    order = {id(n): p for p, n in enumerate(chunk)}
    for n in chunk:
        if id(n) in needed and not any(graph.outputs[k] is n and k not in write_to
                                       for k in mine):
            outputs.append(new[id(n)])
            dests.append(("val", id(n)))
    for k in sorted(mine, key=lambda k: (order.get(id(graph.outputs[k]), len(order)), k)):
        o = graph.outputs[k]
        p = get(o)
        if k in write_to:
            j = write_to[k]
            target = next((q for q, s in enumerate(sources) if s == ("in", j)), None)
            if target is None:  # written, never read here: an input all the same
                target = len(inputs)
                inputs.append(Node("input", (), {}, tuple(graph.inputs[j].shape),
                                   graph.inputs[j].dtype))
                sources.append(("in", j))
            seg_write[len(outputs)] = target
            outputs.append(p)
            dests.append(("in", j))
        else:
            outputs.append(p)
            # A graph output later segments read is read from the output array.
            dests.append(("out", k))
    seg_graph = Graph(inputs, nodes, outputs)
    return Segment(seg_graph, seg_write, sources, dests)
