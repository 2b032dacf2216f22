"""Lower an optimized `Graph` to one ``numba.njit`` function, through the kernel IR.

Each top-level node becomes kernel IR statements (`backend/kir.py`), appended in program
order to one list: fused groups become one loop nest, each member a scalar `kir.Let`
(`lowerings.scalar_expr`); broadcasting is index arithmetic (a dimension of size 1 reads
index 0), never a materialized copy. Reductions fold with their op's `Reduction` spec
(`kir.Accum`) and accumulate in float64 (float32 input) so long sums stay accurate;
matmuls go to BLAS (`kir.Gemm`) with the fused epilogue applied in one pass over the
result. Every other op's block comes from its ``@lowers`` builder. The buffer plan
(results written straight into outputs, in-place updates), the GEMM layout (`schedule`)
and loop merging (`loops`) are decided on those blocks; the list is printed once, at the
end (`printer.function`), with the graph line as a comment above each node's statements.

Values are stored as arrays; a 0-d value is indexed as shape ``(1,)``, which keeps every
loop and index uniform. A kernel whose operands are all 0-d (`ir.graph.zero_d_operands`)
takes and fills 0-d arrays and views each as ``(1,)`` inside (`kernels.one_d`); any other
kernel takes and fills its 0-d values as ``(1,)`` arrays.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...ir.graph import Graph, Node, zero_d_operands
from ...ops.registry import OPS
from .. import kir, loops, schedule
from . import lowerings, printer
from .lowerings import LoweringError, ishape, missing, np_dtype

# The ops of the one pattern `plan_joins` rewrites, by the part each plays: a batched
# product whose heads are merged back (transpose, reshape), copied into a concatenation
# (``+ 0.0``). A fact about this backend's batched-product lowering (it can write a
# strided result), so a table of the backend's, not a registry trait.
_JOIN_ROLE = {"matmul": "product", "transpose": "merge_heads", "reshape": "merge_shape",
              "add": "copy", "concatenate": "join"}


def _join_role(n: object) -> str | None:
    return _JOIN_ROLE.get(n.op) if isinstance(n, Node) else None

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


# A work array of at most this many bytes is allocated by the kernel at each call rather
# than passed in: each array argument costs the call an unboxing and a reference record
# (Numba's NRT) that cost more than a small allocation in compiled code, and a call of a
# small kernel is mostly its arguments.
LOCAL_WORK_BYTES = 4096


def _small(buf: kir.Buffer, keep: int) -> bool:
    """Whether ``buf`` holds at most `LOCAL_WORK_BYTES` and every extent of it is one the
    code prints as a literal (at most ``keep``): a size read from the arguments must not
    decide whether the kernel allocates, or kernels that differ only in their shapes (a
    recurrent step at two sequence lengths) would no longer print the same code."""
    return (all(d <= keep for d in buf.shape)
            and buf.size * np.dtype(buf.dtype).itemsize <= LOCAL_WORK_BYTES)


def fold_block(whole: int) -> int:
    """The buffer length for a sum of ``whole`` values (a multiple of LANES): the largest
    multiple of LANES up to FOLD_BLOCK that divides it, so that every block has the same
    literal length and there is no partial block to write a loop for."""
    for block in range(FOLD_BLOCK, 0, -LANES):
        if whole % block == 0:
            return block
    return LANES


def chunking(blocks: int) -> tuple[int, int]:
    """(chunks, blocks of LANES values per chunk) of a parallel whole-array reduction over
    ``blocks`` blocks: at most CHUNKS chunks, and when chunks are longer than one fold
    buffer, a whole number of full buffers each (1e6 values in 64 chunks of 977 blocks
    had 16-value buffers, 977 being prime)."""
    chunks = min(CHUNKS, blocks)
    per = -(-blocks // chunks)
    unit = FOLD_BLOCK // LANES
    if per > unit:
        per = -(-per // unit) * unit
        chunks = -(-blocks // per)
    return chunks, per


@dataclass(frozen=True)
class _Fold:
    """A reduction's combine: the backend's `Combine` and the `Reduction` spec's name."""

    how: lowerings.Combine
    nan_propagates: bool
    name: str


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
    # buffer per call (but for small ones, which cost a call less than an argument does:
    # `LOCAL_WORK_BYTES`).
    scratch: list = field(default_factory=list)
    # The scheduled kernel IR the source was printed from: top-level statements over the
    # parameters ``a{k}`` (inputs), ``c{k}`` (constants) and ``o{k}`` (outputs); its
    # top-level allocations are the work arrays.
    ir: list = field(default_factory=list)
    # The function as the compiled module holds it: ``source`` with each graph-line
    # comment reduced to the node's name. Sizes are read from the arguments
    # (`printer.Sizes`), so kernels that differ only in their shapes have the same code,
    # one module and one compiled function.
    code: str = ""


Stmts = list
Pre = Callable[[list, dict], list]


