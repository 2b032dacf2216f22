"""Which compiled entry a call may use: its signature key, and guards on captured tensors.

A call's key is ``(per-argument keys, (grad mode, default float dtype, autocast format),
keyword layout, shared memory)``, built by `CompiledFunction._key` on the general path;
each entry's generated call path (`callgen`) checks the same key inline. An argument's key is
``(shape, dtype, requires_grad)`` for a tensor, ``(shape, dtype)`` for a NumPy array and
``(type, value)`` for a Python scalar or ``None`` (baked into the graph as a constant).

Tensors the function captures (module parameters, globals) are not arguments: each entry
keeps guards on them (`guards`), checked before the entry is reused.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..eager.internal import array_of
from ..eager.tensor import Tensor
from .baked import BakedValue, fingerprint, trivial
from .capture import (
    MAX_GUARDED_ITEMS,
    CallTraceContext,
    attr_source,
    code_strings,
    function_of,
    object_attr_guards,
    pin_attr,
    plain_value,
    read_names,
    unwritten_key,
    written_guards,
    written_items,
)
from .guards import (
    ArgGradNone,
    CapturedGradType,
    CapturedType,
    CellIdentity,
    Defaults,
    FunctionCode,
    GradNone,
    Guard,
    Guards,
    Identity,
    ItemIdentity,
    ModuleTable,
    PartialContents,
    PlainValue,
    Value,
    cell_value,
    snapshot,
)
from .plan import ArgumentGrad, AttrTensor, CapturedGrad, CapturedTensor

_INT64 = (-(2 ** 63), 2 ** 63)
# Array dtypes no kernel can take: caught before tracing, with the dtype named.
_UNSUPPORTED_KINDS = {"O": "object", "M": "datetime64", "m": "timedelta64", "U": "str",
                      "S": "bytes", "V": "void (structured)", "c": "complex"}


def const_key(a: Any, i: int, keep: dict) -> tuple:
    """The key of a non-tensor argument ``a`` (argument ``i``), baked into the trace as a
    constant: ``(type, value)``.

    Floats are keyed by their bits (``float.hex``): ``-0.0`` and ``0.0`` differ, and a NaN
    equals itself, so it does not retrace on every call. Tuples, lists and dicts are keyed
    by value, element by element. Other hashable objects (strings, dtypes, functions,
    instances) by value as ``==`` sees it, which is identity unless their class says
    otherwise; unhashable ones by identity (``keep`` keeps them alive so ids stay unique):
    the same object reuses the trace even when changed in place.
    """
    if isinstance(a, float):
        return (type(a), a.hex())
    if isinstance(a, bool) or a is None:
        return (type(a), a)
    if isinstance(a, int):
        if not _INT64[0] <= a < _INT64[1]:
            raise OverflowError(f"compiled function: argument {i} is the Python int {a}, "
                                "which does not fit in int64 (the widest integer a kernel "
                                "takes); pass a float or a smaller int")
        return (type(a), a)
    if isinstance(a, np.generic):
        if a.dtype.kind in _UNSUPPORTED_KINDS:
            raise TypeError(f"compiled function: argument {i} is a NumPy "
                            f"{_UNSUPPORTED_KINDS[a.dtype.kind]} scalar, which dualgraph "
                            "cannot compile")
        return (type(a), a.tobytes())
    if isinstance(a, (Tensor, np.ndarray)):
        raise TypeError(f"compiled function: argument {i} holds a tensor or array inside a "
                        "tuple, list or dict; pass each "
                        "tensor as its own argument")
    if isinstance(a, (tuple, list)):
        return (type(a), tuple(const_key(e, i, keep) for e in a))
    if isinstance(a, dict):
        return (type(a), tuple((const_key(k, i, keep), const_key(v, i, keep))
                               for k, v in a.items()))
    try:
        hash(a)
    except TypeError:
        keep[id(a)] = a
        return (type(a), ("id", id(a)))
    if isinstance(getattr(type(a), "__eq__", None), types.FunctionType):
        return (type(a), ByEq(a))
    return (type(a), a)


class ByEq:
    """An argument of a class with its own ``__eq__`` (a dataclass), keyed by ``==`` and
    ``hash``. A comparison that raises or has no truth value (a dataclass holding a
    tensor compares it elementwise) counts as unequal, so the call retraces where eager
    mode would run."""

    __slots__ = ("obj", "_hash")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self._hash = hash(obj)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if type(other) is not ByEq:
            return NotImplemented
        if self.obj is other.obj:
            return True
        try:
            return bool(self.obj == other.obj)
        except Exception:  # noqa: BLE001 - any failure to compare means "not the same"
            return False

    def __repr__(self) -> str:
        return repr(self.obj)


def overlapping(arrays: list) -> tuple | None:
    """The pairs ``(i, j)`` of arrays (tensor and array arguments, in order) whose memory
    overlaps, or ``None``. Arrays with different base arrays cannot overlap, so the usual
    call costs one ``.base`` read per array."""
    roots = [id(a) if a.base is None else id(a.base) for a in arrays]
    if len(set(roots)) == len(roots):
        return None
    pairs = []
    for i in range(len(arrays)):
        for j in range(i + 1, len(arrays)):
            if roots[i] == roots[j] and _shares(arrays[i], arrays[j]):
                pairs.append((i, j))
    return tuple(pairs) or None


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def placement(base: Any, view: Any) -> tuple:
    """Where ``view``'s memory sits in ``base``'s: the byte offset and both strides."""
    b = array_of(base) if isinstance(base, Tensor) else base
    v = array_of(view) if isinstance(view, Tensor) else view
    return (_address(v) - _address(b), b.strides, v.strides)


def basic_view(base: np.ndarray, view: np.ndarray) -> tuple | None:
    """An index (ints, slices with a positive step, ``None``) such that ``base[index]``
    is exactly ``view``'s memory (same start, shape and strides), or None when there is
    none (another dtype, a transposed or reshaped view): ``h(x[1:3], x)`` is traced as
    ``h(x[1:3], x)``, so a write through one is seen through the other."""
    if base.dtype != view.dtype or base.ndim == 0:
        return None
    off = _address(view) - _address(base)
    shape, strides = base.shape, base.strides
    if off < 0 or any(t <= 0 for n, t in zip(shape, strides) if n > 1):
        return None
    start = [0] * base.ndim
    rest = off
    for e in sorted(range(base.ndim), key=lambda e: -strides[e]):
        if shape[e] > 1:
            start[e] = min(rest // strides[e], shape[e] - 1)
            rest -= start[e] * strides[e]
    if rest != 0:
        return None
    index: list = []
    e = 0  # the next base dimension to place
    for n, t in zip(view.shape, view.strides):
        if n == 1:
            index.append(None)
            continue
        # The first base dimension left whose stride divides this one.
        while e < base.ndim and not (shape[e] > 1 and t > 0 and t % strides[e] == 0):
            index.append(start[e])
            e += 1
        if e == base.ndim:
            return None
        k = t // strides[e]
        index.append(slice(start[e], start[e] + (n - 1) * k + 1, k))
        e += 1
    index += start[e:]
    index = tuple(index)
    try:
        got = base[index]
    except IndexError:
        return None
    def placed(a: np.ndarray) -> tuple:  # a size-1 dimension's stride is never used
        return (a.shape, tuple(t for n, t in zip(a.shape, a.strides) if n > 1),
                _address(a))

    return index if placed(got) == placed(view) else None


def _shares(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except np.exceptions.TooHardError:  # undecided quickly: assume they overlap
        return True


def check_arguments(args: tuple) -> None:
    """Before tracing a new signature: arrays of a dtype no kernel takes raise a
    `TypeError` naming it (instead of failing inside Numba)."""
    for i, a in enumerate(args):
        d = array_of(a) if isinstance(a, Tensor) else a
        if not isinstance(d, np.ndarray):
            continue
        dt = d.dtype
        if dt.kind in _UNSUPPORTED_KINDS:
            raise TypeError(f"compiled function: argument {i} is a "
                            f"{_UNSUPPORTED_KINDS[dt.kind]} array ({dt}); compiled "
                            "kernels take bool, integer and floating-point arrays only")
        if dt == np.float16:
            raise TypeError(f"compiled function: argument {i} is float16, which the Numba "
                            "backend does not support; convert it with .astype(np.float32) "
                            "(eager mode runs float16)")
        if not dt.isnative:
            raise TypeError(f"compiled function: argument {i} has the non-native byte order "
                            f"{dt.str!r}; convert it with a.astype(a.dtype.newbyteorder('='))"
                            " (compiled kernels write results in place, so they take "
                            "native-endian arrays only)")


def check_options(parallel: Any, cache: Any, strict: Any, verify: Any, max_retraces: Any,
                  dynamic: Any, tiered: Any = True) -> None:
    """`dg.compile`'s options, checked when it is applied (``parallel`` ends up in the
    generated source, so it must be a real bool)."""
    for name, v in (("parallel", parallel), ("cache", cache), ("strict", strict),
                    ("verify", verify), ("tiered", tiered)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"dg.compile: {name} must be True or False, got {v!r}")
    if isinstance(max_retraces, bool) or not isinstance(max_retraces, (int, np.integer)):
        raise TypeError(f"dg.compile: max_retraces must be an int, got {max_retraces!r}")
    if max_retraces < 0:
        raise ValueError(f"dg.compile: max_retraces must be >= 0, got {max_retraces}")
    if isinstance(dynamic, (str, bytes)) or not hasattr(dynamic, "__iter__"):
        raise TypeError("dg.compile: dynamic must be a sequence of argument positions, "
                        f"got {dynamic!r}")
    for i in dynamic:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"dg.compile: dynamic positions must be ints, got {i!r}")
        if i < 0:
            raise ValueError(f"dg.compile: dynamic positions must be >= 0, got {i}")


def _shown(k: tuple) -> Any:
    """A constant's key back in words: floats from their bits."""
    return float.fromhex(k[1]) if issubclass(k[0], float) else k[1]


