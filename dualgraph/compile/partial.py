"""Backward kernels of a multi-output compiled call for a backward that reaches only some
of its outputs.

Eager mode runs no backward for an output whose gradient nobody asks for: the inputs only
that output reaches get no gradient (``.grad`` stays None), and the others get no
contribution from it. The call's own backward kernel takes one cotangent per output, and
a zero cotangent is not the same (``0 * inf`` is nan). So a backward whose cotangents are
a subset of the outputs runs a graph differentiated for that subset alone, reading a
subset of the call's residuals: interpreted the first time a subset is asked for,
compiled (and kept per subset) from the second.
"""

from __future__ import annotations

from typing import Any

from ..eager.compiled_node import readonly_cotangent
from ..ir.graph import Graph, zero_d_operands
from ..passes import optimize
from ..trace.autodiff import differentiate
from .tiered import InterpretedKernel


class PartialKernel:
    """The backward kernel for one subset of the outputs: it takes their cotangents, then
    the call's residuals at ``residuals``, and returns the gradients of the call's inputs
    at ``inputs`` (the others get none)."""

    __slots__ = ("kernel", "residuals", "inputs", "_zero_d")

    def __init__(self, kernel: Any, graph: Graph, residuals: tuple, inputs: tuple) -> None:
        self.kernel = kernel
        self.residuals = residuals
        self.inputs = inputs
        self._zero_d = zero_d_operands(graph)

    def arguments(self, cot: list, saved: tuple) -> list:
        """The kernel's inputs: the cotangents ``cot`` (in their outputs' shapes) as a
        backward kernel takes them, then the residuals it reads among ``saved``."""
        args = [readonly_cotangent(c if c.shape or self._zero_d else c.reshape(1))
                for c in cot]
        return args + [saved[j] for j in self.residuals]

    def run(self, cot: list, saved: tuple) -> list:
        """The gradients of the inputs at ``inputs``."""
        outs = self.kernel.new_outputs()
        self.kernel.run(self.arguments(cot, saved), outs)
        return outs


class PartialBackward:
    """Builds and keeps the `PartialKernel` of each subset of a train plan's outputs.

    ``full``: the outputs that require grad (a backward with all of their cotangents runs
    the plan's own backward kernel)."""

    def __init__(self, plan: Any, fwd: Graph, rg: set | None, written: dict,
                 verify: bool) -> None:
        self.plan = plan
        self.fwd = fwd
        self.rg = rg
        self.written = written
        self.verify = verify
        self.full = tuple(k for k, r in enumerate(plan.out_rg) if r)
        self.parallel = False
        self.cache = True
        self._kernels: dict[tuple, PartialKernel | None] = {}

    def get(self, seeds: tuple, cot: list, saved: tuple) -> PartialKernel | None:
        """The kernel for the outputs ``seeds``. The first backward for a subset runs its
        graph interpreted (as tier 0 does): a program that asks once per output (a test
        checking each output's gradient) compiles nothing more. The second compiles it
        for the cotangents ``cot`` and the call's residuals ``saved`` (while the plan's
        own kernels are at tier 0, it stays interpreted). None when its residuals are not
        among the call's (the caller then runs the plan's kernel)."""
        k = self._kernels.get(seeds, _NEW)
        if k is None or (k is not _NEW and not isinstance(k.kernel, InterpretedKernel)):
            return k
        from .specialize import build, read_written  # noqa: PLC0415 - it imports this module

        if k is _NEW:
            plan = self.plan
            d = plan.differentiated
            d_m = differentiate(self.fwd, plan.wrt, self.rg, seeds, d.recomputed_nodes)
            n = len(self.fwd.outputs)
            position = {id(r): j for j, r in enumerate(d.forward.outputs[n:])}
            if any(id(r) not in position for r in d_m.forward.outputs[n:]):
                self._kernels[seeds] = None
                return None
            residuals = tuple(position[id(r)] for r in d_m.forward.outputs[n:])
            inputs = tuple(k for k in range(len(plan.wrt)) if k not in d_m.absent)
            back = d_m.backward.replace(outputs=[d_m.backward.outputs[k] for k in inputs])
            graph = optimize(read_written(back, self.written), verify=self.verify)
            k = PartialKernel(InterpretedKernel(graph, {}), graph, residuals, inputs)
            self._kernels[seeds] = k
            return k
        if getattr(self.plan.bwd_kernel, "tier", None) == 0:
            return k
        graph = k.kernel.graph
        compiled = PartialKernel(build(graph, self.parallel, self.cache, "backward"), graph,
                                 k.residuals, k.inputs)
        compiled.kernel.compile(compiled.arguments(cot, saved), prepared=True)
        self._kernels[seeds] = compiled
        return compiled


_NEW = object()  # a subset not asked for yet