class _Writer:
    def __init__(self, graph: Graph, name: str, parallel: bool,
                 write_to: dict[int, int] | None = None,
                 keep: int = printer.KEEP_LITERAL) -> None:
        self.graph = graph
        self.keep = keep
        self.write_to = write_to or {}
        self.name = name
        self.parallel = parallel
        self.stmts: list = []  # the kernel's top-level statements, in program order
        self.var: dict[int, str] = {}
        self.bufs: dict[str, kir.Buffer] = {}  # variable -> the buffer it names
        # variable -> the layout the plan expects it to have (`layout`), where its buffer
        # says less ("A": an argument's transpose is F-ordered but for a strided view)
        self.planned: dict[str, str] = {}
        self.consts: list[np.ndarray] = []
        self.scratch: list[tuple] = []
        self.ir_names = graph.names()
        self.tmp = 0
        self.into: str | None = None  # the array the node being written must fill
        self.target: dict[int, str] = {}
        self.written: set[int] = set()
        self.filled: set[int] = set()  # nodes whose target (above) holds their value
        # `plan_joins`: concatenation id -> its pieces; product id -> (concatenation,
        # piece); concatenation id -> the buffer its products fill
        self.joins: dict[int, list] = {}
        self.join_of: dict[int, tuple] = {}
        self.join_buf: dict[int, kir.Buffer] = {}

    # ------------------------------------------------------------------ helpers
    def add(self, *stmts: object) -> None:
        self.stmts.extend(stmts)

    def comment(self, n: Node) -> None:
        text = self.graph.format_node(n, self.ir_names)
        self.add(kir.Comment(text, self.ir_names[id(n)]))

    def fresh(self, prefix: str = "t") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def define(self, buf: kir.Buffer) -> kir.Buffer:
        self.bufs[buf.name] = buf
        return buf

    def alloc(self, name: str, shape: tuple, dtype: np.dtype) -> kir.Buffer:
        """A new array at the top level (the printer makes it a work array)."""
        buf = self.define(kir.Buffer(name, shape, dtype))
        self.add(kir.Alloc(buf))
        return buf

    def alias(self, name: str, target: kir.Buffer) -> None:
        """``name`` is another name for ``target`` (a value written into an output)."""
        buf = self.define(kir.Buffer(name, target.shape, target.dtype, kir.VIEW,
                                     target.layout))
        self.add(kir.View(buf, target, "alias"))

    def const(self, value: np.ndarray, shape: tuple) -> str:
        name = f"c{len(self.consts)}"
        value = np.ascontiguousarray(value).reshape(shape)
        self.consts.append(value)
        self.define(kir.Buffer(name, shape, value.dtype, kir.ARG))
        return name

    # ------------------------------------------------------------------- driver
    def run(self) -> Lowered:
        params = []
        for k, n in enumerate(self.graph.inputs):
            self.var[id(n)] = f"a{k}"
            self.define(kir.Buffer(f"a{k}", ishape(n), n.dtype, kir.ARG, "A"))
            params.append(f"a{k}")
        for k, o in enumerate(self.graph.outputs):
            if k not in self.write_to:
                self.define(kir.Buffer(f"o{k}", ishape(o), o.dtype, kir.OUT))
        self.target, self.written = self.plan_targets()
        clusters = self.plan_clusters()
        inside = {id(m) for c in clusters.values() for m in c[0] + c[1]}
        folds = self.plan_batch_sums(inside)
        inside |= {id(f[0]) for f in folds.values()}
        self.joins = self.plan_joins(inside)
        for pieces in self.joins.values():
            inside |= {id(v) for _, chain, _ in pieces for v in chain}
        # Constants are parameters, bound before any statement: a cluster's sibling may
        # read one that stands after its reduction in program order (the seed of a
        # value-and-grad graph's backward).
        for n in self.graph.nodes:
            if n.op == "const":
                self.var[id(n)] = self.const(n.attrs["value"], ishape(n))
        for n in self.graph.nodes:
            if n.op == "const":
                continue
            if id(n) in clusters:
                self.cluster(n, *clusters[id(n)])
            elif id(n) in folds:
                self.batch_sum(n, *folds[id(n)])
            elif id(n) in self.join_of:
                self.join_product(n, *self.join_of[id(n)])
            elif id(n) in self.joins:
                self.join_done(n)
            elif id(n) not in inside:
                self.node(n)
        self.outputs()
        params += [f"c{k}" for k in range(len(self.consts))]
        outs = [f"o{k}" for k in range(len(self.graph.outputs)) if k not in self.write_to]
        kir.verify(self.stmts, [self.bufs[p] for p in params + outs])
        # Nests of three or more loops flattened before merging too: a merge joins nests
        # by their outer loop only, and the imperfect nest it leaves stays n-d (each
        # level and subscript typed and lowered apart), where flat loops of one length
        # still merge. A 2-D nest merged with its neighbours costs little more.
        # Only where the flat length is one the printer reads from an argument's shape.
        sizes = printer.Sizes([(p, self.bufs[p].shape) for p in params + outs], self.keep)
        stmts = loops.hoist_invariants(loops.merge_loops(
            loops.flatten_nests(schedule.share_subexpressions(schedule.hoist_allocations(
                lowerings.norm.column_sums(lowerings.norm.merge_layer_norm_grads(
                    self.stmts)))), depth=3,
                sized=lambda n: n <= self.keep or n in sizes.known),
            keep=folds_scalar))
        parts = None
        if self.parallel:
            from .blas_parallel import product_parts

            parts = product_parts()
            stmts = product_blocks(stmts, parts)
        stmts = loops.flatten_nests(stmts)
        code: list[str] = []
        lines, marks = printer.function(
            self.name, lambda: params + [f"w{k}" for k in range(len(self.scratch))] + outs,
            stmts, work=self.work_array, sizes=sizes, code=code, parts=parts,
            zero_d=self.zero_d_params())
        return Lowered("\n".join(lines), self.name, self.consts,
                       [tuple(o.shape) for o in self.graph.outputs], len(self.graph.inputs),
                       marks, self.scratch, stmts, "\n".join(code))

    def zero_d_params(self) -> tuple:
        """The inputs and outputs the caller passes as 0-d arrays: every one of a kernel
        whose operands are all 0-d, none of any other (those take ``(1,)`` arrays)."""
        if not zero_d_operands(self.graph):
            return ()
        return (tuple(f"a{k}" for k, n in enumerate(self.graph.inputs) if not n.shape)
                + tuple(f"o{k}" for k, o in enumerate(self.graph.outputs)
                        if not o.shape and k not in self.write_to))

    def outputs(self) -> None:
        """Results go into buffers the caller passes (o0, o1, ...), or straight into an
        input's array for in-place state (write_to: output -> input): returning arrays
        would cost a boxing step per array per call. Values not computed in place are
        copied there here."""
        outs = [self.var[id(o)] for o in self.graph.outputs]
        pending = [k for k, o in enumerate(self.graph.outputs)
                   if id(o) not in self.filled or self.target[id(o)] != (
                       f"a{self.write_to[k]}" if k in self.write_to else f"o{k}")]
        if pending:
            self.add(kir.Comment("outputs"))
        for k in pending:
            if k not in self.write_to:
                self.copy_loop(self.bufs[f"o{k}"], self.bufs[outs[k]])
        snapshot: dict[str, kir.Buffer] = {}
        for k in pending:
            o = self.graph.outputs[k]
            if k in self.write_to and not self.fresh_value(o) and outs[k] not in snapshot:
                # May alias an input that another write changes first: snapshot it.
                src = self.bufs[outs[k]]
                snapshot[outs[k]] = self.alloc(self.fresh(f"{outs[k]}_s"), src.shape,
                                               src.dtype)
                self.copy_loop(snapshot[outs[k]], src)
        for k in pending:
            if k in self.write_to:
                src = snapshot.get(outs[k]) or self.bufs[outs[k]]
                self.copy_loop(self.bufs[f"a{self.write_to[k]}"], src)

    def copy_loop(self, dst: kir.Buffer, src: kir.Buffer) -> None:
        """``dst[...] = src`` as an explicit loop: slice assignment makes Numba compile its
        generic broadcasting setitem for every distinct signature (~0.5 s each)."""
        idx, wrap = self.loops(dst.shape)
        self.add(*wrap([kir.Store(dst, tuple(idx), src[tuple(idx)])]))

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
        exist before the reduction (or cluster values; constants are parameters, so they
        do wherever they stand), and writing an array of its own.
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
                ins = [i for i in s.inputs if isinstance(i, Node) and i.op != "const"]
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

    def readers(self) -> dict[int, list[Node]]:
        """Node id -> the nodes reading it, in program order."""
        users: dict[int, list[Node]] = {}
        for n in self.graph.nodes:
            for i in n.inputs:
                if isinstance(i, Node):
                    users.setdefault(id(i), []).append(n)
        return users

    def plan_batch_sums(self, taken: set) -> dict[int, tuple[Node, Node, Node]]:
        """Sums over the batch of a batched product that are one product: sum node id ->
        (the product, the base of its left operand, its right operand).

        ``sum_b x[b].T @ g[b]`` (a weight gradient over batch x sequence: x of shape
        (B, k, m), g of (B, k, n)) is ``X.T @ G`` with X = x as (B*k, m) and G = g as
        (B*k, n): one GEMM over the folded batch instead of B products and a sum. It
        applies when the product's only reader is the sum, its left operand is a view
        swapping the last two axes, and both operands have the whole batch."""
        users = self.readers()
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
        if self.target.get(id(r)) is not None and self.into is None:
            self.filled.add(id(r))
        self.into = None

    def plan_joins(self, taken: set) -> dict[int, list]:
        """Concatenations whose every piece is a batched product seen through views, which
        then writes straight into its slice of the concatenation: concatenation id -> one
        ``(product, (transpose, reshape, add), split)`` per piece, ``split`` the number
        of the transpose's axes each axis of the piece holds.

        Attention's input gradient is the join of the q, k and v gradients, each a
        batched product over (batch, head) whose heads are merged back by a transpose
        and a reshape, then ``+ 0.0`` (a sum of scatters folded into one join): three
        copies of a product's result and a pass over the join. The product's result
        array is instead a strided view of its slice of the join (``gemm_batched``
        writes any strided result), so the transpose, reshape and join are that memory.
        The ``+ 0.0`` made -0.0 +0.0; a product's -0.0 (every term -0.0) now stays,
        equal to it in every comparison and sum."""
        if self.parallel or not lowerings.linalg.HAVE_CBLAS:
            return {}
        users = self.readers()
        outputs = {id(o) for o in self.graph.outputs}

        def only_reader(v: Node, r: Node) -> bool:
            return id(v) not in outputs and id(v) not in taken and [
                id(u) for u in users.get(id(v), [])] == [id(r)]

        joins: dict[int, list] = {}
        for c in self.graph.nodes:
            if _join_role(c) != "join" or id(c) in taken or not c.inputs:
                continue
            axis = c.attrs["axis"] % len(c.shape)
            pieces = []
            for p in c.inputs:
                piece = self.join_piece(p, c, only_reader)
                if piece is None:
                    break
                pieces.append(piece)
            else:
                if len({id(p) for p in c.inputs}) == len(c.inputs) and axis < len(c.shape):
                    joins[id(c)] = pieces
                    for k, (m, _, split) in enumerate(pieces):
                        self.join_of[id(m)] = (c, k, split)
        return joins

    @staticmethod
    def join_piece(p: object, c: Node, only_reader: Callable) -> tuple | None:
        """``(product, (transpose, reshape, add), split)`` when concatenation piece ``p``
        is ``reshape(transpose(x @ y)) + 0.0`` (a batched product, each value read only
        by the next), the reshape merging whole runs of the transpose's axes."""
        if not (_join_role(p) == "copy" and only_reader(p, c)
                and len(p.inputs) == 2 and not isinstance(p.inputs[1], Node)
                and p.inputs[1] == 0 and isinstance(p.inputs[0], Node)):
            return None
        r = p.inputs[0]
        t = r.inputs[0] if _join_role(r) == "merge_shape" else None
        m = t.inputs[0] if _join_role(t) == "merge_heads" else None
        if _join_role(m) != "product" or not (only_reader(r, p) and only_reader(t, r)
                                              and only_reader(m, t)):
            return None
        x, y = m.inputs
        if not (isinstance(x, Node) and isinstance(y, Node) and len(m.shape) >= 3
                and len(x.shape) == len(y.shape) == len(m.shape)
                and len({np.dtype(v.dtype) for v in (x, y, m, p, c)}) == 1
                and np.dtype(m.dtype) in (np.float32, np.float64)
                and tuple(p.shape) == tuple(r.shape)):
            return None
        split, at = [], 0
        for d in r.shape:
            k, size = 0, 1
            while at + k < len(t.shape) and (size < d or k == 0):
                size *= t.shape[at + k]
                k += 1
            if size != d or k == 0:
                return None
            split.append(k)
            at += k
        if at != len(t.shape) or 0 in t.shape:
            return None
        return m, (t, r, p), tuple(split)

    def join_product(self, m: Node, c: Node, k: int, split: tuple) -> None:
        """A `plan_joins` product, computed into its slice of the concatenation."""
        self.comment(m)
        buf = self.join_buf.get(id(c))
        if buf is None:
            into = self.target.get(id(c))
            if into is not None:
                buf = self.bufs[into]
                self.filled.add(id(c))
            else:
                buf = self.alloc(f"v{self.ir_names[id(c)][1:]}", ishape(c), c.dtype)
            self.join_buf[id(c)] = buf
        axis = c.attrs["axis"] % len(c.shape)
        lo = sum(p.shape[axis] for p in c.inputs[:k])
        t = self.joins[id(c)][k][1][0]
        out = f"v{self.ir_names[id(m)][1:]}"
        piece = kir.Buffer(f"{out}_j", tuple(c.inputs[k].shape), m.dtype, kir.VIEW, "A")
        heads = kir.Buffer(f"{out}_h", ishape(t), m.dtype, kir.VIEW, "A")
        res = kir.Buffer(f"{out}_v", ishape(m), m.dtype, kir.VIEW, "A")
        axes = tuple(t.attrs["axes"])
        self.add(kir.View(piece, buf, "slice", tuple(
            (lo, lo + d, 1) if j == axis else (0, d, 1) for j, d in enumerate(piece.shape))),
            kir.View(heads, piece, "reshape", split),
            kir.View(res, heads, "transpose", tuple(axes.index(j) for j in range(len(axes)))))
        for b in (piece, heads, res):
            self.define(b)
        args = [self.arg(i) for i in m.inputs]
        block = schedule.write_into(lowerings.kernel_lowering(m.op)(m, args, out), res)
        if block is None:
            raise LoweringError(f"a joined product does not fill its result: {m.op}")
        self.emit_block(block)
        self.var[id(m)] = out

    def join_done(self, c: Node) -> None:
        """A `plan_joins` concatenation: its products have filled it."""
        out = f"v{self.ir_names[id(c)][1:]}"
        self.comment(c)
        buf = self.join_buf[id(c)]
        if buf.name != out:
            self.alias(out, buf)
        self.var[id(c)] = out
        self.planned[out] = "C"

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
                env[id(m)] = self.const(m.attrs["value"], ishape(m))
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
                buf = self.alloc(out, shape, s.dtype)
            else:
                buf = self.bufs[target]
                self.filled.add(id(s))
            stores.append((s, out, buf))
        scalars: dict[int, kir.Expr] = {}
        r_body, r_ins = self.body_of(r)

        def pre(idx: list, sym: dict) -> list:
            scalars.clear()
            stmts: list = []
            for p in producers:
                body, ins = self.body_of(p)
                env, local = self.body_env(body, ins, scalars)
                members = [m for m in body.nodes if m.op != "const"]
                stmts += self.scalar_stmts(members, env, shape, idx, local)
                scalars[id(p)] = local[id(body.outputs[0])]
            for b, i in zip(r_body.inputs, r_ins):
                if id(i) in scalars:
                    sym[id(b)] = scalars[id(i)]
            return stmts

        emitted = []

        def post(idx: list, sym: dict) -> list:
            emitted.append(idx)
            stmts: list = []
            for s, _, buf in stores:
                body, ins = self.body_of(s)
                env, local = self.body_env(body, ins, scalars)
                members = [m for m in body.nodes if m.op != "const"]
                stmts += self.scalar_stmts(members, env, shape, idx, local)
                scalars[id(s)] = local[id(body.outputs[0])]
                stmts.append(kir.Store(buf, tuple(idx), scalars[id(s)]))
            return stmts

        self.comment(r)
        out = f"v{self.ir_names[id(r)][1:]}"
        self.into = into = self.target.get(id(r))
        # The producers have no arrays: ``pre`` gives them to the body as scalars.
        env, _ = self.body_env(r_body, r_ins, {id(p): None for p in producers})
        members = [m for m in r_body.nodes if m.op != "const"]
        self.reduce_group(members, r_body.outputs[0], env, out, pre, post)
        if not emitted:  # not a lane reduction: the producers' and siblings' work is lost
            raise LoweringError(f"internal: the cluster of {self.ir_names[id(r)]} was not "
                                "emitted as a lane reduction")
        self.var[id(r)] = out
        if into is not None and self.into is None:
            self.filled.add(id(r))
        self.into = None
        for s, out, buf in stores:
            self.comment(s)
            if buf.name != out:
                self.alias(out, buf)
            self.var[id(s)] = out

    def loop_value(self, n: Node) -> bool:
        """``n`` is computed by one loop nest over its own shape (an elementwise group)."""
        if n.op == "fused":
            return n.attrs.get("kind", "elementwise") == "elementwise"
        op = OPS.get(n.op)
        return op is not None and op.loop_fusible and not op.reduction

    @staticmethod
    def direct(n: Node) -> bool:
        """``n``'s array may be allocated by its own loop, reduction, product or kernel
        block, so that it can write into an output buffer instead. A kernel op's block
        decides when it is built (`schedule.write_into`: it only fills a result it
        allocates); one that cannot keeps its array, copied into the output at the end."""
        if n.op == "fused":
            return True
        op = OPS.get(n.op)
        if op is None:
            return False
        return ((op.loop_fusible and not op.view) or op.reduction is not None
                or op.contraction or n.op in lowerings.LOWER)

    @staticmethod

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
                args = [self.arg(i) if isinstance(i, Node) else kir.const(i) for i in ins]
                built = lowerings.kernel_lowering(n.op)(n, args, out)
                self.emit_block(self.schedule(built, op.contraction))
        self.var[id(n)] = out
        self.planned[out] = self.layout(n)
        if into is not None and self.into is None:  # the lowering used the buffer
            self.filled.add(id(n))
        self.into = None

    def arg(self, n: Node) -> lowerings.Arg:
        """Value ``n`` as a lowering's operand."""
        return lowerings.Arg(self.bufs[self.var[id(n)]])

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


    def schedule(self, block: kir.Block, product: bool, epilogue_reads_f: bool = False
                 ) -> kir.Block:
        """A built block with the buffer plan applied: written into ``self.into`` where it
        only fills its result, else (a lone product) transposed where that packs faster
        or where its epilogue reads an F-ordered array (`schedule.swap_product`)."""
        if self.into is not None:
            placed = schedule.write_into(block, self.bufs[self.into])
            if placed is not None:
                self.into = None
                return placed
            return block
        if product:
            return schedule.swap_product(block, lambda b: self.planned.get(b.name, b.layout),
                                         epilogue_reads_f) or block
        return block

    def emit_block(self, block: kir.Block) -> None:
        """Append a lowered block at the function's top level (its top-level allocations
        become work arrays the caller passes)."""
        if self.parallel:
            block = parallel_items(block)
        kir.verify(block, self.block_params(block))
        for s in block.stmts:
            if isinstance(s, kir.Table):  # a constant the caller passes, built once
                c = self.const(np.array(s.values, s.buf.dtype), s.buf.shape)
                s = kir.View(s.buf, self.bufs[c], "alias")
            self.add(s)
        if block.result is not None:
            self.define(block.result)

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

    def work_array(self, buf: kir.Buffer) -> str | None:
        """The work array a top-level allocation of ``buf`` takes: allocated once by the
        caller and passed in (``w{k}``); None for a small one outside any loop, which the
        kernel allocates itself."""
        # A parallel kernel's parts share its top-level arrays: each keeps the caller's.
        if buf.role != kir.SCRATCH and not self.parallel and _small(buf, self.keep):
            return None
        self.scratch.append((tuple(buf.shape) or (1,), np.dtype(buf.dtype)))
        return f"w{len(self.scratch) - 1}"

    # ------------------------------------------------------------- fused groups
    def group(self, body: Graph, args: list[str], out: str, kind: str) -> None:
        env = {id(b): a for b, a in zip(body.inputs, args)}
        root = body.outputs[0]
        members = [m for m in body.nodes if m.op != "const"]
        for m in body.nodes:
            if m.op == "const":
                env[id(m)] = self.const(m.attrs["value"], ishape(m))
        if kind == "matmul":
            anchor = next(m for m in members if OPS[m.op].contraction)
            self.matmul_group(body, members, anchor, env, out)
        elif kind == "reduce":
            self.reduce_group(members, root, env, out)
        else:
            self.loop_group(members, root, env, out, ishape(root))

    def scalar_stmts(self, members: list[Node], env: dict, loop_shape: tuple, idx: list,
                     sym: dict, skip: set | None = None) -> list:
        """A scalar `kir.Let` per member at loop index ``idx`` over ``loop_shape``; ``sym``
        (node id -> expression) gains each member's variable."""
        out = []
        for m in members:
            if skip and id(m) in skip:
                continue
            operands = [i if not isinstance(i, Node) else self.value(i, sym, env, loop_shape,
                                                                        idx)
                        for i in m.inputs]
            v = kir.Var(self.fresh("s"), m.dtype)
            out.append(kir.Let(v, lowerings.scalar_expr(m, operands), m.op))
            sym[id(m)] = v
        return out

    def value(self, n: Node, sym: dict, env: dict, shape: tuple, idx: list) -> kir.Expr:
        """``n`` at the current loop index: a scalar computed in the loop, or a load."""
        if id(n) in sym:
            return sym[id(n)]
        return self.bufs[env[id(n)]][self.index(n, shape, idx)]

    @staticmethod
    def index(n: Node, loop_shape: tuple, idx: list) -> tuple:
        shape = ishape(n)
        if not n.shape:
            return (kir.const(0),)
        lead = len(loop_shape) - len(shape)
        return tuple(idx[lead + j] if d == loop_shape[lead + j] and d != 1 else kir.const(0)
                     for j, d in enumerate(shape))

    def loops(self, shape: tuple, parallel_ok: bool = True, reverse: bool = False
              ) -> tuple[list, Callable[[list], list]]:
        """A loop nest over ``shape``: the index of each dim, and a function that wraps a
        body in the loops. A size-1 dim gets index 0, not a loop (a loop is Numba compile
        time). ``reverse``: the last dim outermost (an F-ordered array's own order)."""
        idx = [kir.const(0) if d == 1 else kir.Var(f"i{k}") for k, d in enumerate(shape)]
        order = list(range(len(shape)))[::-1] if reverse else list(range(len(shape)))
        par = self.parallel and parallel_ok and math.prod(shape) >= PARALLEL_MIN_SIZE

        def wrap(body: list) -> list:
            nest = tuple(body)
            for k in reversed(order):
                if shape[k] != 1:
                    nest = (kir.Loop(kir.Var(f"i{k}"), shape[k], nest,
                                     parallel=par and k == order[0]),)
            return list(nest)

        return idx, wrap

    def fill(self, name: str, shape: tuple, value: kir.Expr, dtype: np.dtype) -> kir.Buffer:
        """A work array of ``shape`` filled with ``value`` by a loop."""
        buf = self.alloc(name, shape, dtype)
        idx, wrap = self.loops(shape, parallel_ok=False)
        self.add(*wrap([kir.Store(buf, tuple(idx), value)]))
        return buf

    def loop_group(self, members: list[Node], root: Node, env: dict, out: str,
                   shape: tuple) -> None:
        if self.into is not None:
            target, self.into = self.bufs[self.into], None
        else:
            target = self.alloc(out, shape, root.dtype)
        idx, wrap = self.loops(shape)
        sym: dict = {}
        body = self.scalar_stmts(members, env, shape, idx, sym)
        body.append(kir.Store(target, tuple(idx), sym[id(root)]))
        self.add(*wrap(body))
        if target.name != out:
            self.alias(out, target)

    def matmul_group(self, body: Graph, members: list[Node], anchor: Node, env: dict,
                     out: str) -> None:
        op = OPS[anchor.op]
        ins = [env[id(i)] if isinstance(i, Node) else kir.const(i) for i in anchor.inputs]
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
        args = [lowerings.Arg(self.bufs[v]) if isinstance(i, Node) else v
                for i, v in zip(anchor.inputs, ins)]
        if op.contraction_bias:
            # The bias is part of the epilogue loop: BLAS computes only the product.
            prod = lowerings.addmm_product(anchor)
            block = lowerings.matmul_block(prod, args[1:], mm)
            bias = anchor.inputs[0]
        else:
            block = lowerings.kernel_lowering(anchor.op)(anchor, args, mm)
            bias = None
        epilogue_target, self.into = self.into, into
        # An epilogue reading an F-ordered array of the result's shape (a product's result
        # written transposed earlier) runs in that array's order when this one is too.
        reads_f = in_place and any(
            isinstance(i, Node) and id(i) in env and tuple(i.shape) == tuple(root.shape)
            and self.bufs[env[id(i)]].layout == "F"
            for m in members if m is not anchor for i in m.inputs)
        block = self.schedule(block, product=into is None, epilogue_reads_f=reads_f)
        if into is not None and self.into is not None:
            # The product keeps its own array; the epilogue writes the output buffer.
            in_place = False
        elif into is None:
            self.into = epilogue_target
        product = block.result
        gemm = block.stmts[-1] if block.stmts else None
        if (bias is not None and in_place and root is anchor and isinstance(gemm, kir.Gemm)
                and gemm.c.buf == product and gemm.beta == 0 and gemm.k <= 256
                and np.dtype(bias.dtype) == np.dtype(anchor.dtype)):
            # The bias is the product's starting value (beta 1): one pass writing the
            # bias replaces the library's pass zeroing the result and the pass adding
            # the bias. Each element is still the product's sum plus the bias, rounded
            # once, while the library sums the contraction in one block (at most 256
            # terms here; a longer one adds its blocks to the bias in turn).
            idx, wrap = self.loops(shape)
            fill = kir.Store(product, tuple(idx), self.bufs[ins[0]][self.index(bias, shape, idx)])
            block.stmts[-1:] = [*wrap([fill]), replace(gemm, beta=1.0)]
            self.emit_block(block)
            if product.name != out:
                self.alias(out, product)
            return
        self.emit_block(block)
        if not in_place:
            if self.into is not None:
                target, self.into = self.bufs[self.into], None
            else:
                target = self.alloc(out, shape, root.dtype)
        else:
            target = product
        # A transposed product is read and written down its columns: its own order.
        idx, wrap = self.loops(shape, reverse=product.layout == "F" and in_place)
        sym: dict = {}
        stmts = []
        mm_at = product[self.index(anchor, shape, idx)]
        if bias is not None:
            s = kir.Var(self.fresh("s"), anchor.dtype)
            bias_at = self.bufs[ins[0]][self.index(bias, shape, idx)]
            stmts.append(kir.Let(s, kir.Cast(kir.Bin("+", mm_at, bias_at), anchor.dtype)))
            sym[id(anchor)] = s
        else:
            sym[id(anchor)] = mm_at
        stmts += self.scalar_stmts(members, env, shape, idx, sym, {id(anchor)})
        stmts.append(kir.Store(target, tuple(idx), sym[id(root)]))
        self.add(*wrap(stmts))
        if target.name != out:
            self.alias(out, target)

    def reduce_group(self, members: list[Node], root: Node, env: dict, out: str,
                     pre: Pre | None = None, post: Pre | None = None) -> None:
        """A reduction group; ``pre(idx, sym)`` and ``post(idx, sym)`` (a `cluster`'s
        producers and siblings) return more work for each iteration of a whole-array lane
        reduction, before and after the reduced value."""
        src = root.inputs[0]
        shape = ishape(src)
        axis = root.attrs["axis"]
        nd = len(src.shape)
        axes = tuple(range(nd)) if axis is None else axis
        spec = OPS[root.op].reduction
        fold = _Fold(lowerings.combine_of(OPS[root.op]), spec.nan_propagates, spec.combine)
        acc_t = fold.how.accumulator(root.dtype)
        count = math.prod(src.shape[a] for a in axes) if nd else 1
        init = kir.const(spec.identity(acc_t), acc_t)
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
        if suffix and expected == out_shape:
            # A scalar accumulator per outer index, stored once, cast to the result's
            # dtype and scaled (a mean) as it is stored: the hot loop touches no memory
            # but its inputs, and no array-wide astype/reshape follows (each costs Numba
            # as much to compile as a loop).
            outer_shape = tuple(shape[d] for d in outer)
            res = self.bufs[into] if into else self.alloc(self.fresh("r"), out_shape,
                                                           root.dtype)
            oidx, wrap = self.loops(outer_shape) if outer_shape else ([], list)
            acc = kir.Var(self.fresh("acc"), acc_t)
            stmts: list = [kir.Let(acc, init)]
            inner_shape = tuple(shape[d] for d in range(len(outer), nd))
            if len(inner_shape) == 1 and inner_shape[0] >= 4 * LANES:
                # Rows on several threads each need their own lanes: a work array would
                # be shared by them.
                role = kir.LOCAL if any(s.parallel for s in wrap([])) else kir.SCRATCH
                stmts += self._lane_reduce(body, env, shape, oidx, inner_shape[0], acc, acc_t,
                                           fold, init, src, pre, post, role)
            else:
                iidx = [kir.const(0) if d == 1 else kir.Var(f"i{len(outer) + k}")
                        for k, d in enumerate(inner_shape)]
                idx = oidx + iidx if nd else [kir.const(0)]
                sym: dict = {}
                inner = self.scalar_stmts(body, env, shape, idx, sym)
                inner += self.combine(acc, self.value(src, sym, env, shape, idx), fold, acc_t)
                nest = tuple(inner)
                for v, d in reversed(list(zip(iidx, inner_shape))):
                    if d != 1:
                        nest = (kir.Loop(v, d, nest),)
                stmts += nest
            if keepdims:
                it = iter(oidx)
                ridx = tuple(next(it) if d in outer else kir.const(0) for d in range(nd))
            else:
                ridx = tuple(oidx) or (kir.const(0),)
            stmts.append(kir.Store(res, ridx, self._store(acc, acc_t, root.dtype, scale)))
            self.add(*wrap(stmts))
            if res.name != out:
                self.alias(out, res)
            return
        acc = self.fill(self.fresh("acc"), keep, init, acc_t)
        # An F-ordered operand (a product's result written transposed) is read down its
        # columns: each total still takes its terms in the same order.
        by_columns = (nd == 2 and id(src) in env and src not in body
                      and self.bufs[env[id(src)]].layout == "F")
        idx, wrap = self.loops(shape, parallel_ok=False, reverse=by_columns)
        sym = {}
        stmts = self.scalar_stmts(body, env, shape, idx, sym)
        ridx = tuple(kir.const(0) if d in axes else idx[d] for d in range(nd))
        stmts += self.combine((acc, ridx), self.value(src, sym, env, shape, idx), fold, acc_t)
        self.add(*wrap(stmts))
        if scale is None and acc_t == root.dtype and keep == out_shape and into is None:
            self.alias(out, acc)
            return
        # Store the accumulators cast (and scaled) into the result's array, in one loop.
        res = self.bufs[into] if into else self.alloc(self.fresh("r"), out_shape, root.dtype)
        kidx, wrap = self.loops(keep, parallel_ok=False)
        if keepdims or not nd:
            ridx = tuple(kidx)
        else:
            ridx = tuple(kidx[d] for d in outer) or (kir.const(0),)
        value = self._store(acc[tuple(kidx)], acc_t, root.dtype, scale)
        self.add(*wrap([kir.Store(res, ridx, value)]))
        if res.name != out:
            self.alias(out, res)

    @staticmethod
    def _store(acc: kir.Expr, acc_t: np.dtype, dtype: np.dtype,
               scale: float | None) -> kir.Expr:
        """An accumulator as a value of the result's dtype (a mean scaled first: an empty
        mean is 0/0, nan, like NumPy's)."""
        if scale is not None:
            acc = kir.Bin("*", acc, kir.const(scale, np.float64))
        if acc_t == dtype and scale is None:
            return acc
        return kir.Cast(acc, dtype)

    def _lane_reduce(self, body: list, env: dict, shape: tuple, oidx: list, n: int,
                     acc: kir.Var, acc_t: np.dtype, fold: _Fold, init: kir.Expr, src: Node,
                     pre: Pre | None = None, post: Pre | None = None,
                     role: str = kir.SCRATCH) -> list:
        """Reduce a long innermost axis with LANES independent accumulators.

        A single accumulator is a loop-carried dependency that LLVM may not vectorize
        without reassociating (which would also license it to reorder the math of the
        fast exp/tanh); independent lanes vectorize as they are, and summing LANES
        partial sums is also more accurate.
        """
        if not oidx and self.parallel and n >= PARALLEL_MIN_SIZE:
            return self._parallel_lane_reduce(body, env, shape, n, acc, acc_t, fold, init,
                                              src, pre, post)
        i = f"i{len(oidx)}"
        il = kir.Var(f"{i}l")
        # One work array for every row's lanes (an allocation here would be one per row),
        # unless rows run on several threads (``role``).
        lanes = kir.Buffer(self.fresh("lanes"), (LANES,), acc_t, role)
        stmts: list = [kir.Alloc(lanes), kir.Loop(il, LANES, (kir.Store(lanes, (il,), init),))]
        if (fold.how.better is None and fold.how.update == "+" and acc_t == np.float64
                and np.dtype(src.dtype) == np.float32):
            stmts += self._fold_blocks(body, env, shape, oidx, n, lanes, src, pre, post)
        else:
            stmts += self._lane_blocks(body, env, shape, oidx, n, lanes, fold, acc_t, src,
                                       pre, post)
        whole = n // LANES * LANES
        if whole < n:
            iv = kir.Var(i)
            stmts.append(kir.Loop(iv, n, tuple(self._element(
                body, env, shape, oidx + [iv], src, (lanes, (kir.const(0),)), fold, acc_t,
                pre, post)), start=whole))
        stmts.append(kir.Loop(il, LANES, tuple(self.combine(acc, lanes[il], fold, acc_t))))
        return stmts

    def _element(self, body: list, env: dict, shape: tuple, idx: list, src: Node,
                 into: kir.Var | tuple, fold: _Fold | None, acc_t: np.dtype,
                 pre: Pre | None = None, post: Pre | None = None) -> list:
        """One element of a reduction's loop: a cluster's producers (``pre``), the reduced
        value combined into ``into`` (a scalar, or a (buffer, index) cell; stored there
        when ``fold`` is None), then the cluster's siblings (``post``)."""
        sym: dict = {}
        stmts = pre(idx, sym) if pre is not None else []
        stmts += self.scalar_stmts(body, env, shape, idx, sym)
        value = self.value(src, sym, env, shape, idx)
        if fold is None:
            stmts.append(kir.Store(*into, value))
        else:
            stmts += self.combine(into, value, fold, acc_t)
        if post is not None:
            stmts += post(idx, sym)
        return stmts

    def _lane_blocks(self, body: list, env: dict, shape: tuple, oidx: list, n: int,
                     lanes: kir.Buffer, fold: _Fold, acc_t: np.dtype, src: Node,
                     pre: Pre | None = None, post: Pre | None = None) -> list:
        """The whole blocks of LANES values, each value combined into its lane."""
        i = f"i{len(oidx)}"
        ib, il, iv = kir.Var(f"{i}b"), kir.Var(f"{i}l"), kir.Var(i)
        inner = [kir.Let(iv, ib * LANES + il)] + self._element(
            body, env, shape, oidx + [iv], src, (lanes, (il,)), fold, acc_t, pre, post)
        return [kir.Loop(ib, n // LANES, (kir.Loop(il, LANES, tuple(inner)),))]

    def _fold_blocks(self, body: list, env: dict, shape: tuple, oidx: list, n: int,
                     lanes: kir.Buffer, src: Node, pre: Pre | None = None,
                     post: Pre | None = None) -> list:
        """`_lane_blocks` for a float32 sum: the loop stores its values in a buffer, one
        block at a time, and `dgk.fold_lanes` adds them to the lanes in the same order.
        The loop then vectorizes like an elementwise one, and the lanes stay in registers
        during the fold."""
        i = f"i{len(oidx)}"
        ic, ik, iv = kir.Var(f"{i}c"), kir.Var(f"{i}k"), kir.Var(i)
        whole = n // LANES * LANES
        block = fold_block(whole)
        buf = kir.Buffer(self.fresh("buf"), (block,), np.float32, lanes.role)
        inner = [kir.Let(iv, ic * block + ik)] + self._element(
            body, env, shape, oidx + [iv], src, (buf, (ik,)), None, np.float32, pre, post)
        return [kir.Alloc(buf), kir.Loop(ic, whole // block, (
            kir.Loop(ik, block, tuple(inner)),
            kir.LibCall("fold_lanes", (buf, kir.const(block)), (lanes,))))]

    def _parallel_lane_reduce(self, body: list, env: dict, shape: tuple, n: int,
                              acc: kir.Var, acc_t: np.dtype, fold: _Fold, init: kir.Expr,
                              src: Node, pre: Pre | None = None,
                              post: Pre | None = None) -> list:
        """`_lane_reduce` of a whole array over a ``numba.prange`` of CHUNKS chunks: each
        chunk folds its blocks into its own row of LANES partials (no two threads write
        the same cell), then the partials are folded in order. The order of the fold does
        not depend on the number of threads, so the result does not either."""
        blocks = n // LANES
        chunks, per = chunking(blocks)
        parts = kir.Buffer(self.fresh("parts"), (chunks, LANES), acc_t, kir.SCRATCH)
        ic, il, ib, iv = (kir.Var(f"i0{c}") for c in ("c", "l", "b", ""))
        stop = kir.Call("min", (ic * per + per, kir.const(blocks)), kir.INDEX)
        if (fold.how.better is None and fold.how.update == "+" and acc_t == np.float64
                and np.dtype(src.dtype) == np.float32):
            chunk = self._chunk_fold(body, env, shape, src, per, stop, ic, parts, init,
                                     pre, post)
        else:
            inner = [kir.Let(iv, ib * LANES + il)] + self._element(
                body, env, shape, [iv], src, (parts, (ic, il)), fold, acc_t, pre, post)
            chunk = (kir.Loop(il, LANES, (kir.Store(parts, (ic, il), init),)),
                     kir.Loop(ib, stop, (kir.Loop(il, LANES, tuple(inner)),), start=ic * per))
        # The chunk number as LLVM sees the prange's index is any integer; bounded to
        # [0, chunks) it proves every element index of the chunk non-negative, so Numba's
        # negative-index wraparound goes and the loop vectorizes (W3's sum at 1e7 on one
        # thread: 2.7x faster, as fast as the serial loop).
        ip = kir.Var("i0p")
        bounded = kir.Call("min", (kir.Call("max", (kir.Cast(ip, kir.INDEX), kir.const(0)),
                                            kir.INDEX), kir.const(chunks - 1)), kir.INDEX)
        stmts: list = [kir.Alloc(parts),
                       kir.Loop(ip, chunks, (kir.Let(ic, bounded), *chunk), parallel=True)]
        if blocks * LANES < n:
            stmts.append(kir.Loop(iv, n, tuple(self._element(
                body, env, shape, [iv], src, acc, fold, acc_t, pre, post)),
                start=blocks * LANES))
        stmts.append(kir.Loop(ic, chunks, (kir.Loop(il, LANES, tuple(
            self.combine(acc, parts[ic, il], fold, acc_t))),)))
        return stmts

    def _chunk_fold(self, body: list, env: dict, shape: tuple, src: Node, per: int,
                    stop: kir.Expr, ic: kir.Var, parts: kir.Buffer, init: kir.Expr,
                    pre: Pre | None, post: Pre | None) -> tuple:
        """One chunk of `_parallel_lane_reduce` for a float32 sum, as `_fold_blocks`: the
        chunk's values go through a buffer of its own, a block at a time, and
        `dgk.fold_lanes` adds them to lanes of its own kept in registers, in the order the
        lane loop would (so the sum is the same); the lanes then go to the chunk's row of
        ``parts``. Adding into ``parts`` directly kept every partial sum in memory."""
        ik, iq, iv = kir.Var("i0k"), kir.Var("i0q"), kir.Var("i0")
        lo, count = kir.Var("i0lo"), kir.Var("i0n")
        il = kir.Var("i0l")
        block = fold_block(per * LANES)  # divides a whole chunk; the last may be shorter
        lanes = kir.Buffer(self.fresh("lanes"), (LANES,), np.float64, kir.LOCAL)
        buf = kir.Buffer(self.fresh("buf"), (block,), np.float32, kir.LOCAL)
        inner = [kir.Let(iv, lo + ik)] + self._element(
            body, env, shape, [iv], src, (buf, (ik,)), None, np.float32, pre, post)
        return (
            kir.Alloc(lanes), kir.Alloc(buf),
            kir.Loop(il, LANES, (kir.Store(lanes, (il,), init),)),
            kir.Loop(iq, per * LANES // block, (
                kir.Let(lo, ic * (per * LANES) + iq * block),
                # Past the end of a short last chunk the count is <= 0: nothing runs.
                kir.Let(count, kir.Call("min", (kir.const(block), stop * LANES - lo),
                                        kir.INDEX)),
                kir.Loop(ik, count, tuple(inner)),
                kir.LibCall("fold_lanes", (buf, count), (lanes,)))),
            kir.Loop(il, LANES, (kir.Store(parts, (ic, il), lanes[il]),)),
        )

    def combine(self, into: kir.Var | tuple, value: kir.Expr, fold: _Fold,
                acc_t: np.dtype) -> list:
        """Fold ``value`` into a scalar accumulator (`kir.Accum`) or a (buffer, index)
        cell: added (cast to the accumulator's dtype), or compared, a nan winning where
        the spec says it propagates."""
        if isinstance(into, kir.Var):
            return [kir.Accum(into, fold.name, value, fold.nan_propagates)]
        buf, index = into
        if fold.how.better is None:  # a sum or product: nan propagates through the arithmetic
            value = value if value.dtype == acc_t else kir.Cast(value, acc_t)
            return [kir.Store(buf, index, value, fold.how.update)]
        if not isinstance(value, kir.Var):
            v = kir.Var(self.fresh("m"), value.dtype)
            let, value = [kir.Let(v, value)], v
        else:
            let = []
        # A comparison is false against nan: where nan must win (np.max), test for it.
        cond = kir.Bin(fold.how.better, value, buf[index])
        if fold.nan_propagates:
            cond = kir.Bin("or", cond, kir.Bin("!=", value, value))
        return let + [kir.If(cond, (kir.Store(buf, index, value),))]