class IntLayout(NamedTuple):
    """The layout part of a key whose int arguments at ``ints`` were passed as graph inputs
    (`symbolic`): such a call is traced with those arguments symbolic, so it must not
    share an entry with a call passing a 0-d int64 tensor there."""

    layout: tuple | None
    ints: tuple


def describe_change(old: tuple, new: tuple, args: tuple) -> str:
    """Why a call's signature differs from the previous one, in words."""
    old_args, old_grad, old_layout, old_alias = old
    new_args, new_grad, new_layout, new_alias = new
    if isinstance(new_layout, IntLayout) and not isinstance(old_layout, IntLayout):
        shown = ", ".join(map(str, new_layout.ints))
        return (f"argument {shown}: another int value, traced again with it as an input "
                "of the graph (automatic dynamic)")
    old_layout = old_layout.layout if isinstance(old_layout, IntLayout) else old_layout
    new_layout = new_layout.layout if isinstance(new_layout, IntLayout) else new_layout
    if old_layout != new_layout:
        def kw(layout: tuple | None) -> str:
            return ", ".join(layout[1]) if layout and layout[1] else "none"
        return f"keyword arguments {kw(new_layout)} instead of {kw(old_layout)}"
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
            return (f"argument {i}: Python value {_shown(b)!r} instead of {_shown(a)!r} "
                    "(baked constant)")
        kind = "tensor" if len(a) == 3 else "array"
        for k, what in ((0, "shape"), (1, "dtype")):
            if a[k] != b[k]:
                return f"argument {i} ({kind}): {what} {b[k]} instead of {a[k]}"
        return f"argument {i}: requires_grad={b[2]} instead of {a[2]}"
    if old_alias != new_alias:
        def shown(alias: tuple | None) -> str:
            return ", ".join(f"{i} and {j}" for i, j in alias) if alias else "none"
        return (f"tensor arguments sharing memory: {shown(new_alias)} instead of "
                f"{shown(old_alias)} (counted among tensor and array arguments)")
    if old_grad[2:] != new_grad[2:]:
        def region(fmt: tuple | None) -> str:
            return f"a {fmt[0]} autocast region" if fmt else "no autocast region"
        return f"{region(new_grad[2])} instead of {region(old_grad[2])} (dg.autocast)"
    if old_grad[1] != new_grad[1]:
        return f"default dtype {new_grad[1]} instead of {old_grad[1]} (dg.set_default_dtype)"
    return (f"grad mode {'on' if new_grad[0] else 'off'} instead of "
            f"{'on' if old_grad[0] else 'off'}")


