"""Lower an optimized `Graph` to the source of one ``numba.njit`` function.

The source is meant to be read (``dg.explain`` prints it): one block per IR node with the IR
line as a comment above it. What each op becomes is looked up by its name in
``lowerings/``: fused groups become one loop nest, each member an inlined scalar
expression; broadcasting is index arithmetic (a dimension of size 1 reads index 0), never
a materialized copy. Reductions fold with their op's `Reduction` spec and accumulate in
float64 (float32 input) so long sums stay accurate; matmuls go to BLAS with the fused
epilogue applied in one pass over the result.

Values are stored as arrays; a 0-d value is stored with shape ``(1,)`` (the runtime
reshapes at the boundary), which keeps every loop and index uniform.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field

import numpy as np

from ...ir.graph import Graph, Node
from ...ops.broadcast import result_dtype
from ...ops.registry import OPS
from .. import kir, schedule
from . import lowerings, printer
from .loopmerge import merge_loops
from .lowerings import LoweringError, identity_literal, ishape, missing, np_dtype
from .printer import MATH, literal

__all__ = ["LANES", "Lowered", "LoweringError", "ishape", "lower", "np_dtype"]

# Independent accumulators for long reductions (see _Writer._lane_reduce).
LANES = 16
# Loops this big or bigger use prange under parallel=True (below it, threads cost more).
PARALLEL_MIN_SIZE = 1 << 15
# A parallel whole-array reduction folds this many chunks' partial sums (a fixed number,
# so the result does not depend on the number of threads).
CHUNKS = 64
# A float32 sum's values go through a buffer of at most this many, folded into its lanes
# by `kernels.fold_lanes` (4 KB: stays in L1 between the loop and the fold).
FOLD_BLOCK = 1024


def fold_block(whole: int) -> int:
    """The buffer length for a sum of ``whole`` values (a multiple of LANES): the largest
    multiple of LANES up to FOLD_BLOCK that divides it, so that every block has the same
    literal length and there is no partial block to write a loop for."""
    for block in range(FOLD_BLOCK, 0, -LANES):
        if whole % block == 0:
            return block
    return LANES


def _py(value: object) -> str:
    """Source for a Python literal (`printer.literal`: inf and nan as NumPy names)."""
    return literal(value)


def _typed(value: object, dtype: np.dtype) -> str:
    """A literal as a constant of ``dtype``: a bare 2.0 would make a float32 loop float64."""
    if np.dtype(dtype).kind in "iu":
        return f"{np_dtype(dtype)}({int(value)})"
    return literal(value, dtype)


@dataclass(frozen=True)
class _Fold:
    """A reduction's combine as the writer emits it."""

    how: lowerings.Combine
    nan_propagates: bool


@dataclass
class Lowered:
    """Generated source plus what the runtime needs to call it."""

    source: str
    name: str
    consts: list
    output_shapes: list
    n_inputs: int
    line_of_node: dict
    # Work arrays (shape, dtype) the caller allocates once and passes after the constants:
    # an allocation inside the kernel costs Numba compile time and the runtime a fresh
    # buffer per call.
    scratch: list = field(default_factory=list)


# A top-level allocation in generated code: ``name = np.empty((shape), np.dtype)``.
_ALLOC = re.compile(r"^(\w+) = np\.empty\((\([\d, ]*\)|\d+), (np\.\w+)\)$")


