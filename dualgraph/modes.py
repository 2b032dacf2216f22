"""Modes and `bind()`, the single entry point every op goes through.

A mode interprets ops. The eager mode (`dualgraph.eager.tensor.EagerMode`) runs each op's
NumPy kernel and records a tape node; the tracing mode (`dualgraph.trace.tracer.
TraceContext`) appends a graph node. Both receive exactly the same `bind` calls and the
same in-place requests from the shared tensor API (`dualgraph.ops.mixin.TensorOps`), so a
program's tape and its trace hold the same sequence of ops.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any


class Mode(abc.ABC):
    """What a mode implements. Tensors never test which mode is active: they call these.

    - `process`: one primitive ``bind``.
    - `inplace`: ``t += x``, ``t.mul_(x)``, ``t.copy_(x)``, ``t.fill_(v)``. The mode checks
      that the write is allowed, computes the new value with the registry op and stores
      it; every write it records goes through `write`.
    - `write`: the single place where a tensor's value is replaced by a computed one.
      A later view-aware mode starts here: ``t`` may be a view, and the eager mode can
      rebase the base's history (PyTorch's ``CopySlices``: ``base := scatter(base, value)``)
      while tracing can functionalize the write (the same scatter as a graph node, later
      reads of every alias re-derived from the new base). Nothing above this layer needs
      to change for either.
    - `note_grad_write`: ``t.grad`` is about to be assigned.
    - What code outside the ops reads, for a compiled call to guard or pass at run time:
      `note_training`, `note_attr`, `note_missing`, `note_module`, `note_data_alias`,
      `guard_value`, `runtime_scalar`. The base implementations do nothing (or return the
      value itself): only a mode that records a program for later calls needs them.

    A mode is also callable as its `process`, so a plain function can stand in for one
    (`push_mode` wraps it; the wrapper hands everything else to the mode below it).
    """

    __slots__ = ()
    # True for modes that record a program instead of running it (`current_trace`).
    tracing = False

    @abc.abstractmethod
    def process(self, op: Any, args: tuple, attrs: dict) -> Any:
        """Apply registry op ``op`` to ``args`` (tensors of any mode, NumPy arrays, Python
        scalars) with keyword attributes ``attrs``; return this mode's tensor."""

    @abc.abstractmethod
    def inplace(self, t: Any, op: Any, other: Any) -> Any:
        """``t := op(t, other)`` for a binary elementwise registry op, or, with ``op``
        ``None``, ``t := other`` broadcast to ``t``'s shape and cast to its dtype (a
        Python scalar fills). Returns ``t``. Raises ``RuntimeError`` with the texts of
        `dualgraph.ops.mixin` (a leaf that requires grad, a shape that does not fit, a
        result dtype that can't be cast)."""

    @abc.abstractmethod
    def write(self, t: Any, value: Any, op: Any = None) -> Any:
        """Replace ``t``'s value by ``value``, a tensor of ``t``'s shape computed by
        ``op`` (``None``: a copy), taking over its history. Returns ``t``."""

    @abc.abstractmethod
    def note_grad_write(self, t: Any) -> None:
        """``t.grad`` is about to be assigned (tracing records the write as an output)."""

    def assign(self, t: Any, value: Any) -> Any:
        """``t := value``, where ``value`` is a fresh result of ``t``'s shape and dtype
        computed from ``t`` (``x[idx] = v`` is ``x := index_put(x, idx, v)``): checked as
        `inplace` checks, then written. By default a copy (`inplace` with no op); a mode
        may take ``value``'s history over directly, without a copy node."""
        return self.inplace(t, None, value)

    def note_made(self, t: Any) -> None:
        """A factory (``zeros``, ``tensor``) made the new tensor ``t`` while this mode ran:
        a recording mode holds it as a constant of the program (its writes stay in the
        program), not as state from outside."""
        return None

    # ------------------------------------------ reads a compiled call guards or passes in
    def note_copied_array(self, arr: Any) -> None:
        """``dg.tensor(arr)`` copied NumPy array ``arr`` while this mode ran: a recording
        mode bakes the copy in, and may check later whether ``arr`` changed."""
        return None

    def read_data(self, t: Any) -> None:
        """The program reads eager tensor ``t``'s values into Python (``item()``,
        ``float()``, ``bool()``, ``tolist()``): a recording mode makes the recording
        depend on them."""
        return None

    def argument_values(self, t: Any) -> Any:
        """The values of traced tensor ``t`` as a NumPy array, when the recording may
        depend on them (a small integer argument of a compiled call, which the call is
        then keyed on by value), else None."""
        return None

    def note_training(self, module: Any, value: bool) -> None:
        """``module.training`` was read and gave ``value``."""
        return None

    def note_attr(self, owner: Any, name: str, value: Any) -> None:
        """``owner.name``, a parameter, buffer or submodule of module ``owner``, was read."""
        return None

    def note_missing(self, owner: Any, name: str) -> None:
        """``owner.name`` was asked of module ``owner``, which has no such attribute (a
        ``hasattr`` or ``getattr`` with a default reads its absence)."""
        return None

    def note_module(self, module: Any) -> None:
        """Module ``module`` is about to run its ``forward`` (or a container lists its
        submodules): its plain Python attributes and its submodule table are read."""
        return None

    def guard_value(self, getter: Callable[[], Any], expected: Any, what: str,
                    keep: Any = None) -> None:
        """A Python value the program branched on: ``getter()`` gave ``expected``; ``what``
        says in words what a different value means."""
        return None

    def runtime_scalar(self, key: Any, value: Callable[[], Any], dtype: Any,
                       keep: Any = None) -> Any:
        """A Python number ``value()`` used as a 0-d ``dtype`` operand (an optimizer
        hyperparameter). The base mode returns the number itself; a recording mode may
        return a 0-d input that reads ``value()`` on every later run (one per ``key``)."""
        return value()

    def note_label(self, t: Any) -> None:
        """``t`` is a loss's target. A recording mode that finds it a constant of one
        repeated value (a label made with ``full`` or ``fill_``) passes that value as a
        0-d argument instead of folding it into the code, so the loss against any such
        label is one kernel. The base mode does nothing."""
        return None

    def note_data_alias(self, t: Any) -> None:
        """``t.data`` is being made (an alias of ``t`` outside autograd). A recording mode
        ties the alias to ``t``, so writes through either reach later reads of both. The
        base mode does nothing."""
        return None

    def note_requires_grad(self, t: Any, value: bool) -> None:
        """Leaf ``t``'s ``requires_grad`` is about to become ``value``. A recording mode
        refuses the change for a tensor it did not make (a compiled call would not replay
        it, and the recorded graph took its gradients at first read). The base mode does
        nothing."""
        return None

    def note_shape_read(self, t: Any) -> None:
        """Eager tensor ``t``'s shape or dtype is being read. A compiling mode guards them,
        as the program may depend on them without reading the data (``x * buf.shape[0]``,
        ``x.to(buf.dtype)``). The base mode does nothing."""
        return None

    def note_layout_read(self, t: Any) -> None:
        """Eager tensor ``t``'s layout is being read (``stride()``, ``is_contiguous()``,
        ``storage_offset()``). A compiling mode guards it. The base mode does nothing."""
        return None

    def is_traced(self, t: Any) -> bool:
        """Whether ``t`` is a value a trace records (not an eager tensor): the base
        mode's tensors never are."""
        return False

    def constant_value(self, t: Any) -> Any:
        """The value of this mode's tensor ``t`` when it is the same on every run (made
        only from constants: ``eye(n).roll(1, 0)``), as a NumPy array; else None. An op
        whose result shape depends on the data (``x[mask]``) can then run."""
        return None

    def grad(self, outputs: Any, inputs: Any, grad_outputs: Any = None,
             create_graph: bool = False, allow_unused: bool = False) -> tuple:
        """``dg.grad`` while this mode records a program (the eager engine answers it
        otherwise): the gradients as this mode's tensors."""
        raise RuntimeError(f"dg.grad is not supported while {type(self).__name__} is active")

    def __call__(self, op: Any, args: tuple, attrs: dict) -> Any:
        return self.process(op, args, attrs)


