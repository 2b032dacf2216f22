"""The Numba backend: one generated ``njit`` function per optimized graph."""

from __future__ import annotations

import operator
import os
import time
import warnings
from typing import Any

import numba
import numpy as np

from ...ir.graph import Graph, zero_d_operands
from ...settings import start_thread_pool
from ..partition import Plan, partition
from . import cache
from .blas import calls_blas, run_single_threaded
from .codegen import Lowered, LoweringError, ishape, lower
from .partcall import make_caller
from .printer import KEEP_LITERAL

__all__ = ["DEFAULT_OPT", "Kernel", "LoweringError", "Part", "build", "compile_graph", "llvm_opt",
           "split_lines"]


class Kernel:
    """A compiled graph.

    ``kernel(*arrays)`` takes one array per graph input and returns the outputs (those not
    written in place). ``run(ins, outs)`` is the unchecked fast path `dg.compile` uses:
    inputs already of the graph's dtypes and ``outs`` from ``new_outputs()``. Its 0-d
    values, inputs and outputs, are 0-d arrays (the arrays their tensors hold) when every
    operand is 0-d (``zero_d``: `zero_d_operands`), ``(1,)`` arrays otherwise.

    A large graph is split (`dualgraph.backend.partition`) into ``parts``, one njit
    function each, run in order; values passed between them live in work arrays like
    the scratch of a one-function kernel. ``lowered`` is then the graph's one-function
    lowering (what `dg.explain` shows), ``source`` the parts' sources, and ``fn`` None.

    ``source`` is the kernel module as a reader wants it (each graph line above its
    code); ``code`` the module as compiled and cached, whose comments name the graph
    nodes only, so that kernels of other sizes share it (`Lowered.code`).
    """

    def __init__(self, graph: Graph, lowered: Lowered, fn: Any, source: str,
                 path: str | None, write_to: dict[int, int], parallel: bool = False,
                 parts: list[Part] | None = None, plan: Plan | None = None,
                 code: str | None = None) -> None:
        self.graph = graph
        self.parallel = parallel
        self.lowered = lowered
        self.fn = fn
        self.source = source
        self.code = source if code is None else code
        self.path = path
        self.numba_seconds = 0.0
        # Of `parts`: how many the last `compile` found compiled already in this process
        # (an identical segment of this or another kernel) and how many it loaded from
        # the disk cache.
        self.shared_parts = 0
        self.loaded_parts = 0
        self.helper_parts = 0  # of those loaded: compiled by helper processes
        self.write_to = write_to
        self.contract = float32_only(graph)
        self.parts = parts or []
        self.plan = plan  # how a split kernel's parts were cut (`partition.Plan`)
        self._in = [(tuple(n.shape), n.dtype) for n in graph.inputs]
        self.zero_d = zero_d_operands(graph)
        self._consts = tuple(lowered.consts) if not self.parts else ()
        self._scratch = [(tuple(shape), dtype) for shape, dtype in lowered.scratch]
        # Work arrays are reused across calls; a call takes a set from the pool and gives
        # it back (list pop/append are atomic, so threads never share a set).
        self._pool: list = []
        self._outs = [(tuple(o.shape) if self.zero_d else ishape(o), o.dtype, not o.shape)
                      for k, o in enumerate(graph.outputs) if k not in write_to]
        if self.parts:
            self._wire(plan)
            # The call path of a split kernel (a one-function kernel's `run` stays as it is).
            self.run = self._run_parts
        # A parallel kernel's products run over Numba's threads (`blas_parallel`), each
        # on one BLAS thread: BLAS's own pool would take turns with Numba's on the same
        # cores. Every call goes through `run` then (`direct_call` offers no other way).
        self.blas_one_thread = parallel and calls_blas(lowered.ir)
        if self.blas_one_thread:
            self.run = run_single_threaded(self.run)

    def _wire(self, plan: Plan) -> None:
        """Each part's arguments as positions in one list: the inputs, the outputs, the
        work arrays (values between parts, then each part's scratch), the constants."""
        n_in, n_out = len(self._in), len(self._outs)
        out_pos = {}
        for k in range(len(self.graph.outputs)):
            if k not in self.write_to:
                out_pos[k] = len(out_pos)
        work: list[tuple] = []
        consts: list = []
        slot: dict[int, int] = {}  # value id -> its position
        for v, (shape, dtype) in plan.values.items():
            slot[v] = -1 - len(work)  # work positions are fixed up below
            work.append((tuple(shape) or (1,), dtype))
        args_of = []
        for part, seg in zip(self.parts, plan.segments):
            args = []
            written = set(seg.write_to.values())
            for k, (kind, j) in enumerate(seg.sources):
                a = j if kind == "in" else slot[j]
                args.append(("f", a, k in written) if k in seg.flat_in else a)
            for c in part.lowered.consts:
                args.append(("c", len(consts)))
                consts.append(c)
            for shape, dtype in part.lowered.scratch:
                args.append(-1 - len(work))
                work.append((tuple(shape), dtype))
            for k, (kind, j) in enumerate(seg.dests):
                if kind == "out":
                    a = n_in + out_pos[j]
                    slot.setdefault(id(self.graph.outputs[j]), n_in + out_pos[j])
                elif kind == "val":
                    a = slot[j]
                else:
                    continue
                args.append(("f", a, True) if k in seg.flat_out else a)
            args_of.append(args)
        base = n_in + n_out
        n_work = len(work)
        flat: dict[int, int] = {}  # position -> the position of its flat view

        def pos(a: Any) -> int:
            if isinstance(a, tuple) and a[0] == "f":
                p = pos(a[1])
                return flat.setdefault(p, base + n_work + len(consts) + len(flat))
            if isinstance(a, tuple):
                return base + n_work + a[1]
            return base - 1 - a if a < 0 else a

        self._scratch = work
        self._part_consts = consts
        self._calls = []
        # Per part: (flat view position, its array's position, written), for `_copying`.
        self._part_flats = [[(pos(a), pos(a[1]), a[2]) for a in args
                             if isinstance(a, tuple) and a[0] == "f"] for args in args_of]
        self._flat = list(flat)  # the arrays passed flat, in the order of their views
        for part, args in zip(self.parts, args_of):
            part.args = tuple(pos(a) for a in args)
            get = (operator.itemgetter(*part.args) if len(part.args) > 1 else
                   (lambda env, i=part.args[0]: (env[i],)))
            self._calls.append((part.fn, get))
        lo, hi = base, base + n_work + len(consts)
        # The flat views kept with the work arrays (`partcall`), in the order of `_flat`.
        self._work_flats = [p for p in self._flat if base <= p < base + n_work]
        # A part whose every argument is the kernel's own has fixed argument types: it
        # may call its compiled entry (`partcall`).
        self._own = [all(lo <= p < hi or p >= hi and base <= self._flat[p - hi] < base + n_work
                         for p in part.args) for part in self.parts]
        self._make_caller({})

    def _make_caller(self, entries: dict[int, Any]) -> None:
        """The generated function `_run_parts` calls (`partcall.make_caller`); part ``k``
        calls ``entries[k]`` when given, its dispatcher otherwise."""
        calls = [(entries.get(k, part.fn), part.args, k in entries)
                 for k, part in enumerate(self.parts)]
        self._entry_flags = [c for c in calls if c[2]]
        self._caller = make_caller(len(self._in), len(self._outs), len(self._scratch),
                                   self._part_consts, self._flat, calls, self._pool,
                                   self._new_work, self._run_general)

    def _entries(self, sig: tuple) -> None:
        """Call the compiled entries of the parts whose arguments are the kernel's own,
        once compiled for ``sig``: their types are those ``sig`` gives them."""
        entries = {}
        for k, (part, s) in enumerate(zip(self.parts, sig)):
            overloads = getattr(part.fn, "overloads", None)  # None: NUMBA_DISABLE_JIT
            compiled = None if overloads is None or not self._own[k] else overloads.get(tuple(s))
            if compiled is not None:
                entries[k] = compiled.entry_point
        self._make_caller(entries)

    @property
    def entry_parts(self) -> int:
        """How many parts the caller runs through their compiled entries (not their
        dispatchers): those whose arguments are all the kernel's own, once compiled."""
        return len(self._entry_flags) if self.parts else 0

    def _new_work(self) -> list:
        """A work set of a split kernel: its work arrays, then the flat views of those
        passed flat (`_work_flats`)."""
        work = self.new_scratch()
        base = len(self._in) + len(self._outs)
        return work + [work[p - base].reshape(-1) for p in self._work_flats]

    def prepare(self, arrays: Any) -> list:
        """Inputs as the kernel takes them: the graph's dtypes and shapes (0-d values as
        ``(1,)`` unless `zero_d`)."""
        if len(arrays) != len(self._in):
            raise TypeError(f"kernel takes {len(self._in)} inputs, got {len(arrays)}")
        out = []
        for a, (shape, dtype) in zip(arrays, self._in):
            a = np.asarray(a)
            if a.shape != shape:
                raise ValueError(f"kernel input of shape {a.shape} for a graph input {shape}")
            if a.dtype != dtype:
                a = a.astype(dtype)
            out.append(a if shape or self.zero_d else a.reshape(1))
        return out

    def new_outputs(self) -> list:
        return [np.empty(s, d) for s, d, _ in self._outs]

    def direct_call(self) -> tuple | None:
        """What a generated call path needs to call a one-function kernel itself, as
        ``run`` does: ``(fn, consts, outputs, pool)``, ``outputs`` the ``(shape, dtype)`` of
        each array ``new_outputs`` makes, ``pool`` the list of free work-array sets
        (``None`` when the kernel takes none; an empty pool: ``new_scratch()`` makes a
        set). ``None`` for a kernel split into parts, and for one whose call sets BLAS's
        threads (`blas_one_thread`)."""
        if self.parts or self.blas_one_thread:
            return None
        return (self.fn, self._consts, [(s, d) for s, d, _ in self._outs],
                self._pool if self._scratch else None)

    def scalar_entry_point(self, dtypes: list) -> Any:
        """The compiled code's own entry (what Numba's dispatcher calls once it has typed
        the arguments) for a call whose every input is an aligned array of a 0-d value
        as `run` takes it (0-d when `zero_d`, else ``(1,)``) that the kernel does not
        write, input ``i`` of dtype ``dtypes[i]``, with this kernel's consts, work arrays
        and outputs. Calling it skips the typing of every argument; the caller guarantees
        those types. None when
        the kernel has an input that is not 0-d, is split or parallel, or is not compiled
        for those types."""
        overloads = getattr(self.fn, "overloads", None)  # None: NUMBA_DISABLE_JIT
        if (self.parts or self.parallel or overloads is None or len(dtypes) != len(self._in)
                or any(s for s, _ in self._in) or self.write_to):
            return None
        try:
            ins = tuple(numba.types.Array(numba.from_dtype(np.dtype(d)), 0 if self.zero_d else 1,
                                          "C") for d in dtypes)
        except Exception:  # noqa: BLE001 - a dtype Numba has no type for has no entry either
            return None
        compiled = overloads.get(self._types(ins))
        return None if compiled is None else compiled.entry_point

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

    def _run_parts(self, ins: list, outs: list) -> None:
        self._caller(ins, outs)

    def _run_general(self, ins: list, outs: list, work: list) -> None:
        """`_run_parts` through the argument list and the dispatchers, copying the
        arrays passed flat that are strided (``work``: a set of `_new_work`)."""
        env = [*ins, *outs, *work[:len(self._scratch)], *self._part_consts]
        n = len(env)
        for p in self._flat:
            x = env[p]
            if not x.flags.c_contiguous:
                self._copying(env[:n])
                return
            env.append(x.reshape(-1))
        for fn, get in self._calls:
            fn(*get(env))

    def _copying(self, env: list) -> None:
        """`_run_parts` when an array a part takes flat is strided: that part gets a flat
        copy, made just before it runs and written back just after when it writes it."""
        env += [None] * len(self._flat)
        for (fn, get), flats in zip(self._calls, self._part_flats):
            for f, p, _ in flats:
                env[f] = env[p].reshape(-1)
            fn(*get(env))
            for f, p, written in flats:
                if written and not env[p].flags.c_contiguous:
                    env[p][...] = env[f].reshape(env[p].shape)

    def _types(self, in_types: tuple) -> tuple:
        """Numba types of every argument position (see `_wire`), or of the one function's
        arguments."""
        if not self.parts:
            return (in_types + tuple(numba.typeof(a) for a in self._consts)
                    + tuple(numba.typeof(a) for a in self.new_scratch())
                    + tuple(numba.typeof(a) for a in self.new_outputs()))
        env = (in_types + tuple(numba.typeof(a) for a in self.new_outputs())
               + tuple(numba.typeof(a) for a in self.new_scratch())
               + tuple(numba.typeof(a) for a in self._part_consts))
        # A flat view keeps its array's flags (a read-only cotangent stays read-only).
        env += tuple(env[p].copy(ndim=1, layout="C") for p in self._flat)
        return tuple(tuple(env[i] for i in p.args) for p in self.parts)

    def signature(self, arrays: Any, prepared: bool = False) -> tuple:
        """The Numba argument types of a call with these inputs (consts and outputs
        included): what `compile` compiles for, and what a compile worker is sent. A split
        kernel's signature is one such tuple per part."""
        ins = list(arrays) if prepared else self.prepare(arrays)
        return self._types(tuple(numba.typeof(a) for a in ins))

    def signature_of(self, inputs: list) -> tuple:
        """`signature` for inputs described as in `array_type`, not given as arrays."""
        return self._types(tuple(array_type(d) for d in inputs))

    def compile(self, arrays: Any = None, prepared: bool = False,
                sig: tuple | None = None) -> float:
        """Compile (or load from Numba's cache) for these inputs, or for the argument types
        ``sig``; returns the seconds. ``prepared``: the arrays are already as `run` takes
        them. A split kernel's distinct parts compile in parallel in helper processes
        when there are cores (`worker.compile_parallel`)."""
        if sig is None:
            sig = self.signature(arrays, prepared)
        t0 = time.perf_counter()
        if not self.parts:
            compile_dispatcher(self.fn, self.path, sig)
        else:
            from .worker import compile_parallel

            tasks = self.compile_tasks(sig)
            self.helper_parts = compile_parallel(tasks) if len(tasks) > 1 else 0
            self.shared_parts = self.loaded_parts = 0
            for part, s in zip(self.parts, sig):
                if tuple(s) in part.fn.overloads:
                    self.shared_parts += 1
                    continue
                hits = cache.hits_misses(part.fn)[0]
                compile_dispatcher(part.fn, part.path, s)
                self.loaded_parts += cache.hits_misses(part.fn)[0] > hits
            self._entries(sig)
        self.numba_seconds = time.perf_counter() - t0
        return self.numba_seconds

    def compile_tasks(self, sig: tuple) -> list[tuple[Any, tuple]]:
        """What compiling for ``sig`` would compile, not load: (this kernel or a part,
        its argument types), one per distinct function."""
        pairs = [(self, sig)] if not self.parts else list(zip(self.parts, sig))
        out, seen = [], set()
        for owner, s in pairs:
            key = (id(owner.fn), tuple(s))
            if key in seen or tuple(s) in owner.fn.overloads:
                continue
            seen.add(key)
            if owner.path is None or not cache.on_disk(owner.fn, s):
                out.append((owner, s))
        return out

    def on_disk(self, sig: tuple) -> bool:
        """Whether Numba's disk cache holds this kernel's machine code for ``sig`` (a
        `compile` would load it, not compile it)."""
        if not self.parts:
            return self.path is not None and cache.on_disk(self.fn, sig)
        return all(p.path is not None and (tuple(s) in p.fn.overloads or
                                           cache.on_disk(p.fn, s))
                   for p, s in zip(self.parts, sig))

    def dispatchers(self) -> list[tuple[str, Any]]:
        """The njit dispatchers this kernel calls, with the digests the kernel cache knows
        them by (one, or one per part)."""
        if not self.parts:
            return [(cache.digest_of(self.code), self.fn)]
        return [(cache.digest_of(p.code), p.fn) for p in self.parts]

    def __call__(self, *arrays: Any) -> tuple:
        outs = self.new_outputs()
        self.run(self.prepare(arrays), outs)
        return tuple(o.reshape(()) if scalar else o for o, (_, _, scalar) in zip(outs, self._outs))