def folds_scalar(s: object) -> bool:
    """A loop whose own body folds into a scalar (`kir.Accum`) stays a loop of its own:
    merged with an elementwise pass, its loop-carried fold would keep LLVM from
    vectorizing that pass (a row kernel's exp into a work array, then its sum)."""
    return isinstance(s, kir.Loop) and any(isinstance(b, kir.Accum) for b in s.body)


# A library block's loop over items (samples) runs over Numba's threads in at most this
# many parts when it needs a private copy of a scratch buffer per part.
ITEM_PARTS = 8


def parallel_items(block: kir.Block) -> kir.Block:
    """``block`` (a lowered op: a convolution's loop over samples, im2col, col2im, a
    grouped product's items) with each top-level loop whose iterations are independent
    as a ``numba.prange``. Independent: every buffer the loop writes is written at
    indices that include the loop's variable (a product: its result starts at
    ``item * size``), and none it writes is read; a scratch buffer the block allocates
    and uses only in the loop (a sample's im2col columns) is made private, one copy per
    part of ITEM_PARTS contiguous parts, instead. Each item is computed the same way
    whichever thread runs it, so the bits do not depend on the number of threads. A loop
    writing fewer than PARALLEL_MIN_SIZE elements, or making products large enough to be
    cut over the threads themselves (`blas_parallel.gemm_blocks`), stays serial."""
    stmts = list(block.stmts)
    views = {s.buf.name: s.base.name for s in stmts if isinstance(s, kir.View)}

    def root(name: str) -> str:
        while name in views:
            name = views[name]
        return name

    allocs = {s.buf.name: k for k, s in enumerate(stmts) if isinstance(s, kir.Alloc)}
    for k, s in enumerate(stmts):
        if not (isinstance(s, kir.Loop) and not s.parallel and s.start == 0 and s.step == 1
                and isinstance(s.extent, int) and s.extent >= 2):
            continue
        private = _private_scratch(stmts, k, allocs, root, block.result)
        if private is None or not _items_independent(s, private, root):
            continue
        if not private:
            stmts[k] = kir.Loop(s.var, s.extent, s.body, parallel=True)
            continue
        parts = min(s.extent, ITEM_PARTS)
        part = kir.Var(f"{s.var.name}_p")
        inner: list = []
        for name in private:
            a = stmts[allocs[name]]
            whole = kir.Buffer(f"{name}_t", (parts, *a.buf.shape), a.buf.dtype, a.buf.role)
            stmts[allocs[name]] = kir.Alloc(whole, a.fill)
            inner.append(kir.View(a.buf, whole, "slice", (part,)))
        moved = [j for j, t in enumerate(stmts) if j < k and isinstance(t, kir.View)
                 and root(t.buf.name) in private and t.buf.name not in private]
        inner += [stmts[j] for j in moved]

        def bound(j: kir.Expr, n: int = s.extent, parts: int = parts) -> kir.Expr:
            return kir.Bin("//", kir.Bin("*", kir.const(n), j), kir.const(parts))

        inner.append(kir.Loop(s.var, bound(kir.Bin("+", part, kir.const(1))), s.body,
                              start=bound(part)))
        stmts[k] = kir.Loop(part, parts, tuple(inner), parallel=True)
        for j in reversed(moved):
            del stmts[j]
        return parallel_items(kir.Block(stmts, block.result))
    return kir.Block(stmts, block.result)


