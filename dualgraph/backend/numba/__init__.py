"""The Numba backend: one generated ``njit`` function per optimized graph."""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import numba
import numpy as np

from ...ir.graph import Graph
from . import cache
from .codegen import Lowered, LoweringError, ishape, lower

__all__ = ["Kernel", "LoweringError", "build", "compile_graph"]


class Kernel:
    """A compiled graph.

    ``kernel(*arrays)`` takes one array per graph input and returns the outputs (those not
    written in place). ``run(ins, outs)`` is the unchecked fast path `dg.compile` uses:
    inputs already of the graph's dtypes with 0-d values as shape (1,), and ``outs`` from
    ``new_outputs()``.
    """

    def __init__(self, graph: Graph, lowered: Lowered, fn: Any, source: str,
                 path: str | None, write_to: dict[int, int], parallel: bool = False) -> None:
        self.graph = graph
        self.parallel = parallel
        self.lowered = lowered
        self.fn = fn
        self.source = source
        self.path = path
        self.numba_seconds = 0.0
        self.write_to = write_to
        self._in = [(tuple(n.shape), n.dtype) for n in graph.inputs]
        self._consts = tuple(lowered.consts)
        self._scratch = [(tuple(shape), dtype) for shape, dtype in lowered.scratch]
        # Work arrays are reused across calls; a call takes a set from the pool and gives
        # it back (list pop/append are atomic, so threads never share a set).
        self._pool: list = []
        self._outs = [(ishape(o), o.dtype, not o.shape) for k, o in enumerate(graph.outputs)
                      if k not in write_to]

    def prepare(self, arrays: Any) -> list:
        """Inputs as the kernel takes them: the graph's dtypes, 0-d values as shape (1,)."""
        if len(arrays) != len(self._in):
            raise TypeError(f"kernel takes {len(self._in)} inputs, got {len(arrays)}")
        out = []
        for a, (shape, dtype) in zip(arrays, self._in):
            a = np.asarray(a)
            if a.shape != shape:
                raise ValueError(f"kernel input of shape {a.shape} for a graph input {shape}")
            if a.dtype != dtype:
                a = a.astype(dtype)
            out.append(a.reshape(1) if not shape else a)
        return out

    def new_outputs(self) -> list:
        return [np.empty(s, d) for s, d, _ in self._outs]

    def new_scratch(self) -> list:
        return [np.empty(s, d) for s, d in self._scratch]

    def run(self, ins: list, outs: list) -> None:
        if not self._scratch:
            self.fn(*ins, *self._consts, *outs)
            return
        pool = self._pool
        work = pool.pop() if pool else self.new_scratch()
        try:
            self.fn(*ins, *self._consts, *work, *outs)
        finally:
            pool.append(work)

    def signature(self, arrays: Any, prepared: bool = False) -> tuple:
        """The Numba argument types of a call with these inputs (consts and outputs
        included): what `compile` compiles for, and what a compile worker is sent."""
        ins = list(arrays) if prepared else self.prepare(arrays)
        return tuple(numba.typeof(a) for a in ins + list(self._consts) + self.new_scratch()
                     + self.new_outputs())

    def signature_of(self, inputs: list) -> tuple:
        """`signature` for inputs described as in `array_type`, not given as arrays."""
        return (tuple(array_type(d) for d in inputs) + tuple(numba.typeof(a) for a in
                self._consts) + tuple(numba.typeof(a) for a in self.new_scratch())
                + tuple(numba.typeof(a) for a in self.new_outputs()))

    def compile(self, arrays: Any = None, prepared: bool = False,
                sig: tuple | None = None) -> float:
        """Compile (or load from Numba's cache) for these inputs, or for the argument types
        ``sig``; returns the seconds. ``prepared``: the arrays are already as `run` takes
        them."""
        if sig is None:
            sig = self.signature(arrays, prepared)
        t0 = time.perf_counter()
        compile_dispatcher(self.fn, self.path, sig)
        self.numba_seconds = time.perf_counter() - t0
        return self.numba_seconds

    def on_disk(self, sig: tuple) -> bool:
        """Whether Numba's disk cache holds this kernel's machine code for ``sig`` (a
        `compile` would load it, not compile it)."""
        return self.path is not None and cache.on_disk(self.fn, sig)

    def __call__(self, *arrays: Any) -> tuple:
        outs = self.new_outputs()
        self.run(self.prepare(arrays), outs)
        return tuple(o.reshape(()) if scalar else o for o, (_, _, scalar) in zip(outs, self._outs))


