"""Guards: what a call must find as its trace found it to reuse a compiled entry.

Each guard is a small typed object with the value it expects. It reads its value now in
Python (`Guard.now`, for the general call path and for saying why a retrace happened) and
gives the same check as source (`Guard.emit`) for the call path generated per entry
(`callgen`), where all of an entry's guards are one tuple comparison.
"""

from __future__ import annotations

import collections
import functools
import keyword
import operator
from collections.abc import Callable
from typing import Any, Protocol

from ..eager.autograd import HOOK_EPOCH
from ..eager.internal import FIELDS, array_of, requires_grad_of
from ..eager.tensor import Tensor

# A tensor's array and ``requires_grad`` as generated source reads them: attribute reads,
# no call (`internal.FIELDS`).
_DATA, _RG = f".{FIELDS['array']}", f".{FIELDS['requires_grad']}"


class Emitter(Protocol):
    """What a guard needs from the code generator (`callgen`): names for constants, the
    generated name of an argument, and of a captured tensor's (or its ``.grad``'s)
    gathered array, if the call gathers it."""

    def const(self, value: Any, hint: str = "k") -> str: ...

    def arg(self, position: int) -> str: ...

    def captured_array(self, t: Any, grad: bool = False) -> str | None: ...


class Guard:
    """One thing a call must find as its trace found it: ``now(args)`` (the value now, for
    a call's arguments ``args``) equals ``expected``. ``emit`` gives the same check as
    source for the generated call path (`callgen`): ``(expression, expected value)``."""

    __slots__ = ("expected",)

    def now(self, args: tuple) -> Any:
        raise NotImplementedError

    def describe(self, now: Any) -> str:
        raise NotImplementedError

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return f"{gen.const(self.now, 'guard')}(args)", self.expected

    def emit_parts(self, gen: Emitter) -> list[tuple[str, Any]]:
        """`emit` as items of the generated call's one tuple comparison."""
        return [self.emit(gen)]


class CapturedType(Guard):
    """A captured tensor's shape, dtype and ``requires_grad``."""

    __slots__ = ("tensor",)

    def __init__(self, t: Any) -> None:
        self.tensor = t
        self.expected = _type_of(t)

    def now(self, args: tuple) -> tuple:
        return _type_of(self.tensor)

    def describe(self, now: tuple) -> str:
        shape, dtype, rg = self.expected
        if now[2] != rg:
            return f"a captured {shape} tensor has requires_grad={now[2]} (traced with {rg})"
        return f"a captured tensor is {now[0]} {now[1]} instead of {shape} {dtype}"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        t = gen.const(self.tensor, "t")
        d = gen.captured_array(self.tensor) or f"{t}{_DATA}"
        return f"({d}.shape, {d}.dtype, {t}{_RG})", self.expected

    def emit_parts(self, gen: Emitter) -> list[tuple[str, Any]]:
        # Three items of the call's comparison, not a tuple of its own to build and compare.
        t = gen.const(self.tensor, "t")
        d = gen.captured_array(self.tensor) or f"{t}{_DATA}"
        return list(zip((f"{d}.shape", f"{d}.dtype", f"{t}{_RG}"), self.expected))


class CapturedGradType(Guard):
    """The shape, dtype and ``requires_grad`` of a captured tensor's ``.grad`` (a kernel
    input), or None."""

    __slots__ = ("owner",)

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self.expected = _type_of(owner.grad)

    def now(self, args: tuple) -> tuple | None:
        g = self.owner.grad
        return None if g is None else _type_of(g)

    def describe(self, now: tuple | None) -> str:
        shape, dtype, rg = self.expected
        if now is None:
            return (f"the .grad of a {tuple(self.owner.shape)} tensor is None (it was not at "
                    "trace time)")
        if now[2] != rg:
            return f"a captured {shape} .grad has requires_grad={now[2]} (traced with {rg})"
        return f"a captured .grad is {now[0]} {now[1]} instead of {shape} {dtype}"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        t = gen.const(self.owner, "t")
        d = gen.captured_array(self.owner, grad=True) or f"{t}.grad{_DATA}"
        return f"({d}.shape, {d}.dtype, {t}.grad{_RG})", self.expected


