"""What makes a compiled call leave its generated call path, in one list it checks.

Non-empty while a `dg.autograd.graph.saved_tensors_hooks` block (the call then runs its
Python function eagerly, so the hooks see every saved tensor), anomaly mode (the same, so
every backward op is checked for nan) or a `dg.profiler.profile` (the call is timed as a
``CompiledFunction`` row) is active: the call path pays one list check for all.
"""

from __future__ import annotations

__all__ = ["ACTIVE"]

# One entry per active block, named for it ("saved_tensors_hooks", "detect_anomaly",
# "profile").
ACTIVE: list[str] = []