def _private_scratch(stmts: list, k: int, allocs: dict, root: Callable,
                     result: kir.Buffer | None) -> list | None:
    """The buffers allocated in the block (before loop ``k``) that only loop ``k`` and
    top-level views of them before it use: each part of the loop may have its own."""
    used_in: dict = {name: set() for name in allocs}
    for j, t in enumerate(stmts):
        if isinstance(t, (kir.Alloc, kir.View)):
            continue
        for b in _buffers_of([t]):
            r = root(b)
            if r in used_in:
                used_in[r].add(j)
    out = [name for name, at in allocs.items() if used_in[name] == {k} and at < k
           and (result is None or root(result.name) != name)]
    # A view made after the loop of a buffer it would make private: not the loop's alone.
    for j, t in enumerate(stmts):
        if isinstance(t, kir.View) and j > k and root(t.buf.name) in out:
            return None
    return out


def _buffers_of(stmts: list) -> list:
    """The names of the buffers ``stmts`` (nested ones included) read or write."""
    names = []
    for t in kir.walk(stmts):
        for e in kir.exprs_of(t):
            names += [x.buf.name for x in kir.subexprs(e) if isinstance(x, kir.Load)]
        if isinstance(t, kir.Store):
            names.append(t.buf.name)
        elif isinstance(t, kir.Gemm):
            names += [t.a.buf.name, t.b.buf.name, t.c.buf.name]
        elif isinstance(t, kir.LibCall):
            names += [b.name for b in t.args + t.outs if isinstance(b, kir.Buffer)]
        elif isinstance(t, kir.View):
            names += [t.buf.name, t.base.name]
    return names