class GradNone(Guard):
    """Whether a captured tensor's ``.grad`` is ``None``."""

    __slots__ = ("tensor",)

    def __init__(self, t: Any, expected: bool) -> None:
        self.tensor = t
        self.expected = expected

    def now(self, args: tuple) -> bool:
        return self.tensor.grad is None

    def describe(self, now: bool) -> str:
        state = "None" if now else "set"
        return (f"the .grad of a {tuple(self.tensor.shape)} tensor is {state} (it was not at "
                "trace time)")

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return f"{gen.const(self.tensor, 't')}.grad is None", self.expected


class ArgGradNone(Guard):
    """Whether the ``.grad`` of the tensor passed at argument ``position`` is ``None``: a
    fresh tensor each call is judged, not the one the trace saw."""

    __slots__ = ("position", "shape")

    def __init__(self, t: Any, position: int, expected: bool) -> None:
        self.position = position
        self.shape = t.shape
        self.expected = expected

    def now(self, args: tuple) -> bool:
        a = args[self.position]
        return not isinstance(a, Tensor) or a.grad is None

    def describe(self, now: bool) -> str:
        state = "None" if now else "set"
        return (f"the .grad of argument {self.position} ({tuple(self.shape)} tensor) is {state} "
                f"(it was {'not ' if now else ''}None at trace time)")

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        # The generated call has checked the argument's type: it is this tensor class.
        return f"{gen.arg(self.position)}.grad is None", self.expected


class ArgValues(Guard):
    """The values of the tensor passed at argument ``position`` (dtype and bytes): a trace
    that took them as Python numbers (a packed batch's lengths) holds for them alone."""

    __slots__ = ("position",)

    def __init__(self, position: int, values: Any) -> None:
        self.position = position
        self.expected = (values.dtype, values.tobytes())

    def now(self, args: tuple) -> tuple:
        a = array_of(args[self.position])
        return (a.dtype, a.tobytes())

    def describe(self, now: tuple) -> str:
        return (f"the values of argument {self.position}, which the trace read as numbers "
                "(a packed batch's lengths), changed")


class ArgLayout(Guard):
    """The strides and storage offset of the tensor passed at argument ``position``: a
    trace that read them (``x.stride()``, ``x.is_contiguous()``) holds for that layout."""

    __slots__ = ("position",)

    def __init__(self, position: int, t: Tensor) -> None:
        self.position = position
        self.expected = layout_of(t)

    def now(self, args: tuple) -> tuple:
        return layout_of(args[self.position])

    def describe(self, now: tuple) -> str:
        return (f"argument {self.position} has strides {now[0]} (traced with "
                f"{self.expected[0]}), which the function reads")


class CapturedLayout(Guard):
    """The strides and storage offset of a captured tensor whose layout the trace read
    (``buf.stride()``, ``buf.is_contiguous()``): ``buf.data = other.t()`` retraces."""

    __slots__ = ("tensor",)

    def __init__(self, t: Tensor) -> None:
        self.tensor = t
        self.expected = layout_of(t)

    def now(self, args: tuple) -> tuple:
        return layout_of(self.tensor)

    def describe(self, now: tuple) -> str:
        return (f"a captured {tuple(self.tensor.shape)} tensor has strides {now[0]} and "
                f"storage offset {now[1]} (traced with {self.expected[0]} and "
                f"{self.expected[1]}), which the function reads")

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return f"{gen.const(layout_of, 'layout')}({gen.const(self.tensor, 't')})", self.expected


def layout_of(t: Tensor) -> tuple:
    """``t``'s strides and storage offset, in elements (`ArgLayout`)."""
    return t.stride(), t.storage_offset()


