"""Saved-tensor hooks: the user's pack/unpack functions around what a tape node keeps.

While `dg.autograd.graph.saved_tensors_hooks(pack, unpack)` is active, every tape node
recorded hands each tensor it saves for backward (its saved inputs, and its output when
the op's gradient reads it) to ``pack`` once, and keeps only what ``pack`` returned. When
backward runs the node, ``unpack`` turns each kept value back into a tensor, every time the
node runs (a ``retain_graph`` backward unpacks again). Only the innermost active pair is
used, as in PyTorch, and ops run inside ``pack`` are recorded without hooks.

A node whose saved values went through the hooks skips the in-place version check on them:
what ``unpack`` returns is the user's, as in PyTorch. An in-place op that overwrites a
tensor its own node saved (``a.mul_(b)`` saves ``a``) hands ``pack`` the tensor when the
node is recorded and, just before the write, a copy of its old value, whose packed form
replaces the first: backward reads the value the op saw, as PyTorch's saved copy of
``self`` gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .autograd import _FREED_MSG, _TENSOR, Function, _make

# Active (pack, unpack) pairs, innermost last.
STACK: list[tuple[Callable[[Any], Any], Callable[[Any], Any]]] = []


class _Packed:
    """What ``pack`` returned for one saved tensor, with the ``unpack`` that reads it and
    the ``source`` tensor it was given."""

    __slots__ = ("value", "unpack", "pack", "source")

    def __init__(self, value: Any, pack: Callable[[Any], Any], unpack: Callable[[Any], Any],
                 source: Any) -> None:
        self.value = value
        self.pack = pack
        self.unpack = unpack
        self.source = source

    def tensor(self) -> Any:
        t = self.unpack(self.value)
        if not isinstance(t, _TENSOR[0]):
            raise TypeError("saved_tensors_hooks: the unpack hook must return a Tensor, but "
                            f"it returned {type(t).__name__}")
        return t


class HookedFunction(Function):
    """A tape node recorded under saved-tensor hooks: it holds its saved values packed and
    unpacks them for the length of its backward."""

    __slots__ = ()

    def apply(self, g: Any) -> tuple:
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        packed, packed_out = self._saved, self._out
        unpacked = []
        for s in packed:
            unpacked.append(s.tensor() if type(s) is _Packed else s)
        self._saved = tuple(unpacked)
        if type(packed_out) is _Packed:
            self._out = np.asarray(packed_out.tensor()._data)
        try:
            return Function.apply(self, g)
        finally:
            self._saved, self._out = packed, packed_out


def _pack(value: Any, pack: Callable, unpack: Callable) -> _Packed:
    # Ops inside ``pack`` record as usual, without hooks (they would pack themselves).
    saved = STACK[:]
    STACK.clear()
    try:
        return _Packed(pack(value), pack, unpack, value)
    finally:
        STACK[:] = saved


def pack_value(t: Any) -> Any:
    """``t`` through the innermost active pack hook (read back with `unpacked`)."""
    pack, unpack = STACK[-1]
    return _pack(t, pack, unpack)


def unpacked(v: Any) -> Any:
    """The tensor a value from `pack_value` stands for (anything else as it is)."""
    return v.tensor() if type(v) is _Packed else v


def repack_overwritten(fn: Function, t: Any, old: Any) -> None:
    """``t``, saved by ``fn``, is about to be overwritten by ``fn``'s own result (an
    in-place op): what was packed from ``t`` is packed again from ``old``, a copy of its
    value before the write, so backward reads the value the op saw."""
    if type(fn) is not HookedFunction:
        return
    saved = []
    for s in fn._saved:
        if type(s) is _Packed and s.source is t:
            s = _pack(old, s.pack, s.unpack)
        saved.append(s)
    fn._saved = tuple(saved)


def pack_node(fn: Function, out: Any) -> None:
    """Pass the values tape node ``fn`` saved (and ``out``, its output tensor, if the node
    keeps its output) through the innermost active pack hook."""
    pack, unpack = STACK[-1]
    tensor = _TENSOR[0]
    fn._saved = tuple([_pack(s, pack, unpack) if isinstance(s, tensor) else s
                       for s in fn._saved])
    if fn._out is not None:
        fn._out = _pack(out if isinstance(out, tensor) else _make(fn._out, False, None),
                        pack, unpack)
    # What unpack returns is the user's value: no version check against the originals.
    fn._versions = ()
    fn.__class__ = HookedFunction
