"""Graph autodiff: a backward graph traced from the registry's VJP rules.

The same rules the eager engine runs are run here under a tracer, so there is no second copy
of any derivative. The result is partitioned like a compiler's: the forward graph also
returns the *residuals* the backward reads, and residuals that are cheap to recompute from
values that are saved anyway (elementwise and view ops) are recomputed in the backward
instead of saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..eager.grad_mode import GRAD_ENABLED
from ..ir.graph import Graph, Node
from ..modes import current_mode
from ..ops.broadcast import fit_grad
from ..ops.elementwise import add
from ..ops.registry import OPS
from .tracer import TraceContext, Tracer


@dataclass
class Differentiated:
    """A forward graph split for training.

    ``forward`` returns the original outputs, then the residuals. ``backward`` takes one
    cotangent per original output, then the residuals, and returns one gradient per input
    in ``wrt``.
    """

    forward: Graph
    backward: Graph
    n_outputs: int
    wrt: tuple
    residual_bytes: int = 0
    recomputed: list = field(default_factory=list)
    bytes_saved: int = 0
    # Positions in ``wrt`` that no gradient reaches (every VJP on the way gave None, as
    # ``nll_loss``'s does for class weights): their gradient is a zeros constant here,
    # where the eager tape leaves ``.grad`` None.
    absent: tuple = ()
    # The forward nodes behind ``recomputed``, in forward order.
    recomputed_nodes: list = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f"forward ({self.n_outputs} output(s) + "
            f"{len(self.forward.outputs) - self.n_outputs} residual(s), "
            f"{self.residual_bytes} residual bytes):",
            str(self.forward),
            f"backward (gradients for inputs {list(self.wrt)}):",
            str(self.backward),
        ]
        if self.recomputed:
            lines.append(
                f"recomputed in the backward instead of saved: {', '.join(self.recomputed)} "
                f"({self.bytes_saved} bytes saved per step)"
            )
        return "\n".join(lines)


def _nbytes(n: Node) -> int:
    return int(np.prod(n.shape, dtype=np.int64)) * n.dtype.itemsize


class _VJPContext:
    """The VJP context protocol (see `OpDef`) over a forward node, inside a backward trace."""

    __slots__ = ("node", "_res", "needs_input_grad")

    def __init__(self, node: Node, res: Any, needs: tuple) -> None:
        self.node = node
        self._res = res
        self.needs_input_grad = needs

    @property
    def inputs(self) -> tuple:
        return self.node.inputs

    @property
    def attrs(self) -> dict:
        return self.node.attrs

    @property
    def args(self) -> tuple:
        return tuple(self._res(i) if isinstance(i, Node) else i for i in self.node.inputs)

    @property
    def out(self) -> Any:
        return self._res(self.node)


def differentiate(fwd: Graph, wrt: Sequence[int] | None = None,
                  rg: set[int] | None = None, seeds: Sequence[int] | None = None,
                  recompute: Sequence[Node] | None = None) -> Differentiated:
    """Build the backward graph of ``fwd`` for the inputs at positions ``wrt``.

    ``wrt`` defaults to every floating-point input. ``rg`` (node ids), when given, limits
    differentiation to the nodes a trace recorded as requiring grad: a value computed under
    ``no_grad`` is then a constant, as on the eager tape. The forward graph must not be
    fused yet (differentiate first, then optimize both halves).

    ``seeds`` (default: all) are the positions of the outputs that get a cotangent: the
    backward takes only theirs, and the others contribute nothing (not a zero cotangent,
    whose products with an inf or nan would not be zero), as eager mode runs no backward
    for an output whose gradient is not asked for. ``recompute``: the nodes another
    differentiation of ``fwd`` recomputed in its backward (``recomputed_nodes``); this one
    recomputes the same ones where it needs them, so its residuals are among that one's.
    """
    if wrt is None:
        wrt = [i for i, n in enumerate(fwd.inputs) if n.dtype.kind == "f"]
    wrt = tuple(wrt)
    for i in wrt:
        if not 0 <= i < len(fwd.inputs):
            raise IndexError(f"differentiate: no input {i} (the graph has {len(fwd.inputs)})")
    bwd = _Backward(fwd)
    seeded = range(len(fwd.outputs)) if seeds is None else sorted(seeds)
    grads_out, absent = bwd.accumulate(_active(fwd, wrt, rg), wrt, seeded)
    if recompute is None:
        recomputed = _rematerializable(fwd, bwd.saved)
    else:
        recomputed = _needed(recompute, bwd.saved)
        for n in recomputed:
            bwd.residual(n)  # each recomputed value stands behind a placeholder
    bwd_nodes, grads_out = bwd.recompute(recomputed, grads_out)
    fwd_inputs = {id(n) for n in fwd.inputs}
    kept = [n for n in bwd.saved if id(n) not in {id(r) for r in recomputed}]
    used = _used_ids(bwd_nodes, grads_out)
    kept = [n for n in kept if id(bwd.placeholders[id(n)].node) in used]
    res_inputs = [bwd.placeholders[id(n)].node for n in kept]
    backward = Graph([bwd.cotangents[k].node for k in seeded] + res_inputs, bwd_nodes,
                     grads_out)
    forward = fwd.replace(outputs=list(fwd.outputs) + kept)
    return Differentiated(
        forward=forward,
        backward=backward,
        n_outputs=len(fwd.outputs),
        wrt=wrt,
        residual_bytes=sum(_nbytes(n) for n in kept if id(n) not in fwd_inputs),
        recomputed=[f"{n.op} {n.type_str}" for n in recomputed],
        bytes_saved=sum(_nbytes(n) for n in recomputed),
        absent=tuple(absent),
        recomputed_nodes=list(recomputed),
    )


def _needed(recompute: Sequence[Node], saved: list[Node]) -> list[Node]:
    """The nodes of ``recompute`` (in forward order) that the values ``saved`` read, or
    that another needed one reads."""
    needed = {id(n) for n in saved}
    for n in reversed(recompute):
        if id(n) in needed:
            needed.update(id(i) for i in n.inputs if isinstance(i, Node))
    return [n for n in recompute if id(n) in needed]


def _active(fwd: Graph, wrt: tuple, rg: set[int] | None) -> set[int]:
    """Ids of the nodes whose value depends differentiably on the inputs ``wrt``."""
    active: set[int] = {id(fwd.inputs[i]) for i in wrt}
    for n in fwd.nodes:
        if n.op == "fused":
            raise ValueError("differentiate the graph before fusing it")
        op = OPS.get(n.op)
        if n.uid in fwd.no_grad:
            continue  # recorded under no_grad: a constant, as on the eager tape
        if op is not None and op.differentiable and (rg is None or id(n) in rg) and any(
            isinstance(i, Node) and id(i) in active for i in n.inputs
        ):
            active.add(id(n))
    return active


class _Backward:
    """The backward trace of a forward graph: its cotangent inputs, and the forward values
    it reads, each seen through one placeholder input (a residual)."""

    def __init__(self, fwd: Graph) -> None:
        self.fwd = fwd
        self.ctx = TraceContext()
        self.cotangents = [self.ctx.new_input(o.shape, o.dtype) for o in fwd.outputs]
        self.placeholders: dict[int, Tracer] = {}
        self.saved: list[Node] = []  # forward nodes behind the residual inputs, in order

    def residual(self, n: Node) -> Tracer:
        """Forward value ``n`` as the backward reads it: a constant, or a residual input."""
        if n.op == "const":
            return Tracer(self.ctx.const(n.attrs["value"]), self.ctx)
        t = self.placeholders.get(id(n))
        if t is None:
            t = Tracer(Node("input", (), {}, tuple(n.shape), n.dtype), self.ctx)
            self.placeholders[id(n)] = t
            self.saved.append(n)
        return t

    def accumulate(self, active: set[int], wrt: tuple, seeded: Sequence[int]
                   ) -> tuple[list[Node], list[int]]:
        """Trace the VJPs in reverse: the gradient node of each input in ``wrt``, and the
        positions in ``wrt`` of those that get none (a zero constant stands in)."""
        ct: dict[int, Tracer] = {}
        grads_out, absent = [], []
        # The backward graph is compiled into a kernel and never differentiated again
        # (backward(create_graph=True) through a compiled function is refused): its VJPs
        # run with grad mode off, as an eager backward without create_graph does, so an op
        # whose VJP has a one-op form (a recurrent layer's loop) uses it.
        was = GRAD_ENABLED.value
        GRAD_ENABLED.value = False
        try:
            return self._accumulate(active, wrt, seeded, ct, grads_out, absent)
        finally:
            GRAD_ENABLED.value = was

    def _accumulate(self, active: set[int], wrt: tuple, seeded: Sequence[int], ct: dict,
                    grads_out: list, absent: list) -> tuple[list[Node], list[int]]:
        with self.ctx:
            for k in seeded:
                o, c = self.fwd.outputs[k], self.cotangents[k]
                if id(o) in active:
                    ct[id(o)] = add(ct[id(o)], c) if id(o) in ct else c
            reverse_accumulate(self.fwd.nodes, active, ct, self.residual)
            for k, i in enumerate(wrt):
                node = self.fwd.inputs[i]
                g = ct.get(id(node))
                if g is None:
                    g = Tracer(self.ctx.const(np.zeros(node.shape, node.dtype)), self.ctx)
                    absent.append(k)
                grads_out.append(g.node)
        return grads_out, absent

    def recompute(self, recomputed: list[Node], grads_out: list[Node]
                  ) -> tuple[list[Node], list[Node]]:
        """The backward's nodes with each of ``recomputed`` computed at its front instead of
        read from a residual, and the gradient nodes remapped accordingly."""
        front: list[Node] = []
        mapping: dict[int, Node] = {}  # old backward node id -> its replacement
        for n in recomputed:
            ins = []
            for i in n.inputs:
                if not isinstance(i, Node):
                    ins.append(i)
                elif i.op == "const":
                    c = Node("const", (), dict(i.attrs), tuple(i.shape), i.dtype)
                    front.append(c)
                    ins.append(c)
                else:
                    ph = self.residual(i).node
                    ins.append(mapping.get(id(ph), ph))
            c = Node(n.op, tuple(ins), n.attrs, tuple(n.shape), n.dtype, n.loc, n.uid)
            front.append(c)
            mapping[id(self.placeholders[id(n)].node)] = c
        nodes = front
        for m in self.ctx.nodes:
            new = _remap(m, mapping)
            if new is not m:
                mapping[id(m)] = new
            nodes.append(new)
        return nodes, [mapping.get(id(g), g) for g in grads_out]


def _rematerializable(fwd: Graph, saved: list[Node]) -> list[Node]:
    """Saved values the backward recomputes instead: an elementwise or view result whose
    inputs are all free (forward inputs, constants) or saved anyway costs one cheap pass,
    not its bytes kept alive between forward and backward. Decided in forward order, so a
    recomputed value may feed the next one."""
    position = {id(n): k for k, n in enumerate(fwd.nodes)}
    ok = {id(n) for n in fwd.inputs} | {id(n) for n in saved}
    recomputed: list[Node] = []
    for n in sorted((s for s in saved if id(s) in position), key=lambda s: position[id(s)]):
        op = OPS.get(n.op)
        srcs = [i for i in n.inputs if isinstance(i, Node)]
        if op is not None and (op.elementwise or op.view) and all(
            id(i) in ok or i.op == "const" for i in srcs
        ):
            recomputed.append(n)
    return recomputed


def scalar_loss(user: Sequence[Node], rg: set | None = None) -> bool:
    """Whether ``user`` (a program's outputs) is one floating-point value of one element
    that requires grad (``rg``: the ids of the nodes that do; None: all): a loss, whose
    gradients `dg.compile` computes with its value (`value_and_grad`). Its ``backward()``
    then needs no second kernel: the gradients for seed one are ready, and any other seed
    ``s`` scales them (the gradient is linear in the seed)."""
    if len(user) != 1:
        return False
    out = user[0]
    return (np.dtype(out.dtype).kind == "f" and int(np.prod(out.shape, dtype=np.int64)) == 1
            and (rg is None or id(out) in rg))


def value_and_grad(d: Differentiated, outputs: Sequence[Node]) -> Graph:
    """One graph that returns ``outputs`` (computed by ``d.forward``) and then the gradients
    of ``d``'s outputs seeded with ones: the backward graph inlined into the forward, its
    cotangent inputs replaced by constant ones and its residual inputs by the forward
    values themselves. For a scalar loss this is JAX's ``value_and_grad`` as one program:
    nothing is saved between two kernels, and the passes fuse the forward and backward
    loops over the same elements (CSE merges the values the backward recomputes).
    """
    n = d.n_outputs
    back = d.backward
    mapping: dict[int, Node] = {}
    ones: list[Node] = []
    for c, o in zip(back.inputs[:n], d.forward.outputs[:n]):
        one = Node("const", (), {"value": np.ones(o.shape, o.dtype)}, tuple(o.shape), o.dtype)
        ones.append(one)
        mapping[id(c)] = one
    for ph, r in zip(back.inputs[n:], d.forward.outputs[n:]):
        mapping[id(ph)] = r
    nodes = list(d.forward.nodes) + ones
    for m in back.nodes:
        new = _remap(m, mapping)
        if new is not m:
            mapping[id(m)] = new
        nodes.append(new)
    grads = [mapping.get(id(g), g) for g in back.outputs]
    return d.forward.replace(nodes=nodes, outputs=list(outputs) + grads)


def reverse_accumulate(nodes: list[Node], active: set[int], ct: dict[int, Any],
                       residual: Any, keep: dict[int, Any] | None = None) -> dict[int, Any]:
    """Reverse-mode sweep: pull the cotangents in ``ct`` (node id -> traced gradient) back
    through ``nodes`` with each op's VJP rule, traced into the current trace context.

    Only ``active`` nodes (those that depend on a differentiated input) are visited;
    ``residual(node)`` gives the traced value of a forward node for the rules to read.
    On return ``ct`` holds the gradients of the values that are not produced by ``nodes``
    (the inputs). ``keep`` maps ids of nodes among ``nodes`` whose own gradient the caller
    wants (a value made a leaf with ``requires_grad_``, a ``dg.grad`` input) to ``None``;
    each gets its complete gradient when the sweep reaches it. Shared by `differentiate`,
    ``backward()`` and ``dg.grad`` inside a traced function.
    """
    ctx = current_mode()
    tctx = ctx if isinstance(ctx, TraceContext) else None
    saved_loc = tctx.loc_override if tctx is not None else None
    try:
        for n in reversed(nodes):
            g = ct.pop(id(n), None)
            if keep is not None and id(n) in keep:
                keep[id(n)] = g
            if g is None or id(n) not in active:
                continue
            if OPS[n.op].vjp is None or (
                    tctx is not None and id(n) in tctx.cut_leaves):
                continue  # a leaf made of a value without history: nothing flows on
            if tctx is not None:
                tctx.loc_override = n.loc
            needs = tuple(isinstance(i, Node) and id(i) in active for i in n.inputs)
            grads = OPS[n.op].vjp(_VJPContext(n, residual, needs), g)
            for i, gi, need in zip(n.inputs, grads, needs):
                if gi is None or not need:
                    continue
                gi = fit_grad(gi, tuple(i.shape), i.dtype)
                ct[id(i)] = add(ct[id(i)], gi) if id(i) in ct else gi
    finally:
        if tctx is not None:
            tctx.loc_override = saved_loc
    return ct


def _remap(n: Node, mapping: dict[int, Node]) -> Node:
    ins = tuple(mapping.get(id(i), i) if isinstance(i, Node) else i for i in n.inputs)
    if all(a is b for a, b in zip(ins, n.inputs)):
        return n
    return Node(n.op, ins, n.attrs, n.shape, n.dtype, n.loc, n.uid)


def _used_ids(nodes: list[Node], outputs: list[Node]) -> set[int]:
    used = {id(o) for o in outputs}
    for n in nodes:
        for i in n.inputs:
            if isinstance(i, Node):
                used.add(id(i))
    return used
