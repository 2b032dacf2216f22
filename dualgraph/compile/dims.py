"""Symbolic lengths: which axes of a traced graph may take any length.

A tensor argument whose axis changed length between two calls (everything else equal) is a
candidate for one graph over all lengths, as ``torch.compile``'s automatic dynamic shapes
make such a dimension dynamic after it changes once. `changed_axes` finds that axis from
two signature keys; `symbolic_shapes` seeds a `Dim` there and carries it through the
graph by the ops' rules for symbols (`OpDef.lengths`, `ops/lengths.py`): elementwise ops
broadcasting it against the same symbol or a length 1, gathers by an index that carries it
(and their gradients' scatters into the fixed table), sums and means over it or over other
axes, matmul where it is a batch, row or (on both sides) contracted axis, concatenation
and transposition that keep it whole, reshapes that only add or drop axes of length 1.
Any other op that meets it makes the analysis refuse, with the reason: that argument keeps
being keyed by value.

A rule sees only the graph. A length the Python program read and turned into a number
(``x.shape[0]`` as a reshape target, a mean's divisor, a loop over it) shows in the graph
as a literal, an attribute, a constant or another graph, which `same_program` catches by
comparing the traces of two lengths node for node. A length that only steered Python
(``if x.shape[0] > 8:``) leaves no trace in either graph: reusing one graph across lengths
needs the tracer to hand out symbolic sizes and guard such reads first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..ir.graph import Graph, Node, attr_key
from ..ops.lengths import Dim, Dims, KeyedByValueError, rule_of, symbolic, where
from ..ops.registry import OPS

__all__ = ["Dim", "SymbolicShapes", "changed_axes", "same_program", "symbolic_shapes"]


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
        rule = rule_of(OPS.get(node.op))
        # An op's rule runs where a symbol reaches it, and where its result's length
        # follows one between the two traces (broadcast_to, whose shape is an attribute).
        if not any(symbolic(d) for _, d in ins) and (rule is None or not symbolic(follows)):
            dims[id(node)] = (None,) * len(node.shape)
            continue
        if rule is None:
            return SymbolicShapes(dims, f"{where(node)} is not among the ops that carry a "
                                  "symbolic length")
        try:
            out = rule(node, ins, follows)
        except KeyedByValueError as e:
            return SymbolicShapes(dims, str(e))
        if len(out) != len(node.shape):  # a rule and the op's own shape disagree
            return SymbolicShapes(dims, f"{where(node)} has no symbolic shape rule for "
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
            return f"{where(b)} differs between the two lengths"
        for x, y in zip(a.inputs, b.inputs):
            if not _same_value(x, y) or (isinstance(x, Node) and pos.get(id(x)) != pos.get(id(y))):
                return f"{where(b)} reads another operand or literal at the other length"
        for name in a.attrs:
            u, v = a.attrs[name], b.attrs[name]
            if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
                if any(x is not None for x in shapes.dims.get(id(b), ())):
                    continue  # an arange of a symbolic length (`_iota_dims`)
                if not (isinstance(u, np.ndarray) and isinstance(v, np.ndarray)
                        and u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True)):
                    return f"{where(b)} holds a constant that depends on the length"
            elif name == "shape" and u == a.shape and v == b.shape:
                continue  # a reshape's target, its own shape: checked with the shapes
            elif attr_key(u) != attr_key(v):
                return f"{where(b)} has an attribute that depends on the length ({name})"
    for a, b in zip(list(first.inputs) + list(first.nodes),
                    list(second.inputs) + list(second.nodes)):
        d = shapes.dims.get(id(b))
        if d is None or a.dtype != b.dtype or len(a.shape) != len(b.shape):
            return f"{where(b)} differs between the two lengths"
        if any(m != n and s is None for m, n, s in zip(a.shape, b.shape, d)):
            return f"{where(b)} has a fixed length that changes with the symbolic one"
    for a, b in zip(first.outputs, second.outputs):
        if pos.get(id(a)) != pos.get(id(b)):
            return "the two lengths return different values"
    return None