class ArgPlacement(Guard):
    """Where argument ``view`` sits in argument ``base``'s memory (`signature.placement`):
    a trace that read one as a view of the other holds for that placement only."""

    __slots__ = ("base", "view", "place")

    def __init__(self, base: int, view: int, expected: tuple,
                 place: Callable[[Any, Any], tuple]) -> None:
        self.base, self.view, self.place = base, view, place
        self.expected = expected

    def now(self, args: tuple) -> tuple:
        return self.place(args[self.base], args[self.view])

    def describe(self, now: tuple) -> str:
        return (f"argument {self.view} is another view of argument {self.base} (byte offset "
                f"{now[0]} instead of {self.expected[0]})")

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return (f"{gen.const(self.place, 'place')}({gen.arg(self.base)}, "
                f"{gen.arg(self.view)})", self.expected)


class Identity(Guard):
    """``table.get(name)`` (a module's parameter, buffer or submodule table, a function's
    globals) is still ``value``."""

    __slots__ = ("table", "name", "value", "what")

    def __init__(self, table: dict, name: str, value: Any, what: str) -> None:
        self.table, self.name, self.value, self.what = table, name, value, what
        self.expected = True

    def now(self, args: tuple) -> bool:
        return self.table.get(self.name) is self.value

    def describe(self, now: bool) -> str:
        return self.what

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        table, name = gen.const(self.table, "table"), gen.const(self.name, "name")
        if self.value is not None and type(self.table) in _PLAIN_TABLES:
            # A subscript, not a method call; a missing name raises, and the generated
            # call's failed guard read returns MISS (the general path then says why).
            return f"{table}[{name}] is {gen.const(self.value, 'v')}", True
        return f"{table}.get({name}) is {gen.const(self.value, 'v')}", True


# Tables whose subscript is their ``get`` when the name is there (no ``__missing__``).
_PLAIN_TABLES = (dict, collections.OrderedDict)


class AttrType(Guard):
    """A tensor attribute (``table[name]``, a module's ``self.h``) still holds a tensor of
    the traced shape, dtype and ``requires_grad``, whichever tensor it is: the compiled
    call reads the attribute's tensor as an input (`plan.AttrTensor`), so an attribute
    rebound every call (a hidden state carried across calls) reuses the trace. Anything
    but a tensor reads as None."""

    __slots__ = ("table", "name", "what")

    def __init__(self, table: dict, name: str, what: str) -> None:
        self.table, self.name, self.what = table, name, what
        self.expected = attr_type(table, name)

    def now(self, args: tuple) -> tuple | None:
        return attr_type(self.table, self.name)

    def describe(self, now: tuple | None) -> str:
        if now is None or self.expected is None:
            was = "None" if self.expected is None else "a tensor"
            return (f"{self.what} is {'not ' if now is None else ''}a tensor now ({was} at "
                    "trace time)")
        shape, dtype, rg = self.expected
        if now[2] != rg:
            return f"{self.what} has requires_grad={now[2]} (traced with {rg})"
        return f"{self.what} is a {now[0]} {now[1]} tensor (traced with {shape} {dtype})"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return (f"{gen.const(attr_type, 'attr_type')}({gen.const(self.table, 'table')}, "
                f"{gen.const(self.name, 'name')})", self.expected)


def attr_type(table: dict, name: str) -> tuple | None:
    """``table[name]``'s shape, dtype and ``requires_grad``, or None when it holds no
    tensor (`AttrType`)."""
    v = table.get(name)
    return _type_of(v) if isinstance(v, Tensor) else None


class CellIdentity(Guard):
    """A closure variable still names ``value``."""

    __slots__ = ("cell", "value", "what")

    def __init__(self, cell: Any, value: Any, what: str) -> None:
        self.cell, self.value, self.what = cell, value, what
        self.expected = True

    def now(self, args: tuple) -> bool:
        return cell_value(self.cell) is self.value

    def describe(self, now: bool) -> str:
        return self.what

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        # An emptied cell raises ValueError: the generated call then takes the general
        # path, which reads it as None.
        return f"{gen.const(self.cell, 'cell')}.cell_contents is {gen.const(self.value, 'v')}", \
            True


