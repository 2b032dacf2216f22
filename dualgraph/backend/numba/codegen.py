"""Lower an optimized `Graph` to the source of one ``numba.njit`` function.

The source is meant to be read (``dg.explain`` prints it): one block per IR node with the IR
line as a comment above it. What each op becomes is looked up by its name in
``lowerings.py``: fused groups become one loop nest, each member an inlined scalar
expression; broadcasting is index arithmetic (a dimension of size 1 reads index 0), never
a materialized copy. Reductions fold with their op's `Reduction` spec and accumulate in
float64 (float32 input) so long sums stay accurate; matmuls go to BLAS with the fused
epilogue applied in one pass over the result.

Values are stored as arrays; a 0-d value is stored with shape ``(1,)`` (the runtime
reshapes at the boundary), which keeps every loop and index uniform.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...ir.graph import Graph, Node
from ...ops.broadcast import result_dtype
from ...ops.registry import OPS
from . import lowerings
from .lowerings import MATH, LoweringError, ishape, literal, missing, np_dtype

__all__ = ["LANES", "Lowered", "LoweringError", "ishape", "lower", "np_dtype"]

# Independent accumulators for long reductions (see _Writer._lane_reduce).
LANES = 16
# Loops this big or bigger use prange under parallel=True (below it, threads cost more).
PARALLEL_MIN_SIZE = 1 << 15


def _py(value: object) -> str:
    """Source for a Python literal; inf and nan have no literal, ``repr`` gives bare names."""
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if value != value else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


def _typed(value: object, dtype: np.dtype) -> str:
    """A literal as a constant of ``dtype``: a bare 2.0 would make a float32 loop float64."""
    if dtype == np.bool_:
        return "True" if value else "False"
    if dtype.kind == "f":
        return f"{np_dtype(dtype)}({_py(float(value))})"
    return f"{np_dtype(dtype)}({int(value)})"


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
        self.ir_names = graph.names()
        self.line_of_node: dict[str, int] = {}
        self.tmp = 0

    # ------------------------------------------------------------------ helpers
    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

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
        body_start = len(self.lines)
        for n in self.graph.nodes:
            if n.op == "const":
                name = f"c{len(self.consts)}"
                value = np.ascontiguousarray(n.attrs["value"])
                self.consts.append(value.reshape(ishape(n)))
                self.var[id(n)] = name
                continue
            self.node(n)
        # Results go into buffers the caller passes (o0, o1, ...), or straight into an
        # input's array for in-place state (write_to: output -> input): returning arrays
        # would cost a boxing step per array per call.
        outs = [self.var[id(o)] for o in self.graph.outputs]
        self.emit("# outputs")
        for k, v in enumerate(outs):
            if k not in self.write_to:
                self.copy_loop(f"o{k}", v, ishape(self.graph.outputs[k]))
        for k, v in enumerate(outs):
            if k in self.write_to and not self.fresh_value(self.graph.outputs[k]):
                # May alias an input that another write changes first: snapshot it.
                self.emit(f"{v} = {v}.copy()")
        for k, v in enumerate(outs):
            if k in self.write_to:
                self.copy_loop(f"a{self.write_to[k]}", v, ishape(self.graph.outputs[k]))
        self.emit("return 0")
        params += [f"c{k}" for k in range(len(self.consts))]
        params += [f"o{k}" for k in range(len(outs)) if k not in self.write_to]
        header = [f"def {self.name}({', '.join(params)}):"]
        body = self.lines[body_start:]
        offset = len(header)
        self.line_of_node = {k: v + offset for k, v in self.line_of_node.items()}
        return Lowered("\n".join(header + body), self.name, self.consts,
                       [tuple(o.shape) for o in self.graph.outputs], len(self.graph.inputs),
                       self.line_of_node)

    def copy_loop(self, dst: str, src: str, shape: tuple) -> None:
        """``dst[...] = src`` as an explicit loop: slice assignment makes Numba compile its
        generic broadcasting setitem for every distinct signature (~0.5 s each)."""
        idx, indent = self.loops(shape, 1)
        at = ", ".join(idx)
        self.emit(f"{dst}[{at}] = {src}[{at}]", indent)

    def fresh_value(self, n: Node) -> bool:
        """Whether ``n``'s array is allocated by this kernel (not an input or a view)."""
        if n.op == "input":
            return False
        op = OPS.get(n.op)
        return not (op is not None and op.view)

    def node(self, n: Node) -> None:
        out = f"v{self.ir_names[id(n)][1:]}"
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
            if op.loop_fusible or op.reduction:
                # A lone loop op is a group of one.
                b_inputs = [Node("input", (), {}, tuple(i.shape), i.dtype)
                            for i in ins if isinstance(i, Node)]
                it = iter(b_inputs)
                b_ins = tuple(next(it) if isinstance(i, Node) else i for i in ins)
                bn = Node(n.op, b_ins, n.attrs, tuple(n.shape), n.dtype)
                body = Graph(b_inputs, [bn], [bn])
                args = [self.var[id(i)] for i in ins if isinstance(i, Node)]
                kind = "reduce" if op.reduction else "elementwise"
                self.group(body, args, out, kind)
            else:
                args = [self.var[id(i)] if isinstance(i, Node) else _py(i) for i in ins]
                for line in lowerings.kernel_lowering(n.op)(n, args, out):
                    self.emit(line)
        self.var[id(n)] = out

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

    def loops(self, shape: tuple, indent: int, parallel_ok: bool = True) -> tuple[list, int]:
        idx = []
        for k, d in enumerate(shape):
            i = f"i{k}"
            rng = "range"
            if k == 0 and self.parallel and parallel_ok and math.prod(shape) >= PARALLEL_MIN_SIZE:
                rng = "numba.prange"
            self.emit(f"for {i} in {rng}({d}):", indent)
            idx.append(i)
            indent += 1
        return idx, indent

    def loop_group(self, members: list[Node], root: Node, env: dict, out: str,
                   shape: tuple, target: str | None = None, skip: set | None = None,
                   sym: dict | None = None) -> None:
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
        if op.contraction_bias:
            # The bias is part of the epilogue loop: BLAS computes only the product.
            a, b = anchor.inputs[1], anchor.inputs[2]
            prod = Node("matmul", (a, b), {}, tuple(anchor.shape), anchor.dtype)
            for line in lowerings.kernel_lowering("matmul")(prod, ins[1:], mm):
                self.emit(line)
            bias = anchor.inputs[0]
            bias_ref = f"{ins[0]}[{{}}]"
        else:
            for line in lowerings.kernel_lowering(anchor.op)(anchor, ins, mm):
                self.emit(line)
            bias, bias_ref = None, None
        root = body.outputs[0]
        shape = ishape(root)
        # Each element is read before it is overwritten, so the epilogue reuses the
        # product's buffer when shapes and dtypes agree.
        in_place = tuple(anchor.shape) == tuple(root.shape) and anchor.dtype == root.dtype
        if not in_place:
            self.emit(f"{out} = np.empty({shape}, {np_dtype(root.dtype)})")
        target = mm if in_place else out
        idx, indent = self.loops(shape, 1)
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
        if in_place:
            self.emit(f"{out} = {mm}")

    def reduce_group(self, members: list[Node], root: Node, env: dict, out: str) -> None:
        src = root.inputs[0]
        shape = ishape(src)
        axis = root.attrs["axis"]
        nd = len(src.shape)
        axes = tuple(range(nd)) if axis is None else axis
        spec = OPS[root.op].reduction
        combine = _Fold(lowerings.combine_of(OPS[root.op]), spec.nan_propagates)
        acc_t = combine.how.accumulator(root.dtype)
        count = math.prod(src.shape[a] for a in axes) if nd else 1
        init = literal(spec.identity(acc_t))
        body = [m for m in members if m is not root]
        outer = [d for d in range(nd) if d not in axes]
        suffix = all(a > o for a in axes for o in outer)  # reduce over trailing dims
        if not nd:
            outer, suffix = [], True
        keep = tuple(1 if d in axes else shape[d] for d in range(nd)) or (1,)
        val = None
        if suffix:
            # A scalar accumulator per outer index: the hot loop touches no memory but
            # its inputs.
            outer_shape = tuple(shape[d] for d in outer)
            res = self.fresh("r")
            self.emit(f"{res} = np.empty({outer_shape or (1,)}, {np_dtype(acc_t)})")
            oidx, indent = self.loops(outer_shape, 1) if outer_shape else ([], 1)
            acc = self.fresh("acc")
            self.emit(f"{acc} = {np_dtype(acc_t)}({init})", indent)
            inner_shape = tuple(shape[d] for d in range(len(outer), nd))
            if len(inner_shape) == 1 and inner_shape[0] >= 4 * LANES:
                self._lane_reduce(body, env, shape, oidx, inner_shape[0], acc, acc_t,
                                  combine, init, src, indent)
            else:
                iidx = []
                for k, d in enumerate(inner_shape):
                    i = f"i{len(outer) + k}"
                    self.emit(f"for {i} in range({d}):", indent)
                    iidx.append(i)
                    indent += 1
                idx = oidx + iidx if nd else ["0"]
                sym: dict = {}
                self.scalar_lines(body, env, shape, idx, sym, indent, set())
                val = self.value(src, sym, env, shape, idx)
                self._combine(acc, val, combine, acc_t, indent)
            target = f"{res}[{', '.join(oidx) if oidx else '0'}]"
            self.emit(f"{target} = {acc}", 1 + len(oidx))
            final = res
        else:
            acc = self.fresh("acc")
            self.emit(f"{acc} = np.full({keep}, {init}, {np_dtype(acc_t)})")
            idx, indent = self.loops(shape, 1, parallel_ok=False)
            sym = {}
            self.scalar_lines(body, env, shape, idx, sym, indent, set())
            val = self.value(src, sym, env, shape, idx)
            ridx = ", ".join("0" if d in axes else idx[d] for d in range(nd))
            self._combine(f"{acc}[{ridx}]", val, combine, acc_t, indent)
            final = acc
        if spec.finalize == "mean":
            # An empty mean is 0/0: nan, like NumPy's (the literal needs np.nan's name).
            self.emit(f"{final} = {final} * {_py(1.0 / count if count else math.nan)}")
        self.emit(f"{out} = {final}.astype({np_dtype(root.dtype)}).reshape({ishape(root)})")

    def _lane_reduce(self, body: list, env: dict, shape: tuple, oidx: list, n: int, acc: str,
                     acc_t: np.dtype, combine: _Fold, init: str, src: Node,
                     indent: int) -> None:
        """Reduce a long innermost axis with LANES independent accumulators.

        A single accumulator is a loop-carried dependency that LLVM may not vectorize
        without reassociating (which would also license it to reorder the math of the
        fast exp/tanh); independent lanes vectorize as they are, and summing LANES
        partial sums is also more accurate.
        """
        lanes = self.fresh("lanes")
        i = f"i{len(oidx)}"
        self.emit(f"{lanes} = np.full({LANES}, {init}, {np_dtype(acc_t)})", indent)
        self.emit(f"for {i}b in range({n // LANES}):", indent)
        self.emit(f"for {i}l in range({LANES}):", indent + 1)
        self.emit(f"{i} = {i}b * {LANES} + {i}l", indent + 2)
        idx = oidx + [i]
        sym: dict = {}
        self.scalar_lines(body, env, shape, idx, sym, indent + 2, set())
        self._combine(f"{lanes}[{i}l]", self.value(src, sym, env, shape, idx), combine, acc_t,
                      indent + 2)
        self.emit(f"for {i} in range({n // LANES * LANES}, {n}):", indent)
        sym = {}
        self.scalar_lines(body, env, shape, idx, sym, indent + 1, set())
        self._combine(f"{lanes}[0]", self.value(src, sym, env, shape, idx), combine, acc_t,
                      indent + 1)
        self.emit(f"for {i}l in range({LANES}):", indent)
        self._combine(acc, f"{lanes}[{i}l]", combine, acc_t, indent + 1)

    def _combine(self, acc: str, val: str, combine: _Fold, acc_t: np.dtype,
                 indent: int) -> None:
        better = combine.how.better
        if better is None:  # a sum: nan propagates through the arithmetic
            self.emit(f"{acc} += {np_dtype(acc_t)}({val})", indent)
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
