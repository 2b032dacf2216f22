"""The Numba backend: one generated ``njit`` function per optimized graph."""

from __future__ import annotations

import time
from typing import Any

import numba
import numpy as np

from ...ir.graph import Graph
from . import cache
from .codegen import Lowered, LoweringError, lower

__all__ = ["Kernel", "LoweringError", "build"]


class Kernel:
    """A compiled graph: call it with one NumPy array per graph input."""

    def __init__(self, graph: Graph, lowered: Lowered, fn: Any, source: str,
                 path: str | None) -> None:
        self.graph = graph
        self.lowered = lowered
        self.fn = fn
        self.source = source
        self.path = path
        self.numba_seconds = 0.0
        self._in = [(tuple(n.shape), n.dtype) for n in graph.inputs]
        self._scalar_out = [not o.shape for o in graph.outputs]
        self._consts = tuple(lowered.consts)

    def prepare(self, arrays: Any) -> list:
        """Inputs as the kernel takes them: the graph's dtype, C-contiguous, writable, and
        0-d values as shape (1,) (one compiled specialization per graph)."""
        out = []
        for a, (shape, dtype) in zip(arrays, self._in):
            a = np.asarray(a)
            if a.dtype != dtype:
                a = a.astype(dtype)
            if not shape:
                a = a.reshape(1)
            if not a.flags.c_contiguous or not a.flags.writeable:
                a = np.array(a, order="C")
            out.append(a)
        return out

    def compile(self, arrays: Any) -> float:
        """Compile (or load from Numba's cache) for these inputs; returns the seconds."""
        args = self.prepare(arrays) + list(self._consts)
        t0 = time.perf_counter()
        self.fn.compile(tuple(numba.typeof(a) for a in args))
        self.numba_seconds = time.perf_counter() - t0
        return self.numba_seconds

    def __call__(self, *arrays: Any) -> tuple:
        outs = self.fn(*self.prepare(arrays), *self._consts)
        return tuple(o.reshape(()) if s else o for o, s in zip(outs, self._scalar_out))


def build(graph: Graph, parallel: bool = False, use_cache: bool = True,
          name: str = "kernel") -> Kernel:
    """Lower ``graph`` and load its njit function (from the caches when possible)."""
    lowered = lower(graph, name=name, parallel=parallel)
    fn, source, path = cache.load(lowered.source, name, parallel, use_cache)
    return Kernel(graph, lowered, fn, source, path)
