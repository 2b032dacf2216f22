"""`graph_of`: export the tape behind a tensor as an IR `Graph`."""

from __future__ import annotations

from typing import Any

from ..ir.graph import Graph, Node, post_order
from .autograd import AccumulateGrad
from .tensor import Tensor


def graph_of(*tensors: Tensor) -> Graph:
    """The tape that produced ``tensors`` as a `Graph` (fresh nodes; the tape is untouched).

    Leaves that require grad become graph inputs (in the order the tape first uses them),
    tensors that do not become ``const`` nodes, Python scalars stay literals.

    >>> print(dg.graph_of(x * y))
    graph(%0:f32[], %1:f32[]):
      %2:f32[] = mul %0, %1
      return %2
    """
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"graph_of expects tensors, got {type(t).__name__}")
    roots = [t._input_node() for t in tensors]
    order = post_order(roots)
    # The DFS order is topological but not the order the program ran: independent branches
    # come out last-visited-first. Every tape node's uid counts up at creation, and a node
    # is created after its inputs, so sorting by uid gives the run order (trace's order).
    ops = sorted((n for n in order if not isinstance(n, AccumulateGrad)), key=lambda n: n.uid)
    leaves: dict[int, Node] = {}
    for n in ops:
        for i in n.inputs:
            if isinstance(i, AccumulateGrad):
                leaves.setdefault(id(i), i)
    for r in roots:
        if isinstance(r, AccumulateGrad):
            leaves.setdefault(id(r), r)
    copies: dict[int, Node] = {}
    inputs, nodes = [], []
    for n in [*leaves.values(), *ops]:
        new_inputs = tuple(copies[id(i)] if isinstance(i, Node) else i for i in n.inputs)
        attrs = dict(n.attrs)
        if isinstance(n, AccumulateGrad):
            # Hidden (underscore) attribute: lets viz.make_dot name a leaf by its parameter.
            attrs["_variable"] = n._var
        c = Node(n.op, new_inputs, attrs, tuple(n.shape), n.dtype, n.loc)
        copies[id(n)] = c
        (inputs if isinstance(n, AccumulateGrad) else nodes).append(c)
    return Graph(inputs, nodes, [copies[id(r)] for r in roots])


def tape_nodes(t: Any) -> int:
    """How many op nodes the tape behind ``t`` holds (inputs and constants excluded)."""
    return sum(1 for n in graph_of(t).nodes if n.op != "const")
