"""Trace one call of the user's function, leaving eager state as it was.

Tensor and array arguments become graph inputs; so does every eager tensor the function
captures (`TraceContext(lift_as_input=...)` is always true here), so later updates of
parameters are seen. A traced training step may assign ``.grad``: the trace records the
new values and `restore_grads` puts the old ones back, for the compiled call to write.
"""

from __future__ import annotations

import builtins
import dis
import functools
import inspect
import os
import random
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .._location import user_location
from ..eager.autograd import LeafHooksUnchanged
from ..eager.grad_mode import GRAD_ENABLED
from ..eager.internal import array_of, requires_grad_of, set_grad
from ..eager.tensor import Tensor, rng
from ..errors import EagerOnlyError, TraceError, runs_eagerly
from ..ir.graph import Node
from ..modes import current_trace
from ..ops.size import Size
from ..optim._tracing import TracedNumber
from ..trace.tracer import OutputTree, TraceContext, Tracer, graph_outputs
from .baked import BakedArray
from .guards import (
    MISSING,
    ArgLayout,
    ArgPlacement,
    ArgValues,
    AttrType,
    CapturedLayout,
    ClassOf,
    Defaults,
    GlobalHookTable,
    Guard,
    Identity,
    InstanceForward,
    ItemIdentity,
    LeafHooks,
    ModuleAttrs,
    ModuleClass,
    ModuleHookTable,
    ModuleTable,
    PartialContents,
    PlainValue,
    TrainingFlag,
    Value,
    defaults_key,
    partial_key,
    snapshot,
    value_key,
)
from .plan import RuntimeScalar, Slot