class Part:
    """One njit function of a split kernel: its lowering, module source (as read and as
    compiled: see `Kernel`), dispatcher and file, and its argument positions in the
    kernel's call (see `Kernel._wire`)."""

    __slots__ = ("lowered", "fn", "source", "code", "path", "parallel", "contract", "args")

    def __init__(self, lowered: Lowered, fn: Any, source: str, path: str | None,
                 parallel: bool, contract: bool, code: str | None = None) -> None:
        self.lowered = lowered
        self.fn = fn
        self.source = source
        self.code = source if code is None else code
        self.path = path
        self.parallel = parallel
        self.contract = contract
        self.args: tuple = ()


def compile_dispatcher(fn: Any, path: str | None, sig: tuple) -> None:
    """``fn.compile(sig)`` for a kernel dispatcher defined in ``path``, with Python's
    garbage collector paused (`cache.collector_paused`): a damaged Numba cache file is
    dropped and the kernel compiled again, with a warning."""
    with cache.collector_paused():
        _compile_or_recover(fn, path, sig)


def _compile_or_recover(fn: Any, path: str | None, sig: tuple) -> None:
    try:
        with warnings.catch_warnings(), cache.optimisation(getattr(fn, "_dg_opt", None)):
            # Layout advice on generated code (np.dot on a batch slice) is not
            # actionable for users.
            warnings.simplefilter("ignore", numba.NumbaPerformanceWarning)
            fn.compile(sig)
    except Exception as e:  # noqa: BLE001 - whatever a damaged cache file raises
        if not path or not _drop_numba_cache(path):
            raise
        warnings.warn(f"dualgraph: Numba's cache for {path} was unreadable ({e!r}); "
                      "removed it and compiled again", RuntimeWarning, stacklevel=4)
        with cache.optimisation(getattr(fn, "_dg_opt", None)):
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
    from .worker import compile_graphs

    (kernel,) = compile_graphs([(graph, name, parallel, write_to, inputs)])
    return kernel, kernel.signature_of(inputs)


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
          name: str = "kernel", write_to: dict[int, int] | None = None,
          segment_lines: int | None = None, opt: int | None = None) -> Kernel:
    """Lower ``graph`` and load its njit function (from the caches when possible), or
    its parts' functions when its one function would be large (``segment_lines``: the
    target lines per part, default `split_lines`; 0 never splits). ``opt``: the LLVM
    optimisation level `Kernel.compile` compiles at (default `llvm_opt`).

    ``write_to`` maps output positions to input positions whose arrays receive those
    outputs in place (a training step's parameters and optimizer state).
    """
    write_to = dict(write_to or {})
    opt = llvm_opt() if opt is None else opt
    if parallel:
        # Before Numba's pool first starts (compiling a prange loop starts it): its workers
        # must sleep between loops, not spin against BLAS's threads.
        start_thread_pool()
    lowered = lower(graph, name=name, parallel=parallel, write_to=write_to)
    limit = split_lines() if segment_lines is None else segment_lines
    if limit and lowered.source.count("\n") > SPLIT_FACTOR * limit:
        plan = partition(graph, write_to, _line_weights(graph, lowered), limit,
                         keep=KEEP_LITERAL)
        if plan is not None:
            return _build_parts(graph, lowered, plan, parallel, use_cache, write_to, opt)
    fn, code, path = cache.load(lowered.code, name, parallel, use_cache,
                                contract=float32_only(graph), opt=opt)
    return Kernel(graph, lowered, fn, cache.shown(code, lowered), path, write_to, parallel,
                  code=code)


