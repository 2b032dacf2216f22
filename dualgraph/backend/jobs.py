"""How many processes compile a job of graphs, decided without importing Numba: the
process calling a tiered compile knows it as it sends the job, before its compile worker
has started (and shares the cores accordingly)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

JOBS_ENV = "DUALGRAPH_COMPILE_JOBS"  # processes compiling at once; 1 turns helpers off
# A job whose graphs hold this many nodes (fused bodies' included) is compiled by
# `compile_jobs` processes, its helpers started before its graphs are lowered: their
# imports then overlap the lowering instead of following it. Generated code runs to 2-3
# lines per node (the model steps), so this is about the 300 lines below which starting
# helpers costs more than they save (`worker.PARALLEL_MIN_LINES`).
LARGE_JOB_NODES = 120


def cores() -> int:
    """The cores this process may run on."""
    return (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1)


def compile_jobs() -> int:
    """How many processes compile at once: ``DUALGRAPH_COMPILE_JOBS``, else `cores`."""
    try:
        return max(1, int(os.environ[JOBS_ENV]))
    except (KeyError, ValueError):
        return max(1, cores())


def graph_nodes(graph: Any) -> int:
    """The nodes of ``graph``, those of its fused bodies included."""
    total = 0
    stack = [graph]
    while stack:
        g = stack.pop()
        total += len(g.nodes)
        stack.extend(n.attrs["body"] for n in g.nodes if n.op == "fused")
    return total


def processes_for(graphs: Iterable[Any]) -> int:
    """How many processes compile a job of ``graphs``: all of `compile_jobs` for a large
    job, one for a small one."""
    jobs = compile_jobs()
    if jobs > 1 and sum(graph_nodes(g) for g in graphs) >= LARGE_JOB_NODES:
        return jobs
    return 1