def _items_independent(loop: kir.Loop, private: list, root: Callable) -> bool:
    """Whether ``loop``'s iterations write disjoint parts of what they write and read
    nothing of it (see `parallel_items`)."""
    from .blas_parallel import SPLIT_FLOPS, product_parts

    parts = product_parts()
    i = loop.var
    bound = {t.var.name for t in kir.walk(loop.body) if isinstance(t, (kir.Let, kir.Loop))}
    written: set = set()
    read: set = set()
    size = 0
    for t in kir.walk(loop.body):
        if isinstance(t, (kir.LibCall, kir.Raise, kir.View, kir.Alloc, kir.Table)):
            return False
        if isinstance(t, kir.Loop) and t.parallel:
            return False
        if isinstance(t, kir.Accum) and t.var.name not in bound:
            return False  # a reduction across items
        for e in kir.exprs_of(t):
            read.update(root(x.buf.name) for x in kir.subexprs(e) if isinstance(x, kir.Load))
        if isinstance(t, kir.Store):
            r = root(t.buf.name)
            if r not in private:
                if i not in t.index:
                    return False
                written.add(r)
                size = max(size, t.buf.size)
        elif isinstance(t, kir.Gemm):
            c = t.c
            off = c.offset
            if (t.batch != 1 or c.ld is None or not isinstance(off, kir.Bin) or off.op != "*"
                    or (parts > 1 and max(t.m, t.n) >= parts
                        and t.m * t.n * t.k >= SPLIT_FLOPS)):
                return False
            step = off.b if off.a == i else off.a if off.b == i else None
            if not (isinstance(step, kir.Const) and isinstance(step.value, int)
                    and step.value >= (t.m - 1) * c.ld + t.n):
                return False
            r = root(c.buf.name)
            if r not in private:
                written.add(r)
                size = max(size, c.buf.size)
            read.update(root(o.buf.name) for o in (t.a, t.b))
    if any(isinstance(t, kir.Jump) for t in loop.body):
        return False  # a break or continue of the item loop itself
    return size >= PARALLEL_MIN_SIZE and not (written & read)