class ItemIdentity(Guard):
    """A list's or tuple's item ``container[index]`` is still ``value`` (a module or an
    optimizer kept in a list a closure names)."""

    __slots__ = ("container", "index", "value", "what")

    def __init__(self, container: Any, index: int, value: Any, what: str) -> None:
        self.container, self.index, self.value, self.what = container, index, value, what
        self.expected = True

    def now(self, args: tuple) -> bool:
        c = self.container
        return len(c) > self.index and c[self.index] is self.value

    def describe(self, now: bool) -> str:
        return self.what

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        # A shortened list raises IndexError: the generated call then takes the general
        # path, which reads it through `now`.
        return (f"{gen.const(self.container, 'c')}[{self.index}] is "
                f"{gen.const(self.value, 'v')}", True)


class PlainValue(Guard):
    """A plain Python value (number, string, tuple of them) read through ``get()``, by its
    `_value_key` (floats by their bits)."""

    __slots__ = ("get", "what")

    def __init__(self, get: Callable[[], Any], value: Any, what: Callable[[Any], str]) -> None:
        self.get, self.what = get, what
        self.expected = value_key(value)

    def now(self, args: tuple) -> Any:
        return value_key(self.get())

    def describe(self, now: Any) -> str:
        return self.what(now)

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return f"value_key({gen.const(self.get, 'get')}())", self.expected


class Value(Guard):
    """Any value read through ``get()``, compared with ``==`` (a Python value a trace
    branched on: ``module.training``, an optimizer's flag; a module's submodule table)."""

    __slots__ = ("get", "what", "keep")

    def __init__(self, get: Callable[[], Any], expected: Any, what: Callable[[Any], str],
                 keep: Any = None) -> None:
        self.get, self.expected, self.what, self.keep = get, expected, what, keep

    def now(self, args: tuple) -> Any:
        return self.get()

    def describe(self, now: Any) -> str:
        return self.what(now)

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        path = attribute_path(self.get)
        if path is not None:  # read inline: a getter call costs as much as the reads
            return f"{gen.const(path[0], 'obj')}.{path[1]}", self.expected
        return f"{gen.const(self.get, 'get')}()", self.expected


def attribute_path(get: Any) -> tuple[Any, str] | None:
    """``(obj, "a.b")`` when ``get()`` is exactly ``obj.a.b``: a `functools.partial` of an
    `operator.attrgetter` of one dotted name, applied to one object; else None."""
    if type(get) is not functools.partial or get.keywords or len(get.args) != 1:
        return None
    if type(get.func) is not operator.attrgetter:
        return None
    names = get.func.__reduce__()[1]
    if len(names) != 1 or not isinstance(names[0], str):
        return None
    if not all(part.isidentifier() and not keyword.iskeyword(part)
               for part in names[0].split(".")):
        return None
    return get.args[0], names[0]


class LeafHooks(Value):
    """The gradient hooks of the leaves a traced backward ran (`autograd.LeafHooksUnchanged`):
    the call compares the hook epoch inline and calls the full check only after it moved."""

    __slots__ = ()

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        get = gen.const(self.get, "hooks")
        return f"({gen.const(HOOK_EPOCH, 'epoch')}[0] == {get}.epoch or {get}())", True


class _PartsGuard(Guard):
    """A guard whose generated check is the tuple of its `emit_parts`."""

    __slots__ = ()

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        parts = self.emit_parts(gen)
        return f"({''.join(e + ', ' for e, _ in parts)})", tuple(x for _, x in parts)


def _same_items(gen: Emitter, d: str, items: tuple) -> list[tuple[str, Any]]:
    """The checks that dict ``d`` (source) holds ``items`` (``(key, Same(value))``): its
    length, then each value by identity (a key gone raises KeyError: the general path
    says why)."""
    return [(f"len({d})", len(items))] + [
        (f"{d}[{gen.const(k, 'name')}] is {gen.const(v.value, 'v')}", True) for k, v in items]


