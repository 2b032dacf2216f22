"""Split a large optimized graph into segments, each compiled as its own function.

Numba's compile time grows faster than the size of the function it compiles, and a very
large generated function can exhaust its recursion limit. A graph whose one-function
lowering would be large is therefore cut, in topological order, into segments of a
bounded size. Each segment is a small `Graph` of its own, so it goes through the same
lowering as any graph, and values crossing a cut become arrays passed from one segment to
the next.

Runs of the graph that repeat back to back (a layer applied several times, the backward
of each block, an optimizer's update of each block's parameters) are found on a sequence of
structure tokens (`repeats`) and every repetition is cut as the first, so a deeper model
adds parts but no new functions. Elsewhere cuts are placed by content (content-defined
chunking, as deduplicating backup tools cut files): a cut falls after a node when a hash of
the structure of the last few nodes hits a fixed pattern, within a minimum and maximum
segment size, so the same run of nodes gets the same cuts wherever it appears. A run of
nodes that only write in place (an optimizer's updates) is cut into one segment per
connected piece (one parameter's update), so parameters of one rank share one function;
so is a run of independent pieces that compute alike on flat arrays (each gradient's norm,
its accumulation). A product fused with an epilogue traced long after it (a gradient added
into ``.grad``) is first split from it and put back where it was traced, so a repeated run
(a second micro-step's backward) holds the nodes the first holds. Each
segment's inputs are numbered by first use and its nodes renumbered, so identical segments
lower to identical source, which the kernel cache content-addresses: they are compiled once
and shared.

Views (reshape, transpose, slices) and constants are not cut points: a segment that reads
one recomputes it from its source, so no copy of a view crosses a cut.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..ir.graph import Graph, Node
from ..ops.registry import OPS

__all__ = ["Plan", "Segment", "flatten", "partition", "repeats", "split_epilogues",
           "tokens", "twins"]

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
    # Positions in ``sources`` and ``dests`` whose arrays the segment takes flattened
    # (1-D, C order): its graph computes elementwise over one shape (`flatten`).
    flat_in: tuple[int, ...] = ()
    flat_out: tuple[int, ...] = ()

    @property
    def flat(self) -> bool:
        return bool(self.flat_in or self.flat_out)


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


def _cdc(units: list[Node], hashes: list[bytes], weight: dict[int, int], target: int,
         modulus: int) -> list[int]:
    """Content-defined cuts of ``units``: the number of units in each chunk. A cut follows a
    unit whose window hash hits the pattern, once the chunk holds ``target // 2``, and
    always at ``2 * target``."""
    lo, hi = target // 2, 2 * target
    sizes: list[int] = [0]
    size = 0
    for k, u in enumerate(units):
        sizes[-1] += 1
        size += weight.get(id(u), 1)
        window = b"".join(hashes[max(0, k - WINDOW + 1):k + 1])
        hit = int.from_bytes(hashlib.sha1(window).digest()[:8], "big") % modulus == 0
        if k + 1 < len(units) and (size >= hi or (size >= lo and hit)):
            sizes.append(0)
            size = 0
    return sizes


def _chunks(units: list[Node], weight: dict[int, int], target: int,
            keep: int = 0) -> list[list[Node]]:
    """``units`` in chunks of about ``target``: runs of repeated structure (`repeats`) cut
    the same way in every repetition, the rest cut by content (`_cdc`)."""
    if not units:
        return [[]]
    w = [weight.get(id(u), 1) for u in units]
    mean = max(1.0, sum(w) / len(units))
    # One unit in ``modulus`` hits: a chunk then ends about ``target`` on average.
    modulus = max(1, round((target - target // 2) / mean))
    hashes = [_structure(u) for u in units]
    toks = tokens(units, keep)
    plain: dict[tuple[int, int], list[int]] = {}

    def layout(runs: list[tuple[int, int, int]]) -> list[int]:
        sizes: list[int] = []
        at = 0
        for start, period, count in [*sorted(runs), (len(units), 1, 0)]:
            if start > at:
                if (at, start) not in plain:
                    plain[at, start] = _cdc(units[at:start], hashes[at:start], weight,
                                            target, modulus)
                sizes.extend(plain[at, start])
            if count:
                sizes.extend(_repeated(w[start:start + period], period, count, target))
            at = start + period * count
        return sizes

    def cost(sizes: list[int]) -> int:
        # What compiling costs, in lines: each distinct chunk (by its units' tokens) once,
        # plus a fixed cost per function (Numba's per-function work: about as much as
        # half a chunk of source).
        seen: set[tuple[int, ...]] = set()
        total = k = 0
        for n in sizes:
            key = tuple(toks[k:k + n])
            if key not in seen:
                seen.add(key)
                total += sum(w[k:k + n]) + target // 2
            k += n
        return total

    # Runs of the same repeated unit (a forward block in each of two micro-steps) are
    # taken or left together: each alone may cost more than the chunks it replaces.
    groups: dict[tuple[int, ...], list[tuple[int, int, int]]] = {}
    for start, period, count in repeats(toks, w, target):
        groups.setdefault(tuple(toks[start:start + period]), []).append(
            (start, period, count))
    # A stretch met twice apart (two layers' backward, one with an extra gradient sum
    # the other has elsewhere) is two runs of one period, cut alike.
    for first, second, length in twins(toks, w, target):
        groups.setdefault(tuple(toks[first:first + length]), []).extend(
            [(first, length, 1), (second, length, 1)])
    runs: list[tuple[int, int, int]] = []
    best = cost(layout(runs))
    for group in groups.values():
        trial = list(runs)
        for start, period, count in group:
            taken = [(s0, s0 + p0 * c0) for s0, p0, c0 in trial]
            free = _free_stretch(start, start + period * count, taken)
            if free is None:
                continue
            lo = start + -(-(free[0] - start) // period) * period  # a period boundary
            if (free[1] - lo) // period >= min(count, 2):
                trial.append((lo, period, (free[1] - lo) // period))
        if sum(c for _, _, c in trial[len(runs):]) >= 2:
            c = cost(layout(trial))
            if c < best:
                runs, best = trial, c
    out: list[list[Node]] = []
    k = 0
    for n in layout(runs):
        out.append(units[k:k + n])
        k += n
    return out


def _updates(units: list[Node], graph: Graph, write_to: dict[int, int],
             keep: int = 0, plain: frozenset = frozenset()
             ) -> list[tuple[int, int, list[list[Node]]]]:
    """Runs of ``units`` that only write in place (an optimizer's parameter updates), each
    as ``(start, end, pieces)``: the run's connected parts, one piece each (one parameter's
    update: its step count, moments and parameter), in the order of their first units.
    Pieces of the same structure at other sizes lower to one function (sizes are read
    from the arguments), so updates of any number of parameters compile once per
    parameter rank instead of once per group that cuts by size happen to form. Only runs
    where at least two pieces share their structure are split so (`partition` keeps the
    pieces no other piece shares together)."""
    written = {id(graph.outputs[k]) for k in write_to}
    written_inputs = {id(graph.inputs[j]) for j in write_to.values()}
    out: list[tuple[int, int, list[list[Node]]]] = []
    k = 0
    while k < len(units):
        if id(units[k]) not in written:
            k += 1
            continue
        end = k
        while end < len(units) and id(units[end]) in written:
            end += 1
        run = units[k:end]
        pieces = _connected(run, written_inputs)
        shapes = [_piece_key(p, keep, plain) for p in pieces]
        if len(pieces) > 1 and len(set(shapes)) < len(shapes):
            out.append((k, end, pieces))
        k = end
    return out


def _alike(units: list[Node], graph: Graph, write_to: dict[int, int],
           weight: dict[int, int], target: int) -> list[tuple[int, int, list[list[Node]]]]:
    """Runs of ``units`` made of independent pieces that compute alike on flat arrays
    (`flatten`), as `_updates` gives them: a norm of each parameter's gradient, a
    gradient accumulated per parameter. Each piece of a kind alone lowers to one function
    for every shape, so a run is split so when that saves at least ``target // 2`` of
    weight (the pieces of a kind after the first); other runs stay as cut. Units written
    in place are `_updates`' concern."""
    written = {id(graph.outputs[k]) for k in write_to}

    def flat_alone(u: Node) -> bool:
        if id(u) in written:
            return False
        if _uniform([u]) is not None:
            return True
        return u.shape == () and _elementwise(u) and all(
            not isinstance(i, Node) or i.shape == () for i in u.inputs)

    out: list[tuple[int, int, list[list[Node]]]] = []
    k = 0
    while k < len(units):
        end = k
        while end < len(units) and flat_alone(units[end]):
            end += 1
        # A value the run computes and broadcasts to its pieces (a clipping coefficient)
        # is made before them: the pieces after it are independent.
        at = {id(u): j for j, u in enumerate(units[k:end], k)}
        fed = [at[id(i)] for u in units[k:end] if u.shape != () for i in u.inputs
               if isinstance(i, Node) and i.shape == () and id(i) in at]
        if fed:
            k = max(fed) + 1
        if end - k < 2:
            k = end + 1
            continue
        pieces = _connected(units[k:end], set())
        keys = [_piece_key(p, 0) if _uniform(p) is not None else None for p in pieces]
        seen: set = set()
        saved = 0
        for p, key in zip(pieces, keys):
            if key is None:
                continue
            if key in seen:
                saved += sum(weight.get(id(u), 1) for u in p)
            seen.add(key)
        if saved >= target // 2:
            out.append((k, end, pieces))
        k = end
    return out