class NeedsValue(Exception):  # noqa: N818 - named for what it means
    """The trace needs the concrete value of a `symbolic.SymbolicInt` or `SymbolicFloat`
    (``reason`` says where)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the function uses a number argument as a Python value ({reason})")
        self.reason = reason


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
        # Eager tensors from outside whose shape the function read (`note_shape_read`).
        self.shape_reads: dict = {}
        self.runtime: list = []
        self._runtime_nodes: dict = {}
        self.arg_index: dict = {}  # id of an argument tensor -> its position
        self.baked: list = []  # captured NumPy arrays made constants (`baked.BakedArray`)
        # Other values the trace may bake in, to be fingerprinted once it ends
        # (`signature.capture_guards`): ``(what, get, load name, code objects)``.
        self.baked_roots: list = []
        # Pairs of array arguments sharing memory traced as a view of one another.
        self.traced_alias: set = set()
        self._baked_ids: set = set()
        # Arrays ``dg.tensor`` copied: (a weak reference, a copy, where). Those still alive
        # after the trace are held outside (a global, not a temporary of library code)
        # and are checked as captured arrays are (`bake_copied_arrays`).
        self._copied: list = []
        # Objects whose attributes the function may set (the modules that ran, objects
        # passed as arguments): id -> (object, its ``__dict__`` before). After the trace,
        # ``attr_writes`` lists ``(object, name, node)``: attributes set to a traced value,
        # which the compiled call sets to the real value (`restore_attrs`).
        self.attrs_before: dict = {}
        self.attr_writes: list = []
        # ``requires_grad`` flags the compiled call sets after it runs: (tensor, value)
        # (`restore_requires_grad`).
        self.rg_writes: tuple = ()
        # The lists the function reaches from outside, as they were: id -> (list, copy,
        # what, held by an attribute). An append inside the trace changes them in place
        # (`restore_containers` puts the items back).
        self.items_before: dict = {}
        # The lists and dicts reached through the function's globals and closure
        # variables or a module hook's (`watch_container`): id -> the list, or the
        # `HeldDict` standing for the dict.
        self.watched: dict = {}
        # Where a list from outside is held, one level up (an attribute, a dict's key, a
        # list's item): id -> (table, key, the list, what), for `guard_holders`.
        self.holders: dict = {}
        # Number attributes read as values of the call's entry (`replay_numbers`):
        # (id of the object's ``__dict__``, name) -> its `EntryNumber`. After the trace,
        # ``number_writes`` lists ``(table, name, get)``: attributes the compiled call sets
        # to ``get()`` after each call (`PythonWrites`); ``numbers_changed`` the
        # ``(object, name)`` whose number the trace changed while it read them as plain
        # values (the trace is taken again with them replayed).
        self.replayed: dict = {}
        self.number_writes: list = []
        # Plain values the trace appended to a list from outside (``history.append(3)``,
        # ``self.log.append(self.step)``): ``(list, getters)``, appended after each call.
        self.list_appends: list = []
        # ``len()`` of a list, dict or set that the function's own code took while
        # traced: ``(container, length)`` (`_LenReads`; guarded when from outside).
        self.len_reads: list = []
        # Whether the trace changed the length of a container it read the length of (a
        # hand-written optimizer's ``if len(state) == 0:`` filling the state): the next
        # call finds another length, so this trace would serve this call only.
        self.fills_length = False
        self.numbers_changed: list = []
        # Whether the trace stored a number argument's stand-in in a list item or a global
        # (``total[0] += lr``): it is put back, and the argument is keyed by value.
        self.kept_stand_in = False
        # Objects passed as arguments that are keyed by identity: ``(position, object)``;
        # the attributes the code names are guarded (`signature.capture_guards`).
        self.arg_objects: list = []
        # Attributes a module was asked for and did not have: ``(id(module), name)``.
        self.missing_reads: set = set()
        # Attributes written back without history (`restore_attrs`): ``(id(obj), name)``.
        self.attr_detached: set = set()
        # Eager tensors held by attributes: id -> ``[(table, name, guard key, what)]``.
        self.attr_holders: dict = {}
        # Modules' plain attributes: id -> (a `ModuleAttrs` of them all, the names guarded).
        self.module_attrs: dict = {}
        # Guards of attribute tensors added only when the call reads the tensor through
        # its attribute (`attr_source`): guard key -> guard.
        self.lazy_reads: dict = {}
        # The `ItemTable` of each container attribute: (id of the table, name) -> table.
        self.item_tables: dict = {}
        # Nodes read as a loss's target (`note_label`), passed as scalars if constant.
        self._labels: dict = {}

    def as_node(self, a: Any) -> Any:
        node = super().as_node(a)
        # A captured array is snapshotted into a constant: record it, so the call path
        # can notice (and say) when it changes later.
        if isinstance(a, np.ndarray) and id(a) not in self._baked_ids and node.op == "const":
            self._baked_ids.add(id(a))
            self.baked.append(BakedArray(a, node.attrs["value"], user_location(2)))
        return node

    def note_copied_array(self, arr: np.ndarray) -> None:
        if id(arr) not in self._baked_ids:
            self._baked_ids.add(id(arr))
            self._copied.append((weakref.ref(arr), np.array(arr, copy=True),
                                 user_location(3)))

    def bake_copied_arrays(self) -> None:
        """After the trace: the arrays ``dg.tensor`` copied that something outside still
        holds are baked in, checked now and then as captured arrays are."""
        for ref, copy, loc in self._copied:
            arr = ref()
            if arr is not None:
                self.baked.append(BakedArray(arr, copy, loc))
        self._copied = []

    def read_number(self, t: Tracer, what: str) -> Any:
        """``t.item()`` inside a compiled call: a stand-in number (`symbolic.read_number`)."""
        from .symbolic import read_number  # (symbolic builds on this module)

        return read_number(t, what)

    def truth_value(self, t: Tracer) -> bool:
        """``bool(t)`` inside a compiled call: computed and guarded (`speculate.truth_value`)."""
        from .speculate import truth_value

        return truth_value(self, t)

    def note_shape_read(self, t: Any) -> None:
        if id(t) not in self.made:
            self.shape_reads.setdefault(id(t), t)

    def note_layout_read(self, t: Any) -> None:
        # An argument's layout is guarded by position (`argument_layout`); a tensor made
        # inside is laid out as made on every call.
        key = ("captured layout", id(t))
        if key not in self.reads and id(t) not in self.made and id(t) not in self.arg_index:
            self.reads[key] = None  # the guard reads the layout too, which comes back here
            self.reads[key] = CapturedLayout(t)

    def note_missing(self, owner: Any, name: str) -> None:
        """``owner.name`` was looked up on a module and is absent (``hasattr``, ``getattr``
        with a default): guard that it stays absent, so a parameter, buffer, submodule or
        attribute added later retraces as eager mode would see it."""
        self.missing_reads.add((id(owner), name))
        d = owner.__dict__
        for t in _MODULE_TABLES:
            table = d.get(t)
            if isinstance(table, dict) and ("absent", id(table), name) not in self.reads:
                self.reads[("absent", id(table), name)] = Identity(
                    table, name, None, f"{type(owner).__name__}.{name} was added")
        if ("absent", id(d), name) not in self.reads:
            self.reads[("absent", id(d), name)] = PlainValue(
                lambda: d.get(name, MISSING), MISSING,
                lambda now: f"{type(owner).__name__}.{name} was set")

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
            # The call's entry is chosen by the flag as the call begins: a function that
            # runs ``model.eval()`` first reads the flag it set itself.
            before = self.attrs_before.get(id(module))
            if before is not None and before[0] is module:
                value = before[1].get("_training", value)
            self.reads[key] = TrainingFlag(
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
        self.remember_attrs(module)
        self.reads[key] = ModuleTable(module)
        # Hooks registered or removed later change what a call runs, as in eager mode;
        # so do the hooks every module runs.
        self.reads[("module hooks", id(module))] = ModuleHookTable(module)
        if ("module hooks", "every") not in self.reads:
            from ..nn.hooks import EVERY_MODULE

            self.reads[("module hooks", "every")] = GlobalHookTable(EVERY_MODULE)
            self.note_hooks(EVERY_MODULE.__dict__["_hooks"])
        self.note_hooks(module.__dict__.get("_hooks"))
        d = module.__dict__
        names = tuple(k for k, v in d.items() if k not in _MODULE_TABLES and plain_value(v))
        if names:
            # A user's module class whose code never names an attribute (bookkeeping such
            # as ``self.rewards = []``, appended to between calls) need not be guarded
            # on it, unless the traced function's own code names it (`capture_guards`).
            read = class_code_names(type(module))
            kept = names if read is None else tuple(k for k in names if k in read)
            guard = ModuleAttrs(module, names)
            self.module_attrs[id(module)] = (guard, kept)
            self.reads[("module attrs", id(module))] = guard.only(kept)
        self.reads[("forward", id(module))] = InstanceForward(module)
        self.reads[("class", id(module))] = ModuleClass(module)
        read = class_code_names(type(module))
        if read is not None:
            table = _class_table(type(module), "forward")
            if table is not None:  # ``Net.forward = other`` on the user's class
                self.reads[("class forward", id(table))] = Identity(
                    table, "forward", table["forward"],
                    f"{type(module).__name__}.forward was replaced on the class")
            # A user's class attribute read through ``self`` (``scale = 1.0`` in the class
            # body, changed on the class): guarded as the instance's own are.
            for k in sorted(read - d.keys()):
                table = _class_table(type(module), k)
                if table is not None and plain_value(table[k]):
                    self.reads[("class attr", id(table), k)] = PlainValue(
                        lambda t=table, k=k: t.get(k, MISSING), table[k],
                        lambda now, k=k: f"{type(module).__name__}.{k} is {_shown(now)} "
                                         "(a class attribute changed since the trace)")
        # Its plain tensor attributes (``self.mask``, not a parameter or buffer) are captured
        # inputs read through the attribute at each call (`attr_source`): guard their type,
        # so rebinding one to a new tensor of that type (``self.h = h`` every call) reuses
        # the trace.
        for k, v in d.items():
            if isinstance(v, Tensor):
                self.note_attr_tensor(d, k, v, f"{type(module).__name__}.{k}")
            elif isinstance(v, functools.partial):
                # ``self.act = partial(F.leaky_relu, negative_slope=0.1)``: eager mode calls
                # what it binds now.
                self.reads[("partial", id(v))] = PartialContents(v)
            elif tensor_tree(v) and not _holds_tracer(v, self):
                # (One holding traced values was set by the trace: `restore_attrs`.)
                self.note_attr_tree(d, k, v, f"{type(module).__name__}.{k}")
        # Its other attributes (arrays, objects, long or nested lists) are baked in:
        # checked now and then (`baked.BakedValue`).
        forward = getattr(getattr(type(module), "forward", None), "__code__", None)
        for k, v in d.items():
            if k not in _MODULE_TABLES and not plain_value(v) and \
                    not isinstance(v, _NOT_BAKED) and not tensor_tree(v) and \
                    (id(d), k) not in self.replayed:
                self.baked_roots.append((f"{type(module).__name__}.{k}",
                                         lambda d=d, k=k: d.get(k), k,
                                         (forward,) if forward is not None else ()))

    def note_attr_tensor(self, table: Any, name: Any, value: Tensor, what: str,
                         lazy: bool = False) -> None:
        """``table[name]`` (an object's attribute, or a tensor inside a container attribute:
        an `ItemTable` and a path) holds the eager tensor ``value``: guard its type (when
        ``lazy``, only if the call reads ``value`` through it), and remember where ``value``
        sits for `attr_source`."""
        key = ("attr value", id(table), name)
        guard = AttrType(table, name, what)
        if lazy:
            self.lazy_reads.setdefault(key, guard)
        else:
            self.reads[key] = guard
        holders = self.attr_holders.setdefault(id(value), [])
        if all(h[2] != key for h in holders):
            holders.append((table, name, key, what))

    def note_attr_tree(self, table: dict, name: str, value: Any, what: str,
                       lazy: bool = False) -> None:
        """``table[name]`` is a tuple, list or dict of eager tensors (``self.hidden = (h,
        c)``): each tensor is read through its place in it (`ItemTable`), as a tensor
        attribute is, and the container's structure is guarded."""
        items = self.item_tables.get((id(table), name))
        if items is None:
            items = self.item_tables[(id(table), name)] = ItemTable(table, name)
        for path, t in tree_leaves(value):
            self.note_attr_tensor(items, path, t, what + "".join(f"[{i!r}]" for i in path),
                                  lazy)
        key = ("attr tree", id(table), name)
        guard = Value(items.structure, tree_structure(value),
                      lambda now: f"{what} holds {describe_structure(now)} now (traced with "
                                  f"{describe_structure(tree_structure(value))})", items)
        if lazy:
            self.lazy_reads.setdefault(key, guard)
        else:
            self.reads[key] = guard

    def note_reachable(self, module: Any) -> None:
        """``module`` (and its submodules) is named by the function (a global, a closure
        variable, the ``self`` of a method) and may run: remember its attributes as they
        are before the trace changes any (`restore_attrs`), and where its tensors sit,
        guarded only if the call reads them there."""
        for m in module.modules():
            self.note_object(m)

    def note_hooks(self, hooks: Any) -> None:
        """The state the hooks of a module that runs may change: the object of a bound
        method (as `note_object`), and the dicts and lists in their closures and globals
        (`watch_container`)."""
        if not hooks:
            return
        for table in (hooks.forward_pre, hooks.forward, hooks.backward, hooks.backward_pre):
            for hook in table.values():
                owner = getattr(hook, "__self__", None)
                if isinstance(getattr(owner, "__dict__", None), dict) and \
                        not _is_library_object(owner):
                    self.note_object(owner)
                f = function_of(hook)
                if f is None:
                    continue
                of = f"of the hook {getattr(hook, '__qualname__', type(hook).__name__)}"
                for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
                    self.watch_container(_cell_value(cell), f"{name!r} ({of})")
                for name in f.__code__.co_names:
                    self.watch_container(f.__globals__.get(name), f"{name!r} ({of})")

    def watch_container(self, v: Any, what: str, depth: int = 0) -> None:
        """``v``, a list or dict the function or a module's hook reaches through a global
        or closure variable (and the lists and dicts nested in it, 3 deep), may be given
        values the trace computes. A dict's string keys are an object's attributes to
        `restore_attrs` (a `HeldDict`): a tensor the call computes stored there
        (``features["last"] = out.detach()``, ``state["h"] = h``) is written back after
        each call. Anything else holding a traced value afterwards (an append, an item of
        a list, a key that is not a string) is put back by `restore_containers`, and that
        signature runs eagerly."""
        if type(v) not in (list, dict) or id(v) in self.watched or depth >= _CONTAINER_DEPTH:
            return
        if type(v) is dict:
            held = HeldDict()
            held.__dict__, held.what = v, what
            self.watched[id(v)] = held
            self.remember_attrs(held)
            inner = list(v.values())
        else:
            self.watched[id(v)] = v
            self.items_before.setdefault(id(v), (v, self._entry_items(v), what, False))
            inner = list(v)
            for i, e in enumerate(inner):
                if type(e) is list:
                    self.holders.setdefault(id(e), (v, i, e, f"{what}[{i}]"))
        for e in inner:
            self.watch_container(e, what, depth + 1)

    def remember_attrs(self, obj: Any) -> None:
        """``obj``'s attributes as they are before the trace changes any, and the items of
        the lists among them."""
        if id(obj) in self.attrs_before:
            return
        d = obj.__dict__
        before = dict(d)
        for k, v in before.items():
            if type(v) is TracedNumber and (id(d), k) in self.replayed:
                before[k] = self.replayed[id(d), k].entry
        self.attrs_before[id(obj)] = (obj, before)
        for k, v in d.items():
            if type(v) is list:
                self.items_before.setdefault(id(v), (v, self._entry_items(v),
                                                     attr_name(obj, k), True))
                self.holders.setdefault(id(v), (d, k, v, attr_name(obj, k)))

    def _entry_items(self, items: list) -> list:
        """A copy of list ``items`` as the call began (a replayed item's number, not its
        stand-in)."""
        return [self.replayed[id(items), i].entry if type(e) is TracedNumber
                and (id(items), i) in self.replayed else e for i, e in enumerate(items)]

    def replay_numbers(self, found: list) -> None:
        """The number attributes ``found`` (``(object, name)``: ``self.nfe += 1``) are read
        as values of the call's entry: each holds a `optim._tracing.TracedNumber` while
        the call is traced, so arithmetic on it is an expression the compiled call
        evaluates again, in Python, from the attribute as each call begins (a runtime
        input where it meets a tensor; guarded where Python branches on it), and what
        the function stores back is written after each call (`restore_attrs`)."""
        hooks = (self.guard_value, self.runtime_scalar)
        for obj, name in found:
            d = _table_of(obj)
            v = _item(d, name)
            if not _is_number(v) or (id(d), name) in self.replayed:
                continue
            get = self.replayed[id(d), name] = EntryNumber(d, name, v)
            what = attr_name(obj, name)
            d[name] = TracedNumber(hooks, ("attribute", id(d), name), get, what, obj)
            # What the compiled call computes from it is Python's int or float arithmetic.
            self.guard_value(functools.partial(_item_type, d, name), type(v),
                             f"{what} is no longer a {type(v).__name__}", obj)

    def end_replay(self) -> None:
        """After the trace: each replayed attribute holds its number again, and reads it
        as a call begins from now on."""
        for get in self.replayed.values():
            if type(_item(get.table, get.name)) is TracedNumber:
                get.table[get.name] = get.entry
            get.entry = None

    def note_object(self, obj: Any) -> None:
        """``obj`` (a module, or an object of the user's classes named by the function or
        held by such an object): its attributes as they are before the trace
        (`restore_attrs` writes back a tensor set on it, ``self.running_mean = ...``), and
        its tensors read through their attribute."""
        if id(obj) in self.attrs_before:
            return
        self.remember_attrs(obj)
        d = obj.__dict__
        for k, v in d.items():
            if isinstance(v, Tensor):
                self.note_attr_tensor(d, k, v, f"{type(obj).__name__}.{k}", lazy=True)
            elif tensor_tree(v):
                self.note_attr_tree(d, k, v, f"{type(obj).__name__}.{k}", lazy=True)

    def argument_values(self, t: Any) -> np.ndarray | None:
        """The values of ``t`` when it is a small integer tensor argument, as passed in: the
        entry is then guarded on them (`guards.ArgValues`)."""
        if not isinstance(t, Tracer) or t._ctx is not self or t.node.op != "input":
            return None
        arg = self.arg_tensors.get(id(t.node))
        if arg is None or id(arg) not in self.arg_index:
            return None
        values = array_of(arg)
        if values.dtype.kind not in "iub" or values.size > MAX_ARGUMENT_VALUES:
            return None
        position = self.arg_index[id(arg)]
        self.reads.setdefault(("argument values", position), ArgValues(position, values))
        return values.copy()

    def argument_layout(self, t: Any) -> Tensor | None:
        """The tensor passed as the argument ``t`` stands for, unchanged since the call
        began, when the program reads its layout (``stride()``, ``is_contiguous()``): the
        entry is then guarded on that layout (`guards.ArgLayout`)."""
        if not isinstance(t, Tracer) or t._ctx is not self or t.node.op != "input":
            return None
        arg = self.arg_tensors.get(id(t.node))
        if arg is None or id(arg) not in self.arg_index:
            return None
        position = self.arg_index[id(arg)]
        self.reads.setdefault(("argument layout", position), ArgLayout(position, arg))
        return arg

    def guard_value(self, getter: Callable[[], Any], expected: Any, what: str,
                    keep: Any = None) -> None:
        """A Python value the trace branched on: reuse the trace while ``getter()`` gives
        ``expected`` (compared with ``==``)."""
        kind = LeafHooks if isinstance(getter, LeafHooksUnchanged) else Value
        self.reads.setdefault(("value", what, id(keep)),
                              kind(getter, expected, lambda now: what, keep))

    def note_label(self, t: Any) -> None:
        if isinstance(t, Tensor) or isinstance(t, Tracer) and t._ctx is self:
            node = self.as_node(t)
            if node.op == "const":
                self._labels[id(node)] = node

    def pass_labels(self) -> None:
        """Each loss target that is still a constant of one repeated float value once the
        trace has ended (a made tensor that escaped is an input by then) becomes that
        value as a 0-d input, broadcast: the real and fake labels' losses of a GAN then
        lower to one kernel instead of one per folded label. The node is rewritten in
        place, so every node that reads it (the loss and its gradient) reads the input."""
        for node in self._labels.values():
            one = _one_float(node.attrs["value"]) if node.op == "const" else None
            if one is None:
                continue
            # One input per label read (not per value): values computed from two reads
            # of one input would be merged by CSE, tying one pass's loss to another's.
            scalar = self.runtime_scalar(("label", id(node)), lambda one=one: one,
                                         node.dtype).node
            node.op, node.inputs, node.attrs = "broadcast_to", (scalar,), {
                "shape": tuple(node.shape)}

    def runtime_scalar(self, key: Any, value: Callable[[], Any], dtype: Any,
                       keep: Any = None) -> Tracer:
        """A 0-d ``dtype`` input whose value the compiled call reads from ``value()`` on
        every call (an optimizer hyperparameter); one input per ``key``."""
        node = self._runtime_nodes.get(key)
        if node is None:
            node = Node("input", (), {}, (), np.dtype(dtype))
            self.runtime.append((node, RuntimeScalar(value, np.dtype(dtype), keep)))
            self._runtime_nodes[key] = node
            self._keep.append(keep)
        return Tracer(node, self)


