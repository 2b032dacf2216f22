"""The IR: typed SSA nodes, and graphs of them that print like a jaxpr.

A `Node` is one value: the op that made it, its inputs (other nodes, or Python scalars kept
as literals), attributes, shape and dtype. The eager tape is made of nodes too (the
autograd `Function` is a `Node` subclass), which is what makes eager and traced programs
comparable node for node.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..dtypes import short_name
from .optable import op_table
from .stages import PassStat, PassStats

Literal = (bool, int, float)
_UIDS = itertools.count(1)


# A fresh node uid (tape nodes and graph nodes share one sequence); the bound method runs in
# C, with no Python frame per eager op.
next_uid = _UIDS.__next__


class Node:
    """One SSA value: ``%3:f32[2,3] = mul %1, %2``.

    ``op`` is the registry name (``"mul"``), or ``"input"`` / ``"const"`` for graph inputs
    and NumPy-array constants (whose array is ``attrs["value"]``).
    """

    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "loc", "uid", "__weakref__")

    def __init__(
        self,
        op: str,
        inputs: tuple,
        attrs: dict,
        shape: tuple,
        dtype: np.dtype,
        loc: str | None = None,
        uid: int | None = None,
    ) -> None:
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.shape = shape
        self.dtype = dtype
        self.loc = loc
        # Provenance: a pass that rebuilds a node keeps its uid, so a report can follow a
        # traced node through every pass (merged, folded, fused into kernel K).
        self.uid = next(_UIDS) if uid is None else uid

    @property
    def type_str(self) -> str:
        return f"{short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"<Node {self.op} {self.type_str}>"


def post_order(roots: Iterable[Node],
               stop: Callable[[Node, int], bool] | None = None) -> list[Node] | None:
    """The nodes ``roots`` reach, each after its inputs (so in an order that can run), by
    an iterative depth-first walk: a 10,000-op chain does not reach the recursion limit.
    ``stop(node, visited)`` is asked of each node as it is first visited (``visited``
    counts it); when it answers True the walk ends and returns None."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(r, False) for r in reversed(list(roots))]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if stop is not None and stop(node, len(seen)):
            return None
        stack.append((node, True))
        stack.extend((i, False) for i in reversed(node.inputs)
                     if isinstance(i, Node) and id(i) not in seen)
    return order


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


class GraphError(ValueError):
    """A graph is malformed (a value used before it is defined, a wrong type, ...)."""


def attr_key(value: Any) -> Any:
    """A hashable, structural stand-in for an attribute value."""
    if isinstance(value, np.ndarray):
        digest = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()
        return ("array", value.shape, value.dtype.str, digest)
    if isinstance(value, Graph):
        return ("graph", value.key())
    if isinstance(value, np.dtype):
        return ("dtype", value.str)
    if isinstance(value, (tuple, list)):
        return tuple(attr_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, attr_key(v)) for k, v in value.items()))
    return value


def _check_operands(k: int, n: Node, defined: set, where: str) -> None:
    """Node ``k`` is defined once, and its inputs are nodes defined before it, or literals."""
    if id(n) in defined:
        raise GraphError(f"node {k} ({n.op}) is defined twice{where}")
    for i in n.inputs:
        if isinstance(i, Node) and id(i) not in defined:
            raise GraphError(
                f"node {k} ({n.op}) uses a value before it is defined{where}: {i!r}"
            )
        if not isinstance(i, (Node,) + Literal):
            raise GraphError(f"node {k} ({n.op}) has a non-node input {i!r}{where}")


