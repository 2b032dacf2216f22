"""Values baked into the trace, checked now and then.

A NumPy array the function captures (a global, a closure variable) becomes a constant of
the graph, a copy made at trace time (JAX's rule). Other state the trace reads once and
no guard covers is baked in the same way: plain Python objects' attributes (``cfg.lr``),
long or nested lists and dicts, module attributes that are arrays or objects, values read
out of arrays. Checking them on every call would cost as much as reading them, so the
call path checks them on a sample of calls (every `CHECK_EVERY`-th), and warns once per
compiled function and value when they no longer match what the trace saw: the compiled
call still computes with the old values.
"""

from __future__ import annotations

import dis
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# The call path compares the captured arrays with their trace-time copies on every
# CHECK_EVERY-th call of an entry (a counter test on the others).
CHECK_EVERY = 16


@dataclass(slots=True, eq=False)
class BakedArray:
    """A captured array, the copy the graph holds, and where the trace first read it."""

    array: np.ndarray
    snapshot: np.ndarray
    loc: str | None


def changed(b: BakedArray) -> bool:
    """Whether ``b.array`` no longer holds the values (bit for bit) it had when traced."""
    a, s = b.array, b.snapshot
    if a.shape != s.shape or a.dtype != s.dtype:
        return True
    # Bytes, not ``==``: a NaN equals itself and -0.0 differs from 0.0, as the kernel sees.
    return a.tobytes() != s.tobytes()


def check_baked(baked: tuple, warned: set, name: str) -> None:
    """Warn once per compiled function and array (or other baked value) whose values
    changed since the trace."""
    for b in baked:
        if isinstance(b, BakedValue):
            _check_value(b, warned, name)
            continue
        if id(b.array) in warned or not changed(b):
            continue
        warned.add(id(b.array))
        where = f" (read at {b.loc})" if b.loc else ""
        warnings.warn(
            f"dg.compile: {name} captured a NumPy array of shape {b.snapshot.shape}{where} "
            "whose values have changed since it was traced; the compiled call still uses "
            "the values it had then. Pass it as an argument (a tensor or array), or keep "
            "it in a tensor the function captures (read on every call) and change that.",
            RuntimeWarning, stacklevel=4)



# ---------------------------------------------------------------- other baked values
# What a fingerprint follows: items in all (per value), nesting, array bytes compared in
# full (a larger array: its shape, dtype and an evenly spaced sample of its elements).
MAX_ITEMS = 4096
MAX_DEPTH = 6
MAX_BYTES = 1 << 20
_SAMPLE = 4096
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
# Compared by identity: their contents are guarded, read on every call, or code.
_BY_IDENTITY = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                types.ModuleType, type)


@dataclass(slots=True, eq=False)
class BakedValue:
    """A Python value the trace may have read and no guard covers: ``get()`` reads it now,
    ``snapshot`` is its fingerprint after the trace (`fingerprint`, following the
    attributes ``names`` of plain objects); ``what`` names it ("global 'cfg'"), ``load``
    is the name whose first load in ``codes`` is the line the warning names (None: the
    function's first line)."""

    what: str
    get: Callable[[], Any]
    names: frozenset
    snapshot: Any
    codes: tuple
    load: str | None
    path: str  # how the warning writes the value itself (``cfg``, ``Net.table``)
    # ``(id of an object's __dict__, name)`` of attributes not followed: numbers a
    # compiled call reads as it begins and writes back (`capture.EntryNumber`).
    skip: frozenset = frozenset()


def fingerprint(v: Any, names: frozenset, skip: frozenset = frozenset()) -> Any:
    """A comparable summary of ``v`` as a trace may have read it: numbers by their bits,
    containers item by item, arrays by their bytes, plain objects by their attributes
    named in ``names`` (but those in ``skip``: ``(id of the object's __dict__, name)``);
    tensors, modules and optimizers (guarded or read on every call), functions, classes
    and Python modules by identity."""
    budget = [MAX_ITEMS]
    return _fp(v, names, _identity_classes(), 0, budget, skip)


def _identity_classes() -> tuple:
    if not _IDENTITY:
        from ..nn.modules import Module
        from ..ops.mixin import TensorOps
        from ..optim import Optimizer

        _IDENTITY.append((TensorOps, Module, Optimizer))
    return _IDENTITY[0]