class Defaults(_PartsGuard):
    """A Python function's defaults (`defaults_key`: ``__defaults__`` by identity, the
    items of ``__kwdefaults__`` by identity): a call binds them before the key is made, so
    one after they are set anew must not take an entry's generated call path, which has
    the old ones in it. Identity, as eager mode reads them: a default array or tensor has
    no truth value to compare by."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.expected = defaults_key(fn)

    def now(self, args: tuple) -> tuple:
        return defaults_key(self.fn)

    def describe(self, now: tuple) -> str:
        return f"the defaults of {self.fn.__name__} changed"

    def emit_parts(self, gen: Emitter) -> list[tuple[str, Any]]:
        # Attribute reads and subscripts, no call: a keyword default gone raises KeyError,
        # and the generated call takes the general path, which says why (`now`).
        f = gen.const(self.fn, "fn")
        parts = [(f"{f}.__defaults__ is {gen.const(self.expected[0].value, 'v')}", True)]
        kw = self.expected[1]
        if kw is None:
            return parts + [(f"{f}.__kwdefaults__", None)]
        return parts + _same_items(gen, f"{f}.__kwdefaults__", kw)


class PartialContents(_PartsGuard):
    """What a `functools.partial` binds (`partial_key`): eager mode calls its ``func`` with
    its ``args`` and the items of its ``keywords`` as they are at the call, and the dict
    may be changed in place (``p.keywords["scale"] = 3.0``)."""

    __slots__ = ("partial",)

    def __init__(self, p: functools.partial) -> None:
        self.partial = p
        self.expected = partial_key(p)

    def now(self, args: tuple) -> tuple:
        return partial_key(self.partial)

    def describe(self, now: tuple) -> str:
        return f"what the functools.partial of {_name_of(self.partial.func)} binds changed"

    def emit_parts(self, gen: Emitter) -> list[tuple[str, Any]]:
        p = gen.const(self.partial, "partial")
        func, args, kw = self.expected
        return [(f"{p}.func is {gen.const(func.value, 'v')}", True),
                (f"{p}.args is {gen.const(args.value, 'v')}", True),
                *_same_items(gen, f"{p}.keywords", kw)]


def _name_of(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def partial_key(p: functools.partial) -> tuple:
    """A partial's ``func``, ``args`` and each ``keywords`` value, by identity (`Same`)."""
    return (Same(p.func), Same(p.args), tuple([(k, Same(v)) for k, v in p.keywords.items()]))


class Same:
    """A value a guard compares by identity (``==`` is ``is``), whatever its type's
    ``__eq__`` does (an array's is elementwise)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is Same and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)

    def __repr__(self) -> str:
        return f"Same({type(self.value).__name__} at {id(self.value):#x})"


def kwdefaults_key(fn: Any) -> tuple | None:
    """The items of ``fn.__kwdefaults__``, each value by identity (`Same`); None without."""
    kw = fn.__kwdefaults__
    return None if kw is None else tuple([(k, Same(v)) for k, v in kw.items()])


def defaults_key(fn: Any) -> tuple:
    """A Python function's defaults as eager mode binds them on its next call: the
    ``__defaults__`` tuple and each ``__kwdefaults__`` value, by identity, so setting them
    anew (or an item of ``__kwdefaults__``) is seen, and no value is compared by ``==``."""
    return (Same(fn.__defaults__), kwdefaults_key(fn))


class FunctionCode(Guard):
    """A Python function's code object: ``g.__code__ = h.__code__`` puts other code in the
    same function object, which eager mode runs on its next call (one attribute read)."""

    __slots__ = ("fn", "what")

    def __init__(self, fn: Any, what: str) -> None:
        self.fn, self.what = fn, what
        self.expected = fn.__code__

    def now(self, args: tuple) -> Any:
        return self.fn.__code__

    def describe(self, now: Any) -> str:
        return f"the code of {self.what} was replaced (its __code__ was set)"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return f"{gen.const(self.fn, 'fn')}.__code__", self.expected


class ClassOf(Guard):
    """An object's class (``obj.__class__ = Other`` makes other methods and class
    attributes be read)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.expected = type(obj)

    def now(self, args: tuple) -> type:
        return type(self.obj)

    def describe(self, now: type) -> str:
        return (f"a {self.expected.__name__} object's class was set to {now.__name__} "
                "(its __class__ was set)")

    _hint = "obj"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return f"{gen.const(self.obj, self._hint)}.__class__", self.expected