def capture_guards(ctx: CallTraceContext,
                   fn: Callable | None = None) -> tuple[tuple, Guards | None]:
    """Where each captured input comes from, and what must hold to reuse the trace.

    Returns ``(sources, guards)``: per captured kernel input a `plan.Source`, and
    `Guards` (``None`` when nothing is guarded): captured tensors' shapes, dtypes and
    ``requires_grad``, whether a ``.grad`` is ``None``, and what the trace read from
    outside (module attributes and ``training`` flags, the tensors and modules ``fn``'s
    globals and closure name, Python values an optimizer branched on). Call it after the
    trace has put every ``.grad`` back.
    """
    entry_grads = {id(t): before for t, before in ctx.grad_before.values()}
    # Arguments are the call's own tensors: their .grad is judged on the tensor passed
    # now (by position), so a fresh leaf per call reuses the trace.
    arg_index = ctx.arg_index
    sources: list = []
    items: list[Guard] = []
    attrs: list = []  # (source position, tensor) read through an attribute
    for t, _ in ctx.captured:
        owner = next((p for p, _ in ctx.captured + list(ctx.grad_before.values())
                      + [(a, None) for a in ctx.arg_tensors.values()]
                      if entry_grads.get(id(p), p.grad) is t and p is not t), None)
        if owner is not None and id(owner) in arg_index:
            sources.append(ArgumentGrad(arg_index[id(owner)]))
            items.append(ArgGradNone(owner, arg_index[id(owner)], False))
            continue  # the argument's .grad: its type is the argument's (in the key)
        if owner is not None:
            # The array the kernel reads is the .grad's at each call: guard that one.
            sources.append(CapturedGrad(owner))
            items.append(GradNone(owner, False))
            items.append(CapturedGradType(owner))
        else:
            held = attr_source(ctx, t)
            if held is not None:
                attrs.append((len(sources), t))
                sources.append(AttrTensor(*held))
            else:
                pin_attr(ctx, t)
                sources.append(CapturedTensor(t))
                items.append(CapturedType(t))
    # Written without being read (``buf.copy_(x)``): the call writes the result into its
    # array, so it must keep the traced shape and dtype (``buf.data = ...`` or ``resize_``
    # between calls would be written past, or broadcast). Its shape read alone (``x *
    # buf.shape[0]``): the trace baked it in.
    typed = {id(t) for t, _ in ctx.captured} | arg_index.keys()
    for t in [t for t, _ in ctx.writes.values()] + list(ctx.shape_reads.values()):
        if id(t) not in typed:
            typed.add(id(t))
            items.append(CapturedType(t))
    for t in ctx.grad_assumed_none:
        if id(t) in arg_index:
            items.append(ArgGradNone(t, arg_index[id(t)], True))
        else:
            items.append(GradNone(t, True))
    roots = list(ctx.baked_roots)
    names: set = set()
    codes: list = []
    outside: list[Guard] = []
    written = written_items(ctx)
    if fn is not None:
        # The methods of the user's modules that ran are helpers too (`forward` reading a
        # global number).
        modules = [g.module for g in ctx.reads.values()
                   if isinstance(g, ModuleTable)]
        outside = _outside_names(fn, roots, names, codes, modules, ctx.replayed, written)
    if ctx.arg_objects:
        # An object passed as an argument is keyed by identity: the attributes the code
        # names are guarded as they were when the call began (the trace may have set
        # them), and the names it may read that the object lacks are guarded absent.
        strings = set(names).union(*map(code_strings, codes))
        read = read_names(codes) if written else ()
        for i, obj in ctx.arg_objects:
            before = ctx.attrs_before[id(obj)][1]
            outside.extend(object_attr_guards(
                obj, f"argument {i} ({type(obj).__name__})", strings, before,
                {k for k in strings if k.isidentifier()}, replayed=ctx.replayed,
                written=written, read=read))
    for module_id, (guard, kept) in ctx.module_attrs.items():
        # Attributes the module's class never names, but the traced function's code does.
        more = tuple(k for k in guard.names if k in kept or k in names)
        if more != kept:
            ctx.reads[("module attrs", module_id)] = guard.only(more)
    outside = _unpin_written(ctx, outside)
    # A tensor an attribute holds that a global, a closure or a module's table also names
    # is read as itself; the attribute is then guarded by identity.
    pinned = {id(g.value) for g in [*ctx.reads.values(), *outside]
              if isinstance(g, (Identity, CellIdentity))}
    for j, t in attrs:
        if id(t) in pinned:
            sources[j] = CapturedTensor(t)
            pin_attr(ctx, t)
            items.append(CapturedType(t))
    items.extend(ctx.reads.values())
    items.extend(outside)
    ctx.baked.extend(_baked_values(ctx, roots, names, codes))
    sources.extend(make for _, make in ctx.runtime)
    return tuple(sources), (Guards(items) if items else None)


