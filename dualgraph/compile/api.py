"""The public entry point: the `compile` decorator, `CompiledFunction`, `CompiledModule`.

`CompiledFunction.__call__` is the per-call path. A plain positional call first tries the
generated call path of the entry the previous call used (`callgen`), which checks the
signature and the guards itself. Otherwise the general path builds the key, picks a cached
entry (`signature`), and runs its call path; a new signature is traced and built once
(`specialize`), within the retrace budget (`retrace`), and ``verify=True`` now and then
checks that the trace is not stale (`stale`).
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import DEFAULT_FLOAT
from ..eager import grad_mode
from ..eager.autograd import ANOMALY
from ..eager.detours import ACTIVE as _DETOURS
from ..eager.internal import array_of, make_tensor, requires_grad_of
from ..eager.saved_hooks import STACK as _SAVED_HOOKS
from ..eager.tensor import Tensor
from ..errors import EagerOnlyError, eager_warning, runs_eagerly
from ..modes import ABOVE_BASE, MODE_STACKS, current_trace
from ..nn.modules import module as _module
from ..ops.complex import ComplexTensor
from ..ops.precision import AUTOCAST
from ..profiler import record_function
from .callgen import (
    DEFAULT,
    FLOAT_ARGUMENT,
    KEYWORD,
    MISS,
    POSITIONAL,
    SLOT,
    CallForm,
    CallPath,
    generate,
    has_slot,
)
from .capture import defaults_of
from .plan import COMPLEX_SLOT, Plan
from .retrace import retrace_allowed
from .signature import (
    IntLayout,
    check_arguments,
    check_options,
    const_key,
    describe_change,
    overlapping,
)
from .specialize import FillsStateError, compile_entry
from .speculate import changed_values, unstable_values
from .stale import check_stale
from .symbolic import NeedsValue, symbolic_ints
from .tiered import enabled as tiered_enabled
from .tiered import poll, prestart


@dataclass
class CompileStats:
    """Counters that prove compilation happened, and what it cost."""

    traces: int = 0
    kernels: int = 0
    trace_seconds: float = 0.0
    passes_seconds: float = 0.0
    numba_seconds: float = 0.0
    retrace_reasons: list = field(default_factory=list)
    # Calls the generated call path served (`callgen`): each is a call, a cache hit and a
    # tier-1 call, counted once there (``calls``, ``cache_hits`` and ``tier1_calls`` add
    # it to the general path's counts below).
    fast_calls: int = 0
    general_calls: int = field(default=0, repr=False)
    general_cache_hits: int = field(default=0, repr=False)
    # Tiered execution (`tiered`): calls the NumPy interpreter served (tier 0), the call
    # number and the seconds after the first call of the first swap to compiled kernels,
    # the worker's Numba seconds, and why tiering failed (the function stays at tier 0).
    tier0_calls: int = 0
    # Calls the general path served by compiled kernels (blocking, or tier 1 after the
    # swap): counted as they run, not derived from the other counters (which a concurrent
    # call may be between updating).
    general_tier1_calls: int = field(default=0, repr=False)
    swap_call: int | None = None
    swap_seconds: float | None = None
    worker_seconds: float = 0.0
    tier_failure: str | None = None
    # Calls run eagerly because their trace would have filled an empty attribute
    # (`specialize.FillsStateError`).
    state_filling_calls: int = 0
    first_call_at: float | None = field(default=None, repr=False)

    @property
    def compile_seconds(self) -> float:
        """Seconds the calling thread spent compiling: trace, passes, Numba (with tiering,
        only loading the worker's kernels)."""
        return self.trace_seconds + self.passes_seconds + self.numba_seconds

    @property
    def calls(self) -> int:
        """Calls of the compiled function."""
        return self.general_calls + self.fast_calls

    @property
    def cache_hits(self) -> int:
        """Calls that found a compiled entry for their signature."""
        return self.general_cache_hits + self.fast_calls

    @property
    def tier1_calls(self) -> int:
        """Calls served by compiled kernels (blocking, or tier 1 after the swap)."""
        return self.general_tier1_calls + self.fast_calls

    def __str__(self) -> str:
        return (f"calls={self.calls} traces={self.traces} cache_hits={self.cache_hits} "
                f"kernels={self.kernels} compile={self.compile_seconds:.3f}s (trace "
                f"{self.trace_seconds:.3f}s, passes {self.passes_seconds:.3f}s, numba "
                f"{self.numba_seconds:.3f}s)" + self._tiers())

    def _tiers(self) -> str:
        if not (self.tier0_calls or self.worker_seconds or self.tier_failure):
            return ""
        s = f" tier0_calls={self.tier0_calls} tier1_calls={self.tier1_calls}"
        if self.swap_call is not None:
            s += f" swap at call {self.swap_call} (+{self.swap_seconds:.3f}s)"
        s += f" worker numba {self.worker_seconds:.3f}s"
        return s + (f" tier failure: {self.tier_failure}" if self.tier_failure else "")


def _lazy_body(fn: Callable) -> bool:
    """Whether calling ``fn`` only makes a generator or coroutine, running none of its
    body (``def f(x): yield x * 2``)."""
    return (inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
            or inspect.iscoroutinefunction(fn))


class CompiledFunction:
    """The callable `compile` returns. ``stats`` counts traces, cache hits and kernels."""

    def __init__(self, fn: Callable, parallel: bool = False, cache: bool = True,
                 strict: bool = False, verify: bool = False, max_retraces: int = 8,
                 dynamic: Sequence[int] = (), tiered: bool = True) -> None:
        check_options(parallel=parallel, cache=cache, strict=strict, verify=verify,
                      max_retraces=max_retraces, dynamic=dynamic, tiered=tiered)
        self.fn = fn
        self.tiered = tiered
        self.dynamic = frozenset(int(i) for i in dynamic)
        self._signature, self._npos = _read_signature(fn)
        self._defaults = defaults_of(fn)  # the signature's, re-read when they change
        self._callers: dict = {}
        self._keep: dict = {}  # unhashable constant arguments, keyed by id (ids stay unique)
        self._baked_warned: set = set()  # captured arrays warned about (`baked.check_baked`)
        self.parallel = parallel
        self.cache = cache
        self.strict = strict
        self.verify = verify or os.environ.get("DUALGRAPH_VERIFY", "") not in ("", "0")
        self.max_retraces = max_retraces
        self.stats = CompileStats()
        self._entries: dict[tuple, list[Plan]] = {}
        self._last_sig: tuple | None = None
        self._eager_fallback = False
        self._filled_state = False  # a call already ran eagerly to fill empty attributes
        self._eager_sigs: set = set()  # signatures whose calls run eagerly (`EagerOnlyError`)
        # Lines whose read number, taken as a value, changed between calls: not speculated
        # on again (`speculate.unstable_values`).
        self._unstable: set = set()
        # Int argument positions traced as graph inputs after a second value (`symbolic`),
        # and those whose trace needed the value (keyed by value for good), with why.
        self._int_inputs: set = set()
        self._int_values: dict = {}
        self._int_callers: dict = {}
        # Tracing and compiling run under a lock: two threads calling the same function with
        # a new signature compile it once; cached calls take no lock.
        self._lock = threading.RLock()
        self._fast: Callable[[tuple], Any] = _miss
        self._fast_kw: Callable[[tuple, dict], Any] = _miss_kw
        self._kinds = "" if self._signature is None else "".join(
            "**" if p.kind is inspect.Parameter.VAR_KEYWORD else "."
            for p in self._signature.parameters.values())
        functools.update_wrapper(self, fn, updated=())
        prestart(tiered, cache)  # the worker imports while the program prepares its first call

    # ------------------------------------------------------------------- calls
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # `current_trace()` written out: a Python call less on every compiled call; no
        # thread-local read while no thread has a mode above its base one.
        if (ABOVE_BASE and MODE_STACKS.stack[-1].tracing) or _DETOURS:
            return self._detour(args, kwargs)
        # The generated call path of the entry the last call used (`callgen`), for calls
        # made as that one was (with keywords or without): it checks the key and the
        # guards itself and returns MISS when they differ.
        try:
            out = self._fast_kw(args, kwargs) if kwargs else self._fast(args)
        except OverflowError:
            # A Python int beyond int64 where the entry takes an int input: the fast path
            # fails converting it, before anything runs; the general call names it.
            return self._call(args, kwargs)
        if out is not MISS:
            return out
        return self._call(args, kwargs)

    def _detour(self, args: tuple, kwargs: dict) -> Any:
        """A call made while a function is traced, under saved-tensor hooks, in anomaly mode
        or inside a profile."""
        if current_trace() is not None or _SAVED_HOOKS or ANOMALY[0]:
            # Traced (another compiled function, or this one recursively): run the Python
            # function, so its ops join the outer trace. Under saved-tensor hooks too: the
            # hooks must see each saved tensor, and a compiled graph keeps them inside its
            # kernels. In anomaly mode too: it checks every backward op for nan.
            return self.fn(*args, **kwargs)
        with record_function("CompiledFunction"):  # a profile's row
            out = self._fast_kw(args, kwargs) if kwargs else self._fast(args)
            return out if out is not MISS else self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """The general call: flatten the arguments, build the key, find (or trace) the
        entry, run its call path."""
        fn = self.fn
        layout = None
        given = len(args)
        call_args = args
        if kwargs or (given != self._npos and self._npos != -2):
            args, fn, layout = self._bind(args, kwargs)
        # A call the plain call path can check as it comes: positional, nothing bound (or
        # every parameter given, no keyword-only one), nothing lifted, nothing flattened.
        plain = not kwargs and (
            layout is None or (layout == (given, ()) and len(args) == given))
        lifted, dtype, templates, ints = (), None, None, ()
        self._note_floats(args)
        if self.dynamic or self._int_inputs:
            args, lifted, dtype, ints = self._lift_dynamic(args)
            plain = plain and not lifted
            if ints:
                fn = self._int_caller(fn, ints)
        for a in args:
            if type(a) in _CONTAINERS or isinstance(a, _CONTAINERS):
                n = len(args)
                args, fn = _flatten_arguments(args, fn)
                if len(args) != n:
                    templates = tuple(t if _has_slot(t) else None for t in args[:n])
                    plain = False
                break
        sig = self._key(args, layout if not ints else IntLayout(layout, ints))
        self.stats.general_calls += 1
        entry = self._find(sig, args)
        if entry is None:
            if self._promote_ints(sig):
                self.stats.general_calls -= 1
                return self._call(call_args, kwargs)  # the ints now lifted
            entry = self._new_entry(sig, args, fn)
            if entry is _RETRY:
                self.stats.general_calls -= 1
                return self._call(call_args, kwargs)  # the ints keyed by value
            if entry is None:
                self._fast = _miss
                return fn(*args)  # runs eagerly (`_new_entry` says why)
        else:
            self.stats.general_cache_hits += 1
        self._last_sig = sig
        if self.verify:
            entry.calls += 1
            if entry.calls & (entry.calls - 1) == 0:  # calls 1, 2, 4, 8, ...: occasionally
                self._code(entry, sig, fn)
                check_stale(fn, entry, args)
        if entry.tier0:
            poll(entry, self.stats)
        code = self._code(entry, sig, fn)
        # The fast path serves only the entry of the last call (so `_last_sig` stays that
        # call's), at tier 1, for calls made as this one was.
        self._fast, self._fast_kw = _miss, _miss_kw
        if not entry.tier0:
            self.stats.general_tier1_calls += 1
            if plain:
                self._fast = code.fast
            elif self._signature is not None or layout is None:
                form = CallForm(given, tuple(kwargs), self._binding(layout, given, kwargs),
                                "**" in self._kinds, lifted, dtype, templates)
                fast = self._form_fast(entry, code, sig, fn, form)[0]
                if kwargs:
                    self._fast_kw = fast
                else:
                    self._fast = fast
        return code.run(args)

    def _binding(self, layout: tuple | None, given: int, kwargs: dict) -> tuple | None:
        """Where each bound argument of a call with ``given`` positional arguments and
        these keywords comes from (`callgen.CallForm.binding`); None when not bound."""
        if layout is None:
            return None
        bound = self._signature.bind(*[_Given(i) for i in range(given)],
                                     **{k: _Given(k) for k in kwargs})
        bound.apply_defaults()
        out = []
        for v in bound.args + tuple(bound.kwargs.values()):
            if isinstance(v, _Given):
                out.append((POSITIONAL if isinstance(v.at, int) else KEYWORD, v.at))
            else:
                out.append((DEFAULT, v))
        return tuple(out)

    def _form_fast(self, entry: Plan, code: CallPath, sig: tuple, fn: Callable,
                   form: CallForm) -> tuple:
        """``(fast, source)``: the generated call path of ``entry`` for calls made as
        ``form`` says."""
        # Within one entry (one key: its templates, which numbers were lifted) the
        # positional count and the keyword names decide the rest of the form.
        made = code.forms.get((form.given, form.keywords))
        if made is None:
            other = generate(entry, sig, fn, self.stats, self.verify, self._keep,
                             check_stale, self._baked_warned, form)
            made = code.forms[form.given, form.keywords] = (other.fast, other.source)
        return made

    def _key(self, args: tuple, layout: tuple | None) -> tuple:
        """The signature key of flat ``args``: ``(per-argument keys, grad mode, layout,
        which array arguments share memory)``."""
        key = []
        arrays = []
        for a in args:
            if isinstance(a, Tensor):
                d = array_of(a)
                arrays.append(d)
                key.append((d.shape, d.dtype, requires_grad_of(a)))
            elif isinstance(a, np.ndarray):
                arrays.append(a)
                key.append((a.shape, a.dtype))
            else:
                key.append(const_key(a, len(key), self._keep))
        # Arguments that share memory (``f(x[1:3], x)``): which pairs is part of the key;
        # a trace that writes one of them runs eagerly (`specialize.check_aliasing`).
        alias = overlapping(arrays) if len(arrays) > 1 else None
        # The default float dtype shapes what a trace builds (Python floats, factories);
        # an autocast region, which ops it rounds.
        return (tuple(key), (grad_mode.GRAD_ENABLED.value, DEFAULT_FLOAT[0], AUTOCAST.value),
                layout, alias)

    def _find(self, sig: tuple, args: tuple) -> Plan | None:
        for e in self._entries.get(sig, ()):
            if e.guards is None or e.guards.holds(args):
                return e
        return None

    def _promote_ints(self, sig: tuple) -> bool:
        """Whether a call of the new signature ``sig`` differs from an entry's only in the
        values of int arguments: those arguments become graph inputs (`symbolic`), as
        ``torch.compile``'s automatic dynamic makes an int dynamic on its second value.
        One the trace needed as a Python value stays keyed by value."""
        keys = sig[0]
        ints = {i for i, k in enumerate(keys) if k[0] is int and i not in self.dynamic
                and i not in self._int_values and i not in self._int_inputs}
        if not ints:
            return False
        for other in self._entries:
            if other[1:] != sig[1:] or len(other[0]) != len(keys):
                continue
            differ = {i for i, (a, b) in enumerate(zip(other[0], keys)) if a != b}
            if differ and differ <= ints and all(other[0][i][0] is int for i in differ):
                self._int_inputs |= differ
                return True
        return False

    def _note_floats(self, args: tuple) -> None:
        """Float arguments are graph inputs from their first call (``torch.compile`` makes
        them inputs on their second value): a float that changes on every call (a mixup
        ``lam``, a step's learning rate) then runs one entry. One the trace needs as a
        Python value is keyed by value (`symbolic.SymbolicFloat`)."""
        for i, a in enumerate(args):
            if type(a) in _FLOATS and i not in self._int_inputs and \
                    i not in self._int_values and i not in self.dynamic:
                self._int_inputs.add(i)

    def _int_caller(self, fn: Callable, ints: tuple) -> Callable:
        """``fn`` taking the int arguments at ``ints`` as lifted 0-d tensors
        (`symbolic.symbolic_ints`), made once per function and positions."""
        key = (fn, ints)
        call = self._int_callers.get(key)
        if call is None:
            call = self._int_callers[key] = symbolic_ints(fn, ints)
        return call

    def _requires_grad_twin(self, sig: tuple, args: tuple) -> Plan | None:
        """An entry whose signature differs from ``sig`` only in the ``requires_grad`` of
        arguments it does not depend on (`Plan.rg_free`), whose guards hold: it serves
        ``sig`` too, without a trace."""
        keys, rest = sig[0], sig[1:]
        for other, entries in list(self._entries.items()):
            if other[1:] != rest or len(other[0]) != len(keys):
                continue
            for e in entries:
                free = e.rg_free
                if free and all(a == b or (i in free and a[:2] == b[:2])
                                for i, (a, b) in enumerate(zip(other[0], keys))) and \
                        (e.guards is None or e.guards.holds(args)):
                    self._entries.setdefault(sig, []).append(e)
                    return e
        return None

    def _new_entry(self, sig: tuple, args: tuple, fn: Callable) -> Plan | None:
        """Trace and build the entry of a new signature (or one whose guards failed),
        within the retrace budget; None when the call must run eagerly."""
        # Why the most recent entry of this signature no longer fits (None: new signature).
        entries = self._entries.get(sig)
        reason = entries[-1].guards.failure(args) if entries else None
        if reason is not None:
            self._unstable.update(changed_values(entries[-1].guards, args))
        if self._eager_fallback or sig in self._eager_sigs:
            return None
        with self._lock:
            entry = self._find(sig, args)  # another thread may have compiled it
            if entry is None:
                entry = self._requires_grad_twin(sig, args)
            if entry is not None:
                self.stats.general_cache_hits += 1  # a waiting thread reuses the new kernel
                return entry
            if _lazy_body(self.fn):
                # Its body runs as the caller consumes the generator, after the call has
                # returned: nothing to trace, so each call runs it as eager mode does.
                e = runs_eagerly(self.fn, "is a generator (or async) function, whose body "
                                 "runs only as its result is consumed",
                                 "Compile the function each item is computed by instead.")
                if self.strict:
                    raise e
                self._eager_sigs.add(sig)
                warnings.warn(eager_warning(e), RuntimeWarning, stacklevel=4)
                return None
            check_arguments(args)
            if reason is None and self._last_sig is not None and sig != self._last_sig:
                reason = describe_change(self._last_sig, sig, args)
                for i, why in self._int_values.items():
                    if reason.startswith(f"argument {i}: Python value"):
                        reason += (f"; keyed by value: the function uses it as a Python "
                                   f"value ({why})")
            if self.stats.traces > 0 and not retrace_allowed(
                    getattr(self.fn, "__name__", "compiled function"), self.stats,
                    self.max_retraces, self.strict, reason):
                self._eager_fallback = True
                return None
            if reason is not None:
                self.stats.retrace_reasons.append(reason)
            try:
                with unstable_values(self._unstable):
                    entry = compile_entry(fn, args, self.stats, self.parallel, self.cache,
                                          self.verify, tiered_enabled(self.tiered, self.cache),
                                          sig[3], fills_state=not (self._filled_state or
                                                                   self.strict))
            except FillsStateError:
                self._filled_state = True
                self.stats.state_filling_calls += 1
                return None
            except NeedsValue as e:
                # The trace used an int argument as a Python value: key it by value.
                if reason is not None:
                    self.stats.retrace_reasons.pop()
                for i in sig[2].ints:
                    self._int_inputs.discard(i)
                    self._int_values[i] = e.reason
                return _RETRY
            except EagerOnlyError as e:
                if self.strict:
                    raise
                self._eager_sigs.add(sig)
                warnings.warn(eager_warning(e), RuntimeWarning, stacklevel=4)
                return None
            self._entries.setdefault(sig, []).append(entry)
            return entry

    def _code(self, entry: Plan, sig: tuple, fn: Callable) -> CallPath:
        """The entry's generated call path, for the kernels it has now (a tier swap
        replaces them: generated again)."""
        code = entry.code
        if code is None or code.kernel is not entry.kernel or \
                code.bwd_kernel is not entry.bwd_kernel:
            code = entry.code = generate(entry, sig, fn, self.stats, self.verify, self._keep,
                                         check_stale, self._baked_warned)
        return code

    def _lookup(self, args: tuple, kwargs: dict) -> tuple:
        """The entry serving ``f(*args, **kwargs)`` now (None if none yet), with what
        `call_source` needs to show its call path."""
        fn = self.fn
        layout = None
        given, lifted, dtype, templates = len(args), (), None, None
        if kwargs or (len(args) != self._npos and self._npos != -2):
            args, fn, layout = self._bind(args, kwargs)
        ints = ()
        self._note_floats(args)
        if self.dynamic or self._int_inputs:
            args, lifted, dtype, ints = self._lift_dynamic(args)
            if ints:
                fn = self._int_caller(fn, ints)
        if any(isinstance(a, _CONTAINERS) for a in args):
            n = len(args)
            args, fn = _flatten_arguments(args, fn)
            if len(args) != n:
                templates = tuple(t if _has_slot(t) else None for t in args[:n])
        sig = self._key(args, layout if not ints else IntLayout(layout, ints))
        return self._find(sig, args), sig, fn, layout, given, lifted, dtype, templates

    def plan_for(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled plan (graphs, kernels, writes) that serves ``f(*args, **kwargs)``
        now, or None when no call with this signature has compiled yet."""
        return self._lookup(args, kwargs)[0]

    def call_source(self, *args: Any, **kwargs: Any) -> str | None:
        """The source of the generated call path that serves ``f(*args, **kwargs)`` now,
        or None when no entry serves it yet (``dg.explain`` prints it)."""
        entry, sig, fn, layout, given, lifted, dtype, templates = self._lookup(args, kwargs)
        if entry is None:
            return None
        code = self._code(entry, sig, fn)
        if not (kwargs or lifted or templates or (layout is not None and (
                layout != (given, ()) or len(args) != given))):
            return code.source
        form = CallForm(given, tuple(kwargs), self._binding(layout, given, kwargs),
                        "**" in self._kinds, lifted, dtype, templates)
        return self._form_fast(entry, code, sig, fn, form)[1]

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """``@dg.compile`` on a method: the bound method passes the instance as argument 0,
        so all instances share this function's cache, keyed by the instance (by identity,
        unless its class defines ``__eq__`` and ``__hash__``)."""
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        """Keyword arguments and defaults: bind them to the signature (read once) and
        return ``(flat arguments, a function taking them positionally, layout)``; the
        layout (how many positional, which keywords) is part of the key."""
        if self._signature is None:
            if kwargs:
                raise TypeError(f"{getattr(self.fn, '__name__', 'the function')}: its "
                                "signature cannot be read, so pass arguments by position")
            return args, self.fn, None
        if defaults_of(self.fn) != self._defaults:  # ``fn.__defaults__`` was set
            self._signature, self._npos = _read_signature(self.fn)
            self._defaults = defaults_of(self.fn)
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError:
            fn = self.fn
            if isinstance(fn, (types.FunctionType, types.MethodType)) and not hasattr(
                    fn, "__wrapped__") and not hasattr(fn, "__signature__"):
                # Python's own message, as eagerly ("f() missing 1 required keyword-only
                # argument: 'scale'"): the call fails binding, before the body runs.
                fn(*args, **kwargs)
            raise
        bound.apply_defaults()
        pos, kw = bound.args, bound.kwargs
        layout = (len(pos), tuple(kw))
        call = self._callers.get(layout)
        if call is None:
            call = self._callers[layout] = _positional(self.fn, *layout)
        return pos + tuple(kw.values()), call, layout

    def _lift_dynamic(self, args: tuple) -> tuple:
        """Python numbers at the ``dynamic`` positions become 0-d tensors: graph inputs, so a
        new value is a new input, not a new constant and a retrace. They take the dtype of
        the first floating-point tensor argument (float32 without one), as a weak Python
        scalar would have. Ints at the positions made inputs automatically
        (`_promote_ints`) become 0-d int64 tensors. Returns ``(arguments, positions
        lifted, dtype, int positions lifted)``; ``dtype`` is one per lifted position
        when ints were lifted."""
        dtype = next((a.dtype for a in args
                      if isinstance(a, Tensor) and a.dtype.kind == "f"), np.dtype(np.float32))
        out = list(args)
        lifted, dtypes, ints = [], [], []
        for i in sorted(self.dynamic | self._int_inputs):
            if i >= len(out):
                continue
            v = out[i]
            if i in self.dynamic:
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out[i] = make_tensor(np.asarray(v, dtype), False, None)
                    lifted.append(i)
                    dtypes.append(dtype)
            elif type(v) is int and _INT64[0] <= v < _INT64[1]:
                out[i] = make_tensor(np.asarray(v, np.int64), False, None)
                lifted.append(i)
                dtypes.append(np.dtype(np.int64))
                ints.append(i)
            elif type(v) in _FLOATS:
                out[i] = make_tensor(np.asarray(v, np.float64), False, None)
                lifted.append(i)
                dtypes.append(FLOAT_ARGUMENT)
                ints.append(i)
        return tuple(out), tuple(lifted), (tuple(dtypes) if ints else dtype), tuple(ints)

    def entries(self) -> list:
        return [e for es in self._entries.values() for e in es]


class CompiledModule:
    """A module compiled as a whole: parameters are graph inputs, so optimizer updates made
    between calls are seen. Attributes are the module's."""

    def __init__(self, module: Any, **options: Any) -> None:
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "compiled", CompiledFunction(module, **options))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.compiled(*args, **kwargs)

    @property
    def _orig_mod(self) -> Any:
        """The module itself, as ``torch.compile``'s wrapper names it (code that unwraps a
        compiled model reads ``model._orig_mod``)."""
        return self.module

    @property
    def stats(self) -> CompileStats:
        return self.compiled.stats

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"Compiled({self.module!r})"


