"""Turn one traced call into an entry: its kind, its kernels, and how to feed and unpack them.

A call is one of three kinds, decided when it is traced (see the package docstring):
inference (one kernel), train (a forward kernel that also returns the residuals, and a
backward kernel) or step (one kernel whose extra outputs are the new values of the tensors
and gradients the function changed).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..eager import grad_mode
from ..eager.compiled_node import readonly_cotangent
from ..eager.internal import array_of
from ..eager.tensor import TRACE_KEY, Tensor
from ..errors import EagerOnlyError
from ..ir.graph import Graph, Node
from ..ops.registry import OPS
from ..passes import optimize
from ..trace.autodiff import differentiate, scalar_loss, value_and_grad
from .capture import trace_call
from .random_state import uses_random
from .signature import capture_guards
from .tiered import start as tiered_start


def build(*args: Any, **kwargs: Any) -> Any:
    """The Numba backend's `build`, imported on first use: ``import dualgraph`` stays light
    (Numba's import alone is ~0.2 s) until something is compiled."""
    return import_backend().build(*args, **kwargs)


def import_backend() -> Any:
    """``dualgraph.backend.numba``, imported so that an interrupted import (Ctrl-C while
    Numba loads, the first compiled call's second or so) leaves nothing half-imported: the
    modules it added are dropped, so the next call imports them again instead of finding
    a ``numba`` without its ``core``."""
    backend = sys.modules.get("dualgraph.backend.numba")
    if backend is not None and getattr(backend, "build", None) is not None:
        return backend
    before = set(sys.modules)
    try:
        from ..backend import numba as backend
    except BaseException:
        for name in set(sys.modules) - before:
            sys.modules.pop(name, None)
        raise
    return backend


@dataclass
class _Entry:
    """One traced signature: its kernels and how to feed and unpack them."""

    mode: str
    graph: Graph
    sources: list  # per captured input: ("tensor", t), ("grad", p) or ("value", make)
    n_user: int
    single: Any  # True: one tensor; False: a flat tuple; an OutputTree: nested
    writes: list  # tensors whose data the call overwrites
    grad_writes: list  # (tensor, "set" | "none")
    guards: Any  # a `signature.Guards`, or None
    kernel: Any = None
    bwd_kernel: Any = None
    wrt_tensors: list = field(default_factory=list)
    n_residuals: int = 0
    optimized: Graph | None = None
    backward_graph: Graph | None = None
    # Call plan, precomputed so a call does only what it must.
    scalar_in: tuple = ()  # input positions holding 0-d values (passed as shape (1,))
    inplace: list = field(default_factory=list)  # tensors the kernel writes in place
    copy_writes: list = field(default_factory=list)  # (tensor, kernel output position)
    grad_set: list = field(default_factory=list)  # (tensor, kernel output position)
    grad_none: list = field(default_factory=list)
    residual_plan: list = field(default_factory=list)  # ("in", j) | ("out", position)
    _pos: dict = field(default_factory=dict)  # graph output index -> kernel output position
    calls: int = 0
    out_rg: tuple = ()  # per user output: depends on an input that requires grad
    saved_inputs: tuple = ()  # kernel input positions the backward reads (version-checked)
    random: bool = False  # has random ops: each call draws a new key (`random_state`)
    key_source: int | None = None  # the trace key's position in ``sources``
    passthrough: tuple = ()  # (user output, argument position): return the argument itself
    # Whether ``inplace``, ``copy_writes``, ``grad_set`` or ``grad_none`` name an argument
    # by its position (an int) instead of the tensor the trace saw (`refer_to_arguments`).
    arg_refs: bool = False
    tier0: bool = False  # kernels are `tiered.InterpretedKernel`s (see `tiered`)
    pending: Any = None  # the worker's job for the compiled kernels, while at tier 0
    # A scalar loss in train mode: the one kernel also returns the gradients for seed one
    # (`scalar_loss`); ``grad_out`` are their kernel output positions.
    joint: bool = False
    grad_out: tuple = ()

    def arrays(self, out: list, args: tuple = (), key: Any = None) -> list:
        """The kernel's input arrays: ``out`` (a new list of the arrays of the call's tensor
        and array arguments, see `arg_arrays`) extended in place with the captured ones
        (``args``: the call's arguments, for an argument's ``.grad``; ``key``: this call's
        random key, in place of the trace key's current value)."""
        first = len(out)
        for kind, t in self.sources:
            out.append(array_of(t) if kind == "tensor" else
                       array_of(t.grad) if kind == "grad" else
                       array_of(args[t].grad) if kind == "arg_grad" else t())
        if key is not None and self.key_source is not None:
            out[first + self.key_source] = key
        for j in self.scalar_in:
            out[j] = out[j].reshape(1)
        return out

    def plan(self, graph: Graph, n_user: int, n_grads: int, write_inputs: list) -> dict:
        """Fill the call plan; returns write_to (kernel output -> input it overwrites)."""
        self.scalar_in = tuple(j for j, n in enumerate(graph.inputs) if not n.shape)
        write_to = {n_user + k: j for k, j in enumerate(write_inputs) if j is not None}
        pos, p = {}, 0
        for k in range(len(graph.outputs)):
            if k not in write_to:
                pos[k] = p
                p += 1
        for k, (t, j) in enumerate(zip(self.writes, write_inputs)):
            if j is None:
                self.copy_writes.append((t, pos[n_user + k]))
            else:
                self.inplace.append(t)
        first_grad = n_user + len(self.writes)
        k = first_grad
        for t, kind in self.grad_writes:
            if kind == "set":
                self.grad_set.append((t, pos[k]))
                k += 1
            else:
                self.grad_none.append(t)
        self._pos = pos
        return write_to

    def refer_to_arguments(self, arg_index: dict) -> None:
        """Name the argument tensors the call writes (data, ``.grad``) by their position,
        so each call writes the tensors it was given, not those of the traced call."""
        def ref(t: Any) -> Any:
            i = arg_index.get(id(t))
            if i is None:
                return t
            self.arg_refs = True
            return i
        self.inplace = [ref(t) for t in self.inplace]
        self.copy_writes = [(ref(t), k) for t, k in self.copy_writes]
        self.grad_set = [(ref(t), k) for t, k in self.grad_set]
        self.grad_none = [ref(t) for t in self.grad_none]


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


def compile_entry(fn: Callable, args: tuple, stats: Any, parallel: bool, cache: bool,
                  verify: bool, tiered: bool = False, alias: tuple | None = None) -> _Entry:
    """Trace ``fn(*args)``, specialise it, optimise and build its kernels; counts into
    ``stats`` (a `CompileStats`). ``tiered``: the entry starts at tier 0 while a worker
    compiles its kernels, when it can (`tiered.start`). ``alias``: the pairs of array
    arguments that share memory (`signature.overlapping`)."""
    t0 = time.perf_counter()
    if stats.first_call_at is None:
        stats.first_call_at = t0
    ctx, outputs, single, grad_writes = trace_call(fn, args)
    check_aliasing(ctx, args, alias)
    user = list(outputs)
    writes = list(ctx.writes.values())
    extra = [n for _, n in writes] + [n for t, kind, n in grad_writes if kind == "set"]
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
    train = (not ctx.backward_called and grad_mode.GRAD_ENABLED.value and leaves
             and any(id(n) in ctx.rg for n in user))
    entry = _Entry(
        mode="train" if train else ("step" if (writes or grad_writes or
                                               ctx.backward_called) else "inference"),
        graph=graph, sources=sources, n_user=len(user), single=single,
        writes=[t for t, _ in writes],
        grad_writes=[(t, kind) for t, kind, _ in grad_writes], guards=guards,
    )
    entry.out_rg = tuple(id(n) in ctx.rg for n in user)
    # An output that is an argument tensor's value at the end of the call (``return x``,
    # also after ``x.add_(1)``) is returned as that tensor itself, as eager mode does.
    owner = [ctx.arg_index.get(id(ctx.arg_tensors.get(id(n)))) for n in user]
    entry.passthrough = tuple((k, i) for k, i in enumerate(owner) if i is not None)
    entry.random = uses_random(graph)
    entry.key_source = next((i for i, (kind, t) in enumerate(sources)
                             if kind == "tensor" and t is TRACE_KEY), None)
    index_of = {id(n): j for j, n in enumerate(graph.inputs)}
    captured_node = {id(t): n for t, n in ctx.captured}
    for node_id, t in ctx.arg_tensors.items():  # arguments changed in place
        node = next((n for n in ctx.inputs if id(n) == node_id), None)
        if node is not None:
            captured_node.setdefault(id(t), node)
    write_inputs = [index_of.get(id(captured_node.get(id(t))), None) for t in entry.writes]
    n_grads = sum(1 for _, kind in entry.grad_writes if kind == "set")
    t1 = time.perf_counter()
    if train:
        lower_train(entry, graph, user, extra, leaves, verify, ctx.rg, ctx.overwritten)
    else:
        entry.optimized = optimize(graph, verify=verify)
    write_to = entry.plan(entry.optimized, len(user), n_grads, write_inputs)
    entry.refer_to_arguments(ctx.arg_index)
    stats.passes_seconds += time.perf_counter() - t1
    arrays = entry.arrays(arg_arrays(args), args)
    name = "forward" if train else "kernel"
    if train:
        entry.residual_plan = [(kind, j if kind == "in" else entry._pos[j])
                               for kind, j in entry.residual_plan]
        entry.saved_inputs = tuple(sorted({j for kind, j in entry.residual_plan
                                           if kind == "in"}))
        if entry.joint:
            n = len(entry.wrt_tensors)
            first = len(entry.optimized.outputs) - n
            entry.grad_out = tuple(entry._pos[first + i] for i in range(n))
    # A backward that must raise (`ModifiedSaved`) is already set and needs no kernel; the
    # joint kernel of a scalar loss needs none either.
    backward = bool(train) and entry.bwd_kernel is None and not entry.joint
    if tiered and tiered_start(entry, arrays, user, name, parallel, write_to, backward):
        stats.kernels += 1 + backward  # being compiled by the worker
        return entry
    entry.kernel = build(entry.optimized, parallel, cache, name, write_to)
    stats.numba_seconds += entry.kernel.compile(arrays, prepared=True)
    stats.kernels += 1
    if backward:
        entry.bwd_kernel = build(entry.backward_graph, parallel, cache, "backward")
        # Types only: running the forward here would apply its in-place writes twice.
        outs = entry.kernel.new_outputs()
        res = [arrays[j] if kind == "in" else outs[j] for kind, j in entry.residual_plan]
        cot = [readonly_cotangent(np.zeros(o.shape or (1,), o.dtype)) for o in user]
        stats.numba_seconds += entry.bwd_kernel.compile(cot + res, prepared=True)
        stats.kernels += 1
    return entry


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


def lower_train(entry: _Entry, graph: Graph, user: list, extra: list, leaves: list,
                verify: bool, rg: set | None = None, overwritten: set | None = None) -> None:
    """The train kind: differentiate the user outputs with respect to ``leaves``; the
    forward graph also returns the residuals the backward graph reads. ``rg`` is the
    trace's set of nodes that require grad (values made under ``no_grad`` are not in it)."""
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
    entry.n_residuals = len(residuals)
    entry.wrt_tensors = leaves
    entry.differentiated = d
    first = len(user) + len(extra)
    if not modified and scalar_loss(user, rg):
        # A scalar loss: one kernel computes it and its gradients (seed one) in the same
        # pass; the tape node hands them out when backward() comes (`PrecomputedBackward`).
        entry.joint = True
        entry.optimized = optimize(value_and_grad(d, user + extra), verify=verify)
        entry.residual_plan = [("in", index_of[id(r)]) for r in residuals
                               if id(r) in index_of]
        return
    computed = [r for r in residuals if id(r) not in index_of]
    full = Graph(graph.inputs, graph.nodes, user + extra + computed)
    entry.optimized = optimize(full, verify=verify)
    entry.backward_graph = optimize(d.backward, verify=verify)
    k = 0
    for r in residuals:
        if id(r) in index_of:
            entry.residual_plan.append(("in", index_of[id(r)]))
        else:
            entry.residual_plan.append(("graph_out", first + k))
            k += 1