def compile_dispatcher(fn: Any, path: str | None, sig: tuple) -> None:
    """``fn.compile(sig)`` for a kernel dispatcher defined in ``path``: a damaged Numba
    cache file is dropped and the kernel compiled again, with a warning."""
    try:
        with warnings.catch_warnings():
            # Layout advice on generated code (np.dot on a batch slice) is not
            # actionable for users.
            warnings.simplefilter("ignore", numba.NumbaPerformanceWarning)
            fn.compile(sig)
    except Exception as e:  # noqa: BLE001 - whatever a damaged cache file raises
        if not path or not _drop_numba_cache(path):
            raise
        warnings.warn(f"dualgraph: Numba's cache for {path} was unreadable ({e!r}); "
                      "removed it and compiled again", RuntimeWarning, stacklevel=3)
        fn.compile(sig)


def array_type(desc: tuple) -> Any:
    """The Numba type `numba.typeof` gives an array described by ``(dtype str, ndim,
    layout "C" | "F" | "A", readonly)`` (see `dualgraph.compile.tiered.describe`)."""
    dtype, ndim, layout, readonly = desc
    return numba.types.Array(numba.from_dtype(np.dtype(dtype)), ndim, layout,
                             readonly=readonly)


def compile_graph(graph: Graph, name: str, parallel: bool, write_to: dict[int, int],
                  inputs: list) -> tuple[Kernel, tuple]:
    """Build ``graph``'s kernel with the disk cache and compile it for inputs described by
    ``inputs`` (see `array_type`): what the compile worker process runs, through the same
    checked kernel files and signed Numba cache as `build`. Returns the kernel and its
    argument types."""
    kernel = build(graph, parallel, True, name, write_to)
    if kernel.path is None:
        raise RuntimeError("no usable disk kernel cache to hand the kernel over")
    sig = kernel.signature_of(inputs)
    kernel.compile(sig=sig)
    return kernel, sig


def _drop_numba_cache(path: str) -> bool:
    """Delete Numba's index and data files for the kernel module at ``path``."""
    d = os.path.join(os.path.dirname(path), "__pycache__")
    stem = os.path.splitext(os.path.basename(path))[0]
    removed = False
    for name in os.listdir(d) if os.path.isdir(d) else ():
        if name.startswith(stem + "."):
            os.remove(os.path.join(d, name))
            removed = True
    return removed


def float32_only(graph: Graph) -> bool:
    """Whether every float value of ``graph`` (fused bodies included) is float32: such a
    kernel may contract ``a * b + c`` to an FMA, which rounds once instead of twice. A
    float64 kernel, the referee of the numerics tests, keeps NumPy's rounding exactly."""
    seen = False
    stack = [graph]
    while stack:
        g = stack.pop()
        for n in list(g.inputs) + list(g.nodes):
            kind = np.dtype(n.dtype).kind
            if kind in "fc":
                if np.dtype(n.dtype) != np.float32:
                    return False
                seen = True
            if n.op == "fused":
                stack.append(n.attrs["body"])
    return seen


def build(graph: Graph, parallel: bool = False, use_cache: bool = True,
          name: str = "kernel", write_to: dict[int, int] | None = None) -> Kernel:
    """Lower ``graph`` and load its njit function (from the caches when possible).

    ``write_to`` maps output positions to input positions whose arrays receive those
    outputs in place (a training step's parameters and optimizer state).
    """
    write_to = dict(write_to or {})
    if parallel:
        # Numba's OpenMP workers spin after each parallel loop and starve OpenBLAS's threads
        # on the same cores: the batch-1024 MLP step ran 2.5x slower with parallel=True
        # (23 ms) than on one thread (9.4 ms), and 5.9 ms with passive waiting. libgomp
        # reads this when Numba first starts its threads; a user's own setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    lowered = lower(graph, name=name, parallel=parallel, write_to=write_to)
    fn, source, path = cache.load(lowered.source, name, parallel, use_cache,
                                  contract=float32_only(graph))
    return Kernel(graph, lowered, fn, source, path, write_to, parallel)
