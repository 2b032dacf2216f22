"""`dg.nn.utils.stateless.functional_call`: the older spelling of `dg.func.functional_call`."""

from __future__ import annotations

from ...func import functional_call

__all__ = ["functional_call"]
