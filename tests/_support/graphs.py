"""Helpers shared by the static-graph tests: feeding graphs, walking and checking them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

import dualgraph as dg
from dualgraph.ir.graph import Graph, Node


def arrays_for(graph: Graph, *args: Any) -> list[np.ndarray]:
    """The input arrays of a traced ``graph``: tensor/array arguments (scalars are baked
    in), then the current data of the captured parameters."""
    out = [a.numpy() if isinstance(a, dg.Tensor) else np.asarray(a)
           for a in args if isinstance(a, (dg.Tensor, np.ndarray))]
    out += [t.numpy() for t in getattr(graph, "captured", [])]
    return out


def split_and_interpreted(graph: Graph, write_to: dict[int, int], arrays: list[np.ndarray],
                          segment_lines: int) -> tuple[Any, list, list, list]:
    """``graph`` built as a split kernel (`backend.numba.build`) and run on copies of
    ``arrays``: the kernel, the reference interpreter's outputs, the kernel's inputs
    (written in place where it writes them) and its outputs."""
    from dualgraph.backend.numba import build
    from dualgraph.ir.interpret import interpret

    want = interpret(graph, *[a.copy() for a in arrays])
    kernel = build(graph, write_to=write_to, segment_lines=segment_lines)
    ins = kernel.prepare([a.copy() for a in arrays])
    outs = kernel.new_outputs()
    kernel.run(ins, outs)
    return kernel, want, ins, outs


def all_ops(graph: Graph) -> Iterator[str]:
    """Every op in ``graph``, fused bodies included."""
    for n in graph.nodes:
        yield n.op
        if n.op == "fused":
            yield from all_ops(n.attrs["body"])


def op_nodes(graph: Graph) -> list[str]:
    """Ops of the top-level nodes that compute something (constants left out)."""
    return [n.op for n in graph.nodes if n.op != "const"]


def snapshot(graph: Graph) -> tuple:
    """Everything a pass could mutate in place: the text, the structure, the node objects
    and each node's fields."""
    fields = [(n.op, n.inputs, dict(n.attrs), n.shape, n.dtype) for n in graph.nodes]
    return (str(graph), graph.key(), list(graph.inputs), list(graph.nodes),
            list(graph.outputs), fields)


def assert_convex(graph: Graph) -> None:
    """No path leaves a fused group and comes back into it (checked on the unfused graph
    through `fusion_groups`)."""
    users: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for i in n.inputs:
            if isinstance(i, Node):
                users.setdefault(id(i), []).append(n)
    for _, members, _ in dg.passes.fusion_groups(graph):
        inside = {id(m) for m in members}
        # Walk every path that starts outside the group from a member's consumer.
        stack = [u for m in members for u in users.get(id(m), []) if id(u) not in inside]
        seen: set[int] = set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            assert id(n) not in inside, f"group with {n.op} is not convex"
            stack.extend(users.get(id(n), []))


def traced_cases(cases: Iterable) -> Iterator[tuple]:
    """``(case, arrays, graph)`` for each op case in ``cases``: its float64 inputs (the
    k-th case's drawn with seed k) and its traced forward graph. A case that takes
    gradients itself cannot be traced and is skipped."""
    for k, case in enumerate(cases):
        arrays = case.arrays(np.random.default_rng(k), np.float64)
        try:
            graph = dg.trace(case.fn, *[dg.tensor(a, requires_grad=a.dtype.kind == "f")
                                         for a in arrays])
        except dg.TraceError:
            continue
        yield case, arrays, graph
