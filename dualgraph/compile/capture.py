"""Trace one call of the user's function, leaving eager state as it was.

Tensor and array arguments become graph inputs; so does every eager tensor the function
captures (`TraceContext(lift_as_input=...)` is always true here), so later updates of
parameters are seen. A traced training step may assign ``.grad``: the trace records the
new values and `restore_grads` puts the old ones back, for the compiled call to write.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np

from .._location import user_location
from ..eager.internal import set_grad
from ..eager.tensor import Tensor
from ..errors import TraceError
from ..ir.graph import Node
from ..trace.tracer import TraceContext, Tracer, graph_outputs
from .baked import BakedArray
from .guards import Identity, ModuleAttrs, ModuleHookTable, ModuleTable, Value
from .plan import RuntimeScalar, Slot


class CallTraceContext(TraceContext):
    """The trace of one compiled call: it also records what the function read from outside
    (for guards) and the hyperparameters it reads at run time.

    ``reads`` maps a key to a `guards.Guard`: the call may reuse the trace while each
    holds. ``runtime`` lists ``(node, scalar)``: 0-d inputs (a `plan.RuntimeScalar`) read
    on every call.
    """

    def __init__(self) -> None:
        super().__init__(lift_as_input=lambda t: True)
        self.reads: dict = {}
        self.runtime: list = []
        self._runtime_nodes: dict = {}
        self.arg_index: dict = {}  # id of an argument tensor -> its position
        self.baked: list = []  # captured NumPy arrays made constants (`baked.BakedArray`)
        # Other values the trace may bake in, to be fingerprinted once it ends
        # (`signature.capture_guards`): ``(what, get, load name, code objects)``.
        self.baked_roots: list = []
        self._baked_ids: set = set()

    def as_node(self, a: Any) -> Any:
        node = super().as_node(a)
        # A captured array is snapshotted into a constant: record it, so the call path
        # can notice (and say) when it changes later.
        if isinstance(a, np.ndarray) and id(a) not in self._baked_ids and node.op == "const":
            self._baked_ids.add(id(a))
            self.baked.append(BakedArray(a, node.attrs["value"], user_location(2)))
        return node

    def note_attr(self, owner: Any, name: str, value: Any) -> None:
        """``owner.name`` (a parameter, buffer or submodule of the module ``owner``) was read:
        guard its identity."""
        key = ("attr", id(owner), name)
        if key not in self.reads:
            # Read the module's own table (a dict lookup) instead of getattr, which would
            # go through Module.__getattr__ on every call.
            d = owner.__dict__
            store = next((s for s in (d["_parameters"], d.get("_buffers", {})) if name in s),
                         d["_modules"])
            self.reads[key] = Identity(
                store, name, value, f"{type(owner).__name__}.{name} was rebound to another "
                                    "object")

    def note_training(self, module: Any, value: bool) -> None:
        """``module.training`` was read: guard its value."""
        key = ("training", id(module))
        if key not in self.reads:
            self.reads[key] = Value(
                lambda: module.training, value,
                lambda now: f"{type(module).__name__}.training is {now} (traced with {value})",
                module)

    def note_module(self, module: Any) -> None:
        """``module`` runs (or lists its submodules): guard its submodule table (which
        module under which name) and its plain Python attributes (``Dropout.p``,
        ``BatchNorm.momentum``, ``eps``, a user's ``self.scale``), which the trace bakes in.
        Every plain attribute is guarded, read or not: a module's ``__dict__`` reads are
        not seen."""
        key = ("module", id(module))
        if key in self.reads:
            return
        self.reads[key] = ModuleTable(module)
        # Hooks registered or removed later change what a call runs, as in eager mode.
        self.reads[("module hooks", id(module))] = ModuleHookTable(module)
        d = module.__dict__
        names = tuple(k for k, v in d.items() if k not in _MODULE_TABLES and plain_value(v))
        if names:
            self.reads[("module attrs", id(module))] = ModuleAttrs(module, names)
        # Its other attributes (arrays, objects, long or nested lists) are baked in:
        # checked now and then (`baked.BakedValue`).
        forward = getattr(getattr(type(module), "forward", None), "__code__", None)
        for k, v in d.items():
            if k not in _MODULE_TABLES and not plain_value(v) and \
                    not isinstance(v, _NOT_BAKED):
                self.baked_roots.append((f"{type(module).__name__}.{k}",
                                         lambda d=d, k=k: d.get(k), k,
                                         (forward,) if forward is not None else ()))

    def guard_value(self, getter: Callable[[], Any], expected: Any, what: str,
                    keep: Any = None) -> None:
        """A Python value the trace branched on: reuse the trace while ``getter()`` gives
        ``expected`` (compared with ``==``)."""
        self.reads.setdefault(("value", what, id(keep)),
                              Value(getter, expected, lambda now: what, keep))

    def runtime_scalar(self, key: Any, value: Callable[[], Any], dtype: Any,
                       keep: Any = None) -> Tracer:
        """A 0-d ``dtype`` input whose value the compiled call reads from ``value()`` on
        every call (an optimizer hyperparameter); one input per ``key``."""
        node = self._runtime_nodes.get(key)
        if node is None:
            node = Node("input", (), {}, (), np.dtype(dtype))
            self.runtime.append((node, RuntimeScalar(value, np.dtype(dtype))))
            self._runtime_nodes[key] = node
            self._keep.append(keep)
        return Tracer(node, self)


# A module's own tables (the training flag and hooks: guarded by `note_training` and
# `guards.ModuleHookTable`).
_MODULE_TABLES = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent_buffers",
                            "_training", "_hooks"})
_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def plain_value(v: Any) -> bool:
    """A Python value a trace bakes in as a constant and can compare cheaply: numbers,
    strings, ``None``, tuples of them, and short lists and dicts of those (a guard keeps
    a copy, `guards.snapshot`, so a change in place is seen)."""
    if _immutable_value(v):
        return True
    if type(v) is list:
        return len(v) <= MAX_GUARDED_ITEMS and all(_immutable_value(e) for e in v)
    if type(v) is dict:
        return len(v) <= MAX_GUARDED_ITEMS and all(
            _immutable_value(k) and _immutable_value(e) for k, e in v.items())
    return False


# The longest list or dict a guard compares item by item on every call.
MAX_GUARDED_ITEMS = 16


def _immutable_value(v: Any) -> bool:
    if isinstance(v, _PLAIN):
        return True
    return type(v) is tuple and all(_immutable_value(e) for e in v)


# Named or held values that are not baked in: functions, classes and Python modules are
# code; tensors, modules and optimizers are guarded or read on every call.
_NOT_BAKED = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.ModuleType, type, Tensor)


def _keyed_by_value(a: Any) -> bool:
    """An argument the signature key compares by value in full (`signature.const_key`)."""
    if isinstance(a, (*_PLAIN, np.generic, Slot, *_NOT_BAKED)):
        return True
    if isinstance(a, (tuple, list)):
        return all(_keyed_by_value(e) for e in a)
    if isinstance(a, dict):
        return all(_keyed_by_value(k) and _keyed_by_value(e) for k, e in a.items())
    return False


def trace_call(fn: Callable, args: tuple, with_outputs: bool = True) -> tuple:
    """Trace ``fn(*args)``; returns ``(ctx, outputs, single, grad_writes)``.

    ``outputs`` are the output nodes (``None`` unless ``with_outputs``), ``single`` whether
    ``fn`` returned one value, ``grad_writes`` what `restore_grads` returned.
    """
    ctx = CallTraceContext()
    ctx.arg_index = {id(a): i for i, a in enumerate(args) if isinstance(a, Tensor)}
    targs = [ctx.new_input(a.shape, a.dtype, a if isinstance(a, Tensor) else None)
             if isinstance(a, (Tensor, np.ndarray)) else a for a in args]
    # A module passed as a constant argument (the ``self`` of a compiled method): its
    # Python values and submodules are guarded as if it had been called.
    from ..nn.modules import Module

    for i, a in enumerate(args):
        if isinstance(a, Module):
            ctx.note_module(a)
        elif not isinstance(a, (Tensor, np.ndarray)) and not _keyed_by_value(a):
            # An object passed as a constant is keyed by identity: its contents are baked.
            ctx.baked_roots.append((f"argument {i} ({type(a).__name__})",
                                    lambda a=a: a, None, None))
    outputs = single = None
    try:
        with ctx:
            out = fn(*targs)
        if with_outputs:
            outputs, single = graph_outputs(ctx, out, fn)
    finally:
        grad_writes = restore_grads(ctx)
    return ctx, outputs, single, grad_writes


def restore_grads(ctx: TraceContext) -> list:
    """Put back every ``.grad`` the trace changed; return what the call must write:
    ``(tensor, node)``, the new ``.grad``'s node or None (``.grad`` set to None)."""
    out: list[Any] = []
    for t, before in ctx.grad_before.values():
        after = t.grad
        set_grad(t, before)
        if after is before:
            continue
        if isinstance(after, Tracer):
            out.append((t, ctx.as_node(after)))
        elif after is None:
            out.append((t, None))
        else:
            raise TraceError("a compiled function assigned an eager tensor to .grad; "
                             "assign the result of an op on traced values instead")
    return out