def _is_number(v: Any) -> bool:
    """A Python ``int`` or ``float`` (not a ``bool``): what a replayed attribute holds."""
    return type(v) in (int, float)


def _item_type(table: Any, name: Any) -> type:
    return type(_item(table, name))


def _item(table: Any, name: Any) -> Any:
    """``table[name]`` of a dict or a list (None when it is not there)."""
    if type(table) is list:
        return table[name] if -len(table) <= name < len(table) else None
    return table.get(name)


class EntryNumber:
    """Reads the number attribute ``table[name]`` as a compiled call begins: what a replayed
    write starts from (`CallTraceContext.replay_numbers`). While the call is traced the
    attribute holds a stand-in, and this gives ``entry``, the value it held then."""

    __slots__ = ("table", "name", "entry")

    def __init__(self, table: dict, name: str, entry: Any) -> None:
        self.table, self.name, self.entry = table, name, entry

    def __call__(self) -> Any:
        entry = self.entry
        return self.table[self.name] if entry is None else entry


class PythonWrites:
    """The Python state a compiled call changes after it ran: number attributes
    (``self.nfe += 1``, ``self.step_count = 0``) and plain values appended to lists from
    outside (``history.append(3)``, ``self.log.append(self.step)``). Every value is
    computed first, from the attributes as the call began, then all are written, as
    eager mode leaves them."""

    __slots__ = ("numbers", "appends")

    def __init__(self, numbers: tuple, appends: tuple) -> None:
        self.numbers = numbers  # (table, name, get)
        self.appends = appends  # (list, getters)

    def __call__(self) -> None:
        values = [get() for _, _, get in self.numbers]
        added = [[get() for get in gets] for _, gets in self.appends]
        for (table, name, _), v in zip(self.numbers, values):
            table[name] = v
        for (items, _), more in zip(self.appends, added):
            items.extend(more)


def _replayed_value(e: Any, ctx: CallTraceContext) -> Callable[[], Any] | None:
    """How a compiled call gets ``e`` again, a value the trace appended to a list: a
    number computed from values read as the call begins, or a constant (numbers,
    strings, None, tuples of them); None for anything else (a fresh object eagerly)."""
    if type(e) is TracedNumber and e.guarded_by(ctx.guard_value):
        return e.getter
    if _immutable_value(e) or type(e) is Size and all(type(n) is int for n in e):
        return lambda: e  # (a shape, ``x.shape``, is a tuple of ints)
    return None


def _one_float(v: np.ndarray) -> float | None:
    """The number every element of float array ``v`` holds (finite, one sign), else None."""
    if v.dtype.kind != "f" or v.size == 0:
        return None
    first = v.reshape(-1)[0]
    if not np.isfinite(first) or not (v == first).all() or (
            np.signbit(v) != np.signbit(first)).any():
        return None
    return float(first)


# The most elements of an integer tensor argument a trace may read as Python numbers
# (`CallTraceContext.argument_values`): a packed batch's lengths are one per sequence.
MAX_ARGUMENT_VALUES = 4096

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


class ItemTable:
    """The tensors inside a container attribute (``table[name]``: a tuple, list or dict,
    nested, such as ``self.hidden = (h, c)``), each addressed by its path of indices and
    keys: read as a table of tensors (``items[path]``, ``items.get(path)``) by
    `plan.AttrTensor` and `guards.AttrType`, so a container rebound on every call is read
    afresh."""

    __slots__ = ("table", "name")

    def __init__(self, table: dict, name: str) -> None:
        self.table, self.name = table, name

    def __getitem__(self, path: tuple) -> Any:
        v = self.table[self.name]
        for i in path:
            if not isinstance(v, (tuple, list, dict)):
                raise KeyError(path)
            v = v[i]
        return v

    def get(self, path: tuple) -> Any:
        try:
            return self[path]
        except (KeyError, IndexError, TypeError):
            return None

    def structure(self) -> Any:
        return tree_structure(self.table.get(self.name))


# The most tensors (and the deepest nesting) a container attribute read item by item
# holds; a larger one is baked in.
MAX_TREE_LEAVES = 16
_MAX_TREE_DEPTH = 3


def tensor_tree(v: Any) -> bool:
    """Whether ``v`` is a tuple, list or dict (nested up to 3 deep) of at most 16 items,
    every one a tensor (eager or traced): a hidden state ``(h, c)``, a dict of buffers."""
    leaves: list = []
    return isinstance(v, (tuple, list, dict)) and _tree_ok(v, 0, leaves) and bool(leaves)


def _tree_ok(v: Any, depth: int, leaves: list) -> bool:
    if isinstance(v, (Tensor, Tracer)):
        leaves.append(v)
        return len(leaves) <= MAX_TREE_LEAVES
    if depth >= _MAX_TREE_DEPTH:
        return False
    if type(v) in (tuple, list):
        return all(_tree_ok(e, depth + 1, leaves) for e in v)
    if type(v) is dict:
        return all(isinstance(k, (str, int)) and _tree_ok(e, depth + 1, leaves)
                   for k, e in v.items())
    return False


def tree_leaves(v: Any, path: tuple = ()) -> list:
    """``(path, value)`` of each leaf of a container (`tensor_tree`), in order."""
    if isinstance(v, (tuple, list)):
        return [x for i, e in enumerate(v) for x in tree_leaves(e, (*path, i))]
    if isinstance(v, dict):
        return [x for k, e in v.items() for x in tree_leaves(e, (*path, k))]
    return [(path, v)]


def tree_structure(v: Any) -> Any:
    """How a container attribute nests (its types, lengths and keys; a tensor is "t"):
    what the trace of one that holds tensors is guarded on."""
    if isinstance(v, (Tensor, Tracer)):
        return "t"
    if type(v) in (tuple, list):
        return (type(v), tuple(tree_structure(e) for e in v))
    if type(v) is dict:
        return (dict, tuple((k, tree_structure(e)) for k, e in v.items()))
    return ("other", type(v))


def describe_structure(s: Any) -> str:
    if s == "t":
        return "a tensor"
    if s[0] == "other":
        return "None" if s[1] is type(None) else f"a {s[1].__name__}"
    return f"a {s[0].__name__} of {len(s[1])}"


def _keyed_by_value(a: Any) -> bool:
    """An argument the signature key compares by value in full (`signature.const_key`)."""
    if isinstance(a, (*_PLAIN, np.generic, Slot, *_NOT_BAKED)):
        return True
    if isinstance(a, (tuple, list)):
        return all(_keyed_by_value(e) for e in a)
    if isinstance(a, dict):
        return all(_keyed_by_value(k) and _keyed_by_value(e) for k, e in a.items())
    return False


def _keyed_by_identity(a: Any) -> bool:
    """Whether the signature key of constant argument ``a`` is its identity (the class
    keeps object's hash, or it has none), so one entry serves only this object."""
    h = type(a).__hash__
    return h is None or h is object.__hash__


class _NumbersChanged(Exception):  # noqa: N818 - not an error: the trace is taken again
    """A trace changed number attributes it read as plain values (``self.nfe += 1``)."""

    def __init__(self, found: list) -> None:
        super().__init__(found)
        self.found = found