class ModuleClass(ClassOf):
    """A module's class. The write goes through ``Module.__setattr__``, which moves the
    modules' change counter (`module_counted`)."""

    __slots__ = ()
    _hint = "module"

    def describe(self, now: type) -> str:
        return (f"a {self.expected.__name__} module's class was set to {now.__name__} "
                "(its __class__ was set)")


class InstanceForward(Guard):
    """What a module's own ``forward`` attribute is (``m.forward = other``; None when the
    class's runs). Every such write goes through ``Module.__setattr__`` or
    ``__delattr__``, which move the modules' change counter (`module_counted`)."""

    __slots__ = ("module",)

    def __init__(self, module: Any) -> None:
        self.module = module
        self.expected = module.__dict__.get("forward")

    def now(self, args: tuple) -> Any:
        return self.module.__dict__.get("forward")

    def describe(self, now: Any) -> str:
        return f"the forward of a {type(self.module).__name__} was replaced"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return (f"{gen.const(self.module.__dict__, 'attrs')}.get('forward')",
                self.expected)


class TrainingFlag(Value):
    """A module's ``training`` flag (``train()``/``eval()``), read through ``get()``."""

    __slots__ = ()


class Guards:
    """What must hold for a call to reuse an entry, checked as one tuple comparison."""

    __slots__ = ("items", "expected")

    def __init__(self, items: list[Guard]) -> None:
        self.items = tuple(items)
        self.expected = tuple(g.expected for g in self.items)

    def holds(self, args: tuple = ()) -> bool:
        return tuple([g.now(args) for g in self.items]) == self.expected

    def failure(self, args: tuple = ()) -> str | None:
        """Why the guards fail now (``None`` when they all hold)."""
        for g in self.items:
            now = g.now(args)
            if now != g.expected:
                return g.describe(now)
        return None


class ModuleTable(Guard):
    """A module's submodule table: names and modules, in order. Tuples compare their items
    by identity first and modules do not define ``__eq__``: an identity check."""

    __slots__ = ("module", "table")

    def __init__(self, module: Any) -> None:
        self.module = module
        self.table = module.__dict__["_modules"]
        self.expected = (tuple(self.table), tuple(self.table.values()))

    def now(self, args: tuple) -> tuple:
        return (tuple(self.table), tuple(self.table.values()))

    def describe(self, now: tuple) -> str:
        return f"the submodules of a {type(self.module).__name__} changed (now {list(now[0])})"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        t = gen.const(self.table, "table")
        names, modules = self.expected
        if not names:  # a leaf module: no call at all while it stays a leaf
            return f"not {t}", True
        return f"tuple({t}.items())", tuple(zip(names, modules))


class ModuleAttrs(Guard):
    """A module's plain Python attributes (``Dropout.p``, a user's ``self.scale``), by value:
    missing ones read as a marker."""

    __slots__ = ("module", "names")

    def __init__(self, module: Any, names: tuple) -> None:
        self.module, self.names = module, names
        d = module.__dict__
        self.expected = tuple(snapshot(d[k]) for k in names)

    def only(self, names: tuple) -> ModuleAttrs:
        """This guard on ``names`` (some of its own) alone, expecting what it expects."""
        if names == self.names:
            return self
        g = ModuleAttrs.__new__(ModuleAttrs)
        g.module, g.names = self.module, names
        g.expected = tuple(e for k, e in zip(self.names, self.expected) if k in names)
        return g

    def now(self, args: tuple) -> tuple:
        d = self.module.__dict__
        return tuple([d.get(k, MISSING) for k in self.names])

    def describe(self, now: tuple) -> str:
        k, old, new = next((k, a, b) for k, a, b in zip(self.names, self.expected, now)
                           if a != b)
        return f"{type(self.module).__name__}.{k} is {new!r} (traced with {old!r})"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        return f"({''.join(e + ', ' for e, _ in self.emit_parts(gen))})", self.expected

    def emit_parts(self, gen: Emitter) -> list[tuple[str, Any]]:
        # A subscript makes no call; one that fails raises KeyError, and the call takes
        # the general path, which reads the attribute as missing (`now`).
        d = gen.const(self.module.__dict__, "attrs")
        return [(f"{d}[{gen.const(k, 'name')}]" if e is not MISSING else
                 f"{d}.get({gen.const(k, 'name')}, MISSING)", e)
                for k, e in zip(self.names, self.expected)]