def _apart(chunks: list[list[Node]], units: list[Node], start: int, end: int,
           pieces: list[list[Node]], keep: int, plain: frozenset = frozenset(),
           worth: Callable[[list[Node]], bool] = lambda p: True,
           fits: Callable[[list[Node]], bool] | None = None) -> list[list[Node]]:
    """``chunks`` with the pieces of the update run ``units[start:end]`` that share their
    structure with another piece (and are ``worth`` it) taken out, each a chunk of its
    own, placed before the first chunk holding a unit after the run. The other chunks
    keep their cuts: a piece no other piece shares gains nothing alone. Unchanged when
    one chunk holds units both before and after the run (a piece could not be placed
    between them). ``fits``: whether a chunk is small enough to be one part; given, a
    chunk the pieces left with units of the run only joins the next such chunk when the
    two fit (what a piece leaves of a chunk is not worth a function of its own)."""
    keys = [_piece_key(p, keep, plain) for p in pieces]
    count = Counter(keys)
    shared = [p for p, k in zip(pieces, keys) if count[k] > 1 and worth(p)]
    taken = {id(u) for p in shared for u in p}
    index = {id(u): k for k, u in enumerate(units)}
    at = next((c for c, chunk in enumerate(chunks)
               if any(index[id(u)] >= end for u in chunk)), len(chunks))
    if at < len(chunks) and any(index[id(u)] < start for u in chunks[at]):
        return chunks
    kept = [[u for u in chunk if id(u) not in taken] for chunk in chunks]
    if fits is not None:
        inside = [bool(c) and all(start <= index[id(u)] < end for u in c) for c in kept]
        for c in range(len(kept) - 1):
            if (inside[c] and inside[c + 1] and len(kept[c]) < len(chunks[c])
                    and fits(kept[c] + kept[c + 1])):
                kept[c + 1] = kept[c] + kept[c + 1]
                kept[c] = []
    out = [c for c in kept[:at] if c] + shared + [c for c in kept[at:] if c]
    return out