def trace_call(fn: Callable, args: tuple, with_outputs: bool = True,
               alias: tuple | None = None) -> tuple:
    """Trace ``fn(*args)``; returns ``(ctx, outputs, single, grad_writes)``.

    ``outputs`` are the output nodes (``None`` unless ``with_outputs``), ``single`` whether
    ``fn`` returned one value, ``grad_writes`` what `restore_grads` returned. ``alias``:
    the array arguments that share memory (`signature.overlapping`); one that is a plain
    view of another (``h(x[1:3], x)``) is traced as that view of it (`_trace_views`).

    A trace that changes a number attribute (``self.nfe += 1`` on a module that ran or
    an object the function names) is taken again with those attributes read as values
    of the call's entry (`CallTraceContext.replay_numbers`), so that the compiled call
    writes them back; a function without one is traced once.
    """
    replay: list = []
    for _ in range(_REPLAY_PASSES):
        try:
            return _trace_pass(fn, args, with_outputs, alias, replay)
        except _NumbersChanged as e:
            replay = replay + [f for f in e.found if f not in replay]
    raise runs_eagerly(
        fn, f"changes the number attribute {attr_name(*replay[-1])} in a way its traces "
        "do not repeat", "Set it outside the compiled function, or return the value.")


# How many times a call is traced to find the number attributes it changes.
_REPLAY_PASSES = 3


def _trace_pass(fn: Callable, args: tuple, with_outputs: bool, alias: tuple | None,
                replay: list) -> tuple:
    """One trace of `trace_call`, with the number attributes ``replay`` replayed."""
    ctx = CallTraceContext()
    ctx.replay_numbers(replay)
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
            if isinstance(getattr(a, "__dict__", None), dict):
                ctx.remember_attrs(a)
                if _keyed_by_identity(a) and not _is_library_object(a):
                    ctx.arg_objects.append((i, a))
    raw = function_of(fn)
    if raw is not None and (raw.__defaults__ or raw.__kwdefaults__):
        ctx.reads[("defaults", id(raw))] = Defaults(raw)
    bound = partial_of(fn)
    if bound is not None:
        ctx.reads[("partial", id(bound))] = PartialContents(bound)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, Module):
        # A compiled method of a module (``dg.compile(model.score)``) reads its module's
        # Python values as ``forward`` does.
        ctx.note_module(owner)
    modules, objects = _named_modules(fn)
    for m in modules:
        ctx.note_reachable(m)
    for obj in objects:
        ctx.note_object(obj)
    outputs = single = None
    streams = _python_streams()
    default_rng = rng()
    generators = _generator_states(fn)
    spaces = _global_spaces(fn)
    cells = _closure_cells(fn)
    _watch_named(ctx, fn, spaces)
    modes = _global_modes()
    raised = None
    try:
        with ctx, _EnvironReads(ctx), _LenReads(_len_spaces(spaces, modules)):
            if alias:
                _trace_views(ctx, args, targs, alias)
            try:
                out = fn(*targs)
            except (TraceError, NeedsValue):
                raise
            except Exception as e:
                raised = e
                raise
        if ctx.replayed and _holds_number(out, 0):
            # Eagerly the caller gets the count as it is after this call: a compiled
            # call's results are tensors and constants.
            raise runs_eagerly(
                fn, "returns a number attribute it changes (return self.nfe)",
                "Read the attribute after the call to keep it compiled.")
        ctx.escaped_writes(out)
        ctx.pass_labels()
        ctx.bake_copied_arrays()
        if with_outputs:
            outputs, single = graph_outputs(ctx, out, fn, constants=True)
            if any(isinstance(n, Node) and id(n) in ctx.leaf_grads for n in outputs):
                # Eagerly the caller gets a leaf that requires grad (and its .grad); a
                # compiled call hands out plain results.
                raise runs_eagerly(
                    fn, "returns a value it made a leaf with requires_grad_()",
                    "Return the value and call requires_grad_() on the result to keep it "
                    "compiled.")
    finally:
        grad_writes = restore_grads(ctx)
        ctx.rg_writes = restore_requires_grad(ctx)
        stored = restore_containers(ctx)
        try:
            ctx.attr_writes, attr_error = restore_attrs(ctx), None
        except TraceError as e:
            # Raised once everything else is put back, and only if the trace itself got
            # through: an error that stopped it says more than what it left half done.
            ctx.attr_writes, attr_error = [], e
        _global_numbers(ctx, spaces)
        _cell_numbers(ctx, cells)
        guard_holders(ctx)
        ctx.end_replay()
        guard_lengths(ctx)
        drew = _restore_python_streams(streams) or _restore_generators(generators)
        rebound = _restore_globals(ctx, spaces)
        switched = _restore_global_modes(modes)
        if raised is not None and (ctx.writes or grad_writes or ctx.number_writes or
                                   ctx.numbers_changed or ctx.list_appends):
            # Eagerly the tensors and numbers written before the error keep their new
            # values (an optimizer step, a counter, before a check that raises); the trace
            # wrote none of them.
            raise runs_eagerly(
                fn, f"raised {type(raised).__name__} after changing tensors in place or "
                "number attributes, which eager mode keeps changed", "Raise before the "
                "writes, or outside the compiled function, to keep it compiled.") from raised
    if attr_error is not None:
        raise attr_error
    if ctx.kept_stand_in:
        raise NeedsValue("kept outside the graph")
    if rng() is not default_rng:
        # Compiled random ops draw a fresh key per call from the generator as it is when
        # the call begins; a seed set inside would be set once, when tracing.
        raise runs_eagerly(
            fn, "seeds dualgraph's generator (dg.manual_seed, dg.set_rng_state) while it is "
            "traced, which a compiled call would do only once",
            "Seed outside the compiled function.")
    shared = sorted(ctx.arg_index[id(t)] for t, _ in ctx.captured if id(t) in ctx.arg_index)
    if shared and (ctx.writes or grad_writes):
        # The argument and the captured tensor are one tensor, but two kernel inputs: a
        # write through one would not be seen through the other.
        raise EagerOnlyError(
            f"argument {shared[0]} is also read by the function as a captured tensor (a "
            "parameter, a global) and the function writes tensors in place; a compiled "
            "call would not see the write through both. Pass the tensor one way only.")
    if rebound:
        raise runs_eagerly(
            fn, f"rebinds the global {' and '.join(map(repr, rebound))} to a value it "
            "computes (global x; x = ...), which a compiled call does not write back",
            "Keep the state in a tensor changed in place (x.copy_(...)) or on a module "
            "attribute, or return it from the function.")
    if stored:
        raise runs_eagerly(
            fn, f"stores a value it computes in the list or dict {' and '.join(stored)} "
            "(history.append(loss), ws[0] = w, a hook's seen.append(out)), which a "
            "compiled call does not repeat", "Return the value and store it outside the "
            "compiled function (register such a hook outside the steps you compile).")
    if switched:
        raise runs_eagerly(
            fn, f"leaves {switched} changed when it returns, which a compiled call would do "
            "only when traced", "Set it outside the compiled function, or inside a "
            "with-block (dg.no_grad(), dg.set_grad_enabled(False)) that puts it back.")
    if drew:
        raise EagerOnlyError(
            f"{getattr(fn, '__name__', 'the function')} draws from {drew} while it is traced "
            "(random.randint deciding a loop, say): a compiled graph would bake those draws "
            "in and repeat them on every call. Draw the numbers outside the compiled "
            "function and pass them as arguments, or use dg.rand/dg.randint, which a "
            "compiled call draws afresh.")
    if ctx.numbers_changed:
        raise _NumbersChanged(ctx.numbers_changed)
    return ctx, outputs, single, grad_writes


class _EnvironReads:
    """While tracing, the environment variables the function reads (``os.environ[k]``,
    ``os.environ.get(k)``, ``os.getenv(k)``, ``k in os.environ``) are guarded by value
    (absent: None), as a global number is: eager mode reads them on every call. The
    mapping's lookup is wrapped only while some thread traces."""

    lock = threading.Lock()
    active = 0
    real: Any = None

    def __init__(self, ctx: CallTraceContext) -> None:
        self.ctx = ctx

    def __enter__(self) -> None:
        cls = _EnvironReads
        with cls.lock:
            if cls.active == 0:
                cls.real = os._Environ.__getitem__
                os._Environ.__getitem__ = _environ_getitem
            cls.active += 1

    def __exit__(self, *exc: Any) -> None:
        cls = _EnvironReads
        with cls.lock:
            cls.active -= 1
            if cls.active == 0:
                os._Environ.__getitem__ = cls.real


class _LenReads:
    """While tracing, ``len()`` of a list, dict or set in the user's code is noted
    (``ctx.len_reads``): eager mode reads the length on every call (``len(opt.state)``,
    ``if len(history) > 3``), so one from outside is guarded (`guard_lengths`). ``len``
    is put into the global namespaces of the function and of the user's module classes
    that may run (``spaces``), unless they define their own, while some thread traces:
    the builtin itself stays, for Numba and library code."""

    lock = threading.Lock()
    users: dict = {}  # id of a namespace -> how many traces use it

    def __init__(self, spaces: list) -> None:
        self.spaces = [g for g in spaces if g.get("len", _traced_len) is _traced_len]

    def __enter__(self) -> None:
        with _LenReads.lock:
            for g in self.spaces:
                _LenReads.users[id(g)] = _LenReads.users.get(id(g), 0) + 1
                g["len"] = _traced_len

    def __exit__(self, *exc: Any) -> None:
        with _LenReads.lock:
            for g in self.spaces:
                _LenReads.users[id(g)] -= 1
                if not _LenReads.users[id(g)]:
                    del _LenReads.users[id(g)]
                    if g.get("len") is _traced_len:
                        del g["len"]


_SIZED = (list, dict, set)


def _traced_len(obj: Any) -> int:
    n = _REAL_LEN(obj)
    if isinstance(obj, _SIZED):
        ctx = current_trace()
        if isinstance(ctx, CallTraceContext):
            ctx.len_reads.append((obj, n))
    return n


_REAL_LEN = builtins.len


def _len_spaces(spaces: list, modules: list) -> list:
    """The global namespaces whose ``len`` a trace notes (`_LenReads`): the function's
    (``spaces``) and those of the ``forward`` of the user's module classes among
    ``modules`` and their submodules."""
    out = {id(g): g for g, _ in spaces}
    for m in modules:
        for sub in m.modules():
            f = function_of(getattr(type(sub), "forward", None))
            if f is not None:
                out.setdefault(id(f.__globals__), f.__globals__)
    # Library code (dualgraph's own modules' forward, NumPy, the standard library) keeps
    # the builtin.
    return [g for g in out.values()
            if (g.get("__name__") or "").partition(".")[0] not in _LIBRARY_ROOTS
            and (g.get("__name__") or "").partition(".")[0] not in sys.stdlib_module_names]