class ModuleHookTable(Guard):
    """A module's hooks (`nn.hooks.ModuleHooks`): which functions, in which order, with
    which flags. Without hooks (the usual case) the generated check is one dict read."""

    __slots__ = ("module",)

    def __init__(self, module: Any) -> None:
        self.module = module
        self.expected = hooks_key(module.__dict__.get("_hooks"))

    def now(self, args: tuple) -> Any:
        return hooks_key(self.module.__dict__.get("_hooks"))

    def describe(self, now: Any) -> str:
        return f"the hooks of a {type(self.module).__name__} changed"

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        if self.expected is None:
            return f"({gen.const(self.module.__dict__, 'attrs')}.get('_hooks') or None)", None
        return super().emit(gen)


class GlobalHookTable(ModuleHookTable):
    """The hooks every module runs (`nn.hooks.GLOBAL`, held by ``owner.__dict__``): without
    any (the usual case) the generated check is one dict's truth value."""

    __slots__ = ()

    def emit(self, gen: Emitter) -> tuple[str, Any]:
        if self.expected is None:
            return f"({gen.const(self.module.__dict__['_hooks'].any, 'hooks')} or None)", None
        return Guard.emit(self, gen)


_HOOK_TABLES = ("forward_pre", "forward", "backward", "backward_pre", "pre_with_kwargs",
                "with_kwargs", "always_call")


def hooks_key(hooks: Any) -> Any:
    """A module's hook table as a guard compares it (None: no hooks)."""
    if not hooks:
        return None
    return tuple(tuple(getattr(hooks, t).items()) for t in _HOOK_TABLES)


MISSING = object()


def module_counted(g: Guard) -> bool:
    """Whether guard ``g`` reads only module state whose every change moves the modules'
    change counter (`nn.changes.CHANGES`): a submodule, parameter or buffer table, a
    module's hooks, its ``training`` flag, its class. The generated call checks those only when the
    counter moved since its last call."""
    from ..nn.changes import CountedTable

    if isinstance(g, ModuleTable | Identity):
        return isinstance(g.table, CountedTable)
    if isinstance(g, ModuleHookTable):
        hooks = g.module.__dict__.get("_hooks")
        return hooks is None or all(isinstance(getattr(hooks, t, None), CountedTable)
                                    for t in _HOOK_TABLES)
    return isinstance(g, TrainingFlag | InstanceForward | ModuleClass)


def _type_of(t: Any) -> tuple:
    d = array_of(t)
    return d.shape, d.dtype, requires_grad_of(t)


def value_key(v: Any) -> Any:
    """A plain value as a guard compares it: floats by their bits (``-0.0`` is not ``0.0``,
    a NaN equals itself), anything else by type and value."""
    if isinstance(v, float):
        return (float, v.hex())
    if type(v) in (tuple, list):  # a list's key is a copy: a change in place is seen
        return (type(v), tuple(value_key(e) for e in v))
    if type(v) is dict:
        return (dict, tuple((k, value_key(e)) for k, e in v.items()))
    return (type(v), v)


def snapshot(v: Any) -> Any:
    """``v`` as a guard keeps it: a copy of a list or dict (of immutable values), so a
    change in place no longer equals it; anything else as it is."""
    if type(v) is list:
        return list(v)
    if type(v) is dict:
        return dict(v)
    return v


def cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # deleted since the trace
        return None