# The name of every part's function: identical segments of different kernels (a forward
# and a backward, two steps) then have identical sources.
PART_NAME = "part"
SEGMENT_ENV = "DUALGRAPH_SEGMENT_LINES"
# A part holds about this many lines of generated source; a graph is split when its one
# function would be longer than SPLIT_FACTOR times that.
SEGMENT_LINES = 150
SPLIT_FACTOR = 2


OPT_ENV = "DUALGRAPH_LLVM_OPT"


# Measured on the transformer step (`tools/compile_profile.py --opt-levels`): level 2
# compiles in 19% less CPU than Numba's default 3, and the step runs at 1.00x its time
# (level 1: 20% less, 0.98x; level 0: 27% less, 10.6x slower). The packed loops of
# tests/backend/test_vectorize.py hold at 2.
DEFAULT_OPT = 2


def llvm_opt() -> int | None:
    """The LLVM optimisation level kernels are compiled at: ``DUALGRAPH_LLVM_OPT`` (1-3);
    unset, `DEFAULT_OPT`, or None (Numba's own) when the user set ``NUMBA_OPT``. A level is
    part of the kernel's module, so kernels of two levels never share machine code in the
    disk cache. Level 0 is not offered: Numba refused to cache a transformer step's part
    compiled at it ("uses dynamic globals"), and a compile worker hands kernels over
    through that cache."""
    value = os.environ.get(OPT_ENV, "")
    if value in ("1", "2", "3"):
        return int(value)
    return None if os.environ.get("NUMBA_OPT") else DEFAULT_OPT


