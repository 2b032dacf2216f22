"""Symbolic lengths: which axes of a traced graph may take any length.

A tensor argument whose axis changed length between two calls (everything else equal) is a
candidate for one graph over all lengths, as ``torch.compile``'s automatic dynamic shapes
make such a dimension dynamic after it changes once. `changed_axes` finds that axis from
two signature keys; `symbolic_shapes` seeds a `Dim` there and carries it through the
graph's nodes by a table of shape rules (`DIM_RULES`): elementwise ops and broadcasting
against the same symbol or a length 1, gathers by an index that carries it, sums and means
over it or over other axes, matmul where it is a batch or row axis, concatenation and
transposition that keep it whole, reshapes that only add or drop axes of length 1. Any
other op that meets it makes the analysis refuse, with the reason: that argument keeps
being keyed by value.

A shape rule sees only the graph. A length the Python program read and turned into a
number (``x.shape[0]`` as a reshape target, a mean's divisor written by hand, an
``arange`` of it) shows in the graph as a literal, an attribute or a constant, which
`same_program` catches by comparing the traces of two lengths node for node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..ir.graph import Graph, Node, attr_key
from ..ops.gather import indexed_shape
from ..ops.registry import OPS


class Dim:
    """A symbolic length: the length of axis ``axis`` of graph input ``input``.

    >>> Dim(0, 0)
    s0.0
    """

    __slots__ = ("input", "axis")

    def __init__(self, input_: int, axis: int) -> None:
        self.input = input_
        self.axis = axis

    def __repr__(self) -> str:
        return f"s{self.input}.{self.axis}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dim) and (self.input, self.axis) == (other.input, other.axis)

    def __hash__(self) -> int:
        return hash((Dim, self.input, self.axis))


# Per node, one entry per axis: its `Dim`, or None for a fixed length.
Dims = tuple


class KeyedByValueError(Exception):
    """A symbolic length met an op outside the shape rules' allow-list (or one that needs
    its value): the argument keeps being keyed by value. The message says why."""


class SymbolicShapes(NamedTuple):
    """`symbolic_shapes`' answer: ``dims`` per node (by id) when every use of the symbols
    is allowed, else ``refused``, the reason."""

    dims: dict[int, Dims]
    refused: str | None


def changed_axes(old: Sequence, new: Sequence) -> dict[int, tuple[int, ...]] | None:
    """The axes whose length differs between two calls' per-argument keys ``old`` and
    ``new`` (`CompiledFunction._key`'s first part): ``{argument: axes}``, or None unless
    the calls differ only there (same ranks, dtypes, ``requires_grad``, constants).

    >>> import numpy as np
    >>> f32 = np.dtype("float32")
    >>> changed_axes([((5, 4), f32, False)], [((7, 4), f32, False)])
    {0: (0,)}
    """
    if len(old) != len(new):
        return None
    out = {}
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            continue
        if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) >= 2
                and isinstance(a[0], tuple) and isinstance(b[0], tuple)
                and len(a[0]) == len(b[0]) and a[1:] == b[1:]):
            return None
        out[i] = tuple(k for k, (m, n) in enumerate(zip(a[0], b[0])) if m != n)
    return out or None


def _where(node: Node) -> str:
    return f"{node.op} ({node.loc})" if node.loc else node.op


def _refuse(node: Node, why: str) -> KeyedByValueError:
    return KeyedByValueError(f"{_where(node)} {why}")


def _broadcast(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """Elementwise ops: a symbolic axis meets the same symbol or a length 1; a fixed
    length that is not 1 would equal the symbol only for this one length."""
    return _broadcast_shapes(node, node.shape, [(x.shape, d) for x, d in ins])


def _broadcast_shapes(node: Node, shape: tuple, ins: list[tuple[tuple, Dims]]) -> Dims:
    out: list[Any] = [None] * len(shape)
    for k in range(len(shape)):
        syms = set()
        fixed = False
        for xs, d in ins:
            j = k - (len(shape) - len(xs))
            if j < 0:
                continue
            if d[j] is not None:
                syms.add(d[j])
            elif xs[j] != 1:
                fixed = True
        if len(syms) > 1:
            raise _refuse(node, f"broadcasts two symbolic lengths {sorted(map(repr, syms))} "
                          "against each other")
        if syms and fixed:
            raise _refuse(node, f"broadcasts symbolic length {next(iter(syms))!r} against a "
                          "fixed length")
        out[k] = next(iter(syms), None)
    return tuple(out)


def _reduced_axes(node: Node, ndim: int) -> tuple[int, ...]:
    axis = node.attrs.get("axis")
    if axis is None:
        return tuple(range(ndim))
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axis)) if ndim else ()


def _reduction(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """A reduction keeps the symbols of the axes it does not reduce; over a symbolic axis
    only a sum or a mean (whose divisor is then the bound length): an empty max raises in
    eager mode where a kernel would return its identity."""
    (x, d), *rest = ins
    if any(any(s is not None for s in dd) for _, dd in rest):
        raise _refuse(node, "reads a symbolic length in an operand other than the reduced one")
    axes = _reduced_axes(node, len(x.shape))
    if node.op not in ("sum", "mean") and any(d[a] is not None for a in axes):
        raise _refuse(node, "reduces over a symbolic length (only sum and mean may)")
    if node.attrs.get("keepdims"):
        return tuple(None if a in axes else s for a, s in enumerate(d))
    return tuple(s for a, s in enumerate(d) if a not in axes)


def _index(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """A gather ``x[idx]`` at ``dims`` (embedding, index_select): the index's batch axes
    may be symbolic (the gathered rows follow), the table's indexed axes may not (its
    length bounds the indices)."""
    (_, dx), (_, di) = ins[:2]
    return _gathered(node, dx, di)


def _gathered(node: Node, dx: Dims, di: Dims) -> Dims:
    """The symbols of ``x[idx]`` from those of the table ``x`` and the index ``idx``."""
    dims = tuple(node.attrs["dims"])
    if any(dx[a] is not None for a in dims):
        raise _refuse(node, "indexes along a symbolic length")
    if di and di[0] is not None:
        raise _refuse(node, "takes a symbolic number of index arrays")
    rest = tuple(a for a in range(len(dx)) if a not in dims)
    if dims == tuple(range(dims[0], dims[0] + len(dims))):
        pre = tuple(a for a in rest if a < dims[0])
        post = tuple(a for a in rest if a > dims[0])
    else:
        pre, post = (), rest
    return tuple(dx[a] for a in pre) + tuple(di[1:]) + tuple(dx[a] for a in post)


def _index_put(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """``x[idx] = v`` (a gather's gradient scatters into its table): the result has the
    table's shape; the index's batch axes and the value's matching axes may carry the
    same symbol."""
    of = {id(n): d for n, d in ins}
    x, v, idx = node.inputs[:3]
    fixed = (None,) * len(node.shape)
    dx = of.get(id(x), fixed) if isinstance(x, Node) else fixed
    target = _gathered(node, dx, of[id(idx)])
    shape = indexed_shape(node.shape, tuple(node.attrs["dims"]), tuple(idx.shape[1:]))
    vs = tuple(v.shape) if isinstance(v, Node) else ()
    dv = of.get(id(v), (None,) * len(vs)) if isinstance(v, Node) else ()
    _broadcast_shapes(node, shape, [(vs, dv), (shape, target)])
    return dx


def _matmul(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """``a @ b``: a symbol on a batch axis (broadcast as elementwise ops are), on the rows
    of ``a`` or the columns of ``b``, or the same symbol on both contracted axes."""
    (a, da), (b, db) = ins
    if len(a.shape) < 2 or len(b.shape) < 2:
        if any(s is not None for s in da + db):
            raise _refuse(node, "multiplies a vector with a symbolic length")
        return (None,) * len(node.shape)
    if da[-1] != db[-2]:
        # The same symbol on both sides is a sum over it (zeros at length 0, as a sum);
        # a symbol against a fixed length would match for this one length.
        raise _refuse(node, "contracts a symbolic length against another length")
    batch = _broadcast_shapes(node, node.shape[:-2],
                              [(a.shape[:-2], da[:-2]), (b.shape[:-2], db[:-2])])
    return batch + (da[-2], db[-1])


def _concatenate(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """Concatenation along a fixed axis, each operand with the same symbol on the others."""
    axis = node.attrs["axis"] % len(node.shape)
    first = ins[0][1]
    for _, d in ins:
        if d[axis] is not None:
            raise _refuse(node, "concatenates along a symbolic length")
        if d != first:
            raise _refuse(node, "concatenates operands whose symbolic lengths differ")
    return first


def _transpose(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    (_, d), = ins
    return tuple(d[a] for a in node.attrs["axes"])


def _reshape(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """A reshape that only adds or drops axes of length 1 keeps each symbolic axis whole;
    any other mixes it with its neighbours (its target shape holds the length)."""
    (x, d), = ins
    kept = [(n, s) for n, s in zip(x.shape, d) if n != 1 or s is not None]
    out: list[Any] = []
    k = 0
    for n in node.shape:
        if k < len(kept) and n == kept[k][0] and (n != 1 or kept[k][1] is not None):
            out.append(kept[k][1])
            k += 1
        elif n == 1:
            out.append(None)
        else:
            raise _refuse(node, "reshapes a symbolic length together with other axes")
    if k != len(kept):
        raise _refuse(node, "reshapes a symbolic length together with other axes")
    return tuple(out)


def _getitem(node: Node, ins: list[tuple[Node, Dims]]) -> Dims:
    """Basic indexing that leaves the symbolic axes alone (they come after the indexed
    ones); a slice of a symbolic axis holds its length."""
    (x, d), = ins
    out: list[Any] = []
    k = 0
    for e in node.attrs["index"]:
        if e is None:
            out.append(None)
            continue
        if d[k] is not None:
            raise _refuse(node, "indexes or slices a symbolic length")
        if not isinstance(e, int):
            out.append(None)
        k += 1
    return tuple(out) + tuple(d[k:])


def _broadcast_to(node: Node, ins: list[tuple[Node, Dims]], follows: Dims) -> Dims:
    """An axis the input has keeps its symbol; an axis the broadcast adds or stretches
    from 1 carries the symbol its length follows between two traces (a reduction's
    gradient spreads back over the reduced input's shape), else it is fixed."""
    (x, d), = ins
    out: list[Any] = []
    lead = len(node.shape) - len(x.shape)
    for k, n in enumerate(node.shape):
        j = k - lead
        if j >= 0 and d[j] is not None:
            if x.shape[j] != n:
                raise _refuse(node, "broadcasts a symbolic length against a fixed length")
            out.append(d[j])
        else:
            out.append(follows[k])
    return tuple(out)


def _elementwise(op: str) -> bool:
    return bool(getattr(OPS.get(op), "elementwise", False))


def _reduces(op: str) -> bool:
    return getattr(OPS.get(op), "reduction", None) is not None


# The shape rules that carry a symbolic length, by op name; ops with the elementwise or
# reduction trait use `_broadcast` and `_reduction` (`rule_for`).
DIM_RULES: dict[str, Callable[[Node, list], Dims]] = {
    "index": _index,
    "index_put": _index_put,
    "matmul": _matmul,
    "concatenate": _concatenate,
    "transpose": _transpose,
    "reshape": _reshape,
    "getitem": _getitem,
}


# Ops whose result's shape is an attribute (a reduction's gradient spreads back by
# ``broadcast_to`` over the reduced input's shape): their rules also see which axes follow a
# symbol between two traces (`_follows`).
SIZED_RULES: dict[str, Callable[[Node, list, Dims], Dims]] = {
    "broadcast_to": _broadcast_to,
}


def rule_for(op: str) -> Callable[[Node, list], Dims] | None:
    """The shape rule carrying symbolic lengths through ``op``; None: not allowed."""
    if op in DIM_RULES:
        return DIM_RULES[op]
    if _elementwise(op):
        return _broadcast
    if _reduces(op):
        return _reduction
    return None


def _iota_axis(value: np.ndarray) -> int | None:
    """The axis along which ``value`` counts 0, 1, 2, ... with length 1 elsewhere (the
    ``arange`` a decomposition builds from a length), or None."""
    if value.dtype.kind not in "iu" or sum(n != 1 for n in value.shape) != 1:
        return None
    axis = next(k for k, n in enumerate(value.shape) if n != 1)
    flat = value.reshape(-1)
    return axis if np.array_equal(flat, np.arange(flat.size)) else None


def _follows(node: Node, other: Node | None, lengths: dict[Dim, tuple[int, int]]) -> Dims:
    """Per axis of ``node``, the symbol whose length its length follows between the trace
    of the other length (``other`` is its node there) and this one, or None."""
    if other is None or len(other.shape) != len(node.shape):
        return (None,) * len(node.shape)
    out = []
    for m, n in zip(other.shape, node.shape):
        match = [d for d, ls in lengths.items() if ls == (m, n) and m != n]
        out.append(match[0] if len(match) == 1 else None)
    return tuple(out)


def _iota_dims(node: Node, other: Node | None, follows: Dims) -> Dims:
    """A constant ``arange`` whose length follows one symbol between two traces (``other``
    is its node in the trace of the other length) carries that symbol."""
    fixed = (None,) * len(node.shape)
    if other is None or node.op != "const" or other.op != "const":
        return fixed
    axis = _iota_axis(node.attrs["value"])
    if axis is None or _iota_axis(other.attrs["value"]) != axis or follows[axis] is None:
        return fixed
    return tuple(follows[axis] if k == axis else None for k in range(len(node.shape)))


def symbolic_shapes(graph: Graph, seeds: dict[int, tuple[int, ...]],
                    other: Graph | None = None) -> SymbolicShapes:
    """Carry a `Dim` from each graph input's axes in ``seeds`` (``{input: axes}``) through
    ``graph``. Outputs may carry symbols. Refused (with the reason) when a symbol meets an
    op outside the allow-list, or a rule that needs its value. ``other``: the trace of
    another length, node for node (`same_program` checks that it is); a constant
    ``arange`` whose length follows a symbol's between the two carries that symbol
    (``iota``).

    >>> import dualgraph as dg
    >>> g = dg.trace(lambda x: (x * 2).sum(1), dg.ones(5, 3))
    >>> symbolic_shapes(g, {0: (0,)}).dims[id(g.outputs[0])]
    (s0.0,)
    """
    dims: dict[int, Dims] = {}
    lengths: dict[Dim, tuple[int, int]] = {}
    for j, n in enumerate(graph.inputs):
        axes = seeds.get(j, ())
        dims[id(n)] = tuple(Dim(j, a) if a in axes else None for a in range(len(n.shape)))
        if other is not None and j < len(other.inputs):
            for a in axes:
                lengths[Dim(j, a)] = (other.inputs[j].shape[a], n.shape[a])
    pair = dict(zip(map(id, graph.nodes), other.nodes)) \
        if other is not None and len(other.nodes) == len(graph.nodes) else {}
    for node in graph.nodes:
        if id(node) in dims:
            continue
        ins = [(i, dims[id(i)]) for i in node.inputs if isinstance(i, Node)]
        follows = _follows(node, pair.get(id(node)), lengths)
        if node.op == "const":
            dims[id(node)] = _iota_dims(node, pair.get(id(node)), follows)
            continue
        sized = SIZED_RULES.get(node.op)
        if sized is None and not any(any(s is not None for s in d) for _, d in ins):
            dims[id(node)] = (None,) * len(node.shape)
            continue
        rule = rule_for(node.op)
        if rule is None and sized is None:
            return SymbolicShapes(dims, f"{_where(node)} is not among the ops that carry a "
                                  "symbolic length")
        try:
            out = sized(node, ins, follows) if sized is not None else rule(node, ins)
        except KeyedByValueError as e:
            return SymbolicShapes(dims, str(e))
        if len(out) != len(node.shape):  # a rule and the op's own shape disagree
            return SymbolicShapes(dims, f"{_where(node)} has no symbolic shape rule for "
                                  "this form")
        dims[id(node)] = tuple(out)
    return SymbolicShapes(dims, None)


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, Node) or isinstance(b, Node):
        return isinstance(a, Node) and isinstance(b, Node)
    return type(a) is type(b) and (a == b or (a != a and b != b))


def same_program(first: Graph, second: Graph, shapes: SymbolicShapes) -> str | None:
    """Whether ``first`` and ``second``, the traces of two lengths, are one program up to
    the symbols ``shapes`` found in ``second``: the same ops on the same operands with the
    same attributes, literals and constants, and shapes that differ only on symbolic axes.
    None when they are; else where they part (a length the program read as a number)."""
    if len(first.inputs) != len(second.inputs) or len(first.nodes) != len(second.nodes) \
            or len(first.outputs) != len(second.outputs):
        return "the two lengths trace to graphs of different sizes"
    pos: dict[int, int] = {}
    for k, (a, b) in enumerate(zip(first.inputs, second.inputs)):
        pos[id(a)] = pos[id(b)] = -1 - k
    for k, (a, b) in enumerate(zip(first.nodes, second.nodes)):
        if id(b) not in pos:
            pos[id(a)] = pos[id(b)] = k
        if a.op != b.op or len(a.inputs) != len(b.inputs) or \
                sorted(a.attrs) != sorted(b.attrs):
            return f"{_where(b)} differs between the two lengths"
        for x, y in zip(a.inputs, b.inputs):
            if not _same_value(x, y) or (isinstance(x, Node) and pos.get(id(x)) != pos.get(id(y))):
                return f"{_where(b)} reads another operand or literal at the other length"
        for name in a.attrs:
            u, v = a.attrs[name], b.attrs[name]
            if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
                if any(x is not None for x in shapes.dims.get(id(b), ())):
                    continue  # an arange of a symbolic length (`_iota_dims`)
                if not (isinstance(u, np.ndarray) and isinstance(v, np.ndarray)
                        and u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True)):
                    return f"{_where(b)} holds a constant that depends on the length"
            elif name == "shape" and u == a.shape and v == b.shape:
                continue  # a reshape's target, its own shape: checked with the shapes
            elif attr_key(u) != attr_key(v):
                return f"{_where(b)} has an attribute that depends on the length ({name})"
    for a, b in zip(list(first.inputs) + list(first.nodes),
                    list(second.inputs) + list(second.nodes)):
        d = shapes.dims.get(id(b))
        if d is None or a.dtype != b.dtype or len(a.shape) != len(b.shape):
            return f"{_where(b)} differs between the two lengths"
        if any(m != n and s is None for m, n, s in zip(a.shape, b.shape, d)):
            return f"{_where(b)} has a fixed length that changes with the symbolic one"
    for a, b in zip(first.outputs, second.outputs):
        if pos.get(id(a)) != pos.get(id(b)):
            return "the two lengths return different values"
    return None