def _unpin_written(ctx: CallTraceContext, outside: list) -> list:
    """``outside`` without the identity guards on tensor attributes the trace sets
    (``self.true_dist = ...`` inside the step). The call writes a new tensor there each
    time, so the old one's identity cannot hold on the next call; what the trace depends
    on is guarded otherwise: the attribute's type (`restore_attrs`), and its data, when
    the trace reads it, through the attribute (`attr_source`) or by identity where it
    must (`pin_attr`). A tensor whose values the trace read into Python (``item()``) keeps
    its identity guard: that guard reads the old tensor's bytes."""
    if not ctx.attr_writes:
        return outside
    written = {(id(obj.__dict__), name) for obj, name, *_ in ctx.attr_writes}
    read = {id(g.keep) for g in ctx.reads.values() if isinstance(g, Value)}
    return [g for g in outside
            if not (type(g) is Identity and isinstance(g.value, Tensor)
                    and (id(g.table), g.name) in written and id(g.value) not in read)]


def _baked_values(ctx: CallTraceContext, roots: list, names: set, codes: list) -> list:
    """The values no guard covers that the trace may have read (`baked.BakedValue`):
    fingerprinted now, after the trace, for the call path to compare now and then.
    ``roots``: ``(what, get, load name, code objects or None)``; ``names``: the
    attribute and global names the function's code (and its helpers', and the modules'
    ``forward``) use, the only attributes of plain objects followed."""
    for _, _, _, own in roots:
        for code in own or ():
            names.update(_code_names(code))
    frozen = frozenset(names)
    # Number attributes replayed on every call (`capture.EntryNumber`): not baked in.
    skip = frozenset(ctx.replayed)
    arrays = {id(b.array) for b in ctx.baked}  # captured arrays: checked as operands
    out = []
    for what, get, load, own in roots:
        try:
            v = get()
            if id(v) in arrays:
                continue
            snap = fingerprint(v, frozen, skip)
        except Exception:  # noqa: BLE001 - a value that cannot be read is not checked
            continue
        if not trivial(snap):
            path = what.split(" ")[-1].strip("'") if what.startswith(("global", "closure")) \
                else what
            out.append(BakedValue(what, get, frozen, snap, tuple(own or codes), load, path,
                                  skip))
    return out


