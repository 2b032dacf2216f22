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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend.numba import Kernel, build
from .eager import grad_mode
from .eager.autograd import _FREED_MSG, Function
from .eager.tensor import Tensor, _make
from .errors import TraceError
from .ir.graph import Graph, Literal
from .passes import optimize
from .trace.autodiff import differentiate
from .trace.tracer import TraceContext, Tracer, _outputs


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


def _arg_signature(a: Any, i: int) -> tuple:
    if isinstance(a, Tensor):
        return ("tensor", a.shape, a.dtype.str, a.requires_grad)
    if isinstance(a, np.ndarray):
        return ("array", a.shape, a.dtype.str)
    if isinstance(a, Literal) or a is None:
        return ("const", type(a).__name__, a)
    raise TypeError(
        f"compiled function: argument {i} is a {type(a).__name__}; pass tensors, NumPy "
        "arrays or Python scalars (scalars are baked into the graph)"
    )


def _describe_change(old: tuple, new: tuple) -> str:
    (old_args, old_grad), (new_args, new_grad) = old, new
    if len(old_args) != len(new_args):
        return f"{len(new_args)} arguments instead of {len(old_args)}"
    for i, (a, b) in enumerate(zip(old_args, new_args)):
        if a == b:
            continue
        if a[0] != b[0]:
            return f"argument {i}: a {b[0]} instead of a {a[0]}"
        if a[0] == "const":
            return f"argument {i}: Python value {b[2]!r} instead of {a[2]!r} (baked constant)"
        for k, what in ((1, "shape"), (2, "dtype")):
            if a[k] != b[k]:
                return f"argument {i}: {what} {b[k]} instead of {a[k]}"
        return f"argument {i}: requires_grad={b[3]} instead of {a[3]}"
    return f"grad mode {'on' if new_grad else 'off'} instead of {'on' if old_grad else 'off'}"


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


class CompiledFunctionBackward(Function):
    """The single tape node of a compiled call: backward runs the compiled backward kernel."""

    __slots__ = ("_kernel", "_outs", "_checks")

    def __init__(self, kernel: Kernel, inputs: tuple, residuals: tuple, outs: list,
                 checks: list) -> None:
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
        if grad_mode.GRAD_ENABLED[0]:
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
        cot = [parts[k]._data if k in parts else np.zeros(shape, dtype)
               for k, (shape, dtype) in enumerate(self._outs)]
        grads = self._kernel(*cot, *self._saved)
        return [_make(np.asarray(a), False, None) for a in grads]


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
    kernel: Kernel | None = None
    bwd_kernel: Kernel | None = None
    wrt_tensors: list = field(default_factory=list)
    n_residuals: int = 0
    optimized: Graph | None = None
    backward_graph: Graph | None = None

    def guard_failure(self) -> str | None:
        for kind, t, expected in self.guards:
            if kind == "grad_none":
                if (t.grad is None) != expected:
                    state = "None" if t.grad is None else "set"
                    return f"the .grad of a {t.shape} tensor is {state} (it was not at trace time)"
            elif kind == "type":
                if (t.shape, t.dtype) != expected:
                    return (f"a captured tensor is {t.shape} {t.dtype} instead of "
                            f"{expected[0]} {expected[1]}")
        return None

    def arrays(self, args: tuple) -> list:
        out = [a._data if isinstance(a, Tensor) else a for a in args
               if isinstance(a, (Tensor, np.ndarray))]
        for kind, t in self.sources:
            out.append(t._data if kind == "tensor" else t.grad._data)
        return out