def _check_type(k: int, n: Node, ops: dict, pass_name: str | None, where: str) -> None:
    """Node ``k``'s type is the one its op's rule gives (a constant's, its value's; a fused
    node's, its body's output, the body verified too)."""
    if n.op == "const":
        v = n.attrs.get("value")
        if not isinstance(v, np.ndarray) or v.shape != tuple(n.shape) or (
                v.dtype != n.dtype):
            raise GraphError(f"const node {k} does not match its type{where}")
    elif n.op == "fused":
        body = n.attrs["body"]
        body.verify(pass_name)
        out = body.outputs[0]
        if tuple(out.shape) != tuple(n.shape) or out.dtype != n.dtype:
            raise GraphError(f"fused node {k} does not match its body's output{where}")
        if len(body.inputs) != len(n.inputs):
            raise GraphError(f"fused node {k}: {len(n.inputs)} inputs for a body "
                             f"of {len(body.inputs)}{where}")
    elif n.op in ops:
        try:
            shape, dtype = ops[n.op].infer(*n.inputs, **n.attrs)
        except (ValueError, TypeError) as e:
            raise GraphError(f"node {k} ({n.op}) is ill-typed{where}: {e}") from None
        if tuple(shape) != tuple(n.shape) or np.dtype(dtype) != n.dtype:
            raise GraphError(
                f"node {k} ({n.op}) says {n.type_str} but its op gives "
                f"{Node('', (), {}, tuple(shape), np.dtype(dtype)).type_str}{where}"
            )
    else:
        raise GraphError(f"node {k} has unknown op {n.op!r}{where}")