def _piece_key(piece: list[Node], keep: int, plain: frozenset = frozenset()) -> tuple:
    """What decides a piece's code, as `_token_key` tells for each of its nodes; for a
    piece `flatten` makes one loop over flat arrays, its shape and sizes do not count.
    ``plain``: views the piece will read as arrays of their own (`_output_views`)."""
    shape = _uniform(piece, plain)
    if shape is not None:
        return ("flat", tuple(_flat_token(u, shape) for u in piece))
    return tuple(_token_key(u, keep) for u in piece)


# ----------------------------------------------------------------- flat segments
def _elementwise(n: Node) -> bool:
    if n.op == "fused":
        body = n.attrs.get("body")
        return n.attrs.get("kind") == "elementwise" and isinstance(body, Graph) and all(
            _elementwise(b) for b in body.nodes)
    return n.op in OPS and OPS[n.op].elementwise and not OPS[n.op].view


def _full_reduce(n: Node) -> bool:
    """``n`` reduces all of its elementwise operands' elements to one value (a norm, a
    mean loss): the flat array's reduction is the same value."""
    if n.op == "fused":
        body = n.attrs.get("body")
        return (n.attrs.get("kind") == "reduce" and n.shape == () and isinstance(body, Graph)
                and all(_elementwise(b) or _full_reduce(b) for b in body.nodes))
    return (n.shape == () and n.op in OPS and OPS[n.op].reduction is not None
            and n.attrs.get("axis") is None and not n.attrs.get("keepdims"))


def _keeps_order(x: Node) -> bool:
    """``x`` is a view whose elements in C order are its input's (a reshape): the one
    kind of view NumPy may have to copy, when no strides express that order."""
    return x.op in OPS and OPS[x.op].view_may_copy and isinstance(x.inputs[0], Node)


def _source(x: Node) -> Node:
    """``x`` through the reshapes it is made by."""
    while _keeps_order(x):
        x = x.inputs[0]
    return x


def _uniform(nodes: list[Node], plain: frozenset = frozenset()) -> tuple | None:
    """The one shape of every non-scalar value ``nodes`` compute and read, when each is
    elementwise (a fused body too) and reads other values only as scalars, at that shape,
    or through reshapes of values of its size; None otherwise, or when all are scalars.
    Element ``i`` of every such value is then element ``i`` of its flat C-ordered array."""
    shape: tuple | None = None

    def fits(s: tuple) -> bool:
        nonlocal shape
        if s == ():
            return True
        if shape is None:
            shape = tuple(s)
        return tuple(s) == shape

    def visit(ns: list[Node]) -> bool:
        for n in ns:
            if n.op == "input" or _free(n):
                continue  # checked where read
            if not (_elementwise(n) or _full_reduce(n)) or not fits(n.shape):
                return False
            if n.op == "fused":
                body = n.attrs["body"]
                if not (all(fits(x.shape) for x in body.inputs) and visit(body.nodes)):
                    return False
            for i in n.inputs:
                if not isinstance(i, Node):
                    continue
                if not fits(i.shape):
                    return False
                src = _source(i)
                if id(i) in plain:
                    continue
                if src is not i:
                    if _free(src) or _size(src.shape) != _size(i.shape):
                        return False
                elif i.op == "const" and i.shape != () or i.op != "const" and _free(i):
                    return False
        return True

    ok = visit(nodes)
    return shape if ok and shape is not None else None


