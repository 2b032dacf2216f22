"""Turn one traced call into a `plan.Plan`: its kind, its kernels, how to feed and unpack them.

A call is one of three kinds, decided when it is traced (see the package docstring):
inference (one kernel), train (a forward kernel that also returns the residuals, and a
backward kernel) or step (one kernel whose extra outputs are the new values of the tensors
and gradients the function changed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend import import_backend
from ..eager import grad_mode
from ..eager.compiled_node import readonly_cotangent, spent_node
from ..eager.internal import array_of
from ..eager.tensor import TRACE_KEY, Tensor
from ..errors import EagerOnlyError, runs_eagerly
from ..ir.graph import Graph, Node, zero_d_operands
from ..ops.registry import OPS
from ..optim.optimizer import state_restored_on_error
from ..passes import optimize
from ..trace.autodiff import differentiate, scalar_loss, value_and_grad
from .capture import PythonWrites, RequiresGradWrites, trace_call
from .partial import PartialBackward
from .plan import (
    Argument,
    ArgumentGrad,
    AttrSet,
    AttrTensor,
    CapturedGrad,
    CapturedTensor,
    CopyWrite,
    From,
    GradSet,
    Kind,
    Plan,
    Residual,
)
from .random_state import uses_random
from .signature import capture_guards
from .speculate import read_guard
from .symbolic import check_reads
from .tiered import start as tiered_start


def build(*args: Any, **kwargs: Any) -> Any:
    """The Numba backend's `build`, imported on first use: ``import dualgraph`` stays light
    (Numba's import alone is ~0.2 s) until something is compiled."""
    return import_backend().build(*args, **kwargs)


def _plan_writes(plan: Plan, n_user: int, writes: list, write_inputs: list,
                 grad_writes: list, arg_index: dict, counts: dict) -> tuple[dict, dict]:
    """Fill the plan's writes from the trace's; returns write_to (kernel output -> the
    input it overwrites in place) and pos (graph output -> kernel output). ``writes``:
    the tensors whose data the call changes, ``write_inputs`` the kernel input of each
    (None: not an input, copied back); ``grad_writes``: ``(tensor, node or None)``, a new
    ``.grad`` or None. A tensor that is an argument is named by its position
    (`plan.Argument`). ``counts``: the in-place ops per written tensor (by id)."""
    graph = plan.optimized
    write_to = {n_user + k: j for k, j in enumerate(write_inputs) if j is not None}
    pos, p = {}, 0
    for k in range(len(graph.outputs)):
        if k not in write_to:
            pos[k] = p
            p += 1

    def target(t: Any) -> Any:
        i = arg_index.get(id(t))
        return t if i is None else Argument(i)

    inplace, copies, bumps = [], [], []
    for k, (t, j) in enumerate(zip(writes, write_inputs)):
        n = counts.get(id(t), 1)
        if j is None:
            copies.append(CopyWrite(target(t), pos[n_user + k], tuple(t.shape), n))
        else:
            inplace.append(target(t))
            bumps.append(n)
    grads, nones = [], []
    k = n_user + len(writes)
    for t, node in grad_writes:
        if node is not None:
            grads.append(GradSet(target(t), pos[k], tuple(t.shape)))
            k += 1
        else:
            nones.append(target(t))
    plan.scalar_in = tuple(j for j, n in enumerate(graph.inputs) if not n.shape)
    plan.inplace, plan.copy_writes, plan.bumps = tuple(inplace), tuple(copies), tuple(bumps)
    plan.grad_set, plan.grad_none = tuple(grads), tuple(nones)
    return write_to, pos


def kernel_inputs(plan: Plan, args: tuple) -> list:
    """The kernel's input arrays for a call with ``args`` as `run` takes them (the trace
    key's current value as the random key): for compiling, and for the tier-0 worker's
    description of the inputs (0-d values as ``(1,)`` unless `zero_d_operands`)."""
    out = arg_arrays(args)
    for src in plan.sources:
        out.append(array_of(src.tensor) if isinstance(src, CapturedTensor) else
                   array_of(src.table[src.name]) if isinstance(src, AttrTensor) else
                   array_of(src.owner.grad) if isinstance(src, CapturedGrad) else
                   array_of(args[src.position].grad) if isinstance(src, ArgumentGrad) else
                   src())
    if not zero_d_operands(plan.optimized):
        for j in plan.scalar_in:
            out[j] = out[j].reshape(1)
    return out


def arg_arrays(args: tuple) -> list:
    """The arrays of the tensor and NumPy array arguments, in order (a new list)."""
    return [array_of(a) if isinstance(a, Tensor) else a for a in args
            if isinstance(a, (Tensor, np.ndarray))]


def _differentiable_ancestors(outputs: list, rg: set) -> set:
    """Ids of the nodes reached from ``outputs`` through nodes that require grad."""
    stack = [o for o in outputs if id(o) in rg]
    seen = {id(o) for o in stack}
    while stack:
        for i in stack.pop().inputs:
            if isinstance(i, Node) and id(i) in rg and id(i) not in seen:
                seen.add(id(i))
                stack.append(i)
    return seen


class FillsStateError(Exception):
    """Raised by `compile_entry` when the trace sets an attribute that held nothing
    (None, or absent) before the call: the caller runs this call eagerly and traces the
    next one."""


def _fills_state(ctx: Any) -> bool:
    """Whether the trace set an attribute (``self.mask = ...``) that held None, a Python
    number (``self.log_prior = 0`` in ``__init__``, a tensor from the first call on) or
    was absent before the call, or changed the length of a container it read the length
    of (``if len(state) == 0:`` filling a hand-written optimizer's state)."""
    if ctx.fills_length:
        return True
    for obj, name, _, _ in ctx.attr_writes:
        before = ctx.attrs_before.get(id(obj))
        if before is None:
            continue
        held = before[1].get(name)
        if held is None or (isinstance(held, (int, float)) and not isinstance(held, bool)):
            return True
    return False


@state_restored_on_error()
def compile_entry(fn: Callable, args: tuple, stats: Any, parallel: bool, cache: bool,
                  verify: bool, tiered: bool = False, alias: tuple | None = None,
                  fills_state: bool = False) -> Plan:
    """Trace ``fn(*args)``, specialise it, optimise and build its kernels; counts into
    ``stats`` (a `CompileStats`). ``tiered``: the entry starts at tier 0 while a worker
    compiles its kernels, when it can (`tiered.start`). ``alias``: the pairs of array
    arguments that share memory (`signature.overlapping`). ``fills_state``: raise
    `FillsStateError`, before anything is compiled, when the trace sets an attribute that
    held nothing."""
    t0 = time.perf_counter()
    if stats.first_call_at is None:
        stats.first_call_at = t0
    ctx, outputs, single, grad_writes = trace_call(fn, args)
    if alias:
        try:
            check_aliasing(ctx, args, alias)
        except EagerOnlyError:
            # Arguments that share memory, one written: trace again, reading an argument
            # that is a view of another as that view (only then: the trace is guarded on
            # their placement, which read-only overlaps need not be).
            ctx, outputs, single, grad_writes = trace_call(fn, args, alias=alias)
    check_aliasing(ctx, args, alias)
    check_reads(ctx)
    # A call that fills an empty attribute (a mask or a state made on first use) is
    # guarded on the attribute being empty, which the next call finds filled: its trace
    # would serve this call only, and the next call would trace and compile again.
    if fills_state and _fills_state(ctx):
        raise FillsStateError
    user = list(outputs)
    writes = list(ctx.writes.values())
    # An attribute set to an argument itself is set to that tensor; others are outputs.
    attr_args = [[ctx.arg_index.get(id(ctx.arg_tensors.get(id(n)))) for n in nodes]
                 for _, _, nodes, _ in ctx.attr_writes]
    extra = [n for _, n in writes] + [n for _, n in grad_writes if n is not None] + \
        [n for (_, _, nodes, _), args_ in zip(ctx.attr_writes, attr_args)
         for n, i in zip(nodes, args_) if i is None]
    sources, guards = capture_guards(ctx, fn)
    graph = Graph(ctx.inputs + [n for _, n in ctx.captured] + [n for n, _ in ctx.runtime],
                  ctx.nodes, user + extra)
    stats.traces += 1
    stats.trace_seconds += time.perf_counter() - t0
    # Only the leaves an output reaches through recorded ops get a gradient, as on the
    # eager tape: an unused input (or one only compared) keeps .grad None, not zeros.
    reached = _differentiable_ancestors(user, ctx.rg)
    leaves = [i for i, n in enumerate(graph.inputs)
              if id(n) in ctx.leaves and id(n) in reached]
    records = bool(not ctx.backward_called and leaves and any(id(n) in ctx.rg for n in user))
    if records and not grad_mode.GRAD_ENABLED.value:
        # Called under no_grad, a result computed under dg.enable_grad() inside: eager
        # mode gives it a history, which a call in this grad mode does not record.
        raise runs_eagerly(
            fn, "returns a value computed under dg.enable_grad() while it is called with "
            "grad mode off", "Call it with grad mode on to keep it compiled.")
    train = records
    kind = (Kind.TRAIN if train else
            Kind.STEP if writes or grad_writes or ctx.backward_called else Kind.INFERENCE)
    plan = Plan(mode=kind, graph=graph, sources=sources, n_user=len(user), single=single,
                guards=guards)
    plan.guards = read_guard(plan, ctx, args)
    plan.baked = tuple(ctx.baked)
    plan.out_rg = tuple(id(n) in ctx.rg for n in user)
    plan.rg_free = _requires_grad_free(ctx, args, user + extra)
    # An output that is an argument tensor's value at the end of the call (``return x``,
    # also after ``x.add_(1)``) is returned as that tensor itself, as eager mode does.
    owner = [ctx.arg_index.get(id(ctx.arg_tensors.get(id(n)))) for n in user]
    plan.passthrough = tuple((k, i) for k, i in enumerate(owner) if i is not None)
    if kind is not Kind.TRAIN:
        _plan_returned(plan, ctx, user, owner, sources, grad_writes)
    plan.random = uses_random(graph)
    plan.key_source = next((i for i, src in enumerate(sources)
                            if isinstance(src, CapturedTensor) and src.tensor is TRACE_KEY),
                           None)
    t1 = time.perf_counter()
    residuals: list = []
    if train:
        residuals = lower_train(plan, graph, user, extra, leaves, verify, ctx.rg,
                                ctx.overwritten, ctx.written_values())
    else:
        plan.optimized = optimize(read_written(graph, ctx.written_values()), verify=verify)
    write_to, pos = _plan_writes(plan, len(user), [t for t, _ in writes],
                                 _write_inputs(ctx, graph, writes), grad_writes,
                                 ctx.arg_index, ctx.write_counts)
    plan.write_to = write_to
    k = len(user) + len(writes) + sum(n is not None for _, n in grad_writes)
    # After the call's own backward(), a value that requires grad keeps that flag and a
    # used-up history, as eager mode leaves it (`SpentBackward`).
    spent = _spent_nodes(ctx, user) if kind is not Kind.TRAIN else {}
    plan.spent = tuple((k, spent[id(n)]) for k, n in enumerate(user) if id(n) in spent)
    result_of = {id(n): k for k, n in reversed(list(enumerate(user)))}
    attrs = []
    for (obj, name, nodes, tree), args_ in zip(ctx.attr_writes, attr_args):
        leaves = []
        for node, i in zip(nodes, args_):
            leaves.append((pos[k] if i is None else None, node.shape, i))
            k += i is None
        kept = (id(obj), name) not in ctx.attr_detached
        extra_ = {"spent": tuple(spent.get(id(n)) if kept else None for n in nodes),
                  "result": tuple(result_of.get(id(n)) if i is None and kept else None
                                  for n, i in zip(nodes, args_))}
        attrs.append(AttrSet(obj, name, *leaves[0], **extra_) if tree is None else
                     AttrSet(obj, name, None, (), None, tree, tuple(leaves), **extra_))
    plan.attr_set = tuple(attrs)
    if ctx.number_writes or ctx.list_appends:
        plan.python_writes = PythonWrites(tuple(ctx.number_writes), tuple(ctx.list_appends))
    if ctx.rg_writes:
        plan.python_writes = RequiresGradWrites(ctx.rg_writes, plan.python_writes)
    stats.passes_seconds += time.perf_counter() - t1
    if train:
        _plan_residuals(plan, residuals, pos)
    return _build_kernels(plan, kernel_inputs(plan, args), user, write_to, parallel, cache,
                          tiered, stats)


def _requires_grad_free(ctx: Any, args: tuple, outputs: list) -> frozenset:
    """Positions of the tensor arguments whose ``requires_grad`` this trace does not depend
    on: every op reading one is not differentiable (``detach``, a comparison), and the
    program never returns, writes or sets them, nor reads their ``requires_grad``,
    ``grad`` or ``is_leaf``. A call that differs from the traced one only there runs the same
    graph, kernels and tape record (the hidden state of a language model, handed back
    each step and detached first)."""
    other_use: set[int] = {id(n) for n in outputs}
    for node in ctx.nodes:
        if getattr(OPS.get(node.op), "differentiable", True):
            other_use.update(id(i) for i in node.inputs)
    other_use.update(id(n) for _, n in ctx.writes.values())
    other_use.update(id(n) for _, _, nodes, _ in ctx.attr_writes for n in nodes)
    written = {id(t) for t, _ in ctx.writes.values()}
    free = []
    for node in ctx.inputs:
        t = ctx.arg_tensors.get(id(node))
        i = ctx.arg_index.get(id(t))
        if (i is None or args[i] is not t or id(node) in other_use or id(node) in ctx.rg_read
                or id(t) in written or sum(a is t for a in args) != 1):
            continue
        free.append(i)
    return frozenset(free)


def _spent_nodes(ctx: Any, user: list) -> dict:
    """Per traced node (by id) among the outputs and attributes written back that requires
    grad in a call that ran ``backward()``: its `SpentBackward` node."""
    if not ctx.backward_called:
        return {}
    nodes = [*user, *(n for obj, name, ns, _ in ctx.attr_writes for n in ns
                      if (id(obj), name) not in ctx.attr_detached)]
    return {id(n): spent_node(n.shape, n.dtype) for n in nodes
            if id(n) in ctx.rg and id(n) not in ctx.arg_tensors}


def _plan_returned(plan: Plan, ctx: Any, user: list, owner: list, sources: tuple,
                   grad_writes: list) -> None:
    """Outputs that eager mode returns as one tensor: the same value twice (``return y,
    y``: one tensor, so a write through one is seen through the other), and a captured
    tensor returned unchanged or after the call wrote it in place (``return w``, also
    after ``w.add_(x)``: ``w`` itself), and a captured tensor's ``.grad`` the call's
    ``backward()`` wrote (``return w.grad``: what ``w.grad`` holds after the call)."""
    captured = {id(n): t for t, n in ctx.captured}
    captured.update((id(n), t) for t, n in ctx.writes.values())  # its value at the end
    held = {id(src.tensor) for src in sources if isinstance(src, CapturedTensor)}
    # An argument's is the call's own argument's, not the traced one's: not kept.
    grads = {id(n): t for t, n in grad_writes
             if n is not None and id(t) not in ctx.arg_index}
    first: dict = {}
    repeated, kept, grads_of = [], [], []
    for k, n in enumerate(user):
        if owner[k] is not None:
            continue
        t = captured.get(id(n))
        if t is not None and id(t) in held:
            kept.append((k, t))
        elif id(n) in grads:
            grads_of.append((k, grads[id(n)]))
        elif id(n) in first:
            repeated.append((k, first[id(n)]))
        else:
            first[id(n)] = k
    plan.repeated, plan.captured_out = tuple(repeated), tuple(kept)
    plan.grads_returned = tuple(grads_of)


def _write_inputs(ctx: Any, graph: Graph, writes: list) -> list:
    """Per tensor the call changes in place, the kernel input holding it (None: not an
    input, its new value is copied back)."""
    index_of = {id(n): j for j, n in enumerate(graph.inputs)}
    captured_node = {id(t): n for t, n in ctx.captured}
    for node_id, t in ctx.arg_tensors.items():  # arguments changed in place
        node = next((n for n in ctx.inputs if id(n) == node_id), None)
        if node is not None:
            captured_node.setdefault(id(t), node)
    return [index_of.get(id(captured_node.get(id(t))), None) for t, _ in writes]


def _plan_residuals(plan: Plan, residuals: list, pos: dict) -> None:
    """Train: the residuals as kernel inputs and outputs (``residuals`` gives outputs by
    graph output index), the version-checked inputs, the joint kernel's gradients."""
    plan.residual_plan = [Residual(k, j if k is From.INPUT else pos[j]) for k, j in residuals]
    plan.saved_inputs = tuple(sorted({j for k, j in plan.residual_plan if k is From.INPUT}))
    if plan.joint:
        n = len(plan.wrt)
        first = len(plan.optimized.outputs) - n
        plan.grad_out = tuple(pos[first + i] for i in range(n))


def _build_kernels(plan: Plan, arrays: list, user: list, write_to: dict, parallel: bool,
                   cache: bool, tiered: bool, stats: Any) -> Plan:
    """Build (or start compiling at tier 0) the plan's kernels for the inputs ``arrays``."""
    train = plan.mode is Kind.TRAIN
    name = "forward" if train else "kernel"
    # A backward that must raise (`ModifiedSaved`) is already set and needs no kernel; the
    # joint kernel of a scalar loss needs none either.
    backward = train and plan.bwd_kernel is None and not plan.joint
    if plan.partial is not None:
        plan.partial.parallel, plan.partial.cache = parallel, cache
    if tiered and tiered_start(plan, arrays, user, name, parallel, write_to, backward):
        stats.kernels += 1 + backward  # being compiled by the worker
        return plan
    plan.kernel = build(plan.optimized, parallel, cache, name, write_to)
    stats.numba_seconds += plan.kernel.compile(arrays, prepared=True)
    stats.kernels += 1
    if backward:
        plan.bwd_kernel = build(plan.backward_graph, parallel, cache, "backward")
        # Types only: running the forward here would apply its in-place writes twice.
        outs = plan.kernel.new_outputs()
        res = [arrays[j] if k is From.INPUT else outs[j] for k, j in plan.residual_plan]
        zero_d = zero_d_operands(plan.backward_graph)
        cot = [readonly_cotangent(np.zeros(o.shape if zero_d else o.shape or (1,), o.dtype))
               for o in user]
        stats.numba_seconds += plan.bwd_kernel.compile(cot + res, prepared=True)
        stats.kernels += 1
    return plan


def check_aliasing(ctx: Any, args: tuple, alias: tuple | None) -> None:
    """A trace that writes a tensor in place while another input shares its memory
    (``h(x[1:3], x)`` with ``v.fill_(0)`` inside, or an argument that is a view of a
    parameter the step updates) would read the other input as if it were independent:
    eager mode sees the write through both. Raise `EagerOnlyError` so the call runs
    eagerly (the caller warns), never computing a different answer."""
    written = {id(t) for t, _ in ctx.writes.values()}
    if not written:
        return
    tensors = [a for a in args if isinstance(a, (Tensor, np.ndarray))]
    for i, j in alias or ():
        if (i, j) in getattr(ctx, "traced_alias", ()):
            continue  # traced as a view of one another: writes are seen through both
        for k in (i, j):
            if id(tensors[k]) in written:
                other = j if k == i else i
                raise EagerOnlyError(
                    f"tensor argument {k} is changed in place and shares memory with "
                    f"tensor argument {other} (counted among tensor and array arguments): "
                    "a compiled call would read the other one as an independent input.")
    # An argument that shares memory with a captured tensor (a parameter) either of them
    # changing in place.
    captured = [t for t, _ in ctx.captured if isinstance(t, Tensor)]
    for k, a in enumerate(tensors):
        d = array_of(a) if isinstance(a, Tensor) else a
        for t in captured:
            if t is a or not (id(t) in written or id(a) in written):
                continue
            if np.may_share_memory(d, array_of(t)):
                raise EagerOnlyError(
                    f"tensor argument {k} shares memory with a tensor the function captures "
                    "(a parameter or global), and one of them is changed in place: a "
                    "compiled call would read them as independent inputs.")


class ModifiedSaved:
    """The backward "kernel" of a trace whose backward reads a value the function then
    changed in place (``y = x.exp(); y += 1``): backward raises as eager mode does."""

    def __init__(self, where: str) -> None:
        self.where = where

    def new_outputs(self) -> list:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: the output of {self.where}, which its backward reads, was "
            "changed in place inside the compiled function. Hint: change a copy (y = x * 1) "
            "instead.")

    def run(self, ins: list, outs: list) -> None:  # pragma: no cover - new_outputs raised
        self.new_outputs()