class _Writer:
    def __init__(self, graph: Graph, name: str, parallel: bool,
                 write_to: dict[int, int] | None = None) -> None:
        self.graph = graph
        self.write_to = write_to or {}
        self.name = name
        self.parallel = parallel
        self.lines: list[str] = []
        self.var: dict[int, str] = {}
        self.consts: list[np.ndarray] = []
        self.scratch: list[tuple] = []
        self.ir_names = graph.names()
        self.line_of_node: dict[str, int] = {}
        self.tmp = 0
        self.into: str | None = None  # the array the node being written must fill
        self.target: dict[int, str] = {}
        self.written: set[int] = set()
        self.filled: set[int] = set()  # nodes whose target (above) holds their value
        self.node_of: dict[str, Node] = {}  # variable -> the node whose value it holds

    # ------------------------------------------------------------------ helpers
    def emit(self, line: str, indent: int = 1) -> None:
        if indent == 1:
            m = _ALLOC.match(line)
            if m:
                line = f"{m.group(1)} = {self.work(m.group(2), m.group(3))}"
        self.lines.append("    " * indent + line)

    def work(self, shape: str, dtype: str) -> str:
        """A new work array of ``shape`` and ``dtype`` (their source text), passed in."""
        dims = ast.literal_eval(shape)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        self.scratch.append((dims, np.dtype(dtype[3:].replace("bool_", "bool"))))
        return f"w{len(self.scratch) - 1}"

    def comment(self, n: Node, indent: int = 1) -> None:
        text = self.graph.format_node(n, self.ir_names)
        self.line_of_node[self.ir_names[id(n)]] = len(self.lines) + 1
        self.emit(f"# {text}", indent)

    def fresh(self, prefix: str = "t") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    # ------------------------------------------------------------------- driver
    def run(self) -> Lowered:
        params = []
        for k, n in enumerate(self.graph.inputs):
            self.var[id(n)] = f"a{k}"
            params.append(f"a{k}")
        self.target, self.written = self.plan_targets()
        clusters = self.plan_clusters()
        inside = {id(m) for c in clusters.values() for m in c[0] + c[1]}
        folds = self.plan_batch_sums(inside)
        inside |= {id(f[0]) for f in folds.values()}
        body_start = len(self.lines)
        for n in self.graph.nodes:
            if n.op == "const":
                name = f"c{len(self.consts)}"
                value = np.ascontiguousarray(n.attrs["value"])
                self.consts.append(value.reshape(ishape(n)))
                self.var[id(n)] = name
                continue
            if id(n) in clusters:
                self.cluster(n, *clusters[id(n)])
            elif id(n) in folds:
                self.batch_sum(n, *folds[id(n)])
            elif id(n) not in inside:
                self.node(n)
        # Results go into buffers the caller passes (o0, o1, ...), or straight into an
        # input's array for in-place state (write_to: output -> input): returning arrays
        # would cost a boxing step per array per call.
        outs = [self.var[id(o)] for o in self.graph.outputs]
        pending = [k for k, o in enumerate(self.graph.outputs)
                   if id(o) not in self.filled or self.target[id(o)] != (
                       f"a{self.write_to[k]}" if k in self.write_to else f"o{k}")]
        if pending:
            self.emit("# outputs")
        for k in pending:
            if k not in self.write_to:
                self.copy_loop(f"o{k}", outs[k], ishape(self.graph.outputs[k]))
        for k in pending:
            if k in self.write_to and not self.fresh_value(self.graph.outputs[k]):
                # May alias an input that another write changes first: snapshot it.
                self.emit(f"{outs[k]} = {outs[k]}.copy()")
        for k in pending:
            if k in self.write_to:
                self.copy_loop(f"a{self.write_to[k]}", outs[k], ishape(self.graph.outputs[k]))
        self.emit("return 0")
        params += [f"c{k}" for k in range(len(self.consts))]
        params += [f"w{k}" for k in range(len(self.scratch))]
        params += [f"o{k}" for k in range(len(outs)) if k not in self.write_to]
        header = [f"def {self.name}({', '.join(params)}):"]
        tags = {line - body_start: name for name, line in self.line_of_node.items()}
        body, lines_of = merge_loops(self.lines[body_start:], tags, set(params))
        offset = len(header)
        self.line_of_node = {k: v + offset for k, v in lines_of.items()}
        return Lowered("\n".join(header + body), self.name, self.consts,
                       [tuple(o.shape) for o in self.graph.outputs], len(self.graph.inputs),
                       self.line_of_node, self.scratch)

    def copy_loop(self, dst: str, src: str, shape: tuple) -> None:
        """``dst[...] = src`` as an explicit loop: slice assignment makes Numba compile its
        generic broadcasting setitem for every distinct signature (~0.5 s each)."""
        idx, indent = self.loops(shape, 1)
        at = ", ".join(idx)
        self.emit(f"{dst}[{at}] = {src}[{at}]", indent)

    def plan_targets(self) -> tuple[dict[int, str], set[int]]:
        """Where values are computed straight into their final arrays (memory planning):
        node id -> the output buffer ``o{k}`` it fills, or the input array ``a{j}`` an
        in-place update overwrites. Each saves an allocation and a copy loop at the end,
        and every loop the kernel does not have is Numba compile time saved (~50 ms).

        A value goes to ``o{k}`` when this kernel allocates it in a loop, reduction or
        matrix product (not a view of something else). An update goes to ``a{j}`` when it
        is an elementwise loop of ``a{j}``'s shape and dtype, and nothing after it (in
        program order) reads ``a{j}`` or a value that may alias it, nor is such a value an
        output (the loop itself reads ``a{j}`` at the index it writes, before writing).
        """
        nodes = self.graph.nodes
        outputs = self.graph.outputs
        target: dict[int, str] = {}
        for k, o in enumerate(outputs):
            if k not in self.write_to and id(o) not in target and self.direct(o):
                target[id(o)] = f"o{k}"
        written: set[int] = set()
        if not self.write_to:
            return target, written
        position = {id(n): p for p, n in enumerate(nodes)}
        # aliases[input j] = ids of the input node and of values that may share its memory
        aliases: dict[int, set[int]] = {}
        for j, inp in enumerate(self.graph.inputs):
            group = {id(inp)}
            for n in nodes:
                if not self.fresh_result(n) and any(
                        isinstance(i, Node) and id(i) in group for i in n.inputs):
                    group.add(id(n))
            aliases[j] = group
        last_read: dict[int, int] = {}
        for p, n in enumerate(nodes):
            for i in n.inputs:
                if isinstance(i, Node):
                    last_read[id(i)] = p
        out_ids = {id(o) for o in outputs}
        for k, j in self.write_to.items():
            o = outputs[k]
            inp = self.graph.inputs[j]
            if (id(o) in target or id(o) not in position or not self.loop_value(o)
                    or ishape(o) != ishape(inp) or o.dtype != inp.dtype):
                continue
            group = aliases[j]
            if group & out_ids:
                continue
            p = position[id(o)]
            if any(last_read.get(a, -1) > p for a in group):
                continue
            # Inside the loop only ``a{j}`` itself may be read (at the written index).
            if any(isinstance(i, Node) and id(i) in group and i is not inp
                   for i in o.inputs):
                continue
            if any(isinstance(i, Node) and i is inp and ishape(i) != ishape(o)
                   for i in o.inputs):
                continue
            target[id(o)] = f"a{j}"
            written.add(id(o))
        return target, written

    # ------------------------------------------------------------------ clusters
    def plan_clusters(self) -> dict[int, tuple[list, list]]:
        """Whole-array reductions that take their producers and siblings into their loop:
        reduction node id -> (producers, siblings), each in program order.

        A value and its gradient (`value_and_grad`) are a reduction and elementwise loops
        over the same elements, reading the same intermediate values (``tanh(x)`` for the
        loss and for its derivative). Fusion stores a value used by two groups rather than
        recompute it; here the groups share one loop instead, so the value is a scalar in
        that loop and never stored. A *producer* is an elementwise loop of the reduction's
        length whose every consumer is in the cluster (so nothing else needs its array);
        a *sibling* is a later elementwise loop of that length reading only values that
        exist before the reduction (or cluster values), and writing an array of its own.
        Under ``parallel=True`` the cluster runs in the reduction's chunked ``prange`` (each
        element is still written by one chunk only).
        """
        nodes = self.graph.nodes
        pos = {id(n): p for p, n in enumerate(nodes)}
        users: dict[int, list[Node]] = {}
        for n in nodes:
            for i in n.inputs:
                if isinstance(i, Node):
                    users.setdefault(id(i), []).append(n)
        out_ids = {id(o) for o in self.graph.outputs}
        clusters: dict[int, tuple[list, list]] = {}
        taken: set[int] = set()
        for r in nodes:
            length = self.whole_reduction(r)
            if length is None or id(r) in taken:
                continue
            shape = (length,)
            reads = {id(i) for i in self.reads_of(r)}
            siblings: list[Node] = []
            for s in nodes[pos[id(r)] + 1:]:
                if (id(s) in taken or not self.loop_value(s) or ishape(s) != shape
                        or not self.target.get(id(s), "o").startswith("o")):
                    continue
                ins = [i for i in s.inputs if isinstance(i, Node)]
                if not all(pos.get(id(i), -1) < pos[id(r)] or i in siblings for i in ins):
                    continue
                if not ({id(i) for i in self.reads_of(s)} & reads):
                    continue  # shares nothing with the reduction: no pass is saved
                siblings.append(s)
            members = {id(r)} | {id(s) for s in siblings}
            producers: list[Node] = []
            for p in reversed(nodes[:pos[id(r)]]):
                if (id(p) in taken or not self.loop_value(p) or ishape(p) != shape
                        or id(p) in out_ids or id(p) in self.target):
                    continue
                cs = users.get(id(p), [])
                if cs and all(id(c) in members for c in cs):
                    producers.insert(0, p)
                    members.add(id(p))
            if producers or siblings:
                clusters[id(r)] = (producers, siblings)
                taken |= members
        return clusters

    def plan_batch_sums(self, taken: set) -> dict[int, tuple[Node, Node, Node]]:
        """Sums over the batch of a batched product that are one product: sum node id ->
        (the product, the base of its left operand, its right operand).

        ``sum_b x[b].T @ g[b]`` (a weight gradient over batch x sequence: x of shape
        (B, k, m), g of (B, k, n)) is ``X.T @ G`` with X = x as (B*k, m) and G = g as
        (B*k, n): one GEMM over the folded batch instead of B products and a sum. It
        applies when the product's only reader is the sum, its left operand is a view
        swapping the last two axes, and both operands have the whole batch."""
        users: dict[int, list[Node]] = {}
        for n in self.graph.nodes:
            for i in n.inputs:
                if isinstance(i, Node):
                    users.setdefault(id(i), []).append(n)
        outputs = {id(o) for o in self.graph.outputs}
        folds: dict[int, tuple[Node, Node, Node]] = {}
        for r in self.graph.nodes:
            op = OPS.get(r.op)
            spec = op.reduction if op is not None else None
            if spec is None or spec.combine != "add" or spec.finalize is not None:
                continue
            p = r.inputs[0]
            pop = OPS.get(p.op) if isinstance(p, Node) else None
            if (pop is None or not pop.contraction or pop.contraction_bias or id(p) in taken
                    or id(p) in outputs or [id(u) for u in users.get(id(p), [])] != [id(r)]):
                continue
            nb = len(p.shape) - 2
            left, right = p.inputs
            if (nb < 1 or r.attrs.get("keepdims") or tuple(r.attrs["axis"] or ()) !=
                    tuple(range(nb)) or not isinstance(left, Node)
                    or not isinstance(right, Node)
                    or len(left.shape) != len(p.shape) or len(right.shape) != len(p.shape)
                    or tuple(left.shape[:nb]) != tuple(p.shape[:nb])
                    or tuple(right.shape[:nb]) != tuple(p.shape[:nb])):
                continue
            lop = OPS.get(left.op)
            swap = tuple(range(nb)) + (nb + 1, nb)
            if lop is None or not lop.view or tuple(left.attrs.get("axes", ())) != swap:
                continue
            base = left.inputs[0]
            if not isinstance(base, Node) or len({np.dtype(v.dtype) for v in (
                    r, p, base, right)}) != 1 or np.dtype(r.dtype).kind != "f":
                continue
            folds[id(r)] = (p, base, right)
        return folds

    def batch_sum(self, r: Node, p: Node, base: Node, right: Node) -> None:
        """A batch-summed product (`plan_batch_sums`) as one GEMM."""
        self.comment(p)
        self.comment(r)
        out = f"v{self.ir_names[id(r)][1:]}"
        self.into = self.target.get(id(r))
        m, n = r.shape
        k = math.prod(base.shape[:-1])
        res = kir.Buffer(out, (m, n), r.dtype)
        x = self.arg(base).buf
        g = self.arg(right).buf
        x2 = kir.Buffer(f"{out}_x", (k, m), r.dtype, kir.VIEW)
        g2 = kir.Buffer(f"{out}_g", (k, n), r.dtype, kir.VIEW)
        block = kir.Block([kir.Alloc(res), kir.View(x2, x, "reshape"),
                           kir.View(g2, g, "reshape"),
                           kir.Gemm(m, n, k, kir.Operand(x2, m), kir.Operand(g2, n),
                                    kir.Operand(res, n), ta=True)], res)
        if k == 0:
            i = kir.Var(f"{out}_i")
            flat = kir.Buffer(f"{out}_f", (m * n,), r.dtype, kir.VIEW)
            block = kir.Block([kir.Alloc(res), kir.View(flat, res, "reshape"), kir.Loop(
                i, m * n, (kir.Store(flat, (i,), kir.const(0, r.dtype)),))], res)
        self.emit_block(self.schedule(block, product=False))
        self.var[id(r)] = out
        self.node_of[out] = r
        if self.target.get(id(r)) is not None and self.into is None:
            self.filled.add(id(r))
        self.into = None

    def whole_reduction(self, n: Node) -> int | None:
        """The length of the one-dimensional array ``n`` reduces whole in a lane reduction
        (a reduction group, or a lone reduction), else None."""
        if n.op == "fused":
            if n.attrs.get("kind") != "reduce":
                return None
            root = n.attrs["body"].outputs[0]
        else:
            op = OPS.get(n.op)
            if op is None or op.reduction is None:
                return None
            root = n
        src = root.inputs[0]
        if not isinstance(src, Node) or len(src.shape) != 1 or src.shape[0] < 4 * LANES:
            return None
        axis = root.attrs.get("axis")
        if axis is not None and tuple(axis) != (0,):
            return None
        return int(src.shape[0])

    @staticmethod
    def reads_of(n: Node) -> list[Node]:
        return [i for i in n.inputs if isinstance(i, Node)]

    def body_of(self, n: Node) -> tuple[Graph, list[Node]]:
        """``n`` as a group body and the top-level values its inputs are (a lone loop op
        is a group of one, as in `node`)."""
        if n.op == "fused":
            return n.attrs["body"], [i for i in n.inputs]
        ins = [i for i in n.inputs if isinstance(i, Node)]
        b_inputs = [Node("input", (), {}, tuple(i.shape), i.dtype) for i in ins]
        it = iter(b_inputs)
        b_ins = tuple(next(it) if isinstance(i, Node) else i for i in n.inputs)
        bn = Node(n.op, b_ins, n.attrs, tuple(n.shape), n.dtype)
        return Graph(b_inputs, [bn], [bn]), ins

    def body_env(self, body: Graph, ins: list, scalars: dict) -> tuple[dict, dict]:
        """A body's array names (``env``) and the symbols its inputs already have as
        scalars of the current iteration (``scalars``: top-level node id -> symbol)."""
        env: dict = {}
        sym: dict = {}
        for b, i in zip(body.inputs, ins):
            if id(i) in scalars:
                sym[id(b)] = scalars[id(i)]
            else:
                env[id(b)] = self.var[id(i)]
        for m in body.nodes:
            if m.op == "const":
                env[id(m)] = f"c{len(self.consts)}"
                self.consts.append(np.ascontiguousarray(m.attrs["value"]).reshape(ishape(m)))
        return env, sym

    def cluster(self, r: Node, producers: list[Node], siblings: list[Node]) -> None:
        """The reduction ``r`` with its producers computed as scalars in its loop and its
        siblings computed and stored there too (see `plan_clusters`)."""
        for m in producers:
            self.comment(m)
        shape = ishape(siblings[0]) if siblings else ishape(producers[0])
        stores = []
        for s in siblings:
            target = self.target.get(id(s))
            out = f"v{self.ir_names[id(s)][1:]}"
            if target is None:
                self.emit(f"{out} = np.empty({shape}, {np_dtype(s.dtype)})")
                target = out
            else:
                self.filled.add(id(s))
            stores.append((s, out, target))
        scalars: dict[int, str] = {}
        r_body, r_ins = self.body_of(r)

        def pre(idx: list, sym: dict, indent: int) -> None:
            scalars.clear()
            for p in producers:
                body, ins = self.body_of(p)
                env, local = self.body_env(body, ins, scalars)
                members = [m for m in body.nodes if m.op != "const"]
                self.scalar_lines(members, env, shape, idx, local, indent, set())
                scalars[id(p)] = local[id(body.outputs[0])]
            for b, i in zip(r_body.inputs, r_ins):
                if id(i) in scalars:
                    sym[id(b)] = scalars[id(i)]

        emitted = []

        def post(idx: list, sym: dict, indent: int) -> None:
            emitted.append(indent)
            for s, _, target in stores:
                body, ins = self.body_of(s)
                env, local = self.body_env(body, ins, scalars)
                members = [m for m in body.nodes if m.op != "const"]
                self.scalar_lines(members, env, shape, idx, local, indent, set())
                scalars[id(s)] = local[id(body.outputs[0])]
                self.emit(f"{target}[{', '.join(idx)}] = {scalars[id(s)]}", indent)

        self.comment(r)
        out = f"v{self.ir_names[id(r)][1:]}"
        self.into = into = self.target.get(id(r))
        # The producers have no arrays: ``pre`` gives them to the body as scalars.
        env, _ = self.body_env(r_body, r_ins, {id(p): None for p in producers})
        members = [m for m in r_body.nodes if m.op != "const"]
        self.reduce_group(members, r_body.outputs[0], env, out, pre, post)
        if len(emitted) != 2:  # the blocked loop and the tail: anything else drops work
            raise LoweringError(f"internal: the cluster of {self.ir_names[id(r)]} was not "
                                "emitted as a lane reduction")
        self.var[id(r)] = out
        self.node_of[out] = r
        if into is not None and self.into is None:
            self.filled.add(id(r))
        self.into = None
        for s, out, target in stores:
            self.comment(s)
            if target != out:
                self.emit(f"{out} = {target}")
            self.var[id(s)] = out
            self.node_of[out] = s

    def loop_value(self, n: Node) -> bool:
        """``n`` is computed by one loop nest over its own shape (an elementwise group)."""
        if n.op == "fused":
            return n.attrs.get("kind", "elementwise") == "elementwise"
        op = OPS.get(n.op)
        return op is not None and op.loop_fusible and not op.reduction

    def direct(self, n: Node) -> bool:
        """``n``'s array is allocated by its own loop, reduction or product, so that loop
        can write into an output buffer instead."""
        if n.op == "fused":
            return True
        op = OPS.get(n.op)
        if op is None:
            return False
        return ((op.loop_fusible and not op.view) or op.reduction is not None
                or op.contraction or self.fills_own(n))

    @staticmethod
    def fills_own(n: Node) -> bool:
        """``n``'s kernel lowering allocates its result first, of its own shape and dtype,
        and only fills it: it can fill a buffer it is given instead."""
        if n.op in lowerings.NOT_LOWERABLE or n.op not in lowerings.LOWER:
            return False
        args = [lowerings.Arg(kir.Buffer(f"x{k}", ishape(i), i.dtype, kir.ARG, "A"))
                if isinstance(i, Node) else _py(i) for k, i in enumerate(n.inputs)]
        try:
            built = lowerings.kernel_lowering(n.op)(n, args, "probe")
        except Exception:  # noqa: BLE001 - a lowering that rejects the node says no
            return False
        if isinstance(built, kir.Block):
            return built.result is not None and built.fills(built.result) and (
                built.result.shape == ishape(n) and built.result.dtype == n.dtype)
        return _Writer.allocates_and_fills(built, "probe", n)

    @staticmethod
    def allocates_and_fills(lines: list[str], out: str, n: Node) -> bool:
        """``lines`` first allocate ``out`` with ``n``'s shape and dtype and never rebind it."""
        return (bool(lines) and lines[0] == f"{out} = np.empty({ishape(n)}, {np_dtype(n.dtype)})"
                and not any(line.startswith(f"{out} = ") for line in lines[1:]))

    @staticmethod
    def fresh_result(n: Node) -> bool:
        """``n``'s array is new memory (never an alias of an input's)."""
        if n.op == "fused":
            return True
        op = OPS.get(n.op)
        return op is not None and not op.view and (
            op.loop_fusible or op.reduction is not None or op.contraction)

    def fresh_value(self, n: Node) -> bool:
        """Whether ``n``'s array is allocated by this kernel (not an input or a view)."""
        if n.op == "input":
            return False
        op = OPS.get(n.op)
        return not (op is not None and op.view)

    def node(self, n: Node) -> None:
        out = f"v{self.ir_names[id(n)][1:]}"
        self.into = into = self.target.get(id(n))
        if n.op == "fused":
            body = n.attrs["body"]
            args = [self.var[id(i)] for i in n.inputs]
            self.comment(n)
            self.group(body, args, out, n.attrs.get("kind", "elementwise"))
        else:
            op = OPS.get(n.op)
            if op is None or op.name in lowerings.NOT_LOWERABLE:
                raise missing(n.op)
            self.comment(n)
            ins = [i for i in n.inputs]
            if op.loop_fusible or op.reduction or op.contraction_bias:
                body, tops = self.body_of(n)  # a lone loop op is a group of one
                args = [self.var[id(i)] for i in tops]
                # A lone addmm is a matmul group without an epilogue: its bias is added
                # by a loop, not by an array expression (which costs Numba more to compile).
                kind = ("reduce" if op.reduction else "matmul" if op.contraction_bias
                        else "elementwise")
                self.group(body, args, out, kind)
            else:
                args = [self.arg(i) if isinstance(i, Node) else _py(i) for i in ins]
                built = lowerings.kernel_lowering(n.op)(n, args, out)
                if isinstance(built, kir.Block):
                    self.emit_block(self.schedule(built, op.contraction))
                else:
                    for line in self.into_buffer(built, out, n):
                        self.emit(line)
        self.var[id(n)] = out
        self.node_of[out] = n
        if into is not None and self.into is None:  # the lowering used the buffer
            self.filled.add(id(n))
        self.into = None

    def arg(self, n: Node, var: str | None = None) -> lowerings.Arg:
        """Value ``n`` (held in ``var``, by default its variable) as a lowering's operand."""
        var = var or self.var[id(n)]
        return lowerings.Arg(kir.Buffer(var, ishape(n), n.dtype, kir.ARG, self.layout(n)))

    def layout(self, n: Node | None) -> str:
        """What this kernel knows of ``n``'s array layout: "C" for an array it allocates
        (or an output buffer), "F" for a 2-D transposed view, else "A" (an argument's
        layout is known only when Numba types the kernel)."""
        if n is None or n.op == "input":
            return "A"
        op = OPS.get(n.op)
        if (op is not None and op.view and len(n.shape) == 2
                and tuple(n.attrs.get("axes", ())) == (1, 0)):
            # The transpose of a C array, or of an argument (C-ordered but for a caller's
            # strided view): only "C" promises a layout the printer relies on.
            base = n.inputs[0]
            return "F" if isinstance(base, Node) and self.layout(base) in "CA" else "A"
        written = self.target.get(id(n), "o").startswith("a")
        return "C" if self.fresh_result(n) and not written else "A"

    def schedule(self, block: kir.Block, product: bool) -> kir.Block:
        """A built block with the buffer plan applied: written into ``self.into`` where it
        only fills its result, else (a lone product) transposed where that packs faster."""
        if self.into is not None:
            res = block.result
            target = kir.Buffer(self.into, res.shape, res.dtype, kir.OUT)
            placed = schedule.write_into(block, target)
            if placed is not None:
                self.into = None
                return placed
            return block
        if product:
            return schedule.swap_product(block) or block
        return block

    def emit_block(self, block: kir.Block) -> None:
        """Print a kernel IR block at the function's top level; its top-level allocations
        become work arrays the caller passes."""
        kir.verify(block, self.block_params(block))
        for line in printer.block_lines(block, 1, work=self.work_array):
            self.lines.append(line)

    def block_params(self, block: kir.Block) -> list:
        """The buffers a block reads without defining them (its operands)."""
        defined = {s.buf.name for s in kir.walk(block.stmts)
                   if isinstance(s, (kir.Alloc, kir.View))}
        seen: dict = {}

        def note(b: kir.Buffer) -> None:
            if b.name not in defined:
                seen[b.name] = b

        for s in kir.walk(block.stmts):
            for e in kir.exprs_of(s):
                for x in kir.subexprs(e):
                    if isinstance(x, kir.Load):
                        note(x.buf)
            if isinstance(s, kir.View):
                note(s.base)
            elif isinstance(s, kir.Store):
                note(s.buf)
            elif isinstance(s, kir.Gemm):
                for o in (s.a, s.b, s.c):
                    note(o.buf)
            elif isinstance(s, kir.LibCall):
                for b in s.args + s.outs:
                    if isinstance(b, kir.Buffer):
                        note(b)
        return list(seen.values())

    def work_array(self, buf: kir.Buffer) -> str:
        """A work array for a top-level allocation of ``buf`` (see `work`)."""
        self.scratch.append((tuple(buf.shape) or (1,), np.dtype(buf.dtype)))
        return f"w{len(self.scratch) - 1}"

    def into_buffer(self, lines: list[str], out: str, n: Node | None = None) -> list[str]:
        """A product that BLAS writes into a new array, or a lowering that allocates its
        result and fills it (`fills_own`), writes into ``self.into`` instead; any other
        lowering keeps its own array (copied into the output at the end)."""
        if self.into is None:
            return lines
        own = n is not None and self.allocates_and_fills(lines, out, n)
        if not own and not self.gemm_line(lines, out):
            return lines
        into, self.into = self.into, None
        return [f"{out} = {into}"] + lines[1:]

    @staticmethod
    def gemm_line(lines: list[str], out: str) -> bool:
        """The lowering allocates the product's array first and BLAS fills it."""
        return (lines[0].startswith(f"{out} = np.empty(")
                and any(line.startswith("dgb.gemm_call(") for line in lines))

    # ------------------------------------------------------------- fused groups
    def group(self, body: Graph, args: list[str], out: str, kind: str) -> None:
        env = {id(b): a for b, a in zip(body.inputs, args)}
        root = body.outputs[0]
        members = [m for m in body.nodes if m.op != "const"]
        for m in body.nodes:
            if m.op == "const":
                name = f"c{len(self.consts)}"
                self.consts.append(np.ascontiguousarray(m.attrs["value"]).reshape(ishape(m)))
                env[id(m)] = name
        if kind == "matmul":
            anchor = next(m for m in members if OPS[m.op].contraction)
            self.matmul_group(body, members, anchor, env, out)
        elif kind == "reduce":
            self.reduce_group(members, root, env, out)
        else:
            self.loop_group(members, root, env, out, ishape(root))

    def scalar_lines(self, members: list[Node], env: dict, loop_shape: tuple,
                     idx: list[str], sym: dict, indent: int, skip: set) -> None:
        """Scalar statements for ``members`` at loop index ``idx`` over ``loop_shape``."""
        for m in members:
            if id(m) in skip:
                continue
            vals = []
            for i in m.inputs:
                if not isinstance(i, Node):
                    # A literal takes the node's dtype; a comparison's (bool) result says
                    # nothing about its operands, so there it takes their common dtype
                    # (`i64 < 2.5` compares with 2.5, not with int64(2.5) == 2).
                    ref = m.dtype
                    if ref == np.bool_:
                        ref = result_dtype(*m.inputs)
                    vals.append(_typed(i, ref))
                elif id(i) in sym:
                    vals.append(sym[id(i)])
                else:
                    vals.append(f"{env[id(i)]}[{self.index(i, loop_shape, idx)}]")
            s = self.fresh("s")
            tmpl = lowerings.scalar_template(m.op)
            if m.dtype.kind == "f":
                consts = {k: _typed(v, m.dtype) for k, v in (("zero", 0), ("one", 1),
                                                              ("half", 0.5))}
            else:
                consts = {"zero": "0", "one": "1", "half": "0.5"}
            expr = tmpl.format(*vals, **consts, **MATH[m.dtype == np.float32])
            # The scalar must have its node's dtype, as the NumPy kernel's result has. The
            # cast is left out where Numba's typing already gives that dtype (operands of
            # the node's dtype, typed literals, no ** whose exponent may widen it): every
            # cast is a call Numba has to type, and compile time is a product cost.
            same = all(x.dtype == m.dtype for x in m.inputs if isinstance(x, Node))
            if tmpl == "{0}":  # identity (astype, broadcast): cast when the dtype changes
                if not same:
                    expr = f"bool({expr})" if m.dtype == np.bool_ else (
                        f"{np_dtype(m.dtype)}({expr})")
            elif m.dtype != np.bool_ and (not same or "**" in tmpl or m.dtype.kind != "f"):
                expr = f"{np_dtype(m.dtype)}({expr})"
            self.emit(f"{s} = {expr}  # {m.op}", indent)
            sym[id(m)] = s

    def value(self, n: Node, sym: dict, env: dict, shape: tuple, idx: list[str]) -> str:
        """``n`` at the current loop index: a scalar computed in the loop, or a load."""
        return sym[id(n)] if id(n) in sym else f"{env[id(n)]}[{self.index(n, shape, idx)}]"

    @staticmethod
    def index(n: Node, loop_shape: tuple, idx: list[str]) -> str:
        shape = ishape(n)
        if not n.shape:
            return "0"
        lead = len(loop_shape) - len(shape)
        return ", ".join(idx[lead + j] if d == loop_shape[lead + j] and d != 1 else "0"
                         for j, d in enumerate(shape))

    def loops(self, shape: tuple, indent: int, parallel_ok: bool = True,
              reverse: bool = False) -> tuple[list, int]:
        """Loop headers over ``shape``: the index names and the indent inside. A size-1
        dim gets index 0, not a loop (a loop is Numba compile time). ``reverse``: the
        last dim outermost (an F-ordered array's own order)."""
        idx = ["0" if d == 1 else f"i{k}" for k, d in enumerate(shape)]
        order = list(range(len(shape)))[::-1] if reverse else list(range(len(shape)))
        for k in order:
            d = shape[k]
            i = f"i{k}"
            if d == 1:
                continue
            rng = "range"
            big = math.prod(shape) >= PARALLEL_MIN_SIZE
            if k == order[0] and self.parallel and parallel_ok and big:
                rng = "numba.prange"
            self.emit(f"for {i} in {rng}({d}):", indent)
            indent += 1
        return idx, indent

    def fill(self, name: str, shape: tuple, value: str, dtype: np.dtype) -> None:
        """``name = np.full(shape, value, dtype)`` as a work array and a fill loop."""
        self.emit(f"{name} = np.empty({shape}, {np_dtype(dtype)})")
        idx, indent = self.loops(shape, 1, parallel_ok=False)
        self.emit(f"{name}[{', '.join(idx)}] = {value}", indent)

    def loop_group(self, members: list[Node], root: Node, env: dict, out: str,
                   shape: tuple, target: str | None = None, skip: set | None = None,
                   sym: dict | None = None) -> None:
        if target is None and self.into is not None:
            target, self.into = self.into, None
        if target is None:
            self.emit(f"{out} = np.empty({shape}, {np_dtype(root.dtype)})")
            target = out
        idx, indent = self.loops(shape, 1)
        sym = dict(sym or {})
        self.scalar_lines(members, env, shape, idx, sym, indent, skip or set())
        self.emit(f"{target}[{', '.join(idx)}] = {sym[id(root)]}", indent)
        if target != out:
            self.emit(f"{out} = {target}")

    def matmul_group(self, body: Graph, members: list[Node], anchor: Node, env: dict,
                     out: str) -> None:
        op = OPS[anchor.op]
        ins = [env[id(i)] if isinstance(i, Node) else _py(i) for i in anchor.inputs]
        mm = self.fresh("mm")
        root = body.outputs[0]
        shape = ishape(root)
        # Each element is read before it is overwritten, so the epilogue reuses the
        # product's buffer when shapes and dtypes agree.
        in_place = tuple(anchor.shape) == tuple(root.shape) and anchor.dtype == root.dtype
        into, self.into = self.into, None
        if not in_place:
            # The epilogue loop writes the output buffer; the product gets its own.
            self.into, into = into, None
        args = [lowerings.Arg(kir.Buffer(v, ishape(i), i.dtype, kir.ARG,
                                         self.layout(self.node_of.get(v))))
                if isinstance(i, Node) else v for i, v in zip(anchor.inputs, ins)]
        if op.contraction_bias:
            # The bias is part of the epilogue loop: BLAS computes only the product.
            prod = lowerings.addmm_product(anchor)
            block = lowerings.matmul_block(prod, args[1:], mm)
            bias = anchor.inputs[0]
            bias_ref = f"{ins[0]}[{{}}]"
        else:
            block = lowerings.kernel_lowering(anchor.op)(anchor, args, mm)
            bias, bias_ref = None, None
        epilogue_target, self.into = self.into, into
        block = self.schedule(block, product=into is None)
        if into is not None and self.into is not None:
            # The product keeps its own array; the epilogue writes the output buffer.
            in_place = False
        elif into is None:
            self.into = epilogue_target
        swapped = block.result.layout == "F"
        self.emit_block(block)
        if not in_place:
            if self.into is not None:
                target, self.into = self.into, None
            else:
                self.emit(f"{out} = np.empty({shape}, {np_dtype(root.dtype)})")
                target = out
        else:
            target = mm
        # A transposed product is read and written down its columns: its own order.
        idx, indent = self.loops(shape, 1, reverse=swapped and in_place)
        sym: dict = {}
        mm_at = f"{mm}[{self.index(anchor, shape, idx)}]"
        if bias is not None:
            sym[id(anchor)] = self.fresh("s")
            self.emit(f"{sym[id(anchor)]} = {np_dtype(anchor.dtype)}("
                      f"{mm_at} + {bias_ref.format(self.index(bias, shape, idx))})", indent)
        else:
            sym[id(anchor)] = mm_at
        self.scalar_lines(members, env, shape, idx, sym, indent, {id(anchor)})
        self.emit(f"{target}[{', '.join(idx)}] = {sym[id(root)]}", indent)
        if target != out:
            self.emit(f"{out} = {target}")

    def reduce_group(self, members: list[Node], root: Node, env: dict, out: str,
                     pre=None, post=None) -> None:
        """A reduction group; ``pre(idx, sym, indent)`` and ``post(idx, sym, indent)``
        (a `cluster`'s producers and siblings) emit more work into each iteration of a
        whole-array lane reduction, before and after the reduced value."""
        src = root.inputs[0]
        shape = ishape(src)
        axis = root.attrs["axis"]
        nd = len(src.shape)
        axes = tuple(range(nd)) if axis is None else axis
        spec = OPS[root.op].reduction
        combine = _Fold(lowerings.combine_of(OPS[root.op]), spec.nan_propagates)
        acc_t = combine.how.accumulator(root.dtype)
        count = math.prod(src.shape[a] for a in axes) if nd else 1
        init = identity_literal(spec.identity(acc_t))
        body = [m for m in members if m is not root]
        outer = [d for d in range(nd) if d not in axes]
        suffix = all(a > o for a in axes for o in outer)  # reduce over trailing dims
        if not nd:
            outer, suffix = [], True
        keep = tuple(1 if d in axes else shape[d] for d in range(nd)) or (1,)
        out_shape = ishape(root)
        keepdims = bool(root.attrs.get("keepdims")) and nd > 0
        # The result's index for an outer index (reduced dims read 0 when kept).
        expected = keep if keepdims else (tuple(shape[d] for d in outer) or (1,))
        scale = (1.0 / count if count else math.nan) if spec.finalize == "mean" else None
        into, self.into = self.into, None
        val = None
        if suffix and expected == out_shape:
            # A scalar accumulator per outer index, stored once, cast to the result's
            # dtype and scaled (a mean) as it is stored: the hot loop touches no memory
            # but its inputs, and no array-wide astype/reshape follows (each costs Numba
            # as much to compile as a loop).
            outer_shape = tuple(shape[d] for d in outer)
            res = into or self.fresh("r")
            if into is None:
                self.emit(f"{res} = np.empty({out_shape}, {np_dtype(root.dtype)})")
            oidx, indent = self.loops(outer_shape, 1) if outer_shape else ([], 1)
            # The store goes after the inner loops, at the outer loops' body: a size-1 outer
            # dim has no loop, so the indent is not 1 + len(oidx).
            store_at = indent
            acc = self.fresh("acc")
            self.emit(f"{acc} = {np_dtype(acc_t)}({init})", indent)
            inner_shape = tuple(shape[d] for d in range(len(outer), nd))
            if len(inner_shape) == 1 and inner_shape[0] >= 4 * LANES:
                self._lane_reduce(body, env, shape, oidx, inner_shape[0], acc, acc_t,
                                  combine, init, src, indent, pre, post)
            else:
                iidx = []
                for k, d in enumerate(inner_shape):
                    i = f"i{len(outer) + k}"
                    if d == 1:
                        iidx.append("0")
                        continue
                    self.emit(f"for {i} in range({d}):", indent)
                    iidx.append(i)
                    indent += 1
                idx = oidx + iidx if nd else ["0"]
                sym: dict = {}
                self.scalar_lines(body, env, shape, idx, sym, indent, set())
                val = self.value(src, sym, env, shape, idx)
                self._combine(acc, val, combine, acc_t, indent)
            if keepdims:
                it = iter(oidx)
                ridx = ", ".join(next(it) if d in outer else "0" for d in range(nd))
            else:
                ridx = ", ".join(oidx) if oidx else "0"
            self.emit(f"{res}[{ridx}] = {self._store(acc, acc_t, root.dtype, scale)}",
                      store_at)
            if res != out:
                self.emit(f"{out} = {res}")
            return
        else:
            acc = self.fresh("acc")
            self.fill(acc, keep, f"{np_dtype(acc_t)}({init})", acc_t)
            idx, indent = self.loops(shape, 1, parallel_ok=False)
            sym = {}
            self.scalar_lines(body, env, shape, idx, sym, indent, set())
            val = self.value(src, sym, env, shape, idx)
            ridx = ", ".join("0" if d in axes else idx[d] for d in range(nd))
            self._combine(f"{acc}[{ridx}]", val, combine, acc_t, indent)
            final = acc
        if scale is None and acc_t == root.dtype and keep == out_shape and into is None:
            self.emit(f"{out} = {final}")
            return
        # Store the accumulators cast (and scaled) into the result's array, in one loop.
        res = into or self.fresh("r")
        if into is None:
            self.emit(f"{res} = np.empty({out_shape}, {np_dtype(root.dtype)})")
        kidx, indent = self.loops(keep, 1, parallel_ok=False)
        if keepdims or not nd:
            ridx = ", ".join(kidx)
        else:
            ridx = ", ".join(kidx[d] for d in outer) or "0"
        src_at = f"{final}[{', '.join(kidx)}]"
        self.emit(f"{res}[{ridx}] = {self._store(src_at, acc_t, root.dtype, scale)}", indent)
        if res != out:
            self.emit(f"{out} = {res}")

    @staticmethod
    def _store(acc: str, acc_t: np.dtype, dtype: np.dtype, scale: float | None) -> str:
        """An accumulator as a value of the result's dtype (a mean scaled first: an empty
        mean is 0/0, nan, like NumPy's)."""
        if scale is not None:
            acc = f"{acc} * {_py(scale)}"
        if acc_t == dtype and scale is None:
            return acc
        return f"bool({acc})" if dtype == np.bool_ else f"{np_dtype(dtype)}({acc})"

    def _lane_reduce(self, body: list, env: dict, shape: tuple, oidx: list, n: int, acc: str,
                     acc_t: np.dtype, combine: _Fold, init: str, src: Node,
                     indent: int, pre=None, post=None) -> None:
        """Reduce a long innermost axis with LANES independent accumulators.

        A single accumulator is a loop-carried dependency that LLVM may not vectorize
        without reassociating (which would also license it to reorder the math of the
        fast exp/tanh); independent lanes vectorize as they are, and summing LANES
        partial sums is also more accurate.
        """
        if not oidx and self.parallel and n >= PARALLEL_MIN_SIZE:
            self._parallel_lane_reduce(body, env, shape, n, acc, acc_t, combine, init, src,
                                       indent, pre, post)
            return
        lanes = self.fresh("lanes")
        i = f"i{len(oidx)}"
        # One work array for every row's lanes: an np.full here would allocate per row.
        self.emit(f"{lanes} = {self.work(str(LANES), np_dtype(acc_t))}", indent)
        self.emit(f"for {i}l in range({LANES}):", indent)
        self.emit(f"{lanes}[{i}l] = {np_dtype(acc_t)}({init})", indent + 1)
        if (combine.how.better is None and combine.how.update == "+" and acc_t == np.float64
                and np.dtype(src.dtype) == np.float32):
            self._fold_blocks(body, env, shape, oidx, n, lanes, src, indent, pre, post)
        else:
            self._lane_blocks(body, env, shape, oidx, n, lanes, combine, acc_t, src, indent,
                              pre, post)
        self.emit(f"for {i} in range({n // LANES * LANES}, {n}):", indent)
        idx = oidx + [i]
        self._element(body, env, shape, idx, src, f"{lanes}[0]", combine, acc_t, indent + 1,
                      pre, post)
        self.emit(f"for {i}l in range({LANES}):", indent)
        self._combine(acc, f"{lanes}[{i}l]", combine, acc_t, indent + 1)

    def _element(self, body: list, env: dict, shape: tuple, idx: list, src: Node, into: str,
                 combine: _Fold | None, acc_t: np.dtype, indent: int, pre=None,
                 post=None) -> None:
        """One element of a reduction's loop: a cluster's producers (``pre``), the reduced
        value combined into ``into`` (stored there when ``combine`` is None), then the
        cluster's siblings (``post``)."""
        sym: dict = {}
        if pre is not None:
            pre(idx, sym, indent)
        self.scalar_lines(body, env, shape, idx, sym, indent, set())
        value = self.value(src, sym, env, shape, idx)
        if combine is None:
            self.emit(f"{into} = {value}", indent)
        else:
            self._combine(into, value, combine, acc_t, indent)
        if post is not None:
            post(idx, sym, indent)

    def _lane_blocks(self, body: list, env: dict, shape: tuple, oidx: list, n: int,
                     lanes: str, combine: _Fold, acc_t: np.dtype, src: Node,
                     indent: int, pre=None, post=None) -> None:
        """The whole blocks of LANES values, each value combined into its lane."""
        i = f"i{len(oidx)}"
        self.emit(f"for {i}b in range({n // LANES}):", indent)
        self.emit(f"for {i}l in range({LANES}):", indent + 1)
        self.emit(f"{i} = {i}b * {LANES} + {i}l", indent + 2)
        self._element(body, env, shape, oidx + [i], src, f"{lanes}[{i}l]", combine, acc_t,
                      indent + 2, pre, post)

    def _fold_blocks(self, body: list, env: dict, shape: tuple, oidx: list, n: int,
                     lanes: str, src: Node, indent: int, pre=None, post=None) -> None:
        """`_lane_blocks` for a float32 sum: the loop stores its values in a buffer, one
        block at a time, and `dgk.fold_lanes` adds them to the lanes in the same order.
        The loop then vectorizes like an elementwise one, and the lanes stay in registers
        during the fold."""
        i = f"i{len(oidx)}"
        whole = n // LANES * LANES
        block = fold_block(whole)
        buf = self.fresh("buf")
        self.emit(f"{buf} = {self.work(str(block), 'np.float32')}", indent)
        self.emit(f"for {i}c in range({whole // block}):", indent)
        self.emit(f"for {i}k in range({block}):", indent + 1)
        self.emit(f"{i} = {i}c * {block} + {i}k", indent + 2)
        self._element(body, env, shape, oidx + [i], src, f"{buf}[{i}k]", None, np.float32,
                      indent + 2, pre, post)
        self.emit(f"dgk.fold_lanes({lanes}, {buf}, {block})", indent + 1)

    def _parallel_lane_reduce(self, body: list, env: dict, shape: tuple, n: int, acc: str,
                              acc_t: np.dtype, combine: _Fold, init: str, src: Node,
                              indent: int, pre=None, post=None) -> None:
        """`_lane_reduce` of a whole array over a ``numba.prange`` of CHUNKS chunks: each
        chunk folds its blocks into its own row of LANES partials (no two threads write
        the same cell), then the partials are folded in order. The order of the fold does
        not depend on the number of threads, so the result does not either."""
        parts = self.fresh("parts")
        blocks = n // LANES
        chunks = min(CHUNKS, blocks)
        per = -(-blocks // chunks)
        self.emit(f"{parts} = {self.work(str((chunks, LANES)), np_dtype(acc_t))}", indent)
        self.emit(f"for i0c in numba.prange({chunks}):", indent)
        self.emit(f"for i0l in range({LANES}):", indent + 1)
        self.emit(f"{parts}[i0c, i0l] = {np_dtype(acc_t)}({init})", indent + 2)
        self.emit(f"for i0b in range(i0c * {per}, min(i0c * {per} + {per}, {blocks})):",
                  indent + 1)
        self.emit(f"for i0l in range({LANES}):", indent + 2)
        self.emit(f"i0 = i0b * {LANES} + i0l", indent + 3)
        self._element(body, env, shape, ["i0"], src, f"{parts}[i0c, i0l]", combine, acc_t,
                      indent + 3, pre, post)
        self.emit(f"for i0 in range({blocks * LANES}, {n}):", indent)
        self._element(body, env, shape, ["i0"], src, acc, combine, acc_t, indent + 1, pre, post)
        self.emit(f"for i0c in range({chunks}):", indent)
        self.emit(f"for i0l in range({LANES}):", indent + 1)
        self._combine(acc, f"{parts}[i0c, i0l]", combine, acc_t, indent + 2)

    def _combine(self, acc: str, val: str, combine: _Fold, acc_t: np.dtype,
                 indent: int) -> None:
        better = combine.how.better
        if better is None:  # a sum or product: nan propagates through the arithmetic
            self.emit(f"{acc} {combine.how.update}= {np_dtype(acc_t)}({val})", indent)
            return
        tmp = self.fresh("m")
        self.emit(f"{tmp} = {val}", indent)
        # A comparison is false against nan: where nan must win (np.max), test for it.
        nan = f" or {tmp} != {tmp}" if combine.nan_propagates else ""
        self.emit(f"if {tmp} {better} {acc}{nan}:", indent)
        self.emit(f"    {acc} = {tmp}", indent)


def lower(graph: Graph, name: str = "kernel", parallel: bool = False,
          write_to: dict[int, int] | None = None) -> Lowered:
    """Generate the source of one njit function computing ``graph``.

    The function takes the inputs, the constants, then one output buffer per output that
    is not in ``write_to`` (output index -> input index whose array receives it in place).
    """
    return _Writer(graph, name, parallel, write_to).run()
