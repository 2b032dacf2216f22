"""`dg.compile`: trace once per signature, optimize, lower to Numba, cache, run.

A call is one of three kinds, decided when it is traced:

- **inference**: no gradient needed; one kernel computes the outputs;
- **train**: an input requires grad and the function does not call ``backward()`` itself;
  the forward kernel also returns the residuals, and the output gets one tape node,
  ``CompiledFunctionBackward``, whose backward runs the compiled backward kernel;
- **step**: the function calls ``backward()`` and/or changes tensors in place (an optimizer
  step, ``zero_grad``); everything is one graph and one kernel, and the new values of
  parameters, gradients and optimizer state are graph outputs written back after the call.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..eager import grad_mode
from ..eager.autograd import _FREED_MSG, Function
from ..eager.tensor import Tensor, _make
from ..errors import TraceError
from ..ir.graph import Graph, Literal, Node
from ..passes import optimize
from ..trace.autodiff import differentiate
from ..trace.tracer import TraceContext, Tracer, _outputs


@dataclass
class CompileStats:
    """Counters that prove compilation happened, and what it cost."""

    calls: int = 0
    traces: int = 0
    cache_hits: int = 0
    kernels: int = 0
    trace_seconds: float = 0.0
    passes_seconds: float = 0.0
    numba_seconds: float = 0.0
    retrace_reasons: list = field(default_factory=list)

    @property
    def compile_seconds(self) -> float:
        return self.trace_seconds + self.passes_seconds + self.numba_seconds

    def __str__(self) -> str:
        return (f"calls={self.calls} traces={self.traces} cache_hits={self.cache_hits} "
                f"kernels={self.kernels} compile={self.compile_seconds:.3f}s (trace "
                f"{self.trace_seconds:.3f}s, passes {self.passes_seconds:.3f}s, numba "
                f"{self.numba_seconds:.3f}s)")


def _describe_change(old: tuple, new: tuple, args: tuple) -> str:
    """Why a call's signature differs from the previous one, in words."""
    (old_args, old_grad), (new_args, new_grad) = old, new
    if len(old_args) != len(new_args):
        return f"{len(new_args)} arguments instead of {len(old_args)}"
    for i, (a, b) in enumerate(zip(old_args, new_args)):
        if a == b:
            continue
        const_a = len(a) == 2 and isinstance(a[0], type)
        const_b = len(b) == 2 and isinstance(b[0], type)
        if len(a) != len(b) or const_a != const_b:
            return f"argument {i}: a {type(args[i]).__name__} now"
        if const_a:
            return f"argument {i}: Python value {b[1]!r} instead of {a[1]!r} (baked constant)"
        kind = "tensor" if len(a) == 3 else "array"
        for k, what in ((0, "shape"), (1, "dtype")):
            if a[k] != b[k]:
                return f"argument {i} ({kind}): {what} {b[k]} instead of {a[k]}"
        return f"argument {i}: requires_grad={b[2]} instead of {a[2]}"
    return f"grad mode {'on' if new_grad else 'off'} instead of {'on' if old_grad else 'off'}"


class RetraceLimitError(RuntimeError):
    """A compiled function with ``strict=True`` went over its retrace budget."""


class StaleTraceError(TraceError):
    """``verify=True`` found that the compiled trace no longer matches the Python program."""


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


class _Cotangents:
    """Per-output gradients flowing into a multi-output compiled node (merged by ``+``)."""

    __slots__ = ("parts",)

    def __init__(self, parts: dict) -> None:
        self.parts = parts

    def __add__(self, other: "_Cotangents") -> "_Cotangents":
        merged = dict(self.parts)
        for k, g in other.parts.items():
            merged[k] = merged[k] + g if k in merged else g
        return _Cotangents(merged)


class _CompiledOp:
    """Stands in for an `OpDef` on the tape node of a compiled call."""

    name = "compiled"
    saves: tuple = ()

    @staticmethod
    def node_name(node: Any) -> str:
        return "CompiledFunctionBackward"


