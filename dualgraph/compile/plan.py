"""The typed plan of one compiled signature: its kind, graphs, kernels, and how a call feeds
the kernels and unpacks their outputs.

`specialize` builds a `Plan` when a signature is traced; `callgen` turns it into the
signature's generated call path. Nothing here is read by name or by a string tag: each
kind of input, write and residual is its own small class.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Union

import numpy as np

from ..eager.tensor import Tensor
from ..ir.graph import Graph


class Kind(str, enum.Enum):
    """What a compiled call runs (see the package docstring). A ``str`` enum, so that
    ``plan.mode == "train"`` reads as it says."""

    INFERENCE = "inference"
    TRAIN = "train"
    STEP = "step"


# ------------------------------------------------------------------ captured inputs
@dataclass(frozen=True, slots=True, eq=False)
class CapturedTensor:
    """A tensor the function captures (a parameter, a global): its data, each call."""

    tensor: Tensor


@dataclass(frozen=True, slots=True, eq=False)
class CapturedGrad:
    """The ``.grad`` of a captured tensor (a training step reading gradients)."""

    owner: Tensor


@dataclass(frozen=True, slots=True, eq=False)
class AttrTensor:
    """The tensor an attribute holds at each call (``table[name]``: a module's ``self.h``
    rebound every call), not the one the trace saw (`guards.AttrType` checks its type)."""

    table: dict
    name: str


@dataclass(frozen=True, slots=True)
class ArgumentGrad:
    """The ``.grad`` of the tensor passed at argument ``position``."""

    position: int


@dataclass(frozen=True, slots=True, eq=False)
class RuntimeScalar:
    """A 0-d input read on every call (an optimizer hyperparameter): ``get()`` as
    ``dtype``."""

    get: Callable[[], Any]
    dtype: np.dtype
    # What the read kept (`optim.optimizer.change_counters` says when it may change).
    keep: Any = None

    def __call__(self) -> np.ndarray:
        return np.array(self.get(), self.dtype)


Source = Union[CapturedTensor, AttrTensor, CapturedGrad, ArgumentGrad, RuntimeScalar]


class Slot:
    """Where a tensor sat inside a tuple, list or dict argument: the containers'
    templates hold it (`CompiledFunction` flattens such arguments)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<tensor>"


SLOT = Slot()


class ComplexSlot:
    """Where a complex tensor argument sat: its real ``(*shape, 2)`` storage is the
    compiled call's tensor, and the traced function gets a complex tensor around it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<complex tensor>"


COMPLEX_SLOT = ComplexSlot()


# ------------------------------------------------------------------ writes
@dataclass(frozen=True, slots=True)
class Argument:
    """The tensor passed at argument ``position`` (each call writes the tensors it is
    given, not those of the traced call)."""

    position: int


Target = Union[Tensor, Argument]


class CopyWrite(NamedTuple):
    """``target``'s data := kernel output ``out`` (reshaped to ``shape``)."""

    target: Target
    out: int
    shape: tuple
    bumps: int = 1  # the in-place ops that wrote it (its version counter advances by as many)


class GradSet(NamedTuple):
    """``target.grad`` := a new tensor of kernel output ``out`` (reshaped to ``shape``)."""

    target: Target
    out: int
    shape: tuple


class AttrSet(NamedTuple):
    """``owner.name`` := a new tensor of kernel output ``out`` (reshaped to ``shape``), or
    the argument tensor at position ``arg`` when the function stored an argument itself
    (``out`` is then None). A container of tensors (``self.hidden = (h, c)``): ``tree``
    (a `trace.tracer.OutputTree`) nests one such ``(out, shape, arg)`` per leaf."""

    owner: Any
    name: str
    out: int | None
    shape: tuple
    arg: int | None = None
    tree: Any = None
    leaves: tuple = ()
    # Per leaf (one, without ``tree``): the `SpentBackward` node of a value that requires
    # grad after the call's own backward() (None: no history); the user output it is
    # (None: another value), handed out as that same tensor, as eager mode does.
    spent: tuple = ()
    result: tuple = ()


