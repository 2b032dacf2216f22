"""Backend flags a compiled function may branch on (``if dg.backends.cudnn.deterministic``):
read while a function is traced, the compiled call is guarded on them, as it is on
``dg.are_deterministic_algorithms_enabled()``, so setting one later runs the other branch,
as eager mode does."""

from __future__ import annotations

import sys
import types
from typing import Any

from ..modes import current_trace


def _note(table: dict, name: str, value: Any, where: str) -> None:
    trace = current_trace()
    if trace is not None:
        trace.guard_value(lambda: table.get(name), value,
                          f"{where}.{name} changed since the trace", table)


class FlagModule(types.ModuleType):
    """A backend module whose flags (the names in its ``_GUARDED``) are guarded when read
    while a function is traced."""

    def __getattribute__(self, name: str) -> Any:
        value = types.ModuleType.__getattribute__(self, name)
        d = types.ModuleType.__getattribute__(self, "__dict__")
        if name in d.get("_GUARDED", ()):
            _note(d, name, value, "dg." + d["__name__"].partition(".")[2])
        return value


class Flags(types.SimpleNamespace):
    """A namespace of flags (``dg.backends.cuda.matmul``) guarded as `FlagModule`'s are."""

    def __init__(self, where: str, **flags: Any) -> None:
        super().__init__(**flags)
        object.__setattr__(self, "_where", where)

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if not name.startswith("_"):
            _note(object.__getattribute__(self, "__dict__"), name, value,
                  object.__getattribute__(self, "_where"))
        return value

    def __repr__(self) -> str:
        d = object.__getattribute__(self, "__dict__")
        return "namespace(" + ", ".join(f"{k}={v!r}" for k, v in d.items()
                                        if not k.startswith("_")) + ")"


def guard_flags(module_name: str, names: tuple) -> None:
    """Make ``names`` of the module ``module_name`` guarded flags (`FlagModule`)."""
    mod = sys.modules[module_name]
    mod._GUARDED = frozenset(names)
    mod.__class__ = FlagModule