class _FunctionMode(Mode):
    """A plain ``process(op, args, attrs)`` function pushed as a mode (a test that
    records binds, say): it sees every bind; in-place writes go to the mode below."""

    __slots__ = ("fn", "below")

    def __init__(self, fn: Callable[..., Any], below: Mode) -> None:
        self.fn = fn
        self.below = below

    def process(self, op: Any, args: tuple, attrs: dict) -> Any:
        return self.fn(op, args, attrs)

    def inplace(self, t: Any, op: Any, other: Any) -> Any:
        return self.below.inplace(t, op, other)

    def write(self, t: Any, value: Any, op: Any = None) -> Any:
        return self.below.write(t, value, op)

    def note_grad_write(self, t: Any) -> None:
        self.below.note_grad_write(t)

    def assign(self, t: Any, value: Any) -> Any:
        return self.below.assign(t, value)

    def note_training(self, module: Any, value: bool) -> None:
        self.below.note_training(module, value)

    def note_attr(self, owner: Any, name: str, value: Any) -> None:
        self.below.note_attr(owner, name, value)

    def note_missing(self, owner: Any, name: str) -> None:
        self.below.note_missing(owner, name)

    def note_module(self, module: Any) -> None:
        self.below.note_module(module)

    def guard_value(self, getter: Callable[[], Any], expected: Any, what: str,
                    keep: Any = None) -> None:
        self.below.guard_value(getter, expected, what, keep)

    def note_label(self, t: Any) -> None:
        self.below.note_label(t)

    def note_data_alias(self, t: Any) -> None:
        self.below.note_data_alias(t)

    def note_requires_grad(self, t: Any, value: bool) -> None:
        self.below.note_requires_grad(t, value)

    def note_shape_read(self, t: Any) -> None:
        self.below.note_shape_read(t)

    def note_layout_read(self, t: Any) -> None:
        self.below.note_layout_read(t)

    def is_traced(self, t: Any) -> bool:
        return self.below.is_traced(t)

    def constant_value(self, t: Any) -> Any:
        return self.below.constant_value(t)

    def runtime_scalar(self, key: Any, value: Callable[[], Any], dtype: Any,
                       keep: Any = None) -> Any:
        return self.below.runtime_scalar(key, value, dtype, keep)

    def grad(self, outputs: Any, inputs: Any, grad_outputs: Any = None,
             create_graph: bool = False, allow_unused: bool = False) -> tuple:
        return self.below.grad(outputs, inputs, grad_outputs, create_graph, allow_unused)