def split_lines() -> int:
    """The target lines of source per part of a split kernel (``DUALGRAPH_SEGMENT_LINES``;
    0 never splits)."""
    try:
        return max(0, int(os.environ.get(SEGMENT_ENV, SEGMENT_LINES)))
    except ValueError:
        return SEGMENT_LINES


def _line_weights(graph: Graph, lowered: Lowered) -> dict[int, int]:
    """Node id -> the lines of the one-function source its block spans (blocks start at
    their IR comment; nodes folded into another's block count one)."""
    names = graph.names()
    starts = sorted((line, name) for name, line in lowered.line_of_node.items())
    span = {}
    total = lowered.source.count("\n") + 1
    for k, (line, name) in enumerate(starts):
        span[name] = (starts[k + 1][0] if k + 1 < len(starts) else total) - line
    return {id(n): max(1, span.get(names[id(n)], 1)) for n in graph.nodes}


def _build_parts(graph: Graph, lowered: Lowered, plan: Plan, parallel: bool,
                 use_cache: bool, write_to: dict[int, int], opt: int | None = None
                 ) -> Kernel:
    parts = []
    for seg in plan.segments:
        # A flat segment reads every size from its arguments: one function for any shape.
        low = lower(seg.graph, name=PART_NAME, parallel=parallel, write_to=seg.write_to,
                    keep=1 if seg.flat else KEEP_LITERAL)
        contract = float32_only(seg.graph)
        fn, code, path = cache.load(low.code, PART_NAME, parallel, use_cache,
                                    contract=contract, opt=opt)
        parts.append(Part(low, fn, cache.shown(code, low), path, parallel, contract, code))
    paths = [p.path for p in parts]
    source = "\n\n".join(p.source for p in parts)
    return Kernel(graph, lowered, None, source, None if None in paths else paths[0],
                  write_to, parallel, parts, plan, code="\n\n".join(p.code for p in parts))