def build(*args: Any, **kwargs: Any) -> Any:
    """The Numba backend's `build`, imported on first use: ``import dualgraph`` stays light
    (Numba's import alone is ~0.2 s) until something is compiled."""
    from ..backend.numba import build as _build

    return _build(*args, **kwargs)


class CompiledFunctionBackward(Function):
    """The single tape node of a compiled call: backward runs the compiled backward kernel."""

    __slots__ = ("_kernel", "_outs", "_checks", "_shapes")

    def __init__(self, kernel: Any, inputs: tuple, residuals: tuple, outs: list,
                 checks: list) -> None:
        self._shapes = [tuple(n.shape) for n in inputs]
        first = outs[0]
        Node_init = super(Function, self).__init__  # noqa: N806 - the IR Node's __init__
        Node_init("compiled", inputs, {}, tuple(first[0]), first[1])
        self._def = _CompiledOp
        self._saved = residuals
        self._versions = ()
        self._out = None
        self._out_version = None
        self._freed = False
        self._hooks = None
        self._retain = None
        self._kernel = kernel
        self._outs = outs
        self._checks = checks

    def apply(self, g: Any) -> list:
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        if grad_mode.GRAD_ENABLED.value:
            raise RuntimeError("backward(create_graph=True) through a compiled function is not "
                               "supported: its backward is a compiled kernel, not a graph of "
                               "ops. Differentiate the eager function instead.")
        for t, v in self._checks:
            if t._version[0] != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: an input of {self.name()} of shape {t.shape} "
                    f"is at version {t._version[0]}; expected version {v} instead."
                )
        parts = g.parts if isinstance(g, _Cotangents) else {0: g}
        cot = []
        for k, (shape, dtype) in enumerate(self._outs):
            c = parts[k]._data if k in parts else np.zeros(shape, dtype)
            cot.append(c.reshape(1) if not shape else c)
        outs = self._kernel.new_outputs()
        self._kernel.run(cot + list(self._saved), outs)
        return [_make(o if o.shape == shape else o.reshape(shape), False, None)
                for o, shape in zip(outs, self._shapes)]


class _OutputOf(Function):
    """Routes the gradient of output ``k`` of a multi-output compiled call to its node."""

    __slots__ = ("_k",)

    def __init__(self, joint: CompiledFunctionBackward, k: int, shape: tuple,
                 dtype: np.dtype) -> None:
        super(Function, self).__init__("compiled_output", (joint,), {"index": k}, shape, dtype)
        self._def = _CompiledOp
        self._saved = ()
        self._versions = ()
        self._out = None
        self._out_version = None
        self._freed = False
        self._hooks = None
        self._retain = None
        self._k = k

    def apply(self, g: Any) -> list:
        return [_Cotangents({self._k: g})]


@dataclass
class _Entry:
    """One traced signature: its kernels and how to feed and unpack them."""

    mode: str
    graph: Graph
    sources: list  # per captured input: ("tensor", t) or ("grad", p)
    n_user: int
    single: bool
    writes: list  # tensors whose data the call overwrites
    grad_writes: list  # (tensor, "set" | "none")
    guards: list  # (kind, tensor, expected)
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

    def guard_failure(self) -> str | None:
        for kind, t, expected in self.guards:
            if kind == "grad_none":
                if (t._grad is None) != expected:
                    state = "None" if t._grad is None else "set"
                    return f"the .grad of a {t.shape} tensor is {state} (it was not at trace time)"
            elif kind == "type":
                d = t._data
                if d.shape != expected[0] or d.dtype != expected[1]:
                    return (f"a captured tensor is {t.shape} {t.dtype} instead of "
                            f"{expected[0]} {expected[1]}")
        return None

    def arrays(self, args: tuple) -> list:
        out = [a._data if isinstance(a, Tensor) else a for a in args
               if isinstance(a, (Tensor, np.ndarray))]
        for kind, t in self.sources:
            out.append(t._data if kind == "tensor" else t._grad._data)
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


