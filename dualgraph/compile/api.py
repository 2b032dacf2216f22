"""The public entry point: the `compile` decorator, `CompiledFunction`, `CompiledModule`.

`CompiledFunction.__call__` is the per-call path: it builds the signature key inline, picks
a cached entry (`signature`), and runs it (`run`); a new signature is traced and built once
(`specialize`), within the retrace budget (`retrace`), and ``verify=True`` now and then
checks that the trace is not stale (`stale`).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..eager import grad_mode
from ..eager.internal import array_of, make_tensor, requires_grad_of
from ..eager.tensor import Tensor
from ..ir.graph import Literal
from .retrace import retrace_allowed
from .run import run
from .signature import describe_change, guard_failure
from .specialize import _Entry, compile_entry
from .stale import check_stale


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
        # The signature is built inline, and the arguments' arrays gathered on the way (the
        # kernel's first inputs, `specialize.arg_arrays`): this runs on every call.
        key = []
        arrays = []
        for a in args:
            if isinstance(a, Tensor):
                d = array_of(a)
                arrays.append(d)
                key.append((d.shape, d.dtype, requires_grad_of(a)))
            elif isinstance(a, Literal) or a is None:
                key.append((type(a), a))
            elif isinstance(a, np.ndarray):
                arrays.append(a)
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
            reason = guard_failure(e.guards) if e.guards else None
            if reason is None:
                entry = e
                break
        if entry is None:
            if self._eager_fallback:
                return self.fn(*args)
            with self._lock:
                for e in self._entries.get(sig, ()):  # another thread may have compiled it
                    if not e.guards or guard_failure(e.guards) is None:
                        entry = e
                        self.stats.cache_hits += 1  # a waiting thread reuses the new kernel
                        break
                if entry is None:
                    if reason is None and self._last_sig is not None and sig != self._last_sig:
                        reason = describe_change(self._last_sig, sig, args)
                    if self.stats.traces > 0 and not retrace_allowed(
                            getattr(self.fn, "__name__", "compiled function"), self.stats,
                            self.max_retraces, self.strict, reason):
                        self._eager_fallback = True
                        return self.fn(*args)
                    if reason is not None:
                        self.stats.retrace_reasons.append(reason)
                    entry = compile_entry(self.fn, args, self.stats, self.parallel, self.cache,
                                          self.verify)
                    self._entries.setdefault(sig, []).append(entry)
        else:
            self.stats.cache_hits += 1
        self._last_sig = sig
        if self.verify:
            entry.calls += 1
            if entry.calls & (entry.calls - 1) == 0:  # calls 1, 2, 4, 8, ...: occasionally
                check_stale(self.fn, entry, args)
        return run(entry, args, arrays)

    def _lift_dynamic(self, args: tuple) -> tuple:
        """Python numbers at the ``dynamic`` positions become 0-d tensors: graph inputs, so a
        new value is a new input, not a new constant and a retrace. They take the dtype of
        the first floating-point tensor argument (float32 without one), as a weak Python
        scalar would have."""
        dtype = next((a.dtype for a in args
                      if isinstance(a, Tensor) and a.dtype.kind == "f"), np.float32)
        out = list(args)
        for i in self.dynamic:
            if i < len(out) and isinstance(out[i], (int, float)) and not isinstance(out[i], bool):
                out[i] = make_tensor(np.asarray(out[i], dtype), False, None)
        return tuple(out)

    def entries(self) -> list:
        return [e for es in self._entries.values() for e in es]


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
