"""``torch._dynamo`` as far as programs touch it: `config` settings, `reset`, `disable`,
`mark_dynamic` and the markers `dg.compiler` has.

`dg.compile` traces with its own tracer, not with Dynamo, so the settings here are
accepted and kept but not read: an untraceable call already falls back to eager with a
warning (what ``suppress_errors = True`` asks for), and each compiled function keeps its own
cache of specializations.

>>> dg._dynamo.config.suppress_errors = True
>>> dg._dynamo.reset()
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .compiler import (
    allow_in_graph,
    assume_constant_result,
    disable,
    is_compiling,
    is_dynamo_compiling,
    reset,
)

__all__ = ["allow_in_graph", "assume_constant_result", "config", "disable", "graph_break",
           "is_compiling", "is_dynamo_compiling", "mark_dynamic", "mark_static",
           "maybe_mark_dynamic", "reset"]

# The settings programs set, with PyTorch's defaults.
_DEFAULTS: dict[str, Any] = {
    "suppress_errors": False, "verbose": False, "cache_size_limit": 8,
    "recompile_limit": 8, "accumulated_cache_size_limit": 256,
    "accumulated_recompile_limit": 256, "capture_scalar_outputs": False,
    "capture_dynamic_output_shape_ops": False, "automatic_dynamic_shapes": True,
    "assume_static_by_default": True, "specialize_int": False, "optimize_ddp": True,
    "error_on_recompile": False, "inline_inbuilt_nn_modules": True,
}


class _Config:
    """``torch._dynamo.config``: the known settings read and write; an unknown one raises
    AttributeError, as PyTorch's does."""

    def __init__(self) -> None:
        object.__setattr__(self, "_values", dict(_DEFAULTS))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"torch._dynamo.config.{name} does not exist") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._values:
            raise AttributeError(f"torch._dynamo.config.{name} does not exist")
        self._values[name] = value

    @contextlib.contextmanager
    def patch(self, changes: dict | None = None, **kwargs: Any) -> Iterator[None]:
        """The settings changed for a ``with`` block."""
        changes = {**(changes or {}), **kwargs}
        old = {k: getattr(self, k) for k in changes}
        for k, v in changes.items():
            setattr(self, k, v)
        try:
            yield
        finally:
            self._values.update(old)


config = _Config()


def mark_dynamic(t: Any, index: Any, *, min: int | None = None,  # noqa: A002
                 max: int | None = None) -> None:  # noqa: A002
    """Accepted: `dg.compile` specializes on shapes (a new shape is a new specialization)."""


maybe_mark_dynamic = mark_dynamic


def mark_static(t: Any, index: Any = None) -> None:
    """Accepted: shapes are static under `dg.compile` already."""


def graph_break() -> None:
    """Accepted: `dg.compile` traces the whole call (there is nothing to break)."""