def product_blocks(stmts: list, parts: int | None = None) -> list:
    """``stmts`` (a parallel kernel's top level) with each product followed by a parallel
    loop over its result's rows and columns that works element by element (its epilogue,
    or a later elementwise op such as a weight update) as one ``numba.prange`` over the
    product's fixed blocks (`blas_parallel.gemm_part`): each block's product, then the
    loop over that block. Entering a parallel region wakes the pool's sleeping workers and
    waits for them (about 45 us on an idle 2-core VM); the product and its loop then cost
    one region, not two. The cut is the one `gemm_blocks` makes, so the bits do not depend
    on the number of threads. The product moves down to the loop past statements that
    neither read its result nor write what it reads. A block loop then takes in what
    works on the rows its blocks wrote (`_chain_product`, `_chain_rows`), and a product
    independent of a later block loop joins it (`_join_product`). ``parts``: the number
    of blocks (`blas_parallel.product_parts` when None); a new list."""
    from .blas import HAVE_CBLAS
    from .blas_parallel import product_parts

    parts = product_parts() if parts is None else parts
    if not HAVE_CBLAS or parts < 2:
        return list(stmts)
    stmts = list(stmts)
    views = {s.buf.name: s for s in kir.walk(stmts) if isinstance(s, kir.View)}

    def root(name: str) -> str:
        while name in views:
            name = views[name].base.name
        return name

    def same_array(b: kir.Buffer) -> str | None:
        """The root of ``b`` when ``b`` is that array under another name, else None."""
        name = b.name
        while name in views:
            if views[name].how != "alias":
                return None
            name = views[name].base.name
        return name

    taken = kir.scalar_names(stmts)
    fresh = kir.Fresh("mp", taken)
    k = 0
    while k < len(stmts):
        g = stmts[k]
        merged = _product_block(stmts, k, root, same_array, fresh, parts) if (
            isinstance(g, kir.Gemm)) else None
        if merged is not None:
            at, loop = merged
            stmts[at] = loop
            del stmts[k]
            continue
        k += 1
    # Chains first: a product joined to a block loop would keep that loop from chaining
    # into the one before it (the MLP's output-layer weight gradient joins the last
    # region instead, and the hidden gradient runs in the first).
    roles = _roles(stmts, root)
    k = 0
    while k < len(stmts):
        if not (_chain_product(stmts, k, root, same_array, fresh, roles)
                or _chain_rows(stmts, k, root, same_array, roles)):
            k += 1
    k = 0
    while k < len(stmts):
        if _join_product(stmts, k, root, fresh):
            continue
        k += 1
    return stmts


def _roles(stmts: list, root: Callable) -> dict:
    """The role (`kir.ARG`, ...) of each array ``stmts`` name, by its root's name."""
    bufs: dict = {}

    def see(b: Any) -> None:
        if isinstance(b, kir.Buffer) and b.role != kir.VIEW:
            bufs.setdefault(root(b.name), b.role)

    for t in kir.walk(stmts):
        for e in kir.exprs_of(t):
            for x in kir.subexprs(e):
                if isinstance(x, kir.Load):
                    see(x.buf)
        if isinstance(t, (kir.Store, kir.Alloc)):
            see(t.buf)
        elif isinstance(t, kir.View):
            see(t.base)
            see(t.buf)
        elif isinstance(t, kir.Gemm):
            for o in (t.a, t.b, t.c):
                see(o.buf)
        elif isinstance(t, kir.LibCall):
            for b in (*t.args, *t.outs):
                see(b)
    return bufs


def _effects(stmts: list, root: Callable) -> tuple[set, set, set] | None:
    """(what ``stmts`` read, what they write, the errors they may raise as (kind,
    message)): arrays by their roots' names, scalars named outside them as ``$name``;
    None when they may jump."""
    rw = _reads_writes_raising(stmts, root)
    if rw is None:
        return None
    reads, writes, raises = rw
    bound: set = set()
    for t in kir.walk(stmts):
        if isinstance(t, kir.Loop):
            bound.add(t.var.name)
        elif isinstance(t, kir.Let) and not any(t is u for u in stmts):
            bound.add(t.var.name)
    for t in kir.walk(stmts):
        for e in kir.exprs_of(t):
            reads.update(f"${x.name}" for x in kir.subexprs(e)
                         if isinstance(x, kir.Var) and x.name not in bound)
        if isinstance(t, kir.Let) and t.var.name not in bound:
            writes.add(f"${t.var.name}")
        elif isinstance(t, kir.Accum) and t.var.name not in bound:
            reads.add(f"${t.var.name}")
            writes.add(f"${t.var.name}")
        elif isinstance(t, kir.Gemm):
            reads.update(f"${v.name}" for v in t.part[:1])
            writes.update(f"${v.name}" for v in t.part[1:])
    return reads, writes, raises


def _reads_writes_raising(stmts: list, root: Callable) -> tuple[set, set, set] | None:
    """`_reads_writes` with the errors ``stmts`` may raise; None when they may jump."""
    if any(isinstance(t, kir.Jump) for t in kir.walk(stmts)):
        return None
    rw = _reads_writes(_without_raises(stmts), root)
    if rw is None:
        return None
    raises = {(t.kind, t.message) for t in kir.walk(stmts) if isinstance(t, kir.Raise)}
    return rw[0], rw[1], raises


def _without_raises(stmts: Any) -> list:
    """``stmts`` with every `kir.Raise` left out (to read their other effects)."""
    out = []
    for t in stmts:
        if isinstance(t, kir.Raise):
            continue
        if isinstance(t, kir.Loop):
            t = dataclasses.replace(t, body=tuple(_without_raises(t.body)))
        elif isinstance(t, kir.If):
            t = dataclasses.replace(t, then=tuple(_without_raises(t.then)),
                                    orelse=tuple(_without_raises(t.orelse)))
        out.append(t)
    return out


def _independent(a: tuple, b: tuple) -> bool:
    """Whether statements of effects ``a`` and ``b`` (`_effects`) may swap: neither
    writes what the other reads or writes, and not both may raise, unless the same one
    error (which of the two raises it then shows no difference)."""
    if a[1] & (b[0] | b[1]) or b[1] & a[0]:
        return False
    return not (a[2] and b[2]) or (a[2] == b[2] and len(a[2]) == 1)


