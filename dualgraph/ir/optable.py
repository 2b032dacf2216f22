"""The op table the IR reads: each op's type rule and NumPy kernel, by name.

The IR never imports the op registry: `dualgraph.ops` is built on the IR (its nodes and
literals), so the dependency runs one way, ops -> ir, and `dualgraph.ops` installs its
registry here when it is imported. `Graph.verify` and `interpret` look ops up through
`op_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol


class OpRule(Protocol):
    """What the IR needs of an op (the registry's ``OpDef`` is one)."""

    @property
    def impl(self) -> Callable[..., Any]:
        """``impl(*arrays_or_literals, **attrs) -> ndarray``: the reference kernel."""

    @property
    def infer(self) -> Callable[..., tuple]:
        """``infer(*avals_or_literals, **attrs) -> (shape, dtype)``: the type rule."""


_table: Mapping[str, OpRule] | None = None


def install_ops(table: Mapping[str, OpRule]) -> None:
    """Make ``table`` (op name -> rule) the ops `verify` and `interpret` know.

    The mapping is kept, not copied, so ops registered into it later are seen too.
    """
    global _table
    _table = table


def op_table() -> Mapping[str, OpRule]:
    """The installed op table; importing `dualgraph` (or `dualgraph.ops`) installs it."""
    if _table is None:
        raise RuntimeError("no op table installed in the IR: import dualgraph.ops first")
    return _table
