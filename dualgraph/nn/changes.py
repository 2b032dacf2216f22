"""The change counter of modules' state: one number that every write a compiled call's
module guards read moves.

A compiled call guards, for every module that ran, its submodule table, which parameter
and buffer each name holds, its hooks and its ``training`` flag. Those change only through
`Module.__setattr__`, ``__delattr__``, ``train()``/``eval()``, hook registration and
removal, and writes to the tables themselves (``net[2] = Linear(...)``, ``append``,
``del``, ``functional_call`` swapping parameters in and out): each of those moves
`CHANGES`, so a call that finds the counter where the last call left it checks none of
those guards (`compile.callgen`). Any write counts, to any module: a counter that moved
for another module costs one full check, never a wrong answer.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any

# Values are unique for the process: a guard never sees a value repeat.
_TICKS = itertools.count(1)


class ModuleChanges:
    """The counter: ``v`` takes a new value after every counted write."""

    __slots__ = ("v",)

    def __init__(self) -> None:
        self.v = next(_TICKS)


CHANGES = ModuleChanges()


def changed() -> None:
    """Count a write to a module's state. Called after the write: a reader that reads the
    counter first and the state second then never keeps a stale state under a new value."""
    CHANGES.v = next(_TICKS)


class CountedTable(OrderedDict):
    """An ordered table (a module's parameters, buffers, submodules, hooks) whose every
    change moves `CHANGES`. Reads cost what an ``OrderedDict``'s do."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:
        OrderedDict.__setitem__(self, key, value)
        changed()

    def __delitem__(self, key: Any) -> None:
        OrderedDict.__delitem__(self, key)
        changed()

    def pop(self, *args: Any) -> Any:
        try:
            return OrderedDict.pop(self, *args)
        finally:
            changed()

    def popitem(self, last: bool = True) -> tuple:
        try:
            return OrderedDict.popitem(self, last)
        finally:
            changed()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        try:
            return OrderedDict.setdefault(self, key, default)
        finally:
            changed()

    def update(self, *args: Any, **kwargs: Any) -> None:
        try:
            OrderedDict.update(self, *args, **kwargs)
        finally:
            changed()

    def clear(self) -> None:
        OrderedDict.clear(self)
        changed()

    def move_to_end(self, key: Any, last: bool = True) -> None:
        OrderedDict.move_to_end(self, key, last)
        changed()

    def __ior__(self, other: Any) -> "CountedTable":
        self.update(other)
        return self