class Graph:
    """A program: input nodes, nodes in topological order, output nodes.

    ``str(graph)`` prints one node per line::

        graph(%0:f32[], %1:f32[]):
          %2:f32[] = mul %0, %1
          return %2

    Besides its structure a graph carries metadata, all declared here (the class has
    ``__slots__``, so nothing else can be attached) and none of it part of its identity
    (`key`, ``==``):

    - from `dg.trace`: ``captured``, the tensors the function read from outside that became
      the inputs after the arguments (module parameters); ``n_args``, the number of inputs
      that are arguments (``None``: not a trace, every input is one); ``single_output``,
      whether the function returned one value rather than a tuple (``None``: not a trace);
      ``no_grad``, the uids of the nodes recorded with grad mode off (in a ``no_grad``
      block): constants for `differentiate`, as on the eager tape.
      Passes carry these forward through `replace`.
    - from a pass: ``notes``, one line per change the pass that produced this graph made.
    - from `optimize`: ``pass_stats``, a `PassStats` list of what each pass did, which
      finds a stage by pass name: ``graph.pass_stats.before("fuse")``.
    """

    __slots__ = ("inputs", "nodes", "outputs", "captured", "n_args", "single_output",
                 "no_grad", "notes", "pass_stats")

    def __init__(
        self,
        inputs: Iterable[Node],
        nodes: Iterable[Node],
        outputs: Iterable[Node],
        *,
        captured: Iterable[Any] = (),
        n_args: int | None = None,
        single_output: bool | None = None,
        no_grad: Iterable[int] = (),
        notes: Iterable[str] = (),
        pass_stats: Iterable[PassStat] = (),
    ) -> None:
        self.inputs = list(inputs)
        self.nodes = list(nodes)
        self.outputs = list(outputs)
        self.captured = list(captured)
        self.n_args = n_args
        self.single_output = single_output
        self.no_grad = frozenset(no_grad)
        self.notes = list(notes)
        self.pass_stats = PassStats(pass_stats)

    def replace(
        self,
        *,
        inputs: Iterable[Node] | None = None,
        nodes: Iterable[Node] | None = None,
        outputs: Iterable[Node] | None = None,
        notes: Iterable[str] = (),
        pass_stats: Iterable[PassStat] = (),
    ) -> Graph:
        """A new graph with the parts given swapped in (the others shared with this one)
        and the trace metadata (``captured``, ``n_args``, ``single_output``) carried over.

        ``notes`` and ``pass_stats`` describe how the new graph was made, so they start
        afresh: a pass gives its own notes here, `optimize` its statistics.

        >>> g2 = graph.replace(nodes=kept, notes=["removed exp f32[3]"])   # doctest: +SKIP
        """
        return Graph(
            self.inputs if inputs is None else inputs,
            self.nodes if nodes is None else nodes,
            self.outputs if outputs is None else outputs,
            captured=self.captured,
            n_args=self.n_args,
            single_output=self.single_output,
            no_grad=self.no_grad,
            notes=notes,
            pass_stats=pass_stats,
        )

    def names(self) -> dict[int, str]:
        """``id(node) -> "%k"``, numbering inputs first, then nodes in order."""
        names: dict[int, str] = {}
        for n in self.inputs:
            names[id(n)] = f"%{len(names)}"
        for n in self.nodes:
            if id(n) not in names:
                names[id(n)] = f"%{len(names)}"
        return names

    # ------------------------------------------------------------- structure
    def key(self) -> tuple:
        """Structural identity: equal for graphs that print the same and hold equal
        constants, whatever the node objects are."""
        index: dict[int, int] = {}
        parts: list = []
        for n in self.inputs:
            index[id(n)] = len(index)
            parts.append(("input", n.shape, n.dtype.str))
        for n in self.nodes:
            ins = tuple(
                ("v", index[id(i)]) if isinstance(i, Node) and id(i) in index
                else ("?",) if isinstance(i, Node) else ("lit", type(i).__name__, i)
                for i in n.inputs
            )
            parts.append((n.op, ins, attr_key(n.attrs), tuple(n.shape), n.dtype.str))
            index[id(n)] = len(index)
        outs = tuple(index.get(id(o), -1) for o in self.outputs)
        return tuple(parts), outs

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Graph) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def verify(self, pass_name: str | None = None) -> "Graph":
        """Check SSA order and every node's type against its op's rule; returns self.

        Raises `GraphError`; ``pass_name`` (the pass that produced the graph) is named in
        the message, since a graph that fails here after a pass is a bug in that pass.
        """
        ops = op_table()
        where = f" after pass {pass_name!r}" if pass_name else ""
        defined: set[int] = set()
        for n in self.inputs:
            if id(n) in defined:
                raise GraphError(f"input {n!r} appears twice{where}")
            defined.add(id(n))
        for k, n in enumerate(self.nodes):
            _check_operands(k, n, defined, where)
            _check_type(k, n, ops, pass_name, where)
            defined.add(id(n))
        for o in self.outputs:
            if id(o) not in defined:
                raise GraphError(f"output {o!r} is not defined in the graph{where}")
        return self

    def __call__(self, *args: Any) -> Any:
        """Run the graph with the reference interpreter (NumPy kernels of the registry)."""
        from .interpret import interpret

        outs = interpret(self, *args)
        return outs[0] if len(outs) == 1 else outs

    def format_node(self, n: Node, names: dict[int, str]) -> str:
        def arg(x: Any) -> str:
            return names.get(id(x), "?") if isinstance(x, Node) else format_literal(x)

        if n.op == "const":
            rhs = f"const {format_const(n.attrs['value'])}"
        else:
            attrs = {k: v for k, v in n.attrs.items() if not k.startswith("_") and k != "body"}
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
        for n in self.nodes:
            lines.append("  " + self.format_node(n, names))
            if n.op == "fused":
                lines += ["    " + line for line in str(n.attrs["body"]).splitlines()]
        outs = ", ".join(names.get(id(n), "?") for n in self.outputs)
        lines.append(f"  return {outs}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Graph {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
            f"{len(self.outputs)} outputs>"
        )


def zero_d_operands(graph: Graph) -> bool:
    """Whether a kernel of ``graph`` takes and fills its 0-d values as 0-d arrays (the
    arrays the tensors hold): when every input and output of ``graph`` is 0-d. A kernel
    with any larger operand takes and fills a 0-d value as a ``(1,)`` array: it is called
    through Numba's dispatcher, which types a 0-d array on a slower path than a ``(1,)``
    one, while a kernel whose operands are all 0-d is called through its compiled entry,
    which types nothing. Every caller and the code generator ask this one function."""
    return (all(not n.shape for n in graph.inputs)
            and all(not o.shape for o in graph.outputs))