class From(str, enum.Enum):
    """Where the backward's residual comes from."""

    INPUT = "in"  # a kernel input (the backward version-checks it)
    OUTPUT = "out"  # a kernel output of the forward


class Residual(NamedTuple):
    """One value the backward kernel reads: kernel input or output number ``index``."""

    kind: From
    index: int


@dataclass(slots=True, eq=False)
class Plan:
    """One traced signature: its kernels and how a call feeds and unpacks them."""

    mode: Kind
    graph: Graph  # the traced graph
    sources: tuple  # per captured kernel input (after the arguments): a `Source`
    n_user: int  # the function's outputs (the first kernel outputs)
    single: Any  # True: one tensor; False: a flat tuple; an OutputTree: nested
    guards: Any  # a `guards.Guards`, or None
    optimized: Graph | None = None  # the graph the (forward) kernel runs
    backward_graph: Graph | None = None
    differentiated: Any = None  # train: `trace.autodiff.differentiate`'s result
    kernel: Any = None
    bwd_kernel: Any = None
    # The kernel's inputs: 0-d ones are passed as shape (1,); ``key_source`` is the
    # position in ``sources`` of the random key, drawn anew each call when ``random``.
    scalar_in: tuple = ()
    random: bool = False
    key_source: int | None = None
    # What the call writes back: tensors the kernel updates in place, data copied from a
    # kernel output, new ``.grad`` values, ``.grad`` set to None.
    inplace: tuple = ()
    copy_writes: tuple = ()
    bumps: tuple = ()  # per ``inplace`` tensor, the in-place ops that wrote it
    # Kernel output -> the kernel input it is written into in place.
    write_to: dict = field(default_factory=dict)
    grad_set: tuple = ()
    grad_none: tuple = ()
    attr_set: tuple = ()  # attributes set to a traced value (`AttrSet`)
    # Number attributes set and list appends after each call (`capture.PythonWrites`).
    python_writes: Any = None
    # User outputs that require grad after the call's own backward(): (output, its
    # `SpentBackward` node), returned with that history as eager mode leaves them.
    spent: tuple = ()
    # Outputs: (user output, argument position) returned as the argument itself.
    passthrough: tuple = ()
    # Outputs returned as an earlier output (``return y, y``): (output, earlier output);
    # and as the captured tensor itself (``return w``): (output, tensor). Not in train
    # mode, whose outputs each carry the call's tape node.
    repeated: tuple = ()
    captured_out: tuple = ()
    # Outputs that are a tensor's ``.grad`` the call wrote (``return w.grad`` after
    # ``backward()``): (output, tensor), returned as its ``.grad`` once written back.
    grads_returned: tuple = ()
    # Train: per user output, whether it depends on an input that requires grad; the
    # positions (among arguments and sources) of the inputs differentiated; the backward's
    # residuals; kernel input positions it reads (version-checked).
    out_rg: tuple = ()
    # Argument positions whose requires_grad the entry does not depend on (only detached):
    # the signature key's requires_grad there is not checked (`specialize`).
    rg_free: frozenset = frozenset()
    wrt: tuple = ()
    residual_plan: list = field(default_factory=list)
    saved_inputs: tuple = ()
    # Several outputs that require grad: the backward kernels for a backward that reaches
    # only some of them (`partial.PartialBackward`).
    partial: Any = None
    # A scalar loss in train mode: the one kernel also returns the gradients for seed one
    # (`trace.autodiff.value_and_grad`) at kernel outputs ``grad_out``.
    joint: bool = False
    grad_out: tuple = ()
    # Tiered execution (`tiered`): kernels are interpreted while ``pending`` compiles.
    tier0: bool = False
    pending: Any = None
    calls: int = 0  # counted with ``verify=True`` (`stale`)
    baked: tuple = ()  # captured NumPy arrays baked in as constants (`baked.BakedArray`)
    baked_calls: int = 0  # calls counted for their checks (`baked.CHECK_EVERY`)
    code: Any = None  # the generated call path (`callgen.CallPath`) for ``kernel``