def _code_names(code: Any) -> set:
    """The names ``code`` and the functions nested in it use (globals, attributes)."""
    names: set = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if inspect.iscode(k))
    return names


def _outside_names(fn: Callable, roots: list, names: set, codes: list,
                   modules: list = (), replayed: Any = frozenset(),
                   written: dict | None = None) -> list:
    """Guards on what ``fn`` (and the helper functions it calls by a global or closure
    name, recursively) names as globals or closure variables: the identity of tensors,
    modules and optimizers (rebinding ``w = dg.tensor(...)`` at module level retraces
    instead of running with the old object), and the value of plain Python values
    (numbers, strings, tuples of them), which the trace bakes in. Other values (plain
    objects, long or nested containers, arrays) go to ``roots`` (`_baked_values`); the
    names the visited code uses to ``names``, its code objects to ``codes``. The number
    attributes and globals ``replayed`` are read as the call's entry values, not guarded;
    a short list or dict the compiled call writes into (``written``: `written_items`) is
    guarded by identity, and on the items it does not write only where the code reads it
    (`read_names`: ``history.append(3)`` alone reads nothing)."""
    from ..eager.tensor import Tensor
    from ..nn.modules import Module
    from ..optim import Optimizer

    watched = (Tensor, Module, Optimizer)
    items: list[Guard] = []
    seen: set = set()
    objects: list = []  # plain objects of the user's classes: (object, name, table, kind)
    kept: list = []  # written containers, guarded once every code is seen: (name, v, kind)
    written = written or {}

    def guard(name: str, v: Any, table: Any, kind: str) -> None:
        """``table``: the globals dict holding ``name``, or the closure cell."""
        if (id(table), name) in replayed or kind == "closure variable" and any(
                getattr(g.table, "cell", None) is table for g in replayed.values()):
            return  # a global or closure number every call writes (its type is guarded)
        if isinstance(v, functools.partial):
            # Eager mode calls what the partial binds now (its keywords dict changes in
            # place), and the code of its function.
            items.append(PartialContents(v))
            if _is_user_function(v.func):
                visit(v.func)
        if isinstance(v, watched) or _is_code(v):
            what = f"{kind} {name!r} was rebound"
            items.append(CellIdentity(table, v, what) if kind == "closure variable"
                         else Identity(table, name, v, what))
        elif plain_value(v) and type(v) in (list, dict) and id(v) in written:
            if kind == "closure variable":
                items.append(CellIdentity(table, v, f"{kind} {name!r} was rebound"))
                kept.append((name, v, kind))
            else:
                kept.append((name, v, kind, table))
        elif plain_value(v):
            get = ((lambda: cell_value(table)) if kind == "closure variable"
                   else (lambda: table.get(name)))
            was = snapshot(v)  # a list or dict may change in place after this
            items.append(PlainValue(
                get, v, lambda now: f"{kind} {name!r} is {_shown_value(now)!r} (traced "
                                    f"with {was!r}, a baked-in constant)"))
        elif not isinstance(v, _NOT_BAKED) and not _is_user_function(v):
            get = ((lambda: cell_value(table)) if kind == "closure variable"
                   else (lambda: table.get(name)))
            roots.append((f"{kind} {name!r}", get, name, None))
            if _is_user_namespace(type(v)):
                objects.append((v, name, table, kind))
            held: list[Guard] = []
            _held_identities(v, f"{kind} {name!r}", held, watched, 0)
            if held or not isinstance(v, np.ndarray):
                # Its items are guarded by identity on every call (a model swapped into
                # ``state["model"]`` retraces), so the container must be the same one; an
                # object rebound to another (``cfg = Config(...)`` again) retraces, where
                # a change inside it is found by its fingerprint. A captured array is
                # compared with its copy (`baked`).
                what = f"{kind} {name!r} was rebound"
                items.append(CellIdentity(table, v, what) if kind == "closure variable"
                             else Identity(table, name, v, what))
                items.extend(held)

    root = function_of(fn)

    def visit(f: Any) -> None:
        f = inspect.unwrap(getattr(f, "__func__", f))
        code = getattr(f, "__code__", None)
        if code is None or id(code) in seen or len(seen) > _MAX_HELPERS:
            return
        seen.add(id(code))
        codes.append(code)
        if isinstance(f, types.FunctionType):
            # Eager mode runs the code and defaults a function object holds when it is
            # called: setting them anew (``g.__code__ = h.__code__``) must retrace. The
            # compiled function's own defaults are guarded where the trace binds them.
            what = f"function {f.__qualname__!r}"
            items.append(FunctionCode(f, what))
            if f is not root and (f.__defaults__ or f.__kwdefaults__):
                items.append(Defaults(f))
        used = _code_names(code)  # nested functions and lambdas share f's globals
        names.update(used)
        g = getattr(f, "__globals__", {})
        for name in sorted(used):
            if name not in g:
                continue
            v = g[name]
            guard(name, v, g, "global")
            if _is_user_function(v):
                visit(v)
            elif _is_user_namespace(v):
                # ``config.SCALE``, ``Config.scale``: the attributes of a module or class of
                # the user's program that the code names are read as its globals are.
                table = vars(v)
                for attr in sorted(used & table.keys()):
                    if not isinstance(table[attr], (types.ModuleType, type)):
                        guard(attr, table[attr], table, f"{name} attribute")
        for name, cell in zip(code.co_freevars, f.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            guard(name, v, cell, "closure variable")
            if _is_user_function(v):
                visit(v)

    visit(fn)
    # A user module's ``forward``, and the methods and properties it reads through
    # ``self``, by name.
    for klass in {type(m): None for m in modules}:
        methods: dict = {}
        for c in reversed(klass.__mro__):
            methods.update((k, (v, c)) for k, v in vars(c).items()
                           if _is_user_function(v) or isinstance(v, property)
                           and _is_user_function(v.fget))
        todo, done = ["forward"], set()
        while todo:
            name = todo.pop()
            if name in done or name not in methods:
                continue
            done.add(name)
            method, owner = methods[name]
            if name != "forward":  # the class's forward has a guard of its own
                # A helper method or property replaced on the class (``Net.act = other``)
                # retraces.
                items.append(Identity(owner.__dict__, name, method,
                                      f"{owner.__name__}.{name} was replaced"))
            if isinstance(method, property):
                method = method.fget
            visit(method)
            code = getattr(inspect.unwrap(method), "__code__", None)
            todo.extend(_code_names(code) if code is not None else ())
    read = read_names(codes) if kept or written else ()
    for name, v, kind, *table in kept:
        if table:
            items.extend(written_guards(table[0], name, v, f"{kind} {name!r}", written,
                                        read))
        elif read is None or name in read:
            get = functools.partial(unwritten_key, v, frozenset(written[id(v)]))
            items.append(Value(get, get(), lambda now, name=name, kind=kind: (
                f"{kind} {name!r} changed where the compiled call does not write it")))
    # Their attributes the visited code names that hold plain values are guarded by value
    # (the object itself by identity, since the guards read its own attributes).
    for v, name, table, kind in objects:
        attrs = object_attr_guards(v, name, names, replayed=replayed, written=written,
                                   read=read)
        if attrs:
            what = f"{kind} {name!r} was rebound"
            items.append(CellIdentity(table, v, what) if kind == "closure variable"
                         else Identity(table, name, v, what))
            items.extend(attrs)
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, Module) and \
            _is_user_namespace(type(owner)):
        items.extend(object_attr_guards(owner, type(owner).__name__, names,
                                        replayed=replayed, written=written, read=read))
    return items