def _pass_over(piece: tuple, between: list, roles: dict, root: Callable
               ) -> tuple[list, list] | None:
    """The statements ``between`` a block loop and ``piece`` (the effects of what is to
    move into that loop) split in (those to move above the loop, those to stay after
    it), or None when the piece cannot move up past them. What the piece needs, and what
    that needs in turn, moves above; names, allocations and comments move above; the
    rest stays, and a statement moving above must be independent of those staying
    before it."""
    kept = (kir.Comment, kir.View, kir.Alloc)
    effects = [None if isinstance(t, kept) else _effects([t], root) for t in between]
    if any(e is None for t, e in zip(between, effects) if not isinstance(t, kept)):
        return None
    need = (set(piece[0]), set(piece[1]), set())
    up = [isinstance(t, kept) for t in between]
    for j in reversed(range(len(between))):
        e = effects[j]
        if e is None or not (e[1] & (need[0] | need[1]) or need[1] & e[0]):
            continue
        up[j] = True
        need = (need[0] | e[0], need[1] | e[1], set())
    stayed = []
    for e, moves in zip(effects, up):
        if e is None:
            continue
        if not moves:
            stayed.append(e)
        elif not all(_independent(e, st) for st in stayed):
            return None
    if any(st[2] for st in stayed) and any(roles.get(w) == kir.ARG for w in piece[1]):
        # The piece would write an argument before an error that stops the kernel.
        return None
    return ([t for t, moves in zip(between, up) if moves],
            [t for t, moves in zip(between, up) if not moves])


def _loop_passable(loop: kir.Loop, above: list, roles: dict, root: Callable) -> bool:
    """Whether the statements ``above`` may move above the block loop ``loop``: each is
    independent of it, and when one may raise, the loop writes no argument."""
    e = _effects([loop], root)
    if e is None or e[2]:
        return False
    for t in above:
        if isinstance(t, (kir.Comment, kir.View, kir.Alloc)):
            continue
        f = _effects([t], root)
        if f is None or not _independent(f, e):
            return False
        if f[2] and any(roles.get(w) == kir.ARG for w in e[1]):
            return False
    return True


# Row routines (`row_kernels`) whose every row is computed from that row alone: called on a
# block of rows, they give those rows' bits of the whole call.
_ROW_WISE = ("row_softmax", "row_softmax_backward", "row_layer_norm",
             "row_layer_norm_backward")


def _sliced_call(s: kir.LibCall, cut: dict, bounds: tuple) -> kir.LibCall:
    """``s`` on the block ``bounds`` (start, stop) of rows of the buffers at the argument
    positions ``cut`` holds ("out": its output): a library template of its own that
    slices those operands (registered once per pattern)."""
    at = len(s.args)
    fn = f"{s.fn}[rows {','.join(map(str, sorted(cut, key=str)))}]"
    if fn not in printer.LIBRARY:
        template = printer.LIBRARY[s.fn]
        for pos in cut:
            name = "{out}" if pos == "out" else f"{{{pos}}}"
            template = template.replace(name, f"{name}[{{{at}}}:{{{at + 1}}}]")
        printer.LIBRARY[fn] = template
    return kir.LibCall(fn, (*s.args, *bounds), s.outs)


def _block_bounds(p: kir.Var, parts: Any, n: int) -> tuple:
    """Block ``p``'s (start, stop) of ``n`` rows cut in ``parts`` as
    `blas_parallel.gemm_part` cuts them."""
    def at(q: kir.Expr) -> kir.Expr:
        return kir.Bin("//", kir.Bin("*", kir.const(n), q), kir.const(parts))
    return at(p), at(kir.Bin("+", p, kir.const(1)))


def _row_owners(loop: kir.Loop, root: Callable) -> tuple[dict, dict] | None:
    """(array -> the row-cut product of the block loop ``loop`` that writes it, array ->
    ids of the products whose blocks write it, None for other writers): a product's
    elementwise loops after it write its block's rows (`_block_epilogue`)."""
    rows_of: dict = {}
    writers: dict = {}
    owner = None
    for t in loop.body:
        if isinstance(t, kir.Gemm):
            owner = t if t.part and t.part[0] == loop.var and t.m >= t.n else None
            written = {root(t.c.buf.name)}
        else:
            rw = _reads_writes([t], root)
            if rw is None:
                return None
            written = rw[1]
        for r in written:
            writers.setdefault(r, set()).add(id(owner) if owner is not None else None)
            if owner is not None:
                rows_of[r] = owner
    return rows_of, writers


# How many statements after a block loop a piece that may join it is looked for.
_REACH = 24


def _chain_rows(stmts: list, k: int, root: Callable, same_array: Callable,
                roles: dict) -> bool:
    """Move a row-wise library call (`_ROW_WISE`, along the last axis of 2-D operands)
    after the block loop ``stmts[k]`` into it, on block ``p``'s rows, when each of its
    2-D inputs is either a row-cut product's result the loop writes block by block (or
    that result's epilogue) or not written by the loop at all, and the loop does not
    touch what it writes: a layer's softmax then runs on the threads with the layer.
    The statements between move above the loop when the call needs them (`_pass_over`:
    a loss's gradient made from the targets alone), else stay after it."""
    loop = stmts[k]
    if not (isinstance(loop, kir.Loop) and loop.parallel and loop.body
            and isinstance(loop.extent, int)):
        return False
    at = None
    for j in range(k + 1, min(len(stmts), k + 1 + _REACH)):
        t = stmts[j]
        if isinstance(t, kir.Loop) and t.parallel:
            break
        if isinstance(t, kir.LibCall) and t.fn in _ROW_WISE:
            at = j
            break
    if at is None:
        return False
    s = stmts[at]
    if len(s.outs) != 1:
        return False
    out = s.outs[0]
    buffers = [a for a in s.args if isinstance(a, kir.Buffer)]
    if len(out.shape) != 2 or any(len(b.shape) not in (1, 2) for b in buffers):
        return False
    m, n = out.shape
    # The row axis: the last of the operands padded to 4 dims (`row_kernels._call`).
    axis = s.args[len(buffers)] if len(s.args) > len(buffers) else None
    if axis != 3 or not isinstance(m, int) or same_array(out) is None:
        return False
    found = _row_owners(loop, root)
    rw = _reads_writes(list(loop.body), root)
    if found is None or rw is None:
        return False
    rows_of, writers = found
    cut: dict = {"out": None}
    for pos, a in enumerate(s.args):
        if not isinstance(a, kir.Buffer):
            continue
        r = root(a.name)
        if a.shape == (m, n):
            if same_array(a) is None:
                return False
            if r in rw[1]:
                owner = rows_of.get(r)
                if owner is None or owner.m != m or writers[r] != {id(owner)}:
                    return False
            cut[pos] = None
        elif len(a.shape) != 1 or r in rw[1]:
            return False
    target = root(out.name)
    if target in rw[0] | rw[1] or any(root(a.name) == target for a in buffers):
        return False
    piece = _effects([s], root)
    split = _pass_over(piece, stmts[k + 1:at], roles, root) if piece else None
    if split is None or not _loop_passable(loop, split[0], roles, root):
        return False
    above, stay = split
    call = _sliced_call(s, cut, _block_bounds(loop.var, loop.extent, m))
    stmts[k:at + 1] = [*above, kir.Loop(loop.var, loop.extent, (*loop.body, call),
                                        parallel=True), *stay]
    return True


def _next_product(stmts: list, k: int, root: Callable) -> int | None:
    """The position of the first product after ``stmts[k]`` that a row cut may chain
    (whole, not transposed on the left, as many rows as columns or more), alone or as
    the one product of a block loop, before any other parallel loop and within
    `_REACH`; products that may not are passed over."""
    for j in range(k + 1, min(len(stmts), k + 1 + _REACH)):
        t = stmts[j]
        g = _single_block(t) if isinstance(t, kir.Loop) and t.parallel else t
        if isinstance(g, kir.Gemm) and not g.ta and g.m >= g.n and (
                _product_whole(g, root) is not None):
            return j
        if isinstance(t, kir.Loop) and t.parallel:
            return None
    return None


def _single_block(loop: kir.Loop) -> kir.Gemm | None:
    """The product of a block loop of one product and its epilogue (`_product_block`),
    the product unblocked; else None."""
    body = loop.body
    if not (body and isinstance(body[0], kir.Gemm) and body[0].part
            and body[0].part[0] == loop.var):
        return None
    rest = list(body[1:])
    if any(isinstance(t, (kir.Gemm, kir.LibCall)) for t in kir.walk(rest)):
        return None
    if any(isinstance(x, kir.Var) and x.name == loop.var.name for t in kir.walk(rest)
           for e in kir.exprs_of(t) for x in kir.subexprs(e)):
        return None
    g = body[0]
    return kir.Gemm(g.m, g.n, g.k, g.a, g.b, g.c, g.ta, g.tb, g.beta)


def _rows_read_in_block(piece: list, loop_writes: set, rows_of: dict, writers: dict,
                        m: int, root: Callable) -> bool:
    """Whether the epilogue in ``piece`` (`_block_epilogue`'s ``[block, starts, rows]``)
    reads what the block loop writes only at its own rows: arrays a row-cut product of
    ``m`` rows of the loop writes alone, at index (i, ...)."""
    rest = piece[1:]
    if not rest:
        return True
    rows = rest[-1]
    if not (isinstance(rows, kir.Loop) and rows.body and isinstance(rows.body[0], kir.Let)):
        return False
    i = rows.body[0].var
    for t in kir.walk(rest):
        for e in kir.exprs_of(t):
            for x in kir.subexprs(e):
                if not (isinstance(x, kir.Load) and root(x.buf.name) in loop_writes):
                    continue
                r = root(x.buf.name)
                owner = rows_of.get(r)
                if (owner is None or owner.m != m or writers[r] != {id(owner)}
                        or not x.index or x.index[0] != i):
                    return False
    return True