def guard_lengths(ctx: CallTraceContext) -> None:
    """Guard the lengths the trace read (``ctx.len_reads``) of the lists, dicts and sets
    from outside: those the function reaches (`watch_container`), those an object's or
    module's attribute holds, and an optimizer's state and parameter groups. A container
    the trace made itself is not guarded."""
    if not ctx.len_reads:
        return
    outside = set(ctx.watched) | set(ctx.items_before)
    for _, before in ctx.attrs_before.values():
        outside.update(id(v) for v in before.values() if isinstance(v, _SIZED))
    for c, n in ctx.len_reads:
        if id(c) in outside or (type(c).__module__ or "").startswith("dualgraph.optim"):
            if _REAL_LEN(c) != n:
                ctx.fills_length = True
            ctx.guard_value(functools.partial(_REAL_LEN, c), n,
                            f"the length of a {type(c).__name__} the function read "
                            f"changed (traced with {n})", c)
    ctx.len_reads = []


def _environ_getitem(env: Any, key: Any) -> Any:
    value = None  # absent
    try:
        value = _EnvironReads.real(env, key)
    finally:
        ctx = current_trace()
        if env is os.environ and isinstance(ctx, CallTraceContext):
            environ = os.environ
            ctx.guard_value(lambda: environ.get(key), value,
                            f"os.environ[{key!r}] changed since the trace", environ)
    return value


def function_of(fn: Any) -> types.FunctionType | None:
    """The Python function under a method, wrappers or a `functools.partial`, or None."""
    fn = inspect.unwrap(fn)
    while isinstance(fn, functools.partial):
        fn = inspect.unwrap(fn.func)
    fn = getattr(fn, "__func__", fn)
    return fn if isinstance(fn, types.FunctionType) else None


def partial_of(fn: Any) -> functools.partial | None:
    """The `functools.partial` ``fn`` is (under wrappers), or None."""
    fn = inspect.unwrap(fn)
    return fn if isinstance(fn, functools.partial) else None


def defaults_of(fn: Any) -> tuple:
    """The defaults of the Python function under ``fn`` (methods, wrappers, a partial), as
    `guards.defaults_key` compares them, with what a partial binds (`guards.partial_key`):
    a partial's keywords are defaults of its signature."""
    f = function_of(fn)
    p = partial_of(fn)
    return ((None, None) if f is None else defaults_key(f),
            None if p is None else partial_key(p))


def object_attr_guards(obj: Any, what: str, names: set, before: dict | None = None,
                       absent: set = frozenset(), depth: int = 0,
                       replayed: Any = frozenset(), written: dict | None = None,
                       read: Any = None) -> list:
    """Guards on the attributes of a plain Python object ``obj`` (a user's config object,
    named as a global, closure variable or the ``self`` of a compiled method, or passed as
    an argument) whose names the code uses: by value when they hold plain values
    (`plain_value`), as a module's are, so ``cfg.lr = 0.1`` between calls retraces
    instead of running with the baked-in value; a tensor by identity. An attribute
    removed later reads as a marker.

    ``before``: the values to guard (the object's ``__dict__`` before the call, when the
    trace may have changed it), else the current ones. ``absent``: names the code may
    read that ``obj`` lacks (``getattr(cfg, "w", None)``), guarded to stay absent. A plain
    object an attribute holds (``cfg.opt.lr``) is guarded by identity, and its own
    attributes the same way, one level down. ``replayed``: ``(id of a __dict__, name)``
    of the number attributes read as the call's entry values
    (`CallTraceContext.replay_numbers`), which are not guarded by value. ``written``: the
    lists and dicts every compiled call writes into (`written_items`), guarded by
    identity, and on the rest only when the code reads them (``read``: `read_names`,
    None for every name)."""
    d = getattr(obj, "__dict__", None)
    if type(d) is not dict or isinstance(obj, _NOT_BAKED):
        return []
    values = d if before is None else before
    out: list = []
    for k in sorted(names & values.keys()):
        if (id(d), k) in replayed:
            continue
        v = values[k]
        if isinstance(v, Tensor):  # read as itself: another tensor there retraces
            out.append(Identity(d, k, v, f"{what}.{k} was rebound to another tensor"))
        elif isinstance(k, str) and plain_value(v) and written and id(v) in written:
            out.extend(written_guards(d, k, v, f"{what}.{k}", written, read))
        elif isinstance(k, str) and plain_value(v):
            out.append(_value_guard(d, k, v, what))
        elif depth == 0 and isinstance(k, str) and _keyed_by_identity(v) and \
                type(getattr(v, "__dict__", None)) is dict and \
                not isinstance(v, _NOT_BAKED) and not _is_library_object(v):
            inner = object_attr_guards(v, f"{what}.{k}", names, None, absent, depth + 1,
                                       replayed, written, read)
            if inner:
                out.append(Identity(d, k, v, f"{what}.{k} was rebound to another object"))
                out.extend(inner)
    for k in sorted(absent - values.keys()):
        out.append(_value_guard(d, k, MISSING, what))
    on_class = _class_attrs(obj, names - values.keys())
    for k, owner in on_class:
        # A number the class holds (``o.scale`` reading ``A.scale``): by value where it
        # is, and absent from the object, whose own would hide it.
        v = owner.__dict__[k]
        if isinstance(k, str) and plain_value(v):
            out.append(_value_guard(owner.__dict__, k, v, f"{what} (class {owner.__name__})"))
            if k not in absent:
                out.append(_value_guard(d, k, MISSING, what))
    if on_class:
        # The code reads a method or class attribute: another class gives other ones.
        out.append(ClassOf(obj))
    return out


def _class_attrs(obj: Any, names: Any) -> list:
    """``(name, class)`` for each of ``names`` that ``obj``'s class (or a base of it but
    ``object``) holds, in the class that holds it."""
    out = []
    for k in sorted(n for n in names if isinstance(n, str)):
        owner = next((c for c in type(obj).__mro__[:-1] if k in vars(c)), None)
        if owner is not None:
            out.append((k, owner))
    return out


def _value_guard(d: dict, k: str, v: Any, what: str) -> Guard:
    """``d[k]`` still ``v`` (`MISSING`: still absent), compared by value."""
    was = "missing" if v is MISSING else repr(snapshot(v))
    return PlainValue(lambda: d.get(k, MISSING), v,
                      lambda now: f"{what}.{k} is {_shown(now)} (traced with {was}, a "
                                  "baked-in constant)")


def _is_library_object(v: Any) -> bool:
    """An instance of a class of dualgraph (a module, an optimizer, a tensor-like value):
    its state has guards of its own."""
    return (type(v).__module__ or "").partition(".")[0] == "dualgraph"


def _shown(key: Any) -> str:
    """A `guards.value_key` as the value it stands for."""
    if key[0] is float:
        return repr(float.fromhex(key[1]))
    if key[1] is MISSING:
        return "missing"
    return repr(key[1]) if key[0] not in (tuple, list, dict) else f"a changed {key[0].__name__}"


def _named_modules(fn: Callable) -> tuple[list, list]:
    """The modules and the plain objects of the user's classes that ``fn`` names before
    it runs (itself, the ``self`` of a method, its closure variables, the globals its code
    names), and those that such a plain object holds, also in a list, tuple or dict (a
    loss-compute object holding its criterion module, a model kept as a list of layers)."""
    from ..nn.modules import Module

    found: list = []
    # A wrapper's names and those of the function it wraps (a decorator's, or the one
    # that hands lifted number arguments in as symbolic numbers).
    for f in dict.fromkeys((fn, inspect.unwrap(fn))):
        found += [f, getattr(f, "__self__", None)]
        f = getattr(f, "__func__", f)
        code = getattr(f, "__code__", None)
        for cell in getattr(f, "__closure__", None) or ():
            try:
                found.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        g = getattr(f, "__globals__", None)
        if code is not None and isinstance(g, dict):
            found.extend(g.get(n) for n in code_strings(code))
    modules: list = []
    objects: list = []
    seen: set = set()

    def visit(v: Any, depth: int) -> None:
        if id(v) in seen:
            return
        if isinstance(v, Module):
            seen.add(id(v))
            modules.append(v)
        elif depth < 3 and _is_plain_object(v):
            seen.add(id(v))
            objects.append(v)
            for x in list(v.__dict__.values()):
                visit(x, depth + 1)
        elif depth < 3 and type(v) in (list, tuple, dict) and len(v) <= 64:
            # A model kept as a list of layers (makemore's hand-written Sequential).
            seen.add(id(v))
            for x in list(v.values() if type(v) is dict else v):
                visit(x, depth + 1)

    for v in found:
        visit(v, 0)
    return modules, objects


def _is_plain_object(v: Any) -> bool:
    """An instance of a class the user wrote (not of Python's, NumPy's or dualgraph's),
    with attributes in a ``__dict__``."""
    if not isinstance(getattr(v, "__dict__", None), dict) or isinstance(
            v, (type, types.ModuleType, types.FunctionType, types.MethodType, Tensor)):
        return False
    # A subclass of a library class (a user's optimizer) keeps the library's state guards.
    return not any((c.__module__ or "").partition(".")[0] in _LIBRARY_ROOTS
                   or (c.__module__ or "").partition(".")[0] in sys.stdlib_module_names
                   for c in type(v).__mro__[:-1])


# Packages whose objects keep their own state (or none the trace changes).
_LIBRARY_ROOTS = frozenset({"builtins", "dualgraph", "numpy", "numba", "scipy", "torch",
                            "jax", "jaxlib", "pytest", "_pytest", "hypothesis"})


def _global_modes() -> tuple:
    """The process-wide settings eager ops read that a function may change for its caller
    (`_restore_global_modes`)."""
    from .. import settings

    return (GRAD_ENABLED.value, settings.get_default_dtype(),
            settings.are_deterministic_algorithms_enabled(),
            settings.is_deterministic_algorithms_warn_only_enabled(),
            settings.get_float32_matmul_precision())


