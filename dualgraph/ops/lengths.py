"""Symbolic lengths in shape rules: which axes of an op's result carry a `Dim`.

A `Dim` stands for the length of one axis of a graph input that may take any length
(`compile/dims.py` seeds and carries them). An op's ``lengths`` rule (`OpDef.lengths`)
maps its operands' symbols to its result's, or raises `KeyedByValueError` when the op needs
the length's value (it indexes along it, mixes it in a reshape, meets a fixed length): the
argument then keeps being keyed by value. Elementwise ops and reductions take their rule
from their traits (`rule_of`); an op with neither trait nor rule refuses any symbol.

A rule is ``rule(node, ins, follows) -> dims``: ``ins`` the node operands with their
symbols (literals left out), ``follows`` per result axis the symbol whose length it
follows between the traces of two lengths (for an op whose result's shape is an
attribute, as ``broadcast_to``), ``dims`` one entry per result axis: a `Dim` or None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# Per value, one entry per axis: its `Dim`, or None for a fixed length.
Dims = tuple
Rule = Callable[[Any, list, Dims], Dims]


class Dim:
    """A symbolic length: the length of axis ``axis`` of graph input ``input``.

    >>> Dim(0, 1)
    s0.1
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


class KeyedByValueError(Exception):
    """A symbolic length met an op that needs its value: the argument keeps being keyed by
    value. The message says where and why."""


def where(node: Any) -> str:
    """The node's op and the user's line, for a reason."""
    return f"{node.op} ({node.loc})" if node.loc else node.op


def refuse(node: Any, why: str) -> KeyedByValueError:
    return KeyedByValueError(f"{where(node)} {why}")


def symbolic(d: Dims) -> bool:
    return any(s is not None for s in d)


def broadcast_dims(node: Any, shape: Sequence[int], ins: list[tuple[tuple, Dims]]) -> Dims:
    """The symbols of operands of shapes and symbols ``ins`` broadcast to ``shape``: a
    symbolic axis meets the same symbol or a length 1; a fixed length that is not 1 would
    equal the symbol for one length only, and two symbols would need a guard that they
    stay equal."""
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
            raise refuse(node, f"broadcasts two symbolic lengths {sorted(map(repr, syms))} "
                         "against each other")
        if syms and fixed:
            raise refuse(node, f"broadcasts symbolic length {next(iter(syms))!r} against a "
                         "fixed length")
        out[k] = next(iter(syms), None)
    return tuple(out)


def gathered(xs: Sequence, dims: tuple, batch: Sequence) -> tuple:
    """``x[idx]``'s axes (shapes or symbols) from the table's ``xs`` indexed at ``dims`` and
    the index arrays' batch axes ``batch`` (NumPy's rule: separated advanced dims first)."""
    rest = tuple(a for a in range(len(xs)) if a not in dims)
    if dims == tuple(range(dims[0], dims[0] + len(dims))):
        pre = tuple(a for a in rest if a < dims[0])
        post = tuple(a for a in rest if a > dims[0])
    else:
        pre, post = (), rest
    return tuple(xs[a] for a in pre) + tuple(batch) + tuple(xs[a] for a in post)


def elementwise_lengths(node: Any, ins: list, follows: Dims) -> Dims:
    """Elementwise ops broadcast symbols as shapes (`broadcast_dims`)."""
    return broadcast_dims(node, node.shape, [(tuple(x.shape), d) for x, d in ins])


def _reduced_axes(node: Any, ndim: int) -> tuple[int, ...]:
    axis = node.attrs.get("axis")
    if axis is None:
        return tuple(range(ndim))
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axis)) if ndim else ()


def reduction_lengths(node: Any, ins: list, follows: Dims, empty_ok: bool = True) -> Dims:
    """A reduction keeps the symbols of the axes it does not reduce. Over a symbolic axis
    only one defined when empty (a sum, a mean: its divisor is then the bound length); an
    empty max raises in eager mode where a kernel would return its identity."""
    (x, d), *rest = ins
    if any(symbolic(dd) for _, dd in rest):
        raise refuse(node, "reads a symbolic length in an operand other than the reduced one")
    axes = _reduced_axes(node, len(x.shape))
    if not empty_ok and any(d[a] is not None for a in axes):
        raise refuse(node, "reduces over a symbolic length (an empty one raises)")
    if node.attrs.get("keepdims"):
        return tuple(None if a in axes else s for a, s in enumerate(d))
    return tuple(s for a, s in enumerate(d) if a not in axes)


def rule_of(op: Any) -> Rule | None:
    """The symbolic-length rule of `OpDef` ``op``: its own, or its trait's; None: the op
    takes no symbolic length."""
    if op is None:
        return None
    if op.lengths is not None:
        return op.lengths
    if op.elementwise:
        return elementwise_lengths
    if op.reduction is not None:
        empty_ok = op.reduction.empty_ok
        return lambda node, ins, follows: reduction_lengths(node, ins, follows, empty_ok)
    return None