class CompiledFunction:
    """The callable `compile` returns. ``stats`` counts traces, cache hits and kernels."""

    def __init__(self, fn: Callable, parallel: bool = False, cache: bool = True,
                 strict: bool = False, verify: bool = False, max_retraces: int = 8,
                 dynamic: Sequence[int] = ()) -> None:
        self.fn = fn
        self.dynamic = frozenset(int(i) for i in dynamic)
        self.parallel = parallel
        self.cache = cache
        self.strict = strict
        self.verify = verify or os.environ.get("DUALGRAPH_VERIFY", "") not in ("", "0")
        self.max_retraces = max_retraces
        self.stats = CompileStats()
        self._entries: dict[tuple, list[_Entry]] = {}
        self._last_sig: tuple | None = None
        self._eager_fallback = False
        # Tracing and compiling run under a lock: two threads calling the same function with
        # a new signature compile it once; cached calls take no lock.
        self._lock = threading.RLock()
        functools.update_wrapper(self, fn, updated=())

    # ------------------------------------------------------------------- calls
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError("compiled functions take positional arguments only")
        if self.dynamic:
            args = self._lift_dynamic(args)
        # The signature is built inline: this runs on every call.
        key = []
        for a in args:
            if isinstance(a, Tensor):
                d = a._data
                key.append((d.shape, d.dtype, a._rg))
            elif isinstance(a, Literal) or a is None:
                key.append((type(a), a))
            elif isinstance(a, np.ndarray):
                key.append((a.shape, a.dtype))
            else:
                raise TypeError(
                    f"compiled function: argument {len(key)} is a {type(a).__name__}; pass "
                    "tensors, NumPy arrays or Python scalars (scalars are baked into the graph)"
                )
        sig = (tuple(key), grad_mode.GRAD_ENABLED.value)
        self.stats.calls += 1
        entry = None
        reason = None
        for e in self._entries.get(sig, ()):
            reason = e.guard_failure() if e.guards else None
            if reason is None:
                entry = e
                break
        if entry is None:
            if self._eager_fallback:
                return self.fn(*args)
            with self._lock:
                for e in self._entries.get(sig, ()):  # another thread may have compiled it
                    if not e.guards or e.guard_failure() is None:
                        entry = e
                        self.stats.cache_hits += 1  # a waiting thread reuses the new kernel
                        break
                if entry is None:
                    if reason is None and self._last_sig is not None and sig != self._last_sig:
                        reason = _describe_change(self._last_sig, sig, args)
                    if self.stats.traces > 0 and not self._retrace_allowed(reason):
                        return self.fn(*args)
                    if reason is not None:
                        self.stats.retrace_reasons.append(reason)
                    entry = self._compile(args)
                    self._entries.setdefault(sig, []).append(entry)
        else:
            self.stats.cache_hits += 1
        self._last_sig = sig
        if self.verify:
            entry.calls += 1
            if entry.calls & (entry.calls - 1) == 0:  # calls 1, 2, 4, 8, ...: occasionally
                self._check_stale(entry, args)
        return self._run(entry, args)

    def _lift_dynamic(self, args: tuple) -> tuple:
        """Python numbers at the ``dynamic`` positions become 0-d tensors: graph inputs, so a
        new value is a new input, not a new constant and a retrace. They take the dtype of
        the first floating-point tensor argument (float32 without one), as a weak Python
        scalar would have."""
        dtype = next((a._data.dtype for a in args
                      if isinstance(a, Tensor) and a._data.dtype.kind == "f"), np.float32)
        out = list(args)
        for i in self.dynamic:
            if i < len(out) and isinstance(out[i], (int, float)) and not isinstance(out[i], bool):
                out[i] = _make(np.asarray(out[i], dtype), False, None)
        return tuple(out)

    def _retrace_allowed(self, reason: str | None) -> bool:
        """The retrace budget: past it, warn once and run eagerly (or raise if strict)."""
        if self.stats.traces - 1 < self.max_retraces:
            return True
        reasons = self.stats.retrace_reasons + [reason or "unknown"]
        shown = "\n  ".join(reasons[-8:])
        msg = (
            f"{getattr(self.fn, '__name__', 'compiled function')} was retraced "
            f"{self.stats.traces - 1} times (budget {self.max_retraces}). Why:\n  {shown}\n"
            "Fix: mark a changing Python number dynamic (dg.compile(fn, dynamic=(position,))) "
            "or pass it as a tensor (dg.tensor(value)) so it is an input, not a baked "
            "constant; keep shapes and dtypes fixed (pad the last batch); "
            "or raise the budget with dg.compile(fn, max_retraces=N)."
        )
        if self.strict:
            raise RetraceLimitError(msg)
        warnings.warn(msg + " Running eagerly from now on.", RuntimeWarning, stacklevel=3)
        self._eager_fallback = True
        return False

    def _check_stale(self, entry: _Entry, args: tuple) -> None:
        """Trace again and compare with the compiled trace: a Python branch baked into the
        trace that now goes the other way changes the op sequence. Functions without side
        effects also run eagerly, and their results are compared."""
        ctx = TraceContext(lift_as_input=lambda t: True)
        targs = [ctx.new_input(a.shape, a.dtype, a if isinstance(a, Tensor) else None)
                 if isinstance(a, (Tensor, np.ndarray)) else a for a in args]
        try:
            with ctx:
                self.fn(*targs)
        finally:
            self._restore_grads(ctx)
        old = [(n.op, n.loc) for n in entry.graph.nodes if n.op != "const"]
        new = [(n.op, n.loc) for n in ctx.nodes if n.op != "const"]
        if old != new:
            k = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old),
                                                                                   len(new)))
            where = (new[k] if k < len(new) else old[k - 1] if old else (None, None))[1]
            # The branch itself records no op: it lies after the last op both programs
            # share and before the first where they part.
            after = f" (the Python branch is after {old[k - 1][1]})" if k and old[k - 1][1] \
                else " (the Python branch is before it)"
            raise StaleTraceError(
                f"the compiled trace of {getattr(self.fn, '__name__', 'the function')} is "
                f"stale: running it now gives a different program from {where or 'the end'} "
                f"on{after} ({old[k][0] if k < len(old) else 'nothing'} was compiled, "
                f"{new[k][0] if k < len(new) else 'nothing'} runs now). A Python branch or "
                "value baked into the trace changed; make it a tensor input or use dg.where."
            )
        if entry.mode != "step":
            with grad_mode.no_grad():
                expected = self.fn(*args)
                got = self._run(entry, args)
            exp = expected if isinstance(expected, (tuple, list)) else (expected,)
            res = got if isinstance(got, (tuple, list)) else (got,)
            for k, (e, r) in enumerate(zip(exp, res)):
                tol = 1e-4 if e.dtype == np.float32 else 1e-9
                if not np.allclose(r._data, e._data, rtol=tol, atol=tol, equal_nan=True):
                    raise StaleTraceError(
                        f"the compiled result {k} of {getattr(self.fn, '__name__', 'fn')} no "
                        "longer matches the eager one: a Python value baked into the trace "
                        "(a hyperparameter, a global) has changed; pass it as a tensor.")

    def entries(self) -> list:
        return [e for es in self._entries.values() for e in es]

    # ----------------------------------------------------------------- tracing
    def _compile(self, args: tuple) -> _Entry:
        t0 = time.perf_counter()
        ctx = TraceContext(lift_as_input=lambda t: True)
        targs = []
        for a in args:
            if isinstance(a, (Tensor, np.ndarray)):
                targs.append(ctx.new_input(a.shape, a.dtype, a if isinstance(a, Tensor) else None))
            else:
                targs.append(a)
        try:
            with ctx:
                out = self.fn(*targs)
            outputs, single = _outputs(ctx, out, self.fn)
        finally:
            grad_writes = self._restore_grads(ctx)
        user = list(outputs)
        writes = list(ctx.writes.values())
        extra = [n for _, n in writes] + [n for t, kind, n in grad_writes if kind == "set"]
        entry_grads = {id(t): before for t, before in ctx.grad_before.values()}
        sources, guards = [], []
        for t, _ in ctx.captured:
            owner = next((p for p, _ in ctx.captured + list(ctx.grad_before.values())
                          if entry_grads.get(id(p), p._grad) is t and p is not t), None)
            if owner is not None:
                sources.append(("grad", owner))
                guards.append(("grad_none", owner, False))
                guards.append(("type", t, (t.shape, t.dtype)))
            else:
                sources.append(("tensor", t))
                guards.append(("type", t, (t.shape, t.dtype)))
        for t in ctx.grad_assumed_none:
            guards.append(("grad_none", t, True))
        graph = Graph(ctx.inputs + [n for _, n in ctx.captured], ctx.nodes, user + extra)
        self.stats.traces += 1
        self.stats.trace_seconds += time.perf_counter() - t0
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
            self._lower_train(entry, graph, user, extra, leaves, ctx)
            graph_for_plan = entry.optimized
        else:
            entry.optimized = optimize(graph, verify=self.verify)
            graph_for_plan = entry.optimized
        write_to = entry.plan(graph_for_plan, len(user), n_grads, write_inputs)
        self.stats.passes_seconds += time.perf_counter() - t1
        arrays = entry.arrays(args)
        name = "forward" if train else "kernel"
        entry.kernel = build(entry.optimized, self.parallel, self.cache, name, write_to)
        self.stats.numba_seconds += entry.kernel.compile(arrays, prepared=True)
        self.stats.kernels += 1
        if train:
            entry.residual_plan = [(kind, j if kind == "in" else entry._pos[j])
                                   for kind, j in entry.residual_plan]
            entry.bwd_kernel = build(entry.backward_graph, self.parallel, self.cache,
                                     "backward")
            # Types only: running the forward here would apply its in-place writes twice.
            outs = entry.kernel.new_outputs()
            res = [arrays[j] if kind == "in" else outs[j] for kind, j in entry.residual_plan]
            cot = [np.zeros(o.shape or (1,), o.dtype) for o in user]
            self.stats.numba_seconds += entry.bwd_kernel.compile(cot + res, prepared=True)
            self.stats.kernels += 1
        return entry

    @staticmethod
    def _restore_grads(ctx: TraceContext) -> list:
        """Put back every ``.grad`` the trace changed; return what the call must write."""
        out = []
        for t, before in ctx.grad_before.values():
            after = t._grad
            t._grad = before
            if after is before:
                continue
            if isinstance(after, Tracer):
                out.append((t, "set", ctx.as_node(after)))
            elif after is None:
                out.append((t, "none", None))
            else:
                raise TraceError("a compiled function assigned an eager tensor to .grad; "
                                 "assign the result of an op on traced values instead")
        return out

    def _lower_train(self, entry: _Entry, graph: Graph, user: list, extra: list,
                     leaves: list, ctx: TraceContext) -> None:
        fwd = Graph(graph.inputs, graph.nodes, user)
        d = differentiate(fwd, leaves)
        residuals = d.forward.outputs[len(user):]
        # A residual that is an input is not an output: the backward gets the input's
        # array itself (version checks guard it against in-place changes).
        index_of = {id(n): j for j, n in enumerate(graph.inputs)}
        computed = [r for r in residuals if id(r) not in index_of]
        full = Graph(graph.inputs, graph.nodes, user + extra + computed)
        entry.optimized = optimize(full, verify=self.verify)
        entry.backward_graph = optimize(d.backward, verify=self.verify)
        entry.n_residuals = len(residuals)
        entry.wrt_tensors = leaves
        entry.differentiated = d
        first = len(user) + len(extra)
        k = 0
        for r in residuals:
            if id(r) in index_of:
                entry.residual_plan.append(("in", index_of[id(r)]))
            else:
                entry.residual_plan.append(("graph_out", first + k))
                k += 1

    # ----------------------------------------------------------------- running
    def _run(self, entry: _Entry, args: tuple) -> Any:
        ins = entry.arrays(args)
        kernel = entry.kernel
        outs = kernel.new_outputs()
        kernel.run(ins, outs)
        for t in entry.inplace:
            t._version[0] += 1
        for t, k in entry.copy_writes:
            np.copyto(t._data, outs[k].reshape(t.shape))
            t._version[0] += 1
        for t, k in entry.grad_set:
            o = outs[k]
            t._grad = _make(o if o.shape == t.shape else o.reshape(t.shape), False, None)
        for t in entry.grad_none:
            t._grad = None
        results = []
        for o, n in zip(outs, entry.optimized.outputs[:entry.n_user]):
            results.append(_make(o if o.shape == n.shape else o.reshape(n.shape), False, None))
        if entry.mode == "train" and grad_mode.GRAD_ENABLED.value:
            res = tuple(ins[j] if kind == "in" else outs[j] for kind, j in entry.residual_plan)
            self._attach_backward(entry, args, res, results)
        return results[0] if entry.single else tuple(results)

    def _attach_backward(self, entry: _Entry, args: tuple, residuals: tuple,
                         results: list) -> None:
        tensors = [a for a in args if isinstance(a, (Tensor, np.ndarray))]
        if entry.sources:
            tensors += [t if kind == "tensor" else t._grad for kind, t in entry.sources]
        inputs = tuple([tensors[i]._input_node() for i in entry.wrt_tensors])
        # Residuals may be the input arrays themselves: changing one in place before
        # backward must raise, as in eager mode.
        checks = [(t, t._version[0]) for t in tensors if isinstance(t, Tensor)]
        outs = [(tuple(r.shape), r.dtype) for r in results]
        joint = CompiledFunctionBackward(entry.bwd_kernel, inputs, residuals, outs, checks)
        for k, r in enumerate(results):
            if not entry.out_rg[k]:
                # As in eager mode: a comparison or a value computed from detached tensors
                # does not require grad (its cotangent stays zero).
                continue
            r._rg = True
            r.grad_fn = joint if len(results) == 1 else _OutputOf(joint, k, r.shape, r.dtype)