def _restore_global_modes(before: tuple) -> str | None:
    """Put back the settings of ``before`` (`_global_modes`) that the trace changed and
    did not restore (``dg.set_grad_enabled(False)`` with no block around it): eager mode
    leaves them changed on every call, which a compiled call cannot replay. Returns them
    named, or None."""
    from .. import settings

    now = _global_modes()
    if now == before:
        return None
    names = ("grad mode", "the default dtype", "deterministic algorithms",
             "deterministic algorithms", "the float32 matmul precision")
    GRAD_ENABLED.value = before[0]
    settings.set_default_dtype(before[1])
    settings.use_deterministic_algorithms(before[2], warn_only=before[3])
    settings.set_float32_matmul_precision(before[4])
    return " and ".join(dict.fromkeys(n for n, a, b in zip(names, now, before) if a != b))


def _python_streams() -> tuple:
    """The states of Python's and NumPy's global random generators."""
    return random.getstate(), np.random.get_state()


def _restore_python_streams(before: tuple) -> str | None:
    """Put back the global random generators' states of ``before`` (a trace must not
    advance them: the eager call that may follow draws the same numbers); returns
    which ones the trace drew from, or None."""
    py, nps = before
    drew = []
    if random.getstate() != py:
        random.setstate(py)
        drew.append("Python's random module")
    now = np.random.get_state()
    if now[2:] != nps[2:] or not np.array_equal(now[1], nps[1]):
        np.random.set_state(nps)
        drew.append("NumPy's global random generator (np.random)")
    return " and ".join(drew) or None


_GENERATORS = (np.random.Generator, np.random.RandomState, random.Random)


def _generator_state(g: Any) -> Any:
    if isinstance(g, np.random.Generator):
        return g.bit_generator.state
    if isinstance(g, np.random.RandomState):
        kind, keys, *rest = g.get_state()
        return kind, keys.tobytes(), *rest
    return g.getstate()


def _generator_states(fn: Any) -> list:
    """``(name, generator, state)`` for the random generator objects the function names
    (closure variables, globals its code names, defaults; a module's or bound method's
    ``self`` attributes): eager mode draws new numbers from them on every call."""
    owners = [fn, getattr(fn, "__self__", None)]
    funcs = _python_functions(fn)
    found: dict = {}

    def visit(name: str, v: Any) -> None:
        if isinstance(v, _GENERATORS) and id(v) not in found:
            found[id(v)] = (name, v)

    for owner in owners:
        if owner is not None and isinstance(getattr(owner, "__dict__", None), dict):
            for k, v in list(owner.__dict__.items()):
                visit(f"{type(owner).__name__}.{k}", v)
    for f in funcs:
        if f is None:
            continue
        code = f.__code__
        for cell, name in zip(f.__closure__ or (), code.co_freevars):
            try:
                visit(name, cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        names = set(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                names.update(c.co_names)
        for name in names:
            if name in f.__globals__:
                visit(name, f.__globals__[name])
        for i, v in enumerate(f.__defaults__ or ()):
            visit(f"default {i}", v)
    return [(name, g, _generator_state(g)) for name, g in found.values()]


def _python_functions(fn: Any) -> list:
    """The Python functions a call of ``fn`` runs first: its own (None when it has none)
    and, for a module, its class's ``forward``."""
    from ..nn.modules import Module

    funcs = [function_of(fn)]
    if isinstance(fn, Module):
        funcs.append(function_of(type(fn).forward))
    return funcs


def _global_spaces(fn: Any) -> list:
    """``(globals, copy)`` of the global namespaces of the function (and of a module's
    ``forward``), to find globals the trace rebinds to traced values."""
    spaces: dict = {}
    for f in _python_functions(fn):
        if f is not None and id(f.__globals__) not in spaces:
            spaces[id(f.__globals__)] = (f.__globals__, dict(f.__globals__))
    return list(spaces.values())


def _restore_globals(ctx: CallTraceContext, spaces: list) -> list:
    """Put back every global of ``spaces`` the trace set to a value holding its traced
    tensors; returns their names. (A list or dict still bound to its name but changed in
    place is `restore_containers`'s.)"""
    rebound = []
    for space, before in spaces:
        for name, v in list(space.items()):
            if v is before.get(name, MISSING) and isinstance(v, (list, dict)):
                continue
            if _traced(v, ctx) or _holds_tracer(v, ctx) or _holds_number(v, 0):
                rebound.append(name)
                if name in before:
                    space[name] = before[name]
                else:
                    del space[name]
    return rebound


def guard_holders(ctx: CallTraceContext) -> None:
    """Guard that each list or dict every compiled call writes into (`written_items`) is
    still where the trace found it (``box["history"] = []`` between calls retraces), so
    the call writes to the one eager mode would. (One a global or closure variable names
    is guarded by `signature` with the other names.)"""
    for cid in written_items(ctx):
        held = ctx.holders.get(cid)
        if held is None:
            continue
        table, key, v, what = held
        ctx.reads.setdefault(("holder", cid), (
            ItemIdentity if type(table) is list else Identity)(
                table, key, v, f"{what} was replaced"))


def _stand_in(v: Any) -> bool:
    """Whether ``v`` stands for a number argument traced as a graph input
    (`symbolic.SymbolicInt`, `SymbolicFloat`), which only the trace has."""
    return getattr(type(v), "_stands_for", None) is not None and \
        getattr(type(v), "read_kind", None) is None


def _global_numbers(ctx: CallTraceContext, spaces: list) -> None:
    """The globals of ``spaces`` the trace changed from one number to another (``global n;
    n += 1``), or replayed: written back by every compiled call, as number attributes are
    (`_number_written`), and put back now."""
    for space, before in spaces:
        held = None
        for name, v in list(space.items()):
            old = before.get(name, MISSING)
            if v is not old and _stand_in(v):
                space[name] = old
                ctx.kept_stand_in = True
                continue
            if v is old or not (type(v) is TracedNumber or _is_number(v)) or not (
                    _is_number(old) or (id(space), name) in ctx.replayed):
                continue
            if held is None:
                held = HeldDict()
                held.__dict__, held.what = space, "globals()"
            _number_written(ctx, held, space, name, v, before)


class CellTable:
    """A closure cell read and written as a one-entry table (``table[name]``), so that a
    number the function rebinds there (``nonlocal n; n += 1``) is replayed as a number
    attribute is (`CallTraceContext.replay_numbers`)."""

    __slots__ = ("cell",)

    def __init__(self, cell: Any) -> None:
        self.cell = cell

    def __getitem__(self, name: str) -> Any:
        return self.cell.cell_contents

    def __setitem__(self, name: str, v: Any) -> None:
        self.cell.cell_contents = v

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self.cell.cell_contents
        except ValueError:  # an empty cell
            return default


def _closure_cells(fn: Any) -> list:
    """``(name, cell, value)`` of the closure variables of the function (and of a module's
    ``forward``), as the call begins."""
    out = []
    for f in _python_functions(fn):
        for name, cell in zip(f.__code__.co_freevars if f else (), (f and f.__closure__) or ()):
            out.append((name, cell, _cell_value(cell)))
    return out


def _cell_numbers(ctx: CallTraceContext, cells: list) -> None:
    """The closure variables the trace rebound from one number to another (``nonlocal n;
    n += 1``), or replayed: written back by every compiled call (`_number_written`)."""
    tables = {id(g.table.cell): g.table for g in ctx.replayed.values()
              if type(g.table) is CellTable}
    for name, cell, old in cells:
        v = _cell_value(cell)
        table = tables.get(id(cell))
        if table is not None:
            old = ctx.replayed[id(table), name].entry
        if v is old or not (type(v) is TracedNumber or _is_number(v)) or not (
                _is_number(old) or table is not None):
            if v is not old and _stand_in(v):
                cell.cell_contents = old
                ctx.kept_stand_in = True
            continue
        table = table or CellTable(cell)
        _number_written(ctx, HeldList(table, name), table, name, v, {name: old})


_CONTAINER_DEPTH = 3  # lists and dicts nested this deep are put back


def _watch_named(ctx: CallTraceContext, fn: Any, spaces: list) -> None:
    """Watch the lists and dicts that the function's globals (``spaces``) and closure
    variables hold (`CallTraceContext.watch_container`): a trace that stores a traced
    value in one (``history.append(loss)``, ``state["h"] = h``) changes it in place."""
    for space, _ in spaces:
        for name, v in list(space.items()):
            if not name.startswith("__"):  # Python's own (``__warningregistry__``)
                ctx.watch_container(v, repr(name))
    for f in _python_functions(fn):
        if f is not None and f.__closure__:
            for name, cell in zip(f.__code__.co_freevars, f.__closure__):
                ctx.watch_container(_cell_value(cell), repr(name))


def _cell_value(cell: Any) -> Any:
    """What a closure cell holds (None when it is still empty)."""
    try:
        return cell.cell_contents
    except ValueError:
        return None


class HeldDict:
    """Stands for a dict the function or a module's hook reaches (`watch_container`): its
    ``__dict__`` is that dict, so the dict's string keys are an object's attributes to
    `restore_attrs` and to the compiled call, which writes the real tensors there.
    ``what`` names the dict in messages."""

    __slots__ = ("__dict__", "what")


def written_items(ctx: CallTraceContext) -> dict:
    """What every compiled call of the trace writes into lists and dicts from outside
    (`PythonWrites`): id of the container -> the keys or indices of its replayed numbers;
    a list appended to is there too. Such a container is guarded on the rest only
    (`unwritten_key`)."""
    out: dict = {}
    for table_id, name in ctx.replayed:
        out.setdefault(table_id, set()).add(name)
    for table, name, _ in ctx.number_writes:
        out.setdefault(id(table), set()).add(name)
    for items, _ in ctx.list_appends:
        out.setdefault(id(items), set())
    return out


def written_guards(table: dict, name: str, v: Any, what: str, written: dict,
                   read: Any) -> list:
    """Guards on ``table[name]``, a short list or dict every compiled call writes into
    (``written``: `written_items`): that it is still there, and, when the code reads it
    (``read``: `read_names`, None for every name), its length or keys and the items the
    call does not write."""
    out: list = [Identity(table, name, v, f"{what} was rebound")]
    if read is None or name in read:
        get = functools.partial(unwritten_key, v, frozenset(written[id(v)]))
        out.append(Value(get, get(), lambda now: f"{what} changed where the compiled call "
                                                 "does not write it"))
    return out


def unwritten_key(container: Any, written: frozenset) -> tuple:
    """What a guard compares of a list or dict whose items ``written`` every compiled call
    writes: its length or keys, and its other items by value (`guards.value_key`)."""
    pairs = container.items() if type(container) is dict else enumerate(container)
    return tuple((k, None if k in written else value_key(e)) for k, e in pairs)


def read_names(codes: list) -> set:
    """The global, closure and attribute names ``codes`` (and the code nested in them)
    load for anything but a call of their ``append`` or ``extend`` (``history.append(3)``
    and ``self.log.append(3)`` read neither ``history`` nor ``log``); every name (None)
    when the code may reach a namespace by other means (``globals()``, ``getattr``)."""
    out: set = set()
    stack = list(codes)
    while stack:
        c = stack.pop()
        if _NAMESPACE_READS & set(c.co_names):
            return None
        ins = list(dis.get_instructions(c))
        for a, b in zip(ins, ins[1:] + [None]):
            if a.opname in _NAME_LOADS and not (
                    b is not None and b.opname in ("LOAD_METHOD", "LOAD_ATTR")
                    and b.argval in ("append", "extend")):
                out.add(a.argval)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


_NAME_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLASSDEREF",
                         "LOAD_ATTR", "LOAD_METHOD"})
