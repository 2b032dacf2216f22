"""The IR: typed SSA nodes, and graphs of them that print like a jaxpr.

A `Node` is one value: the op that made it, its inputs (other nodes, or Python scalars kept
as literals), attributes, shape and dtype. The eager tape is made of nodes too (the
autograd `Function` is a `Node` subclass), which is what makes eager and traced programs
comparable node for node.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..dtypes import short_name

Literal = (bool, int, float)


class Node:
    """One SSA value: ``%3:f32[2,3] = mul %1, %2``.

    ``op`` is the registry name (``"mul"``), or ``"input"`` / ``"const"`` for graph inputs
    and NumPy-array constants (whose array is ``attrs["value"]``).
    """

    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "loc", "__weakref__")

    def __init__(
        self,
        op: str,
        inputs: tuple,
        attrs: dict,
        shape: tuple,
        dtype: np.dtype,
        loc: str | None = None,
    ) -> None:
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.loc = loc

    @property
    def type_str(self) -> str:
        return f"{short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"<Node {self.op} {self.type_str}>"


def format_attr(value: Any) -> str:
    """Attributes print compactly and deterministically (slices as ``a:b:c``)."""
    if isinstance(value, np.dtype):
        return short_name(value)
    if isinstance(value, tuple):
        inner = ", ".join(format_attr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def format_literal(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_const(value: np.ndarray) -> str:
    if value.size <= 8:
        return np.array2string(value, separator=", ", threshold=8).replace("\n", "")
    return f"<{short_name(value.dtype)}[{','.join(map(str, value.shape))}]>"


class Graph:
    """A program: input nodes, nodes in topological order, output nodes.

    ``str(graph)`` prints one node per line::

        graph(%0:f32[], %1:f32[]):
          %2:f32[] = mul %0, %1
          return %2
    """

    def __init__(self, inputs: Iterable[Node], nodes: Iterable[Node], outputs: Iterable[Node]):
        self.inputs = list(inputs)
        self.nodes = list(nodes)
        self.outputs = list(outputs)

    def names(self) -> dict[int, str]:
        """``id(node) -> "%k"``, numbering inputs first, then nodes in order."""
        names: dict[int, str] = {}
        for n in self.inputs:
            names[id(n)] = f"%{len(names)}"
        for n in self.nodes:
            if id(n) not in names:
                names[id(n)] = f"%{len(names)}"
        return names

    def format_node(self, n: Node, names: dict[int, str]) -> str:
        def arg(x: Any) -> str:
            return names.get(id(x), "?") if isinstance(x, Node) else format_literal(x)

        if n.op == "const":
            rhs = f"const {format_const(n.attrs['value'])}"
        else:
            attrs = {k: v for k, v in n.attrs.items() if not k.startswith("_")}
            head = n.op
            if attrs:
                head += "[" + ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(attrs.items()))
                head += "]"
            rhs = head + (" " + ", ".join(arg(x) for x in n.inputs) if n.inputs else "")
        return f"{names[id(n)]}:{n.type_str} = {rhs}"

    def __str__(self) -> str:
        names = self.names()
        params = ", ".join(f"{names[id(n)]}:{n.type_str}" for n in self.inputs)
        lines = [f"graph({params}):"]
        lines += ["  " + self.format_node(n, names) for n in self.nodes]
        outs = ", ".join(names.get(id(n), "?") for n in self.outputs)
        lines.append(f"  return {outs}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Graph {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
            f"{len(self.outputs)} outputs>"
        )