_IDENTITY: list = []  # filled on first use: the classes live in higher layers


def _fp(v: Any, names: frozenset, identity: tuple, depth: int, budget: list,
        skip: frozenset) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        return ("more",)
    if isinstance(v, float):
        return (float, v.hex())
    if isinstance(v, _SCALARS):
        return (type(v), v)
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype.str, _array_bytes(v))
    if isinstance(v, np.generic):
        return (type(v), v.tobytes())
    if isinstance(v, identity) or isinstance(v, _BY_IDENTITY) or depth >= MAX_DEPTH:
        return ("id", id(v))
    if isinstance(v, (list, tuple)):
        return ("seq", type(v), tuple(_fp(e, names, identity, depth + 1, budget, skip) for e in v))
    if isinstance(v, dict):
        return ("map", type(v), tuple((_key(k), _fp(e, names, identity, depth + 1, budget, skip))
                                      for k, e in v.items()))
    d = getattr(v, "__dict__", None)
    if isinstance(d, dict):
        return ("obj", type(v), tuple((k, _fp(d[k], names, identity, depth + 1, budget, skip))
                                      for k in sorted(names.intersection(d))
                                      if (id(d), k) not in skip))
    return ("id", id(v))


def _key(k: Any) -> Any:
    return k if isinstance(k, _SCALARS) else ("id", id(k))


def _array_bytes(a: np.ndarray) -> bytes:
    if a.nbytes <= MAX_BYTES:
        return a.tobytes()
    if a.flags.c_contiguous:
        flat = a.reshape(-1)
        return flat[::max(1, flat.size // _SAMPLE)].tobytes()
    return b""


def trivial(snapshot: Any) -> bool:
    """A fingerprint with nothing a change could show (an object none of whose
    attributes the code names, an identity)."""
    return snapshot[0] == "id" or (snapshot[0] == "obj" and not snapshot[2])


def where(old: Any, new: Any, path: str) -> str:
    """The first place (``cfg.lr``, ``table[1][0]``) where two fingerprints differ."""
    if old[0] == new[0] and len(old) == len(new) and old[:2] == new[:2]:
        kind = old[0]
        if kind == "seq" and len(old[2]) == len(new[2]):
            for i, (a, b) in enumerate(zip(old[2], new[2])):
                if a != b:
                    return where(a, b, f"{path}[{i}]")
        if kind in ("map", "obj") and [k for k, _ in old[2]] == [k for k, _ in new[2]]:
            for (k, a), (_, b) in zip(old[2], new[2]):
                if a != b:
                    shown = f".{k}" if kind == "obj" else f"[{k!r}]"
                    return where(a, b, path + shown)
    return path


def _check_value(b: BakedValue, warned: set, name: str) -> None:
    key = ("value", b.what)
    if key in warned:
        return
    try:
        now = fingerprint(b.get(), b.names, b.skip)
    except Exception:  # noqa: BLE001 - a value that cannot be read now is not compared
        return
    if now == b.snapshot:
        return
    warned.add(key)
    line = first_load(b.codes, b.load)
    at = f" (read at {line})" if line else ""
    warnings.warn(
        f"dg.compile: {name} was traced with the value of {b.what}{at}, and "
        f"{where(b.snapshot, now, b.path)} has changed since; the compiled call still "
        "uses the value it had then. Pass the value as an argument (a tensor, or a "
        "Python number marked dynamic=), or keep it in a tensor, a module's number "
        "attribute or a global number, which are read or guarded on every call.",
        RuntimeWarning, stacklevel=5)


def first_load(codes: tuple, name: str | None) -> str | None:
    """``file:line`` of the first instruction in ``codes`` (and the functions nested in
    them) that loads ``name``: a global, a closure variable or an attribute."""
    if name is None:
        return next((f"{c.co_filename}:{c.co_firstlineno}" for c in codes), None)
    stack = list(codes)
    while stack:
        code = stack.pop(0)
        for ins in dis.get_instructions(code):
            if ins.opname.startswith("LOAD_") and ins.argval == name and \
                    ins.positions is not None and ins.positions.lineno is not None:
                return f"{code.co_filename}:{ins.positions.lineno}"
        stack.extend(k for k in code.co_consts if isinstance(k, types.CodeType))
    return None