class CompiledModule:
    """A module compiled as a whole: parameters are graph inputs, so optimizer updates made
    between calls are seen. Attributes are the module's."""

    def __init__(self, module: Any, **options: Any) -> None:
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "compiled", CompiledFunction(module, **options))

    def __call__(self, *args: Any) -> Any:
        return self.compiled(*args)

    @property
    def stats(self) -> CompileStats:
        return self.compiled.stats

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"Compiled({self.module!r})"


def compile(fn: Callable | None = None, *, parallel: bool = False, cache: bool = True,  # noqa: A001
            strict: bool = False, verify: bool = False, max_retraces: int = 8,
            dynamic: Sequence[int] = ()) -> Any:
    """Compile a function or a module to Numba, once per argument signature.

    >>> @dg.compile
    ... def f(x, y):
    ...     return (x * y + y ** 2).sum()

    Options: ``parallel`` (prange for large loops), ``cache`` (on-disk kernel cache;
    ``DUALGRAPH_DISABLE_DISK_CACHE=1`` turns it off everywhere), ``max_retraces`` (past
    it the function warns once and runs eagerly, or raises `RetraceLimitError` when
    ``strict``), ``verify`` (now and then retrace and rerun eagerly to catch a stale
    trace; ``DUALGRAPH_VERIFY=1`` turns it on everywhere), ``dynamic`` (positions of Python
    number arguments passed as 0-d tensor inputs instead of constants: a new value runs the
    same kernel instead of retracing).
    """
    options = {"parallel": parallel, "cache": cache, "strict": strict, "verify": verify,
               "max_retraces": max_retraces, "dynamic": tuple(dynamic)}
    if fn is None:
        return functools.partial(compile, **options)
    from ..nn.modules import Module

    if isinstance(fn, Module):
        return CompiledModule(fn, **options)
    if not callable(fn):
        raise TypeError(f"dg.compile expects a function or a module, got {type(fn).__name__}")
    return CompiledFunction(fn, **options)