def _chain_product(stmts: list, k: int, root: Callable, same_array: Callable,
                   fresh: kir.Fresh, roles: dict) -> bool:
    """Move the next product after the block loop ``stmts[k]`` into it, with the
    element-by-element loop over that product's result when one follows, when the
    product's left operand is the result of a product the loop cuts by rows (or that
    result's epilogue, or a row call's result there), of as many rows, and the new
    product is cut by rows too: block ``p`` of it reads only the rows block ``p`` of the
    loop has just written (a layer's output feeding the next layer: its product and bias
    then cost no region of their own). The product may stand alone or be the one product
    of a block loop of its own (which then costs no region either). The statements
    between move above the loop or stay after it (`_pass_over`)."""
    loop = stmts[k]
    if not (isinstance(loop, kir.Loop) and loop.parallel and loop.body):
        return False
    head = [t for t in loop.body if isinstance(t, kir.Gemm) and t.part
            and t.part[0] == loop.var]
    if not head:
        return False
    at = _next_product(stmts, k, root)
    if at is None:
        return False
    blocked = isinstance(stmts[at], kir.Loop)
    g = _single_block(stmts[at]) if blocked else stmts[at]
    out = _product_whole(g, root)
    if out is None or g.ta or g.m < g.n or (g.a.resolved and (g.a.offset != 0 or g.a.ld != g.k)):
        return False
    left = same_array(g.a.buf)
    if left is None or g.a.buf.shape != (g.m, g.k):
        return False
    found = _row_owners(loop, root)
    if found is None:
        return False
    rows_of, writers = found
    owner = rows_of.get(left)
    if owner is None or owner.m != g.m or writers[left] != {id(owner)}:
        return False
    rw = _reads_writes(list(loop.body), root)
    operand = root(g.b.buf.name)
    if rw is None or out in rw[0] | rw[1] or operand in rw[1]:
        return False
    p = loop.var
    end = at + 1
    if blocked:
        old = stmts[at].body[0]
        body = [kir.Gemm(g.m, g.n, g.k, g.a, g.b, g.c, g.ta, g.tb, g.beta,
                         part=(p, *old.part[1:])), *stmts[at].body[1:]]
    else:
        block = kir.Gemm(g.m, g.n, g.k, g.a, g.b, g.c, g.ta, g.tb, g.beta,
                         part=(p, *(fresh.var(kir.INDEX) for _ in range(4))))
        body = [block]
        nxt = stmts[end] if end < len(stmts) else None
        if isinstance(nxt, kir.Loop):
            epilogue = _block_epilogue(g, block, nxt, root, same_array, fresh)
            if epilogue is not None:
                body = epilogue
                end += 1
    if not _rows_read_in_block(body, rw[1], rows_of, writers, g.m, root):
        return False
    piece = _effects(stmts[at:end], root)
    split = _pass_over(piece, stmts[k + 1:at], roles, root) if piece else None
    if split is None or not _loop_passable(loop, split[0], roles, root):
        return False
    above, stay = split
    stmts[k:end] = [*above, kir.Loop(p, loop.extent, (*loop.body, *body), parallel=True),
                    *stay]
    return True


def _next_parallel_loop(stmts: list, k: int, root: Callable) -> tuple[int, str, set] | None:
    """(position of the first parallel loop after the product ``stmts[k]``, the root of
    its result, those of its operands) when the product writes its result whole and may
    move down to that loop: no statement between reads or writes its result or writes
    its operands, or leaves early; else None."""
    out = _product_whole(stmts[k], root)
    if out is None:
        return None
    operands = {root(o.buf.name) for o in (stmts[k].a, stmts[k].b)}
    for at in range(k + 1, len(stmts)):
        s = stmts[at]
        if isinstance(s, kir.Loop) and s.parallel:
            return at, out, operands
        if isinstance(s, (kir.Comment, kir.View, kir.Alloc)):
            continue
        rw = _reads_writes([s], root)
        if rw is None or out in rw[0] | rw[1] or rw[1] & operands:
            return None
    return None


def _product_whole(g: kir.Gemm, root: Callable) -> str | None:
    """The root of the array a single product writes whole (C-ordered from its first
    element, as `blas_parallel.gemm_part` cuts it), else None."""
    c = g.c
    if (g.batch != 1 or g.part or not (isinstance(g.m, int) and isinstance(g.n, int)
                                       and isinstance(g.k, int)) or min(g.m, g.n, g.k) < 1
            or c.ld != g.n or c.offset != 0 or c.buf.shape != (g.m, g.n)):
        return None
    out = root(c.buf.name)
    return None if out in {root(o.buf.name) for o in (g.a, g.b)} else out


def _join_product(stmts: list, k: int, root: Callable, fresh: kir.Fresh) -> bool:
    """Move the product ``stmts[k]`` into the next merged block loop (`product_blocks`)
    as one more block per part, when neither depends on the other and the product may
    move down to it: an independent product then costs no parallel region of its own."""
    g = stmts[k]
    found = _next_parallel_loop(stmts, k, root) if isinstance(g, kir.Gemm) else None
    if found is None:
        return False
    at, out, operands = found
    loop = stmts[at]
    first = loop.body[0] if loop.body else None
    if not (isinstance(first, kir.Gemm) and first.part and first.part[0] == loop.var):
        return False
    rw = _reads_writes(list(loop.body), root)
    if rw is None or out in rw[0] | rw[1] or rw[1] & operands:
        return False
    bounds = tuple(fresh.var(kir.INDEX) for _ in range(4))
    block = kir.Gemm(g.m, g.n, g.k, g.a, g.b, g.c, g.ta, g.tb, g.beta,
                     part=(loop.var, *bounds))
    stmts[at] = kir.Loop(loop.var, loop.extent, (block, *loop.body), parallel=True)
    del stmts[k]
    return True


def _reads_writes(stmts: list, root: Callable) -> tuple[set, set] | None:
    """The roots of the buffers ``stmts`` read and write, or None when they may leave
    early (a raise or a jump)."""
    reads: set = set()
    writes: set = set()
    for t in kir.walk(stmts):
        if isinstance(t, (kir.Raise, kir.Jump)):
            return None
        for e in kir.exprs_of(t):
            reads.update(root(x.buf.name) for x in kir.subexprs(e) if isinstance(x, kir.Load))
        if isinstance(t, kir.Store):
            writes.add(root(t.buf.name))
            if t.combine is not None:
                reads.add(root(t.buf.name))
        elif isinstance(t, kir.Gemm):
            reads.update(root(o.buf.name) for o in (t.a, t.b))
            writes.add(root(t.c.buf.name))
            if t.beta:
                reads.add(root(t.c.buf.name))
        elif isinstance(t, kir.LibCall):
            reads.update(root(b.name) for b in t.args if isinstance(b, kir.Buffer))
            writes.update(root(b.name) for b in t.outs)
            reads.update(root(b.name) for b in t.outs)
    return reads, writes


def _product_block(stmts: list, k: int, root: Callable, same_array: Callable,
                   fresh: kir.Fresh, parts: int) -> tuple[int, kir.Loop] | None:
    """(position, merged loop) for the product ``stmts[k]`` and the first parallel loop
    after it when `product_blocks` may merge them, else None."""
    g = stmts[k]
    c = g.c
    found = _next_parallel_loop(stmts, k, root)
    if found is None:
        return None
    at = found[0]
    loop = stmts[at]
    from .blas_parallel import ROW_PARTS, SPLIT_FLOPS

    p = fresh.var(kir.INDEX)
    block = kir.Gemm(g.m, g.n, g.k, g.a, g.b, c, g.ta, g.tb, g.beta,
                     part=(p, *(fresh.var(kir.INDEX) for _ in range(4))))
    body = _block_epilogue(g, block, loop, root, same_array, fresh)
    # As `blas_parallel.blocks` cuts the product alone; the products that join or chain
    # later take this loop's cut.
    if parts > 1 and g.m * g.n * g.k < ROW_PARTS * SPLIT_FLOPS:
        parts = ROW_PARTS
    return None if body is None else (at, kir.Loop(p, parts, tuple(body), parallel=True))


def _block_epilogue(g: kir.Gemm, block: kir.Gemm, loop: kir.Loop, root: Callable,
                    same_array: Callable, fresh: kir.Fresh) -> list | None:
    """``[block, ...]``: the product's block then ``loop`` (over the product's result,
    element by element) over that block's rows and columns; None when ``loop`` is not
    such a loop."""
    out = root(g.c.buf.name)
    operands = {root(o.buf.name) for o in (g.a, g.b)}
    inner = [t for t in loop.body if isinstance(t, kir.Loop)]
    if (loop.start != 0 or loop.step != 1 or loop.extent != g.m or len(inner) != 1
            or inner[0].start != 0 or inner[0].step != 1 or inner[0].extent != g.n
            or inner[0].parallel):
        return None
    i, j = loop.var, inner[0].var
    rw = _reads_writes([loop], root)
    if rw is None or out not in rw[0] or rw[1] & operands:
        return None
    # Element by element: every store, and every load of an array the loop writes or of
    # the product, is element (i, j) of an array of the product's shape.
    touched = rw[1] | {out}
    for t in kir.walk(loop.body):
        if isinstance(t, kir.Accum) or (isinstance(t, kir.Store) and t.combine is not None):
            return None
        accesses = [x for e in kir.exprs_of(t) for x in kir.subexprs(e)
                    if isinstance(x, kir.Load) and root(x.buf.name) in touched]
        if isinstance(t, kir.Store):
            accesses.append(t)
        for x in accesses:
            if (x.index != (i, j) or x.buf.shape != (g.m, g.n)
                    or same_array(x.buf) is None):
                return None
    _, r0, r1, c0, c1 = block.part

    # Each loop counts from 0 and adds its start, bounded below by 0: from a start LLVM
    # cannot prove non-negative Numba keeps its negative-index wraparound, and over
    # ``range(start, stop)`` the loop did not vectorize even from ``max(start, 0)``
    # (a 1024 x 256 ReLU block loop: 6x the time of the same loop from 0).
    r_at, c_at, ki, kj = (fresh.var(kir.INDEX) for _ in range(4))
    cols = kir.Loop(kj, kir.Bin("-", c1, c_at), (kir.Let(j, kir.Bin("+", c_at, kj)),
                                                   *inner[0].body))
    rows = kir.Loop(ki, kir.Bin("-", r1, r_at), (
        kir.Let(i, kir.Bin("+", r_at, ki)),
        *(cols if t is inner[0] else t for t in loop.body)))
    starts = (kir.Let(r_at, kir.Call("max", (r0, kir.const(0)), kir.INDEX)),
              kir.Let(c_at, kir.Call("max", (c0, kir.const(0)), kir.INDEX)))
    return [block, *starts, rows]


def lower(graph: Graph, name: str = "kernel", parallel: bool = False,
          write_to: dict[int, int] | None = None,
          keep: int = printer.KEEP_LITERAL) -> Lowered:
    """Generate the source of one njit function computing ``graph``.

    The function takes the inputs, the constants, the work arrays, then one output buffer
    per output that is not in ``write_to`` (output index -> input index whose array
    receives it in place). Sizes above ``keep`` are read from the arguments
    (`printer.Sizes`).
    """
    return _Writer(graph, name, parallel, write_to, keep).run()