def _held_identities(v: Any, where: str, out: list, watched: tuple, depth: int) -> None:
    """Identity guards on the tensors, modules and optimizers a short list, tuple or dict
    ``v`` holds (and the short containers inside it, two levels deep): the trace read
    them once, and a call must not run with the ones it replaced."""
    if not isinstance(v, (list, tuple, dict)) or depth > 1 or len(v) > MAX_GUARDED_ITEMS:
        return
    pairs = v.items() if isinstance(v, dict) else enumerate(v)
    for k, e in pairs:
        here = f"{where}[{k!r}]"
        if isinstance(e, watched) or isinstance(e, (list, tuple, dict)):
            if isinstance(v, dict):
                guard: Guard = Identity(v, k, e, f"{here} was replaced")
            else:
                guard = ItemIdentity(v, k, e, f"{here} was replaced")
            if isinstance(e, watched):
                out.append(guard)
                continue
            before = len(out)
            _held_identities(e, here, out, watched, depth + 1)
            if len(out) > before:
                out.insert(before, guard)


# Named values that are not baked in: functions, classes and Python modules are code.
_NOT_BAKED = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.ModuleType, type)
# How many helper functions `_outside_names` follows (a bound on trace-time work).
_MAX_HELPERS = 64
# Functions of these packages (and of the standard library) are not followed: their
# globals are library state, not the user's program.
_LIBRARIES = frozenset({"dualgraph", "numpy", "numba", "scipy", "torch", "jax"})


