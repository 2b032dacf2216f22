"""`dg.explain`: what tracing and each pass do to a program, forward and backward.

The report ends with a source map: each line of user code, the IR nodes it became after
optimization (members of fused kernels included) and the line of generated Numba source
that computes each of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .compile.plan import Kind
from .ir.graph import Graph, Node
from .passes import PassStats, fusion_groups, op_count, optimize
from .trace.autodiff import Differentiated, differentiate, scalar_loss, value_and_grad
from .trace.tracer import trace


@dataclass(frozen=True)
class SourceLine:
    """One source-map row: user ``file:line`` -> IR node -> generated Numba line."""

    user: str | None
    graph: str  # "forward", "backward" or "kernel"
    op: str
    ir: str
    kernel: str | None  # the IR name of the fused node this node is a member of
    numba_line: int  # 1-based, in `Explanation.numba_source`
    numba_text: str


@dataclass(repr=False)
class Explanation:
    """The report of `explain`; ``str()`` (and the interpreter's echo) shows every stage,
    ``print(dg.explain(...))`` in a script."""

    traced: Graph
    optimized: Graph
    passes: PassStats
    differentiated: Differentiated | None = None
    backward_optimized: Graph | None = None
    backward_passes: PassStats = field(default_factory=PassStats)
    numba_source: str | None = None
    source_map: list[SourceLine] = field(default_factory=list)
    # For a `dg.compile`d function: which tier serves its calls now (see `tier_of`).
    tier: str | None = None
    # A scalar loss: the one graph `dg.compile` runs for it, forward and backward together
    # (`trace.autodiff.value_and_grad`, optimized).
    value_and_grad: Graph | None = None
    # Bytes and flops of each kernel of the graphs `dg.compile` runs (`compare.KernelCost`);
    # with ``roofline=True`` also each one's time alone and share of the machine's limit.
    kernel_costs: list = field(default_factory=list)
    limits: dict | None = None
    # For a `dg.compile`d function already called with arguments of this signature: the
    # Python call path generated for it (`compile.callgen`).
    call_path: str | None = None
    # A compiled training step (``backward()`` and the optimizer inside the function): the
    # graph `dg.compile` runs is the whole traced step, with its in-place updates.
    step: bool = False
    # Where the graphs come from: the signature `dg.compile` built for these arguments, or
    # a fresh `dg.trace` (a plain function, or a compiled one not called with them yet).
    origin: str | None = None

    def lines_for(self, user: str) -> list[SourceLine]:
        """Source-map rows whose user location ends with ``user`` (e.g. ``"model.py:12"``)."""
        return [r for r in self.source_map if r.user and r.user.endswith(user)]

    @property
    def fusion_groups(self) -> list[list[str]]:
        return [[m.op for m in members] for _, members, _ in fusion_groups(
            self.passes.before("fuse"))]

    def _stages(self, title: str, start: Graph, passes: PassStats) -> list[str]:
        out = [f"== {title}: traced ({op_count(start)} nodes)", str(start)]
        given = passes[0].graph_before if passes else None
        if given is not None and given is not start and str(given) != str(start):
            # The graph differentiated (and extended with the values the backward reads)
            # before the passes ran: what they were given.
            out += [f"-- given to the passes ({op_count(given)} nodes)", str(given)]
        for s in passes:
            out.append(f"-- after {s.name}: {s.nodes_before} -> {s.nodes_after} nodes")
            out += [f"   {n}" for n in s.notes[:20]]
            if len(s.notes) > 20:
                out.append(f"   ... {len(s.notes) - 20} more")
            if s.graph is not None and (s.nodes_before != s.nodes_after or s.notes):
                out.append(str(s.graph))
            else:  # said rather than reprinted: the graph is the one printed above
                out.append("   (graph unchanged)")
        return out

    def _kernel_lines(self) -> list[str]:
        if not self.kernel_costs:
            return []
        from .compare import format_size, roofline_lines

        if self.limits:
            return ["== kernels against the machine's limits"] + roofline_lines(
                self.kernel_costs, self.limits)[1:]
        out = ["== kernels: bytes moved and flops (explain(..., roofline=True) times each "
               "against the machine's limits)"]
        for k in self.kernel_costs:
            out.append(f"   {k.graph} {k.index}: {k.what}: {format_size(k.bytes, 'B')}, "
                       f"{format_size(k.flops, 'FLOP')}")
        return out

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        lines = [f"== tier: {self.tier}"] if self.tier else []
        lines += [f"== graphs: {self.origin}"] if self.origin else []
        title = "step" if self.step else "forward"
        lines += self._stages(title, self.traced, self.passes)
        kernels = sum(1 for n in self.optimized.nodes if n.op == "fused")
        lines.append(f"== {title}: {op_count(self.traced)} traced nodes -> "
                     f"{op_count(self.optimized)} optimized nodes, {kernels} fused kernel(s)")
        if self.differentiated is not None:
            d = self.differentiated
            lines += self._stages("backward", d.backward, self.backward_passes)
            lines.append(
                f"== residuals: {len(d.forward.outputs) - d.n_outputs} saved by the forward "
                f"({d.residual_bytes} bytes); recomputed in the backward: "
                f"{', '.join(d.recomputed) or 'nothing'} ({d.bytes_saved} bytes saved per step)"
            )
        if self.value_and_grad is not None:
            j = self.value_and_grad
            kernels = sum(1 for n in j.nodes if n.op == "fused")
            lines.append(f"== value and grad: a scalar loss, so dg.compile runs forward and "
                         f"backward as one kernel: {op_count(j)} optimized nodes, {kernels} "
                         "fused kernel(s)")
            lines.append(str(j))
        lines += self._kernel_lines()
        lines.append("== fusion groups (forward):")
        lines += [f"   kernel {k}: {' -> '.join(g)}" for k, g in enumerate(self.fusion_groups)]
        if self.call_path:
            lines.append("== call path (generated Python: checks the signature and guards, "
                         "gathers the inputs, runs the kernel, wraps the outputs):")
            lines.append(self.call_path.rstrip())
        lines.append("== Numba source (one njit function per graph):")
        lines.append(self.numba_source or "(not generated)")
        if self.source_map:
            lines.append("== source map: user line -> IR node -> Numba source line")
            for r in self.source_map:
                where = f" (in kernel {r.kernel})" if r.kernel else ""
                lines.append(f"   {_short(r.user):24s} {r.graph:8s} {r.ir}{where}")
                lines.append(f"   {'':24s} {'':8s}   -> line {r.numba_line}: "
                             f"{r.numba_text.strip()}")
        return "\n".join(lines)


def explain(fn: Callable, *example_args: Any, wrt: Any = "auto",
            roofline: bool = False) -> Explanation:
    """Trace ``fn``, optimize it pass by pass, and differentiate it; for a `dg.compile`d
    function already called with arguments of this signature, show instead the graphs its
    compiled plan runs (its captured inputs, constants and passes, as compiled).

    The backward graph is built for the inputs that require grad (tensor arguments with
    ``requires_grad=True`` and captured module parameters); ``wrt=None`` skips it. Each
    kernel's bytes and flops are listed; ``roofline=True`` also compiles and times each
    one alone against the machine's measured limits (`dualgraph.compare.machine_limits`).
    The result prints every stage: ``print(dg.explain(...))``.

    >>> print(dg.explain(lambda x: (x * 2).exp().sum(), dg.randn(3)))   # doctest: +SKIP
    """
    plan = fn.plan_for(*example_args) if hasattr(fn, "plan_for") else None
    if plan is not None and plan.optimized is not None:
        e = _explain_plan(fn, plan)
    else:
        e = _explain(fn, *example_args, wrt=wrt)
        if hasattr(fn, "plan_for"):
            e.origin = ("dg.trace's: not called with arguments of this signature yet, so "
                        "nothing is compiled for it (call it once to see what it runs)")
    if hasattr(fn, "call_source"):
        e.call_path = fn.call_source(*example_args)
    from .compare import asdict, kernel_costs, kernel_roofline, machine_limits

    graphs = ([(e.optimized, "step")] if e.step else
              [(e.value_and_grad, "step")] if e.value_and_grad is not None else
              [(e.optimized, "forward")] + ([(e.backward_optimized, "backward")]
                                           if e.backward_optimized is not None else []))
    if roofline:
        limits = machine_limits()
        e.limits = asdict(limits)
        e.kernel_costs = kernel_roofline(graphs, limits)
    else:
        e.kernel_costs = [k for g, name in graphs for k in kernel_costs(g, name)]
    return e


def _explain_plan(fn: Callable, plan: Any) -> Explanation:
    """A compiled function already called with arguments of this signature: the graphs
    its plan runs, as `dg.compile` traced (captured inputs, constants, in-place updates)
    and optimized them, rather than a new trace.

    A training step (``backward()`` and an optimizer inside) is one graph; a scalar loss
    one graph computing the loss and its gradients; other differentiated outputs a forward
    graph (returning the residuals too) and a backward graph; the rest one kernel."""
    opt = plan.optimized
    tier = tier_of(fn)
    origin = f"the {plan.mode.value} plan dg.compile built for this signature"
    if plan.mode is Kind.STEP:
        source, smap = _lower_all([(opt, "step", plan.write_to)])
        return Explanation(plan.graph, opt, opt.pass_stats, numba_source=source,
                           source_map=smap, tier=tier, step=True, origin=origin)
    if plan.mode is not Kind.TRAIN:
        source, smap = _lower_all([(opt, "kernel", plan.write_to)])
        return Explanation(plan.graph, opt, opt.pass_stats, numba_source=source,
                           source_map=smap, tier=tier, origin=origin)
    d = plan.differentiated
    if plan.joint:
        source, smap = _lower_all([(opt, "forward", plan.write_to)])
        return Explanation(plan.graph, opt, opt.pass_stats, d, numba_source=source,
                           source_map=smap, tier=tier, value_and_grad=opt, origin=origin)
    bwd = plan.backward_graph
    source, smap = _lower_all([(opt, "forward", plan.write_to), (bwd, "backward", None)])
    return Explanation(plan.graph, opt, opt.pass_stats, d, bwd, bwd.pass_stats, source, smap,
                       tier=tier, origin=origin)


def _explain(fn: Callable, *example_args: Any, wrt: Any = "auto") -> Explanation:
    tier = tier_of(fn)
    traced = trace(fn, *example_args)
    traced.verify("trace")
    if wrt == "auto":
        from .eager.tensor import Tensor

        n_args = traced.n_args
        tensors = [a for a in example_args if isinstance(a, Tensor) or hasattr(a, "shape")]
        wrt = [i for i, a in enumerate(tensors[:n_args])
               if isinstance(a, Tensor) and a.requires_grad]
        wrt += list(range(n_args, len(traced.inputs)))
    if wrt:
        d = differentiate(traced, wrt)
        fwd = optimize(d.forward, verify=True)
        bwd = optimize(d.backward, verify=True)
        source, smap = _lower_all([(fwd, "forward", None), (bwd, "backward", None)])
        joint = None
        if scalar_loss(traced.outputs):
            joint = optimize(value_and_grad(d, traced.outputs), verify=True)
        return Explanation(traced, fwd, fwd.pass_stats, d, bwd, bwd.pass_stats, source, smap,
                           tier=tier, value_and_grad=joint)
    fwd = optimize(traced, verify=True)
    source, smap = _lower_all([(fwd, "kernel", None)])
    return Explanation(traced, fwd, fwd.pass_stats, numba_source=source, source_map=smap,
                       tier=tier)


def tier_of(fn: Any) -> str | None:
    """Which tier serves a compiled function's calls, in words (None for a plain function):
    blocking, or tiered with its tier-0 and tier-1 call counts, the swap and any failure."""
    stats = getattr(fn, "stats", None)
    if stats is None or not hasattr(fn, "tiered"):
        return None
    from .compile.tiered import enabled

    if not enabled(fn.tiered, fn.cache):
        return ("blocking: the first call of each signature compiles the Numba kernels "
                "(tiered=False, DUALGRAPH_TIERED=0 or cache=False)")
    calls = stats.traces + stats.cache_hits
    if not calls:
        return "tiered, not called yet"
    entries = fn.entries() if hasattr(fn, "entries") else []
    now = "tier 1 (Numba kernels)"
    if any(getattr(e, "tier0", False) for e in entries):
        now = "tier 0 (NumPy interpreter" + (")" if stats.tier_failure
                                              else "; the worker is compiling)")
    text = (f"{now}; {stats.tier0_calls} call(s) at tier 0, {stats.tier1_calls} at tier 1")
    if stats.swap_call is not None:
        text += f"; swapped at call {stats.swap_call}, {stats.swap_seconds:.2f} s after the first"
    if stats.tier_failure:
        text += f"; tiering failed, staying at tier 0: {stats.tier_failure}"
    return text


def _short(loc: str | None) -> str:
    return os.path.basename(loc) if loc else "(no location)"


def _lower_all(graphs: list[tuple[Graph, str, dict | None]]
               ) -> tuple[str, list[SourceLine]]:
    """The Numba source the backend generates for each ``(graph, name, write_to)``
    (generation only: nothing is compiled; ``write_to`` maps a kernel output to the input
    it updates in place), joined by blank lines, and the source map over the joined
    text."""
    from .backend import import_backend

    lower = import_backend().codegen.lower

    chunks: list[str] = []
    smap: list[SourceLine] = []
    offset = 0  # lines of the joined source before this function
    for graph, name, write_to in graphs:
        lowered = lower(graph, name=name, write_to=write_to)
        text = lowered.source.split("\n")
        smap += _map_graph(graph, name, lowered.line_of_node, text, offset)
        chunks.append(lowered.source)
        offset += len(text) + 1  # the blank line between functions
    return "\n\n".join(chunks), smap


def _map_graph(graph: Graph, name: str, line_of_node: dict[str, int], text: list[str],
               offset: int) -> list[SourceLine]:
    """Source-map rows for one lowered graph.

    The backend records the line of the IR comment above each top-level node; each node (or
    fused member) maps to the scalar statement the backend tags ``# op`` inside the node's
    block, matched in member order (the order the backend emits them; a plain loop op is a
    group of one), falling back to the block's first line where no statement has the tag
    (a BLAS call, a reduction's accumulator).
    """
    names = graph.names()
    starts = sorted(line_of_node.values())
    rows: list[SourceLine] = []

    def row(n: Node, ir: str, kernel: str | None, line: int) -> SourceLine:
        return SourceLine(n.loc, name, n.op, ir, kernel, line + offset, text[line - 1])

    for n in graph.nodes:
        ir_name = names[id(n)]
        if n.op == "const" or ir_name not in line_of_node:
            continue
        first = line_of_node[ir_name] + 1
        end = next((s for s in starts if s >= first), len(text) + 1)
        if n.op == "fused":
            body = n.attrs["body"]
            body_names = body.names()
            members = [(m, body.format_node(m, body_names), ir_name)
                       for m in body.nodes if m.op != "const"]
        else:
            members = [(n, graph.format_node(n, names), None)]
        cursor = first
        for m, ir, kernel in members:
            line = first
            for k in range(cursor, end):
                if text[k - 1].rstrip().endswith(f"# {m.op}"):
                    line, cursor = k, k + 1
                    break
            rows.append(row(m, ir, kernel, line))
    return rows