class CompiledFunction:
    """The callable `compile` returns. ``stats`` counts traces, cache hits and kernels."""

    def __init__(self, fn: Callable, parallel: bool = False, cache: bool = True,
                 strict: bool = False, verify: bool = False) -> None:
        self.fn = fn
        self.parallel = parallel
        self.cache = cache
        self.strict = strict
        self.verify = verify
        self.stats = CompileStats()
        self._entries: dict[tuple, list[_Entry]] = {}
        self._last_sig: tuple | None = None
        functools.update_wrapper(self, fn, updated=())

    # ------------------------------------------------------------------- calls
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError("compiled functions take positional arguments only")
        sig = (tuple(_arg_signature(a, i) for i, a in enumerate(args)),
               grad_mode.GRAD_ENABLED[0])
        self.stats.calls += 1
        entry = None
        reason = None
        for e in self._entries.get(sig, ()):
            reason = e.guard_failure()
            if reason is None:
                entry = e
                break
        if entry is None:
            if reason is None and self._last_sig is not None and sig != self._last_sig:
                reason = _describe_change(self._last_sig, sig)
            if reason is not None:
                self.stats.retrace_reasons.append(reason)
            entry = self._compile(args)
            self._entries.setdefault(sig, []).append(entry)
        else:
            self.stats.cache_hits += 1
        self._last_sig = sig
        return self._run(entry, args)

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
        leaves = [i for i, n in enumerate(graph.inputs) if id(n) in ctx.leaves]
        train = (not ctx.backward_called and grad_mode.GRAD_ENABLED[0] and leaves
                 and any(id(n) in ctx.rg for n in user))
        entry = _Entry(
            mode="train" if train else ("step" if (writes or grad_writes or
                                                   ctx.backward_called) else "inference"),
            graph=graph, sources=sources, n_user=len(user), single=single,
            writes=[t for t, _ in writes],
            grad_writes=[(t, kind) for t, kind, _ in grad_writes], guards=guards,
        )
        arrays = entry.arrays(args)
        t1 = time.perf_counter()
        if train:
            self._lower_train(entry, graph, user, extra, leaves, ctx)
        else:
            entry.optimized = optimize(graph, verify=self.verify)
        self.stats.passes_seconds += time.perf_counter() - t1
        if train:
            entry.kernel = build(entry.optimized, self.parallel, self.cache, "forward")
            entry.bwd_kernel = build(entry.backward_graph, self.parallel, self.cache, "backward")
            self.stats.numba_seconds += entry.kernel.compile(arrays)
            outs = entry.kernel(*arrays)
            cot = [np.zeros(o.shape, o.dtype) for o in user]
            self.stats.numba_seconds += entry.bwd_kernel.compile(
                cot + list(outs[len(user) + len(extra):]))
            self.stats.kernels += 2
        else:
            entry.kernel = build(entry.optimized, self.parallel, self.cache)
            self.stats.numba_seconds += entry.kernel.compile(arrays)
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
        full = Graph(graph.inputs, graph.nodes, user + extra + residuals)
        entry.optimized = optimize(full, verify=self.verify)
        entry.backward_graph = optimize(d.backward, verify=self.verify)
        entry.n_residuals = len(residuals)
        entry.wrt_tensors = leaves
        entry.differentiated = d

    # ----------------------------------------------------------------- running
    def _run(self, entry: _Entry, args: tuple) -> Any:
        arrays = entry.arrays(args)
        outs = entry.kernel(*arrays)
        n_user = entry.n_user
        n_writes = len(entry.writes)
        for t, a in zip(entry.writes, outs[n_user:n_user + n_writes]):
            np.copyto(t._data, a)
            t._version[0] += 1
        k = n_user + n_writes
        for t, kind in entry.grad_writes:
            if kind == "set":
                t._grad = _make(np.array(outs[k]), False, None)
                k += 1
            else:
                t._grad = None
        results = [_make(np.asarray(o), False, None) for o in outs[:n_user]]
        if entry.mode == "train":
            self._attach_backward(entry, args, arrays, outs[k:], results)
        return results[0] if entry.single else tuple(results)

    def _attach_backward(self, entry: _Entry, args: tuple, arrays: list, residuals: tuple,
                         results: list) -> None:
        tensors = [a for a in args if isinstance(a, (Tensor, np.ndarray))]
        tensors += [t if kind == "tensor" else t.grad for kind, t in entry.sources]
        wrt = [tensors[i] for i in entry.wrt_tensors]
        inputs = tuple(t._input_node() for t in wrt)
        checks = [(t, t._version[0]) for t in tensors if isinstance(t, Tensor)]
        outs = [(tuple(r.shape), r.dtype) for r in results]
        joint = CompiledFunctionBackward(entry.bwd_kernel, inputs, tuple(residuals), outs,
                                         checks)
        for k, r in enumerate(results):
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
            strict: bool = False, verify: bool = False) -> Any:
    """Compile a function or a module to Numba, once per argument signature.

    >>> @dg.compile
    ... def f(x, y):
    ...     return (x * y + y ** 2).sum()

    Options: ``parallel`` (prange for large loops), ``cache`` (on-disk kernel cache;
    ``DUALGRAPH_DISABLE_DISK_CACHE=1`` turns it off everywhere), ``strict`` and ``verify``.
    """
    options = {"parallel": parallel, "cache": cache, "strict": strict, "verify": verify}
    if fn is None:
        return functools.partial(compile, **options)
    from .nn.modules import Module

    if isinstance(fn, Module):
        return CompiledModule(fn, **options)
    if not callable(fn):
        raise TypeError(f"dg.compile expects a function or a module, got {type(fn).__name__}")
    return CompiledFunction(fn, **options)