def _is_user_function(v: Any) -> bool:
    """A Python function of the user's program (not of dualgraph, NumPy or the standard
    library): a helper whose globals the compiled function depends on. A compiled
    function counts by the function it wraps (called inside a trace, it is inlined)."""
    if not isinstance(v, types.FunctionType):
        v = getattr(v, "__wrapped__", None)
        if not isinstance(v, types.FunctionType):
            return False
    root = (getattr(v, "__module__", None) or "").partition(".")[0]
    return root not in _LIBRARIES and root not in sys.stdlib_module_names


def _is_code(v: Any) -> bool:
    """A function, method, class or module of the user's program that a global or closure
    variable names: the trace ran (or read) it, so rebinding the name (a helper redefined
    in a notebook, ``act = dg.tanh``) must retrace. Library and standard-library modules
    (``np``, ``math``) are not guarded: nothing rebinds them to other code."""
    if isinstance(v, types.ModuleType):
        return _is_user_namespace(v)
    return isinstance(v, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                          type)) or _is_user_function(v)


def _is_user_namespace(v: Any) -> bool:
    """A Python module or class of the user's program (not of a library
    `_is_user_function` skips, nor of the standard library or a builtin)."""
    if isinstance(v, types.ModuleType):
        name = v.__name__
    elif isinstance(v, type):
        name = getattr(v, "__module__", None) or "builtins"
    else:
        return False
    root = name.partition(".")[0]
    return root not in _LIBRARIES and root not in sys.stdlib_module_names


def _shown_value(k: Any) -> Any:
    """The value a `guards.value_key` stands for."""
    if k[0] is float:
        return float.fromhex(k[1])
    if k[0] in (tuple, list):
        return k[0](_shown_value(e) for e in k[1])
    if k[0] is dict:
        return {name: _shown_value(e) for name, e in k[1]}
    return k[1]