def read_written(graph: Graph, written: dict[int, Node]) -> Graph:
    """``graph`` with each straight read of a leaf written under no_grad replaced by the
    written value (``written``: `CallTraceContext.written_values`), for a graph that is
    differentiated already: the read's added ``input - stop_gradient(input)`` only
    carried the gradient to the leaf's input, and is not zero for an inf or nan input
    (nor does a written -0.0 stay -0.0), where eager mode reads the written value."""
    if not written:
        return graph
    swap: dict[int, Node] = {}

    def get(x: Any) -> Any:
        return swap.get(id(x), x) if isinstance(x, Node) else x

    nodes = []
    for n in graph.nodes:
        if id(n) in written:
            swap[id(n)] = get(written[id(n)])
            continue
        ins = tuple(get(i) for i in n.inputs)
        if any(a is not b for a, b in zip(ins, n.inputs)):
            m = Node(n.op, ins, n.attrs, n.shape, n.dtype, n.loc, n.uid)
            swap[id(n)] = m
            n = m
        nodes.append(n)
    if not swap:
        return graph
    return graph.replace(nodes=nodes, outputs=[get(o) for o in graph.outputs])


def lower_train(entry: Plan, graph: Graph, user: list, extra: list, leaves: list,
                verify: bool, rg: set | None = None, overwritten: set | None = None,
                written: dict[int, Node] | None = None) -> list:
    """The train kind: differentiate the user outputs with respect to ``leaves``; the
    forward graph also returns the residuals the backward graph reads. ``rg`` is the
    trace's set of nodes that require grad (values made under ``no_grad`` are not in it);
    ``written``: its straight reads (`read_written`), replaced once differentiated.
    Returns the residuals: ``(From.INPUT, kernel input)`` or ``(From.OUTPUT, graph output
    index)``."""
    written = written or {}
    fwd = Graph(graph.inputs, graph.nodes, user)
    d = differentiate(fwd, leaves, rg)
    if d.absent:
        # No gradient reaches these inputs (a class weight of nll_loss): as on the eager
        # tape their .grad stays None, rather than receiving the graph's zeros.
        keep = [k for k in range(len(leaves)) if k not in d.absent]
        d.backward = d.backward.replace(outputs=[d.backward.outputs[k] for k in keep])
        d.wrt = tuple(d.wrt[k] for k in keep)
        d.absent = ()
        leaves = [leaves[k] for k in keep]
    residuals = d.forward.outputs[len(user):]
    # As on the eager tape: an op whose VJP reads its own output (exp, tanh, sigmoid)
    # refuses a backward after that output was changed in place, even where this graph's
    # backward would recompute it.
    modified = [n for n in graph.nodes if overwritten and id(n) in overwritten
                and (rg is None or id(n) in rg) and getattr(OPS.get(n.op), "saves_out", False)]
    if modified:
        r = modified[0]
        entry.bwd_kernel = ModifiedSaved(f"{r.op} ({r.loc})" if r.loc else r.op)
    # A residual that is an input is not an output: the backward gets the input's
    # array itself (version checks guard it against in-place changes).
    index_of = {id(n): j for j, n in enumerate(graph.inputs)}
    entry.wrt = tuple(leaves)
    entry.differentiated = d
    first = len(user) + len(extra)
    if not modified and scalar_loss(user, rg):
        # A scalar loss: one kernel computes it and its gradients (seed one) in the same
        # pass; the tape node hands them out when backward() comes (`PrecomputedBackward`).
        entry.joint = True
        entry.optimized = optimize(read_written(value_and_grad(d, user + extra), written),
                                   verify=verify)
        return [(From.INPUT, index_of[id(r)]) for r in residuals if id(r) in index_of]
    computed = [r for r in residuals if id(r) not in index_of]
    full = Graph(graph.inputs, graph.nodes, user + extra + computed)
    entry.optimized = optimize(read_written(full, written), verify=verify)
    entry.backward_graph = optimize(read_written(d.backward, written), verify=verify)
    if sum(entry.out_rg) > 1 and not modified:
        entry.partial = PartialBackward(entry, fwd, rg, written, verify)
    out, k = [], 0
    for r in residuals:
        if id(r) in index_of:
            out.append((From.INPUT, index_of[id(r)]))
        else:
            out.append((From.OUTPUT, first + k))
            k += 1
    return out
