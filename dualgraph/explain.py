"""`dg.explain`: what tracing and each pass do to a program, forward and backward."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .ir.graph import Graph
from .passes import PassStat, fusion_groups, op_count, optimize
from .trace.autodiff import Differentiated, differentiate
from .trace.tracer import trace


@dataclass
class Explanation:
    """The report of `explain`; ``str()`` prints every stage."""

    traced: Graph
    optimized: Graph
    passes: list[PassStat]
    differentiated: Differentiated | None = None
    backward_optimized: Graph | None = None
    backward_passes: list[PassStat] = field(default_factory=list)
    numba_source: str | None = None

    @property
    def fusion_groups(self) -> list[list[str]]:
        return [[m.op for m in members] for _, members, _ in fusion_groups(
            self.passes[-2].graph if len(self.passes) > 1 else self.traced)]

    def _stages(self, title: str, start: Graph, passes: list[PassStat]) -> list[str]:
        out = [f"== {title}: traced ({op_count(start)} nodes)", str(start)]
        for s in passes:
            out.append(f"-- after {s.name}: {s.nodes_before} -> {s.nodes_after} nodes")
            out += [f"   {n}" for n in s.notes[:20]]
            if len(s.notes) > 20:
                out.append(f"   ... {len(s.notes) - 20} more")
            if s.graph is not None and s.nodes_before != s.nodes_after or s.notes:
                out.append(str(s.graph))
        return out

    def __str__(self) -> str:
        lines = self._stages("forward", self.traced, self.passes)
        kernels = sum(1 for n in self.optimized.nodes if n.op == "fused")
        lines.append(f"== forward: {op_count(self.traced)} traced nodes -> "
                     f"{op_count(self.optimized)} optimized nodes, {kernels} fused kernel(s)")
        if self.differentiated is not None:
            d = self.differentiated
            lines += self._stages("backward", d.backward, self.backward_passes)
            lines.append(
                f"== residuals: {len(d.forward.outputs) - d.n_outputs} saved by the forward "
                f"({d.residual_bytes} bytes); recomputed in the backward: "
                f"{', '.join(d.recomputed) or 'nothing'} ({d.bytes_saved} bytes saved per step)"
            )
        lines.append("== Numba source (one njit function per graph):")
        lines.append(self.numba_source or "(not generated)")
        return "\n".join(lines)


def explain(fn: Callable, *example_args: Any, wrt: Any = "auto") -> Explanation:
    """Trace ``fn``, optimize it pass by pass, and differentiate it.

    The backward graph is built for the inputs that require grad (tensor arguments with
    ``requires_grad=True`` and captured module parameters); ``wrt=None`` skips it.

    >>> print(dg.explain(lambda x: (x * 2).exp().sum(), dg.randn(3)))   # doctest: +SKIP
    """
    traced = trace(fn, *example_args)
    traced.verify("trace")
    if wrt == "auto":
        from .eager.tensor import Tensor

        n_args = getattr(traced, "n_args", len(traced.inputs))
        tensors = [a for a in example_args if isinstance(a, Tensor) or hasattr(a, "shape")]
        wrt = [i for i, a in enumerate(tensors[:n_args])
               if isinstance(a, Tensor) and a.requires_grad]
        wrt += list(range(n_args, len(traced.inputs)))
    if wrt:
        d = differentiate(traced, wrt)
        fwd = optimize(d.forward, verify=True)
        bwd = optimize(d.backward, verify=True)
        source = _source(fwd, "forward") + "\n\n" + _source(bwd, "backward")
        return Explanation(traced, fwd, fwd.pass_stats, d, bwd, bwd.pass_stats, source)
    fwd = optimize(traced, verify=True)
    return Explanation(traced, fwd, fwd.pass_stats, numba_source=_source(fwd, "kernel"))


def _source(graph: Graph, name: str) -> str:
    """The Numba source the backend generates for ``graph`` (generation only: no compile)."""
    from .backend.numba.codegen import lower

    return lower(graph, name=name).source