def compile(fn: Callable | None = None, *, parallel: bool = False, cache: bool = True,  # noqa: A001
            strict: bool = False, verify: bool = False, max_retraces: int = 8,
            dynamic: Sequence[int] | bool | None = (), tiered: bool = True,
            fullgraph: bool = False, backend: Any = "inductor", mode: str | None = None,
            options: dict | None = None, disable: bool = False) -> Any:
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
    same kernel instead of retracing), ``tiered`` (a new signature's first calls run the
    optimized graph in NumPy while a background process compiles; later calls run the
    compiled kernels. ``tiered=False``, ``DUALGRAPH_TIERED=0`` or ``cache=False`` compile
    blocking).

    Float arguments are 0-d float64 inputs from the first call, and int arguments from
    their second value (``torch.compile``'s automatic dynamic), so a new value runs the
    same kernel; one the function needs as a Python value (``if lam > 0.5``, a shape) is
    keyed by value instead: a trace per value.

    ``torch.compile``'s keywords are accepted too: ``fullgraph=True`` is ``strict=True``
    (dualgraph always captures the whole call as one graph; strict makes the cases that
    would run eagerly raise instead); ``dynamic=True``/``False``/``None`` keep shapes
    specialized (a new shape traces again, torch's ``dynamic=False``); ``backend`` names
    (``"inductor"``, ``"eager"``, ``"aot_eager"``, ``"cudagraphs"``) and ``mode``
    (``"default"``, ``"reduce-overhead"``, ``"max-autotune"``,
    ``"max-autotune-no-cudagraphs"``) are accepted and all compile to Numba; ``options``
    (inductor's settings) are accepted and unused; ``disable=True`` returns ``fn`` itself.
    """
    dynamic, strict = torch_options(dynamic, strict, fullgraph, backend, mode, options)
    if disable:
        return fn if fn is not None else (lambda f: f)
    check_options(parallel=parallel, cache=cache, strict=strict, verify=verify,
                  max_retraces=max_retraces, dynamic=dynamic, tiered=tiered)
    options = {"parallel": parallel, "cache": cache, "strict": strict, "verify": verify,
               "max_retraces": max_retraces, "dynamic": tuple(dynamic), "tiered": tiered}
    if fn is None:
        return functools.partial(compile, **options)
    from ..nn.modules import Module

    if isinstance(fn, Module):
        return CompiledModule(fn, **options)
    if not callable(fn):
        raise TypeError(f"dg.compile expects a function or a module, got {type(fn).__name__}")
    return CompiledFunction(fn, **options)


_CONTAINERS = (tuple, list, dict, ComplexTensor)
_INT64 = (-(2 ** 63), 2 ** 63)
_FLOATS = (float, np.float64)
# `_new_entry`'s answer when the call must be made again (its ints keyed by value now).
_RETRY = object()


def _miss(args: tuple) -> Any:
    """The call path before any call: serves nothing."""
    return MISS


def _miss_kw(args: tuple, kwargs: dict) -> Any:
    return MISS


class _Given:
    """A stand-in for a passed argument while binding (`CompiledFunction._binding`)."""

    __slots__ = ("at",)

    def __init__(self, at: int | str) -> None:
        self.at = at


_SLOT = SLOT
_has_slot = has_slot


def _template(a: Any, leaves: list) -> Any:
    """``a`` with each tensor and array inside it replaced by `_SLOT` (appended to
    ``leaves``); the same object when it holds none."""
    if isinstance(a, (Tensor, np.ndarray)):
        leaves.append(a)
        return _SLOT
    if isinstance(a, ComplexTensor):
        leaves.append(a._storage())
        return COMPLEX_SLOT
    if isinstance(a, (tuple, list)):
        n = len(leaves)
        items = [_template(e, leaves) for e in a]
        if len(leaves) == n:
            return a
        if hasattr(a, "_fields"):  # a named tuple
            return type(a)(*items)
        return type(a)(items)
    if isinstance(a, dict):
        n = len(leaves)
        items = {k: _template(v, leaves) for k, v in a.items()}
        return a if len(leaves) == n else type(a)(items)
    return a


def _fill(t: Any, leaves: Any) -> Any:
    if t is _SLOT:
        return next(leaves)
    if t is COMPLEX_SLOT:
        return ComplexTensor(next(leaves))
    if isinstance(t, (tuple, list)):
        items = [_fill(e, leaves) for e in t]
        return type(t)(*items) if hasattr(t, "_fields") else type(t)(items)
    if isinstance(t, dict):
        return type(t)({k: _fill(v, leaves) for k, v in t.items()})
    return t


def _flatten_arguments(args: tuple, fn: Callable) -> tuple:
    """Tensors inside tuple, list and dict arguments become arguments of their own, after
    the others (as ``jax.tree_util`` flattens a pytree); each container is replaced by a
    template (its structure and other values, keyed as a constant). Returns ``(flat
    arguments, a function taking them)``: it rebuilds the containers around the values
    it is given (tracers while tracing)."""
    leaves: list = []
    templates = tuple(_template(a, leaves) for a in args)
    if not leaves:
        return args, fn
    n = len(args)

    def call(*flat: Any) -> Any:
        it = iter(flat[n:])
        return fn(*[_fill(t, it) for t in flat[:n]])

    functools.update_wrapper(call, fn, updated=())
    return templates + tuple(leaves), call
_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def torch_options(dynamic: Any, strict: bool, fullgraph: Any, backend: Any, mode: Any,
                  options: Any) -> tuple:
    """``(dynamic, strict)`` after checking ``torch.compile``'s keywords (see `compile`)."""
    if not isinstance(fullgraph, (bool, np.bool_)):
        raise TypeError(f"dg.compile: fullgraph must be True or False, got {fullgraph!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"dg.compile: backend {backend!r} is not supported: dualgraph compiles "
                         f"to Numba; the names {', '.join(_BACKENDS)} are accepted")
    if mode not in _MODES:
        raise RuntimeError(f"dg.compile: unrecognized mode={mode!r}, should be one of: "
                           + ", ".join(m for m in _MODES if m))
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"dg.compile: options must be a dict, got {type(options).__name__}")
    if dynamic is None or isinstance(dynamic, (bool, np.bool_)):
        dynamic = ()
    return dynamic, (True if fullgraph else strict)  # strict itself is checked later


def _read_signature(fn: Callable) -> tuple:
    """``(signature or None, npos)``: ``npos`` is the number of positional parameters when
    a purely positional call of that many arguments needs no binding (no defaults, no
    keyword-only parameters), -2 for ``(*args)``-style functions (any positional call),
    and -1 when every call must be bound."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C callables
        return None, -2
    kinds = [p.kind for p in sig.parameters.values()]
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if all(p.kind in plain and p.default is p.empty for p in sig.parameters.values()):
        return sig, len(kinds)
    if all(k in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
           for k in kinds):
        return sig, -2
    return sig, -1


def _positional(fn: Callable, n: int, names: tuple) -> Callable:
    """``fn`` taking its ``n`` positional arguments, then the keyword arguments ``names``,
    all by position (the compiled call's flat argument list)."""
    if not names:
        return fn

    def call(*flat: Any) -> Any:
        return fn(*flat[:n], **dict(zip(names, flat[n:])))

    functools.update_wrapper(call, fn, updated=())
    return call


# `nn.Module.compile` compiles through this module's `compile` (nn cannot import upward).
_module.COMPILE[0] = compile