_NAMESPACE_READS = frozenset({"globals", "locals", "vars", "eval", "exec", "getattr",
                              "__dict__"})


class HeldList:
    """Stands for a list from outside whose number items the function changes (``count[0]
    += 1``): ``items`` is the list (`_table_of`), read and written by index as an object's
    number attributes are by name (`CallTraceContext.replay_numbers`)."""

    __slots__ = ("items", "what")

    def __init__(self, items: list, what: str) -> None:
        self.items, self.what = items, what


# The objects standing for containers whose items are written as attributes are.
_HELD = (HeldDict, HeldList)


def _table_of(obj: Any) -> Any:
    """Where the attributes of ``obj`` live: its ``__dict__``, or the list a `HeldList`
    stands for."""
    return obj.items if type(obj) is HeldList else obj.__dict__


def attr_name(obj: Any, name: Any) -> str:
    """How messages name attribute ``name`` of ``obj`` (``Net.h``; ``'state'['h']`` for a
    key of a watched dict, ``'count'[0]`` for an item of a list)."""
    if type(obj) is HeldList and type(obj.items) is CellTable:
        return f"closure variable {name!r}"
    if type(obj) in _HELD:
        return f"{obj.what}[{name!r}]"
    return f"{type(obj).__name__}.{name}"


def restore_containers(ctx: CallTraceContext) -> list:
    """Put back every list the function reaches from outside (named, or held by an
    attribute or a watched dict: ``ctx.items_before``) that the trace left holding its
    traced values, and every key of a watched dict that is not a string and was given
    one; returns them named. An item written in a list an attribute holds, the length
    kept (``self.hidden[0] = h``), is left to `restore_attrs`, which writes the list back
    as a whole; an append of a traced value (``self.images.append(image)``,
    ``history.append(loss)``) would not be repeated by a compiled call. Plain values
    appended (``history.append(3)``, ``self.log.append(self.step)``) are put back too,
    and go to ``ctx.list_appends``, for every compiled call to append again."""
    changed = []
    for v, items, what, held in list(ctx.items_before.values()):
        # Numbers changed in place (``count[0] += 1``): written back by index, as number
        # attributes are (`_number_written`), then put back.
        numbered = None
        for i in range(min(len(v), len(items))):
            e = v[i]
            if e is not items[i] and _stand_in(e):
                v[i] = items[i]
                ctx.kept_stand_in = True
            if e is items[i] or not (type(e) is TracedNumber or _is_number(e)):
                continue
            numbered = numbered or HeldList(v, what)
            _number_written(ctx, numbered, v, i, e, {i: items[i]})
        if _holds_tracer(v, ctx):
            if not (held and len(v) == len(items)):
                v[:] = items
                changed.append(what)
        elif len(v) > len(items) and all(a is b for a, b in zip(v, items)):
            # Appended to: plain values are appended again by every compiled call.
            gets = [_replayed_value(e, ctx) for e in v[len(items):]]
            v[:] = items
            if None in gets:
                changed.append(what)
            else:
                ctx.list_appends.append((v, tuple(gets)))
        elif any(type(e) is TracedNumber for e in v):
            v[:] = items  # a number read at the call's entry, stored in place
            changed.append(what)
    for held in ctx.watched.values():
        if type(held) is not HeldDict:
            continue
        d, before = held.__dict__, ctx.attrs_before[id(held)][1]
        for k in [k for k, e in d.items() if not isinstance(k, str) and (
                _traced(e, ctx) or _holds_tracer(e, ctx))]:
            _put_back(d, k, before)
            changed.append(held.what)
    return list(dict.fromkeys(changed))


def _restore_generators(before: list) -> str | None:
    """Put back the generators of ``before`` (`_generator_states`) that the trace drew
    from; returns them named, or None."""
    drew = []
    for name, g, state in before:
        if _generator_state(g) == state:
            continue
        if isinstance(g, np.random.Generator):
            g.bit_generator.state = state
        elif isinstance(g, np.random.RandomState):
            kind, keys, *rest = state
            g.set_state((kind, np.frombuffer(keys, np.uint32).copy(), *rest))
        else:
            g.setstate(state)
        drew.append(f"the {type(g).__name__} {name!r}")
    return " and ".join(drew) or None


def _trace_views(ctx: CallTraceContext, args: tuple, targs: list, alias: tuple) -> None:
    """Arguments that share memory: where one is a plain view of the other
    (`signature.basic_view`: ints, slices, new axes) and neither requires grad, the
    trace reads it as that view of the other's input, so a write through either is seen
    through both, as in eager mode; the pair goes to ``ctx.traced_alias``."""
    from .signature import basic_view, placement

    arrays = [k for k, a in enumerate(args) if isinstance(a, (Tensor, np.ndarray))]
    viewed: dict = {}
    for i, j in alias:
        ki, kj = arrays[i], arrays[j]
        if any(isinstance(args[k], Tensor) and args[k].requires_grad for k in (ki, kj)):
            continue
        for kb, kv in ((ki, kj), (kj, ki)):
            if kb in viewed or kv in viewed:
                continue
            d = [array_of(args[k]) if isinstance(args[k], Tensor) else args[k]
                 for k in (kb, kv)]
            index = basic_view(d[0], d[1])
            if index is not None:
                viewed[kv] = kb
                targs[kv] = targs[kb][index]
                ctx.traced_alias.add((i, j))
                # The trace holds for this placement only (``x[2:4]`` after ``x[1:3]``
                # is another view): a guard, so read-only overlaps stay one entry.
                ctx.reads[("placement", kb, kv)] = ArgPlacement(
                    kb, kv, placement(args[kb], args[kv]), placement)
                break


def restore_attrs(ctx: CallTraceContext) -> list:
    """Put back every attribute the trace set to a traced value (``self.mask = mask``), or
    to a tuple, list or dict of them (``self.hidden = (h, c)``), on an object in
    ``ctx.attrs_before``; return ``(object, name, nodes, tree)`` per such attribute, for
    the compiled call to set to the real value, as eager mode leaves it (``tree``: None
    for one tensor, else the `OutputTree` that nests ``nodes``).

    The trace is also guarded on the attribute still holding what it held before, so a
    call after the write-back traces again when it would branch differently. A value
    that requires grad is refused (the compiled call's tape cannot hand it out), unless
    the function ran ``backward()``: its history then ends in the call, and it is written
    back as a tensor without history, as the next step's ``detach()`` would leave it.
    Every attribute is put back before an error is raised.
    """
    from ..nn.modules import Module

    out: list = []
    error = None  # raised once every attribute is put back
    constant: list = []  # attributes set to (or deleted for) a value the trace did not make
    for obj, before in ctx.attrs_before.values():
        d = obj.__dict__
        for name in [k for k in before if k not in d and not _is_library_object(obj)]:
            d[name] = before[name]
            constant.append(attr_name(obj, name))
        watched = type(obj) is HeldDict
        for name, v in list(d.items()):
            if watched and not isinstance(name, str):
                # A key that is not a string (``counts[0] += 1``): a number there is
                # written back as under a string key; anything else is
                # `restore_containers`'s.
                if before.get(name, MISSING) is not v and (
                        type(v) is TracedNumber or _is_number(v)):
                    _number_written(ctx, obj, d, name, v, before)
                continue
            if watched and before.get(name, MISSING) is v and type(v) is not list:
                continue  # a key of a watched dict that still holds what it held
            what = attr_name(obj, name)
            if isinstance(v, Tracer) and v._ctx is ctx:
                leaves, tree = [((), v)], None
            elif _holds_tracer(v, ctx):
                leaves, tree = tree_leaves(v), _tree_of(v)
                bad = next((p for p, e in leaves if not isinstance(e, Tracer)
                            or e._ctx is not ctx), None)
                if bad is not None and _read_in(leaves, ctx):
                    _put_back(d, name, before)
                    constant.append(what)
                    continue
                if bad is not None or not tensor_tree(v):
                    _put_back(d, name, before)
                    where = f"{what}{''.join(f'[{i!r}]' for i in bad)}" if bad else what
                    error = error or TraceError(
                        f"{what} was set to a {type(v).__name__} holding traced tensors and "
                        f"{'other values' if bad is not None else 'more than fits'} "
                        f"({where}) inside a compiled function; the compiled call writes "
                        f"back a tuple, list or dict (nested up to {_MAX_TREE_DEPTH} deep, "
                        f"up to {MAX_TREE_LEAVES} items) made only of tensors the function "
                        "computed. Store those tensors alone, or return the values from "
                        "the function")
                    continue
            elif _number_written(ctx, obj, d, name, v, before):
                continue
            else:
                # A library object (an optimizer's step count) keeps its own state guards.
                if (name == "_training" or not _is_library_object(obj)) and \
                        _rebound(before, name, v):
                    _put_back(d, name, before)
                    constant.append(f"{type(obj).__name__}.training (train()/eval())"
                                    if name == "_training" else what)
                continue
            nodes = [ctx.as_node(e) for _, e in leaves]
            # A module attribute the call creates, never asked for before (a read of it
            # would have gone through Module.__getattr__): its absence decided nothing.
            created = (name not in before and isinstance(obj, Module)
                       and (id(obj), name) not in ctx.missing_reads)
            old = _put_back(d, name, before)
            for (path, _), node in zip(leaves, nodes):
                if id(node) in ctx.rg and not ctx.backward_called and error is None:
                    at = what + "".join(f"[{i!r}]" for i in path)
                    error = TraceError(
                        f"{at} was set to a value that requires grad inside a compiled "
                        "function that does not call backward(); store a detached value "
                        f"({what} = value.detach()"
                        f"{'' if tree is None else ' for each tensor'}), call backward() inside "
                        "the compiled function, or return the value from it instead")
            out.append((obj, name, nodes, tree))
            held = _tensors_in(old)
            if held and not any(requires_grad_of(t) for t in held):
                # The trace is guarded on the held tensors not requiring grad (a recurrent
                # state the step detaches): written back with history, the value would
                # make the next call trace again.
                ctx.attr_detached.add((id(obj), name))
            if isinstance(old, Tensor):  # the next call reads whichever tensor is there
                ctx.note_attr_tensor(d, name, old, what)
            elif tensor_tree(old):
                ctx.note_attr_tree(d, name, old, what)
            elif not created:
                ctx.reads[("attr value", id(d), name)] = Identity(
                    d, name, old, f"{what} was set to another value")
    if error is not None:
        raise error
    if constant:
        # The compiled call writes back only tensors it computes: a Python value (None,
        # a number, a tensor it did not compute) written once by the trace would not be
        # written by the calls that reuse it.
        raise EagerOnlyError(
            f"{' and '.join(constant)} {'was' if len(constant) == 1 else 'were'} set to a "
            "value the function does not compute (None, a number, a tensor from outside) "
            "or deleted, which a compiled call does not write back. Set the attribute "
            "outside the compiled function, store a tensor the function computes, or return "
            "the value from the function.")
    return out