# The eager mode registers itself at import (the first push: the base mode); tracers push
# and pop theirs.
_BASE: list[Mode] = []


class _Modes(threading.local):
    """The mode stack, one per thread: a trace running in one thread must not record (or
    swallow) the eager ops of another. Every thread starts in the base (eager) mode.
    ``procs`` mirrors ``stack`` with each mode's bound ``process``: `bind` is the eager
    per-op hot path, and this saves it a method lookup."""

    def __init__(self) -> None:
        self.stack: list[Mode] = list(_BASE)
        self.procs: list[Callable[..., Any]] = [m.process for m in _BASE]


_LOCAL = _Modes()
# The mode stacks, for the compiled call's entry, which tests
# ``MODE_STACKS.stack[-1].tracing`` (`current_trace` without a Python call).
MODE_STACKS = _LOCAL
# One item per mode pushed above the base, in any thread (`list.append` and `list.pop` are
# atomic): while it is empty every thread runs its base mode, which the hot paths then
# take without reading the thread's own stack (a thread-local read is a chain of lookups).
ABOVE_BASE: list = []
_BASE_PROCESS: list = []


def bind(op: Any, *args: Any, **attrs: Any) -> Any:
    """Apply registry op ``op`` to ``args`` in the active mode."""
    if ABOVE_BASE:
        return _LOCAL.procs[-1](op, args, attrs)
    return _BASE_PROCESS[0](op, args, attrs)


def push_mode(mode: Mode | Callable[..., Any]) -> None:
    """Make ``mode`` the active mode of this thread (a plain function: see `Mode`)."""
    if not isinstance(mode, Mode):
        mode = _FunctionMode(mode, current_mode())
    if not _BASE:
        _BASE.append(mode)
        _BASE_PROCESS.append(mode.process)
    else:
        ABOVE_BASE.append(None)  # before the push: never a pushed mode that is not counted
    _LOCAL.stack.append(mode)
    _LOCAL.procs.append(mode.process)


def pop_mode() -> None:
    stack = _LOCAL.stack
    if len(stack) <= 1:
        raise RuntimeError("cannot pop the eager mode")
    stack.pop()
    _LOCAL.procs.pop()
    ABOVE_BASE.pop()  # after the pop, as the push counts before


def current_mode() -> Mode:
    """The active mode of this thread (the eager mode unless a trace is running)."""
    return _LOCAL.stack[-1]


@contextlib.contextmanager
def eager_section() -> Iterator[None]:
    """Run the ops inside in the base (eager) mode, also while a trace is active: for work
    on eager tensors whose result an object made outside the trace keeps (a memo), which
    must stay an eager tensor after the traced call returns."""
    push_mode(_BASE[0])
    try:
        yield
    finally:
        pop_mode()


def current_trace() -> Mode | None:
    """The active mode if it is not the eager base mode (a trace is running), else ``None``:
    code that behaves differently under tracing (guards, runtime hyperparameters, inlining
    a compiled call) asks this."""
    mode = _LOCAL.stack[-1]
    return mode if mode.tracing else None