def _size(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _flat_token(n: Node, shape: tuple) -> tuple:
    """`_token_key` of a node of a piece `_uniform` over ``shape``, as its flat code sees
    it: every value of that shape one flat array of a length read at run time."""

    def ins(i: object) -> object:
        if not isinstance(i, Node):
            return ("lit", repr(i))
        src = _source(i)
        if src.op == "const":
            return ("const", src.dtype.str, _attr_key(src.attrs.get("value"), 1, {}))
        return ("n" if i.shape != () else (), i.dtype.str)

    def attr(v: object) -> object:
        if isinstance(v, Graph):
            return (tuple(("n" if b.shape != () else (), b.dtype.str) for b in v.inputs),
                    tuple(_flat_token(b, shape) for b in v.nodes))
        return _attr_key(v, 1, {})

    return (n.op, n.dtype.str, "n" if n.shape != () else (),
            tuple(ins(i) for i in n.inputs),
            tuple((k, attr(v)) for k, v in sorted(n.attrs.items())), n.loc)


def _flat_graph(graph: Graph, length: int) -> Graph:
    """``graph`` (`_uniform`) with every non-scalar value a flat array of ``length``, its
    reshapes gone."""
    new: dict[int, Node] = {}

    def get(x: object) -> object:
        if not isinstance(x, Node):
            return x
        src = _source(x)
        if id(src) not in new:
            assert src.op in ("input", "const"), "a flat segment's value read before made"
            new[id(src)] = clone(src)
        return new[id(src)]

    def clone(n: Node) -> Node:
        attrs = dict(n.attrs)
        if n.op == "fused":
            attrs["body"] = _flat_graph(attrs["body"], length)
        return Node(n.op, tuple(get(i) for i in n.inputs), attrs,
                    (length,) if n.shape != () else (), n.dtype, n.loc, n.uid)

    inputs = []
    for x in graph.inputs:
        new[id(x)] = Node("input", (), {}, (length,) if x.shape != () else (), x.dtype)
        inputs.append(new[id(x)])
    nodes = []
    for n in graph.nodes:
        if _keeps_order(n) or id(n) in new:
            continue
        new[id(n)] = clone(n)
        nodes.append(new[id(n)])
    return Graph(inputs, nodes, [get(o) for o in graph.outputs])


def flatten(seg: Segment) -> Segment:
    """``seg`` computing on flat arrays when its graph is elementwise over one shape
    (`_uniform`): every array of that shape, argument or output, is passed as a flat
    C-ordered array (the caller's reshape: a view of a C-ordered array) and computed in
    one loop, so pieces of any shape and rank (an optimizer's update of each parameter)
    print the same source, one function for all. ``seg`` itself otherwise."""
    g = seg.graph
    shape = _uniform(g.nodes)
    if shape is None:
        return seg
    n = _size(shape)
    if any(x.shape != () and _size(x.shape) != n for x in g.inputs) or any(
            o.shape not in ((), shape) for o in g.outputs):
        return seg
    flat = _flat_graph(g, n)
    return Segment(flat, seg.write_to, seg.sources, seg.dests,
                   tuple(k for k, x in enumerate(g.inputs) if x.shape != ()),
                   tuple(k for k, o in enumerate(g.outputs) if o.shape != ()))


def _connected(run: list[Node], written_inputs: set[int]) -> list[list[Node]]:
    """``run`` split into its connected parts (a node joins the nodes of ``run`` it reads,
    through views, and every node reading or writing the same in-place input), in the
    order of their first nodes; each part keeps its nodes' order."""
    parent = {id(n): id(n) for n in run}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(a: int, b: int) -> None:
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra

    def reads(x: Node, u: Node) -> None:
        for i in x.inputs:
            if not isinstance(i, Node):
                continue
            if id(i) in written_inputs:
                join(id(u), id(i))
            elif id(i) in parent and id(i) != id(u):
                join(id(u), id(i))
            elif _free(i):
                reads(i, u)

    for u in run:
        reads(u, u)
    pieces: dict[int, list[Node]] = {}
    for u in run:
        pieces.setdefault(find(id(u)), []).append(u)
    return list(pieces.values())


def _repeated(w: list[int], period: int, count: int, target: int) -> list[int]:
    """Chunk sizes for ``count`` repetitions of ``period`` units weighing ``w``: each
    repetition cut as the first is (into pieces of equal weight when it is heavier than
    ``2 * target``), or small repetitions (one parameter's update) grouped about
    ``target`` a chunk."""
    one = sum(w)
    if one > 2 * target:
        return _balanced(w, -(-one // (2 * target))) * count
    if one >= target // 2:
        return [period] * count
    group = max(1, min(count, round(target / max(1, one))))
    sizes = [group * period] * (count // group)
    if count % group:
        sizes.append(count % group * period)
    return sizes


def _balanced(w: list[int], pieces: int) -> list[int]:
    """Cut after the unit where the running weight of ``w`` first reaches each of
    ``pieces`` equal shares: the number of units in each piece."""
    total = sum(w)
    sizes = [0]
    acc = 0
    for k, x in enumerate(w):
        sizes[-1] += 1
        acc += x
        if k + 1 < len(w) and acc * pieces >= total * len(sizes) and len(sizes) < pieces:
            sizes.append(0)
    return sizes


def _shape_key(shape: tuple, keep: int, labels: dict[int, int]) -> tuple:
    """A shape as generated code sees it: sizes up to ``keep`` are literals in the code,
    larger ones are read from the arrays, so only which of them are equal matters
    (``labels``: such a size -> its negative label, numbered as first met)."""
    return tuple(int(d) if d <= keep else labels.setdefault(int(d), -1 - len(labels))
                 for d in shape)


def _attr_key(v: object, keep: int, labels: dict[int, int]) -> object:
    """An attribute as `_token_key` sees it: integers above ``keep`` as `_shape_key` sees
    sizes, without object addresses (a compile worker process must cut alike)."""
    if isinstance(v, Graph):
        return (tuple((_shape_key(b.shape, keep, labels), b.dtype.str) for b in v.inputs),
                tuple(_token_key(b, keep, labels) for b in v.nodes))
    if isinstance(v, np.ndarray):
        return (v.shape, v.dtype.str, hashlib.sha1(v.tobytes()).hexdigest())
    if isinstance(v, (tuple, list)):
        return tuple(_attr_key(x, keep, labels) for x in v)
    if isinstance(v, slice):
        return ("slice", _attr_key((v.start, v.stop, v.step), keep, labels))
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v > keep:
        return labels.setdefault(int(v), -1 - len(labels))
    text = repr(v)
    if " at 0x" in text:  # an object's address differs between processes: key its type
        return ("object", type(v).__module__, type(v).__qualname__)
    return text


def _token_key(n: Node, keep: int, labels: dict[int, int] | None = None) -> tuple:
    """What decides ``n``'s code, as far as a cheap key tells: op, dtype, shapes (as
    `_shape_key`), operands (a view or constant read, which the part recomputes, with its
    own key: the time step a sequence model's view selects), attributes, the source line
    (a repeated layer runs the same lines), and a fused node's body."""
    labels = {} if labels is None else labels
    ins = tuple(("lit", repr(i)) if not isinstance(i, Node) else
                _token_key(i, keep, labels) if _free(i) else
                (_shape_key(i.shape, keep, labels), i.dtype.str) for i in n.inputs)
    attrs = tuple((k, _attr_key(v, keep, labels)) for k, v in sorted(n.attrs.items()))
    return (n.op, n.dtype.str, _shape_key(n.shape, keep, labels), ins, attrs, n.loc)


def tokens(units: list[Node], keep: int = 0) -> list[int]:
    """One small integer per unit; equal integers for units of equal `_token_key`."""
    ids: dict[tuple, int] = {}
    return [ids.setdefault(_token_key(u, keep), len(ids)) for u in units]


def repeats(toks: list[int], weight: list[int], target: int,
            limit: int = 64) -> list[tuple[int, int, int]]:
    """Runs of ``toks`` that repeat back to back, as ``(start, period, count)``: the
    blocks of a layer applied ``count`` times, their backward, an optimizer's update of
    parameters in the same order per layer. At most ``limit``, those saving the most
    weight (``count - 1`` periods, at least ``target // 2``) first; of a run's periods,
    only its shortest."""
    n = len(toks)
    if n < 2:
        return []
    t = np.asarray(toks)
    cum = np.concatenate([[0], np.cumsum(weight)])
    cands: list[tuple[int, int, int, int]] = []  # (-saved, start, period, count)
    covered: set[tuple[int, int]] = set()  # (start, end) of runs found at a shorter period
    for p in range(1, n // 2 + 1):
        for a, b in _matches(t, p):
            # t[i] == t[i + p] for i in [a, b): [a, b + p) repeats with period p.
            count = (b - a + p) // p
            if count < 2 or (a, b + p) in covered:
                continue
            covered.add((a, b + p))
            saved = (count - 1) * int(cum[a + p] - cum[a])
            if saved >= target // 2:
                cands.append((-saved, a, p, count))
    cands.sort()
    return [(a, p, c) for _, a, p, c in cands[:limit]]


def twins(toks: list[int], weight: list[int], target: int,
          limit: int = 16) -> list[tuple[int, int, int]]:
    """Stretches of ``toks`` met twice without overlapping and not back to back (that
    is `repeats`' kind), as ``(first, second, length)``, each at least ``target`` of
    weight (one part's worth: what sharing it saves); at most ``limit``, the heaviest
    first, each as long as its two copies match."""
    n = len(toks)
    if n < 2:
        return []
    t = np.asarray(toks)
    cum = np.concatenate([[0], np.cumsum(weight)])
    cands: list[tuple[int, int, int, int]] = []  # (-weight, first, second, length)
    for p in range(2, n):
        for a, b in _matches(t, p):
            # t[i] == t[i + p] for i in [a, b): [a, b) is met again at a + p.
            if b - a >= p:
                continue
            heavy = int(cum[b] - cum[a])
            if heavy >= target:
                cands.append((-heavy, a, a + p, b - a))
    cands.sort()
    return [(a, b, n_) for _, a, b, n_ in cands[:limit]]


def _matches(t: np.ndarray, p: int) -> list[tuple[int, int]]:
    """The maximal runs ``[a, b)`` of indices where ``t[i] == t[i + p]``."""
    eq = np.concatenate([[False], t[:-p] == t[p:], [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(eq))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _free_stretch(a: int, b: int, taken: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The longest part of [a, b) outside every interval of ``taken``."""
    stretches = [(a, b)]
    for x, y in taken:
        nxt = []
        for s, e in stretches:
            if y <= s or x >= e:
                nxt.append((s, e))
                continue
            if s < x:
                nxt.append((s, x))
            if y < e:
                nxt.append((y, e))
        stretches = nxt
    if not stretches:
        return None
    return max(stretches, key=lambda se: (se[1] - se[0], -se[0]))


def partition(graph: Graph, write_to: dict[int, int], weight: dict[int, int],
              target: int, keep: int = 0) -> Plan | None:
    """``graph`` as segments of about ``target`` (in units of ``weight``: node id ->
    its share of the one-function lowering, such as source lines; 1 when missing), or
    ``None`` when it would be one segment anyway. ``write_to`` maps graph outputs to the
    inputs their values are written into in place. ``keep``: sizes up to it are
    literals in generated code, so they tell repeated structure apart (`repeats`)."""
    given = graph
    graph, weight = split_epilogues(graph, weight)
    units, sunk = _sink([n for n in graph.nodes if not _free(n)], graph, write_to)
    chunks = _chunks(units, weight, target, keep)
    if sunk:
        # Few parts for them (they are nothing but the end of each pass's statistics).
        w = [weight.get(id(u), 1) for u in sunk]
        k = 0
        for n in _balanced(w, -(-sum(w) // (2 * target))):
            chunks.append(sunk[k:k + n])
            k += n
        units = units + sunk
    plain = _output_views(graph, write_to)
    for start, end, pieces in _updates(units, graph, write_to, keep, plain):
        # Pieces of scalars only (a batch norm's count of batches) are not worth a
        # function each: they keep their cuts.
        chunks = _apart(chunks, units, start, end, pieces, keep, plain,
                        lambda p: any(u.shape != () for u in p),
                        lambda c: sum(weight.get(id(u), 1) for u in c) <= 2 * target)
    for start, end, pieces in _alike(units, graph, write_to, weight, target):
        chunks = _apart(chunks, units, start, end, pieces, keep, plain)
    if len(chunks) < 2:
        return None
    home = {id(n): c for c, chunk in enumerate(chunks) for n in chunk}
    input_index = {id(n): j for j, n in enumerate(graph.inputs)}
    last = len(chunks) - 1
    # A view that is a graph output (a row of batch norm's parameter gradients given as a
    # `.grad`) is copied out by the chunk `_view_home` names; a later chunk reads that
    # output array instead of the view's source, so its piece reads a whole array (a
    # flat optimizer update shared with every other parameter's).
    copied = _copied_views(graph, write_to, home, last)

    # What each chunk reads from outside (graph inputs, values of earlier chunks), with
    # views and constants recomputed where read.
    reads: list[dict[tuple[str, int], None]] = [{} for _ in chunks]

    def visit(x: Node, c: int) -> None:
        if id(x) in input_index:
            reads[c].setdefault(("in", input_index[id(x)]))
        elif id(x) in home:
            if home[id(x)] != c:
                reads[c].setdefault(("val", id(x)))
        elif copied.get(id(x), c) < c:
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

    # A value written in place that later chunks read, when no chunk after its own reads
    # the input's old value: they read the input array, written by then, so the writing
    # chunk's outputs are its in-place writes only (an optimizer's update of a parameter
    # that a later forward reads is the update of every other parameter).
    fresh = _read_after_write(graph, write_to, home, reads)

    # Where each graph output is produced: the chunk computing it, or, for an in-place
    # write whose input a later chunk still reads, that last reader (the value is passed
    # to it); outputs that are inputs, constants or views go to the last chunk. Placing
    # an output may add reads to its chunk, so this repeats until nothing moves.
    owner: dict[int, int] = {}
    while True:
        last_reader: dict[int, int] = {}
        for c, rs in enumerate(reads):
            for kind, j in rs:
                if kind == "in" and (c, j) not in fresh:
                    last_reader[j] = c
        moved = False
        for k, o in enumerate(graph.outputs):
            c = home.get(id(o), _view_home(o, home, last))
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
        plan.segments.append(flatten(_segment(graph, c, chunk, list(reads[c]), owner,
                                              needed, write_to, home, input_index, by_id,
                                              copied, fresh)))
    for seg in plan.segments:
        for kind, v in seg.dests:
            if kind == "val":
                n = by_id[v]
                plan.values[v] = (tuple(n.shape), n.dtype)
    if graph is not given:
        # The kernel knows a graph output a later segment reads by the given graph's node.
        _rename(plan, {id(a): id(b) for a, b in zip(graph.outputs, given.outputs)
                       if a is not b})
    return plan


def _sink(units: list[Node], graph: Graph, write_to: dict[int, int]
          ) -> tuple[list[Node], list[Node]]:
    """``units`` without those written in place that no unit reads, into an input that
    only they read, met before the last unit of the computation (`last` below), and the
    units only they read; then those (to be computed at the end, in their order): a
    training batch norm's running averages, whose updates fusion joins into one node at
    the layer's last call (the third pass of a discriminator holds them, the first two
    not), so the passes' runs of units become the same, and are cut alike."""
    written = {id(graph.outputs[k]) for k in write_to}
    into = {id(graph.outputs[k]): id(graph.inputs[j]) for k, j in write_to.items()}
    outputs = {id(o) for o in graph.outputs}
    readers: dict[int, list[int]] = {}

    def note(x: Node, reader: int) -> None:
        for i in x.inputs:
            if isinstance(i, Node):
                readers.setdefault(id(i), []).append(reader)
                if _free(i):
                    note(i, reader)

    for n in graph.nodes:
        if not _free(n):
            note(n, id(n))
    # The last unit of the computation: not written in place, and read (a loss returned
    # after the optimizer's updates is not).
    last = max((k for k, u in enumerate(units) if id(u) not in written and id(u) in readers),
               default=-1)
    roots = set(written)
    while True:
        gone: set[int] = set()
        # Backwards, so that a unit only such a write reads (its sum) goes with it.
        for u in reversed(units[:last]):
            mine = readers.get(id(u), [])
            if (id(u) in roots and not mine) or (
                    mine and id(u) not in outputs and all(r in gone for r in mine)):
                gone.add(id(u))
        # Only state that nothing but its own update reads (a running average, a count):
        # a parameter's update, whose parameter the forward reads, stays with its piece.
        bad = {r for r in gone if r in written and not set(readers.get(into[r], ())) <= gone}
        if not bad:
            break
        roots -= bad
    return ([u for u in units if id(u) not in gone], [u for u in units if id(u) in gone])


def _read_after_write(graph: Graph, write_to: dict[int, int], home: dict[int, int],
                      reads: list[dict[tuple[str, int], None]]) -> dict[tuple[int, int], int]:
    """``(chunk, input)`` -> value id, for each read of a value written in place into that
    input (the only write into it) by an earlier chunk, after which no chunk reads the
    input's old value: the chunk reads the input array, which holds the value by then.
    ``reads`` is updated to say so."""
    count = Counter(write_to.values())
    out: dict[tuple[int, int], int] = {}
    for k, j in write_to.items():
        o = graph.outputs[k]
        h = home.get(id(o))
        if h is None or count[j] > 1:
            continue
        if any(("in", j) in rs for rs in reads[h + 1:]):
            continue
        for c in range(h + 1, len(reads)):
            if ("val", id(o)) in reads[c]:
                del reads[c][("val", id(o))]
                reads[c][("in", j)] = None
                out[c, j] = id(o)
    return out


def _rename(plan: Plan, ids: dict[int, int]) -> None:
    """``plan`` with the values of ids ``ids`` maps known by the ids it maps them to."""
    if not ids:
        return

    def swap(pairs: list[tuple[str, int]]) -> list[tuple[str, int]]:
        return [(k, ids.get(v, v) if k == "val" else v) for k, v in pairs]

    for seg in plan.segments:
        seg.sources, seg.dests = swap(seg.sources), swap(seg.dests)
    plan.values = {ids.get(v, v): sv for v, sv in plan.values.items()}


# ----------------------------------------------------------------- late epilogues
def _trace_key(n: Node) -> int:
    """Where ``n`` was traced: its uid, or for a fused node its root's (the fused node
    takes the root's place); a pass's new node counts as traced last."""
    if n.op == "fused":
        body = n.attrs.get("body")
        if isinstance(body, Graph) and body.outputs and isinstance(body.outputs[0], Node):
            return body.outputs[0].uid
    return n.uid


def _anchor(n: Node) -> Node | None:
    """The product a ``fused`` matmul node's body computes first, when the rest of the
    body is its elementwise epilogue reading it; None for any other node."""
    if n.op != "fused" or n.attrs.get("kind") != "matmul":
        return None
    body = n.attrs["body"]
    if not isinstance(body, Graph) or len(body.nodes) < 2 or len(body.inputs) != len(n.inputs):
        return None
    anchor = body.nodes[0]
    if not (anchor.op in OPS and OPS[anchor.op].contraction):
        return None
    if not all(isinstance(i, Node) and any(i is b for b in body.inputs)
               for i in anchor.inputs):
        return None
    return anchor if all(_elementwise(b) for b in body.nodes[1:]) else None


def _accumulates(body: Graph, anchor: Node) -> bool:
    """The epilogue after ``anchor`` adds it to a value of its shape (``grad + x.T @ g``),
    and nothing else: an epilogue that reads the product's neighbours (a ReLU's mask, a
    bias) stays fused, as the product's own backward computes it."""
    rest = body.nodes[1:]
    if len(rest) != 1 or not getattr(OPS.get(rest[0].op), "sums", False) or \
            len(rest[0].inputs) != 2:
        return False
    a, b = rest[0].inputs
    other = b if a is anchor else a if b is anchor else None
    return isinstance(other, Node) and tuple(other.shape) == tuple(anchor.shape)


def split_epilogues(graph: Graph, weight: dict[int, int]
                    ) -> tuple[Graph, dict[int, int]]:
    """``graph`` with each fused product whose epilogue only accumulates it and was traced
    well after the product (a gradient added into ``.grad`` at the end of a backward pass:
    ``grad + x.T @ g``, `_accumulates`) cut in two: the product back where it was traced,
    among the nodes that compute it where no accumulation happens (the first micro-step's
    backward), and the add where the fused node was. The repeated runs then hold the same
    nodes, so they are cut alike and share their functions; the add costs one more
    elementwise pass over the product. ``weight`` is extended to the new nodes. Unchanged
    (the same objects) when no product moves."""
    pos = {id(n): k for k, n in enumerate(graph.nodes)}
    moves: dict[int, int] = {}  # fused node's position -> its product's
    for k, n in enumerate(graph.nodes):
        anchor = _anchor(n)
        if anchor is None or not _accumulates(n.attrs["body"], anchor):
            continue
        outer = {id(b): x for b, x in zip(n.attrs["body"].inputs, n.inputs)}
        ready = -1  # the last unit the product reads, through views
        stack = [outer[id(i)] for i in anchor.inputs]
        while stack:
            x = stack.pop()
            if id(x) not in pos:
                continue
            if _free(x):
                stack += [i for i in x.inputs if isinstance(i, Node)]
            else:
                ready = max(ready, pos[id(x)])
        at = next((j for j in range(ready + 1, k)
                   if not _free(graph.nodes[j])
                   and _trace_key(graph.nodes[j]) > anchor.uid), k)
        if any(not _free(graph.nodes[j]) for j in range(at, k)):
            moves[k] = at
    if not moves:
        return graph, weight
    weight = dict(weight)
    before: dict[int, list[Node]] = {}
    epilogue_of: dict[int, Node] = {}
    for k, at in moves.items():
        n = graph.nodes[k]
        body = n.attrs["body"]
        anchor = body.nodes[0]
        outer = {id(b): x for b, x in zip(body.inputs, n.inputs)}
        product = Node(anchor.op, tuple(outer[id(i)] for i in anchor.inputs), anchor.attrs,
                       tuple(anchor.shape), anchor.dtype, anchor.loc, anchor.uid)
        slot = Node("input", (), {}, tuple(anchor.shape), anchor.dtype)
        rest = body.nodes[1:]
        inner: dict[int, Node] = {id(anchor): slot}
        nodes = []
        for b in rest:
            c = Node(b.op, tuple(inner.get(id(i), i) if isinstance(i, Node) else i
                                 for i in b.inputs), b.attrs, tuple(b.shape), b.dtype,
                     b.loc, b.uid)
            inner[id(b)] = c
            nodes.append(c)
        used = {id(i) for c in nodes for i in c.inputs if isinstance(i, Node)}
        keep = [(b, x) for b, x in zip(body.inputs, n.inputs) if id(b) in used]
        if len(nodes) == 1:
            lone = {id(b): x for b, x in keep}
            lone[id(slot)] = product
            c = nodes[0]
            epi = Node(c.op, tuple(lone.get(id(i), i) if isinstance(i, Node) else i
                                   for i in c.inputs), c.attrs, tuple(n.shape), n.dtype,
                       n.loc, c.uid)
        else:
            new_body = Graph([b for b, _ in keep] + [slot], nodes,
                             [inner[id(body.outputs[0])]])
            epi = Node("fused", tuple(x for _, x in keep) + (product,),
                       {**n.attrs, "body": new_body, "kind": "elementwise"}, tuple(n.shape),
                       n.dtype, n.loc, n.uid)
        w = weight.get(id(n), 1)
        weight[id(product)] = max(1, w // 2)
        weight[id(epi)] = max(1, w - w // 2)
        before.setdefault(at, []).append(product)
        epilogue_of[k] = epi
    mapping: dict[int, Node] = {}

    def get(x: object) -> object:
        return mapping.get(id(x), x) if isinstance(x, Node) else x

    out: list[Node] = []
    for k, n in enumerate(graph.nodes):
        for p in before.get(k, ()):
            ins = tuple(get(i) for i in p.inputs)
            if any(a is not b for a, b in zip(ins, p.inputs)):
                q = Node(p.op, ins, p.attrs, p.shape, p.dtype, p.loc, p.uid)
                weight[id(q)] = weight[id(p)]
                mapping[id(p)] = p = q
            out.append(p)
        if k in epilogue_of:
            e = epilogue_of[k]
            ins = tuple(get(i) for i in e.inputs)
            m = e if all(a is b for a, b in zip(ins, e.inputs)) else Node(
                e.op, ins, e.attrs, e.shape, e.dtype, e.loc, e.uid)
        else:
            ins = tuple(get(i) for i in n.inputs)
            m = n if all(a is b for a, b in zip(ins, n.inputs)) else Node(
                n.op, ins, n.attrs, n.shape, n.dtype, n.loc, n.uid)
        if m is not n:
            mapping[id(n)] = m
            weight[id(m)] = weight.get(id(epilogue_of[k] if k in epilogue_of else n), 1)
        out.append(m)
    return graph.replace(nodes=out, outputs=[get(o) for o in graph.outputs]), weight


def _view_home(o: Node, home: dict, last: int) -> int:
    """The chunk that copies out a graph output made by views (or constants) of values:
    the last chunk computing one of those values, which no chunk writes again, so the
    last piece of an optimizer's run stays a piece like the others; ``last`` when it
    reads a graph input (a later in-place write may replace that input) or nothing."""
    leaves: list = []
    stack = [o]
    while stack:
        x = stack.pop()
        if id(x) in home:
            leaves.append(home[id(x)])
        elif _free(x):
            stack += [i for i in x.inputs if isinstance(i, Node)]
        else:
            return last
    return max(leaves) if leaves else last


def _output_views(graph: Graph, write_to: dict[int, int]) -> frozenset:
    """Ids of the graph outputs (not written in place) that are views of computed values
    only: the chunk copying one out comes before any chunk of the nodes after it, which
    then read the output array (`_copied_views`)."""
    out = set()
    for k, o in enumerate(graph.outputs):
        if k in write_to or not _free(o) or o.op == "const":
            continue
        stack, ok = [o], True
        while stack and ok:
            x = stack.pop()
            if x.op == "input":
                ok = False
            elif _free(x):
                stack += [i for i in x.inputs if isinstance(i, Node)]
        if ok:
            out.add(id(o))
    return frozenset(out)


def _copied_views(graph: Graph, write_to: dict[int, int], home: dict,
                  last: int) -> dict[int, int]:
    """View id -> the chunk copying it out, for each graph output (not written in place)
    that views values chunks compute: a chunk after that one may read the output array."""
    out: dict[int, int] = {}
    for k, o in enumerate(graph.outputs):
        if k in write_to or id(o) in home or not _free(o) or o.op == "const":
            continue
        c = _view_home(o, home, last)
        # `_view_home` gives ``last`` for a view of a graph input: no chunk reads it later.
        out[id(o)] = min(out.get(id(o), c), c)
    return out


def _segment(graph: Graph, c: int, chunk: list[Node], reads: list, owner: dict,
             needed: dict, write_to: dict, home: dict, input_index: dict,
             by_id: dict, copied: dict | None = None,
             fresh: dict[tuple[int, int], int] | None = None) -> Segment:
    """Chunk ``c`` as a graph: inputs numbered by first use, views and constants cloned
    (``copied``: views read from the output arrays earlier chunks copied them to;
    ``fresh``: values read from the inputs they were written into, `_read_after_write`)."""
    readable = set(reads)
    copied = copied or {}
    written_into = {v: j for (c2, j), v in (fresh or {}).items() if c2 == c}
    new: dict[int, Node] = {}
    inputs: list[Node] = []
    sources: list[tuple[str, int]] = []
    nodes: list[Node] = []

    def source_of(x: Node) -> tuple[str, int] | None:
        if id(x) in input_index:
            return ("in", input_index[id(x)])
        if id(x) in written_into:
            return ("in", written_into[id(x)])
        if id(x) in home and home[id(x)] != c and ("val", id(x)) in readable:
            return ("val", id(x))
        if copied.get(id(x), c) < c and ("val", id(x)) in readable:
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