def _number_written(ctx: CallTraceContext, obj: Any, d: dict, name: str, v: Any,
                    before: dict) -> bool:
    """Whether attribute ``name`` (now ``v``) is a number the compiled call writes back
    (`PythonWrites`), or one to read as the call's entry value in a trace taken again
    (``ctx.numbers_changed``); it is then put back as it was before the call."""
    old = before.get(name, MISSING)
    get = ctx.replayed.get((id(d), name))
    if type(v) is TracedNumber and v.guarded_by(ctx.guard_value):
        # A number the trace computed from values read at the call's entry (a replayed
        # attribute, a parameter group's): recomputed after each call.
        if v.getter is not get:  # (the stand-in itself: the attribute was not set)
            ctx.number_writes.append((d, name, v.getter))
    elif get is not None and _is_number(v):
        ctx.number_writes.append((d, name, lambda v=v: v))  # set to a constant
    elif _is_number(old) and _is_number(v) and old != v and name != "_training" and \
            (type(obj) in _HELD or not _is_library_object(obj)):
        ctx.numbers_changed.append((obj, name))
    else:
        return False
    d[name] = old
    return True


def _rebound(before: dict, name: str, v: Any) -> bool:
    """Whether attribute ``name``, now ``v``, holds another value than it did in
    ``before`` (an equal number or string counts as the same)."""
    if name not in before:
        return True
    old = before[name]
    if old is v:
        return False
    return not (_immutable_value(v) and type(old) is type(v) and old == v)


def _tensors_in(v: Any) -> list:
    """The tensors ``v`` is or holds (a tuple, list or dict of them)."""
    if isinstance(v, Tensor):
        return [v]
    if tensor_tree(v):
        return [e for _, e in tree_leaves(v) if isinstance(e, Tensor)]
    return []


def _put_back(d: dict, name: str, before: dict) -> Any:
    """Set ``d[name]`` back to its value in ``before`` (none: removed); return it. A value
    holding traced tensors (set by the function before the object was first seen) puts
    back None."""
    if name not in before:
        d.pop(name)
        return None
    old = before[name]
    if isinstance(old, Tracer) or isinstance(old, (tuple, list, dict)) and \
            any(isinstance(e, Tracer) for _, e in tree_leaves(old)):
        old = None
    d[name] = old
    return old


def _tree_of(v: Any) -> OutputTree:
    """The `OutputTree` that nests the leaves of container ``v`` as ``v`` does."""
    if isinstance(v, dict):
        return OutputTree(dict, [None if not isinstance(e, (tuple, list, dict)) else _tree_of(e)
                                 for e in v.values()], list(v))
    return OutputTree(type(v), [None if not isinstance(e, (tuple, list, dict)) else _tree_of(e)
                                for e in v])


def _class_table(cls: type, name: str) -> Any:
    """The ``__dict__`` of the user's class in ``cls``'s MRO that defines ``name`` (the
    module classes of dualgraph aside), or None."""
    from ..nn.modules import Module

    for k in cls.__mro__:
        if k is Module or k is object or k.__module__.split(".")[0] == "dualgraph":
            return None
        if name in vars(k):
            return vars(k)
    return None


def class_code_names(cls: type) -> frozenset | None:
    """The attribute names (and string constants, for ``getattr(self, "name")``) that the
    methods of a user's module class ``cls`` and its bases use, ``__init__`` aside; None
    (every attribute counts) for the library's own module classes."""
    names = _CLASS_NAMES.get(cls)
    if names is not None or cls in _CLASS_NAMES:
        return names
    from ..nn.modules import Module

    out: set | None = set()
    for k in cls.__mro__:
        if k is Module or k is object:
            continue
        if k.__module__.split(".")[0] == "dualgraph":
            out = None
            break
        for name, v in vars(k).items():
            if name == "__init__":
                continue
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            funcs = (v.fget, v.fset, v.fdel) if isinstance(v, property) else (v,)
            for f in funcs:
                code = getattr(f, "__code__", None)
                if code is not None:
                    out |= code_strings(code)
    names = _CLASS_NAMES[cls] = None if out is None else frozenset(out)
    return names


_CLASS_NAMES: dict = {}


def code_strings(code: Any) -> set:
    """The names and string constants of ``code`` and the code nested in it."""
    out: set = set()
    stack = [code]
    while stack:
        c = stack.pop()
        out.update(c.co_names)
        for k in c.co_consts:
            if isinstance(k, str):
                out.add(k)
            elif isinstance(k, tuple):
                out.update(e for e in k if isinstance(e, str))
            elif isinstance(k, types.CodeType):
                stack.append(k)
    return out


def _traced(v: Any, ctx: CallTraceContext) -> bool:
    """Whether ``v`` is a traced value of ``ctx``, or a number the trace read from one
    (``loss.item()``, `symbolic.read_number`), which only the trace can compute."""
    if isinstance(v, Tracer):
        return v._ctx is ctx
    return getattr(type(v), "read_kind", None) is not None and v.trace_value()._ctx is ctx


def _read_in(leaves: list, ctx: CallTraceContext) -> bool:
    """Whether a container's ``leaves`` hold a number the trace read (`_traced`)."""
    return any(not isinstance(e, Tracer) and _traced(e, ctx) for _, e in leaves)


def _holds_number(v: Any, depth: int) -> bool:
    """Whether ``v`` is (or a tuple, list or dict 3 deep holds) a number the trace
    computed from values read as the call begins (`CallTraceContext.replay_numbers`)."""
    if type(v) is TracedNumber:
        return True
    if depth < 3 and type(v) in (tuple, list):
        return any(_holds_number(e, depth + 1) for e in v)
    if depth < 3 and type(v) is dict:
        return any(_holds_number(e, depth + 1) for e in v.values())
    return False


def _holds_tracer(v: Any, ctx: CallTraceContext) -> bool:
    """Whether ``v`` is a tuple, list or dict (nested) holding a traced value of ``ctx``."""
    if isinstance(v, (tuple, list)):
        return any(_traced(e, ctx) or _holds_tracer(e, ctx)
                   for e in v)
    if isinstance(v, dict):
        return _holds_tracer(list(v.values()), ctx)
    return False


def attr_source(ctx: CallTraceContext, t: Tensor) -> tuple | None:
    """``(table, name)`` when the compiled call may read captured tensor ``t`` through the
    one attribute that held it (`plan.AttrTensor`): it does not require grad (its gradient
    would go to the traced tensor) and the trace does not write it in place. (The caller
    also checks that no other guard names it.)"""
    holders = ctx.attr_holders.get(id(t), ())
    if len(holders) != 1 or requires_grad_of(t) or id(t) in ctx.writes:
        return None
    table, name, key, _ = holders[0]
    if key not in ctx.reads:  # a lazy guard (`CallTraceContext.note_reachable`)
        ctx.reads[key] = ctx.lazy_reads[key]
        if isinstance(table, ItemTable):
            tree = ("attr tree", id(table.table), table.name)
            ctx.reads.setdefault(tree, ctx.lazy_reads[tree])
    return table, name


def pin_attr(ctx: CallTraceContext, t: Tensor) -> None:
    """Guard the identity of ``t`` in every attribute that held it: the call reads ``t``
    itself (`plan.CapturedTensor`), so an attribute rebound to another tensor retraces."""
    for table, name, key, what in ctx.attr_holders.get(id(t), ()):
        ctx.reads[key] = Identity(table, name, t, f"{what} was rebound to another tensor")


class RequiresGradWrites:
    """After a compiled call: set the ``requires_grad`` flags the traced program left
    changed (a discriminator frozen and not unfrozen), then run ``then`` (the call's
    `PythonWrites`, or None). A flag the program set and put back is not written."""

    __slots__ = ("flags", "then")

    def __init__(self, flags: tuple, then: Callable[[], None] | None) -> None:
        self.flags = flags  # (tensor, value)
        self.then = then

    def __call__(self) -> None:
        for t, value in self.flags:
            t.requires_grad_(value)
        if self.then is not None:
            self.then()


def restore_requires_grad(ctx: TraceContext) -> tuple:
    """Put back the ``requires_grad`` of every tensor from outside whose flag the trace
    changed, so the call's guards see the flags it began with; return ``(tensor, value)``
    for each the compiled call must set after it runs."""
    out = []
    for t, before in ctx.rg_entry.values():
        after = requires_grad_of(t)
        if after != before:
            t.requires_grad_(before)
            out.append((t, after))
    return tuple(out)


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
