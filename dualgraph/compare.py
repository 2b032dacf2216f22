"""`dg.compare`: one program, eager and compiled, side by side.

The report covers numerics (outputs and gradients, eager float32 vs compiled float32, both
refereed by an eager float64 run), time (eager, compile split into trace/passes/Numba with
cold and warm caches, compiled steady state, speed-up, break-even), structure (tape nodes,
traced, optimized, kernels), memory (what eager autograd saves vs the compiled residuals),
a node-by-node diff of the eager tape and the traced graph with what each pass did, and the
fusion decisions. ``compare(..., ablation=True)`` also reruns the compiled path with each
pass switched off.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import passes as P
from .eager import autograd as A
from .eager.export import graph_of
from .eager.internal import array_of, saved_arrays, set_array, set_grad
from .eager.tensor import Tensor, _make
from .errors import TraceError
from .ir.graph import Graph, Node
from .trace.tracer import trace

RANDOM_NOTE = ("random ops: compiled draws a different stream from eager; numerical error is "
               "not reported for outputs (and gradients) that depend on them")


@dataclass
class Diff:
    """Eager vs compiled for one output or gradient, each refereed by float64."""

    name: str
    max_abs_error: float
    max_rel_error: float
    eager_vs_f64: float
    compiled_vs_f64: float
    # Depends on random ops: compiled draws another stream than eager, so the errors are
    # not measured (nan) and not counted in the report's maxima.
    random: bool = False

    @property
    def closer(self) -> str:
        if self.random:
            return "random"
        if self.eager_vs_f64 == self.compiled_vs_f64:
            return "tie"
        return "eager" if self.eager_vs_f64 < self.compiled_vs_f64 else "compiled"


@dataclass
class CompareReport:
    """Everything `compare` measured; ``str()`` is a readable table, ``to_json()`` data."""

    name: str
    numerics: list = field(default_factory=list)
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    eager_time: float = float("nan")
    eager_spread: tuple = (float("nan"), float("nan"))
    compiled_time: float | None = None
    compiled_spread: tuple | None = None
    timings: dict = field(default_factory=dict)
    compile_time: float | None = None
    compile_spread: tuple | None = None
    compile_cache: str | None = None
    compile_cache_source: str | None = None
    compile_breakdown: dict = field(default_factory=dict)
    cold_compile_time: float | None = None
    warm_compile_time: float | None = None
    speedup: float | None = None
    speedup_spread: tuple | None = None
    break_even_calls: float | None = None
    break_even_spread: tuple | None = None
    noisy: bool = False
    noise_reasons: list = field(default_factory=list)
    eager_tape_nodes: int = 0
    traced_nodes: int = 0
    optimized_nodes: int = 0
    backward_nodes: int = 0
    # A scalar loss: forward and backward are one kernel (`value_and_grad`), nothing is
    # kept between them, and `optimized_nodes` counts both.
    value_and_grad: bool = False
    kernels: int = 0
    fused_kernels: int = 0
    eager_saved_bytes: int = 0
    compiled_residual_bytes: int = 0
    recomputed: list = field(default_factory=list)
    diff: list = field(default_factory=list)
    fusion: list = field(default_factory=list)
    ablation: list = field(default_factory=list)
    trace_error: str | None = None
    notes: list = field(default_factory=list)
    threads: int | None = None  # None: single-threaded BLAS, the default

    # ------------------------------------------------------------------- output
    def to_json(self, **kwargs: Any) -> str:
        d = asdict(self)
        d["numerics"] = [dict(asdict(n), closer=n.closer) for n in self.numerics]
        return json.dumps(d, default=_jsonable, **kwargs)

    def __str__(self) -> str:
        out = [f"dg.compare: {self.name}"]
        if self.trace_error:
            out.append(f"  compiled side unavailable, tracing failed:\n    {self.trace_error}")
        out.append("numerics (float32 eager vs compiled; error of each vs an eager float64 run)")
        out.append(f"  {'value':24s} {'max abs':>10s} {'max rel':>10s} {'eager-f64':>10s} "
                   f"{'comp-f64':>10s}  closer")
        for n in self.numerics:
            if n.random:
                out.append(f"  {n.name:24s} {'(random: a different stream, not compared)'}")
                continue
            out.append(f"  {n.name:24s} {n.max_abs_error:10.2e} {n.max_rel_error:10.2e} "
                       f"{n.eager_vs_f64:10.2e} {n.compiled_vs_f64:10.2e}  {n.closer}")
        for note in self.notes:
            out.append(f"  note: {note}")
        out.append("time (median per call, [interquartile range], rounds x calls"
                   + (f"; {self.threads} threads)" if self.threads else ")"))
        out.append(f"  eager            {_timing_line(self.timings.get('eager'), self.eager_time)}")
        if self.compiled_time is not None:
            out.append(f"  compiled         "
                       f"{_timing_line(self.timings.get('compiled'), self.compiled_time)}")
            b = self.compile_breakdown
            lo, hi = self.compile_spread or (self.compile_time, self.compile_time)
            out.append(f"  compile          {self.compile_time:.3f} s {self.compile_cache} "
                       f"[{lo:.3f} .. {hi:.3f}] (trace {b['trace']:.3f}, passes "
                       f"{b['passes']:.3f}, numba {b['numba']:.3f}; "
                       f"{_CACHE_WORDS.get(self.compile_cache_source, '')})")
            if self.cold_compile_time is not None:
                out.append(f"  compile cold/warm cache  {self.cold_compile_time:.3f} s / "
                           f"{self.warm_compile_time:.3f} s")
            lo, hi = self.speedup_spread
            out.append(f"  speed-up         {self.speedup:.2f}x [{lo:.2f}x .. {hi:.2f}x]")
            be = ("never (compiled is not faster)" if self.break_even_calls is None
                  else f"{self.break_even_calls:,.0f} calls "
                  f"({_range_calls(self.break_even_spread)}) with blocking compilation")
            out.append(f"  break-even       {be}")
        if self.noisy:
            out.append(f"  NOISY: {'; '.join(self.noise_reasons)}")
        out.append("structure")
        backward = ("(forward and backward: one value-and-grad kernel)" if self.value_and_grad
                    else f"(+{self.backward_nodes} backward)")
        out.append(f"  eager tape nodes {self.eager_tape_nodes}   traced {self.traced_nodes}   "
                   f"optimized {self.optimized_nodes} {backward}   "
                   f"kernels {self.kernels} (Numba functions; {self.fused_kernels} fused "
                   "loop nests)")
        out.append("memory")
        out.append(f"  eager autograd saves {self.eager_saved_bytes} bytes for backward; "
                   + ("compiled keeps none (its kernel computes the gradients with the value)"
                      if self.value_and_grad else
                      f"compiled keeps {self.compiled_residual_bytes} bytes of residuals"))
        if self.recomputed:
            out.append(f"  recomputed in the backward instead: {', '.join(self.recomputed)}")
        if self.diff:
            out.append("tape <-> trace (what each pass did to each traced node)")
            for row in self.diff:
                out.append(f"  {row['eager'] or '-':14s} {row['traced'] or '-':14s} "
                           f"{row['fate']:34s} {row['loc'] or ''}")
        if self.fusion:
            out.append("fusion")
            for k, g in enumerate(self.fusion):
                out.append(f"  kernel {k} ({g['kind']}): {' -> '.join(g['members'])}; "
                           f"~{g['bytes_saved']} bytes not materialized")
                for r in g["admitted"]:
                    out.append(f"    + {r}")
                for r in g["blocked"]:
                    out.append(f"    - {r}")
        if self.ablation:
            out.append("pass ablation (compiled forward, each pass off in turn)")
            out.append(f"  {'off':14s} {'nodes':>6s} {'kernels':>8s} {'max abs err':>12s} "
                       f"{'time':>12s}")
            for r in self.ablation:
                out.append(f"  {r['off']:14s} {r['nodes']:6d} {r['kernels']:8d} "
                           f"{r['max_abs_error']:12.2e} {_t(r['time']):>12s}")
        return "\n".join(out)


def _t(s: float | None) -> str:
    if s is None or s != s:
        return "n/a"
    return f"{s * 1e6:8.1f} us" if s < 1e-3 else f"{s * 1e3:8.3f} ms"


_CACHE_WORDS = {"numba": "Numba compiled the machine code",
                "disk": "Numba loaded the machine code from the disk cache",
                "memory": "kernels already loaded in this process"}


def _timing_line(t: dict | None, median: float) -> str:
    if not t:
        return _t(median)
    return (f"{_t(t['median'])} [{_t(t['q1']).strip()} .. {_t(t['q3']).strip()}] "
            f"{t['repeats']} x {t['number']}")


def _range_calls(spread: tuple | None) -> str:
    """'90-180' for a break-even range; the high end is open when the compiled function
    may be no faster at all."""
    if not spread:
        return "range n/a"
    lo, hi = spread
    lo_s = "n/a" if lo is None else f"{lo:,.0f}"
    return f"{lo_s}-{'never' if hi is None else f'{hi:,.0f}'}"


def _jsonable(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


# ------------------------------------------------------------------------ running fn
def _grad_leaves(args: tuple, captured: list) -> list[tuple[str, Tensor]]:
    leaves = [(f"grad arg {i}", a) for i, a in enumerate(args)
              if isinstance(a, Tensor) and a.requires_grad]
    leaves += [(f"grad captured {k} {tuple(t.shape)}", t) for k, t in enumerate(captured)
               if t.requires_grad]
    return leaves


def _scalar(out: Any) -> Tensor:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = None
    for o in outs:
        s = o.sum() if o.shape else o
        total = s if total is None else total + s
    return total


def _run(fn: Callable, args: tuple, leaves: list) -> tuple[list, list]:
    """Outputs and gradients (of the sum of the outputs) for one call of ``fn``."""
    saved = [t.grad for _, t in leaves]
    for _, t in leaves:
        set_grad(t, None)
    try:
        out = fn(*args)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        values = [np.array(array_of(o), copy=True) for o in outs]
        grads = []
        if leaves and any(o.requires_grad for o in outs):
            _scalar(outs).backward()
            grads = [None if t.grad is None else np.array(array_of(t.grad), copy=True)
                     for _, t in leaves]
        return values, grads
    finally:
        for (_, t), g in zip(leaves, saved):
            set_grad(t, g)


@contextlib.contextmanager
def _as_float64(args: tuple, captured: list):
    """The same call in float64: float32 arguments copied, captured tensors' data swapped
    (and put back afterwards)."""
    swapped = []
    for t in captured:
        if t.dtype == np.float32:
            swapped.append((t, array_of(t)))
            set_array(t, array_of(t).astype(np.float64))
    try:
        new = []
        for a in args:
            if isinstance(a, Tensor) and a.dtype == np.float32:
                c = _make(array_of(a).astype(np.float64), False, None)
                new.append(c.requires_grad_(True) if a.requires_grad else c)
            elif isinstance(a, np.ndarray) and a.dtype == np.float32:
                new.append(a.astype(np.float64))
            else:
                new.append(a)
        yield tuple(new)
    finally:
        for t, d in swapped:
            set_array(t, d)


def _errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.size == 0:
        return 0.0, 0.0
    d = np.abs(a - b)
    d = np.where(np.isnan(a) & np.isnan(b), 0.0, d)
    # Relative to the reference's scale (normwise): elementwise ratios blow up at the
    # near-zero entries every gradient has.
    scale = float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0))
    return float(np.max(d)), float(np.max(d)) / scale if scale else float(np.max(d))


# --------------------------------------------------------------------------- timing
# The clocks, as module attributes so that tests can make them jittery or busy.
_wall = time.perf_counter
_cpu = time.process_time

NOISY_IQR = 0.25  # a timing whose IQR exceeds this fraction of its median is noisy
BUSY_CPU = 0.8  # single-threaded, a process with less CPU than this per wall second waited
MIN_ROUNDS = 5  # fewer rounds than this give no usable quartiles
_SETTLED_IQR = 0.1  # stop adding rounds (past the minimum) once the IQR is this tight


@dataclass
class Timing:
    """Seconds per call over rounds of ``number`` calls: median and quartiles, and the
    share of the wall time the process had the CPU while it was measured."""

    median: float
    q1: float
    q3: float
    repeats: int
    number: int
    cpu_ratio: float

    @property
    def iqr_ratio(self) -> float:
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0


def _measure(call: Callable[[], Any], repeats: int = MIN_ROUNDS, budget: float = 1.0,
             target: float = 0.01, max_repeats: int = 100) -> Timing:
    """Time ``call``: at least ``repeats`` rounds of enough calls to last ``target`` s,
    then more rounds, within ``budget`` seconds, until there are `MIN_ROUNDS` and the IQR
    has settled."""
    call()
    n = 1
    while True:
        t0 = _wall()
        for _ in range(n):
            call()
        if _wall() - t0 > target or n >= 1 << 16:
            break
        n *= 2
    times: list[float] = []
    w0, c0 = _wall(), _cpu()
    while True:
        t0 = _wall()
        for _ in range(n):
            call()
        times.append((_wall() - t0) / n)
        k = len(times)
        if k >= max_repeats or (k >= repeats and _wall() - w0 > budget):
            break
        if k >= max(repeats, MIN_ROUNDS):
            q1, med, q3 = np.percentile(times, [25, 50, 75])
            if q3 - q1 <= _SETTLED_IQR * med:
                break
    wall, cpu = _wall() - w0, _cpu() - c0
    q1, med, q3 = (float(v) for v in np.percentile(times, [25, 50, 75]))
    return Timing(med, q1, q3, len(times), n, cpu / wall if wall > 0 else 1.0)


def _noise(timings: dict[str, Timing], compile_cpu: float | None) -> list[str]:
    """Why a row's numbers should not be trusted (empty when they can be)."""
    reasons = []
    busy = [f"{name} {t.cpu_ratio:.0%}" for name, t in timings.items()
            if t.cpu_ratio < BUSY_CPU]
    if compile_cpu is not None and compile_cpu < BUSY_CPU:
        busy.append(f"compile {compile_cpu:.0%}")
    if busy:
        reasons.append("busy machine (other processes took the CPU): cpu/wall "
                       + ", ".join(busy))
    for name, t in timings.items():
        if t.repeats < MIN_ROUNDS:
            reasons.append(f"too few repeats: {name} {t.repeats} rounds (< {MIN_ROUNDS}; "
                           "the time budget ran out)")
        if t.iqr_ratio > NOISY_IQR:
            reasons.append(f"{name} spread: IQR {t.iqr_ratio:.0%} of the median")
    return reasons


def _cache_counts() -> dict[str, tuple[int, int]]:
    """Numba's disk-cache (hits, misses) of every kernel loaded in this process."""
    from .backend.numba import cache

    return {d: _hits_misses(fn) for d, fn in list(cache._KERNELS.items())}


def _hits_misses(fn: Any) -> tuple[int, int]:
    st = getattr(fn, "stats", None)
    if st is None:
        return 0, 0
    return sum(st.cache_hits.values()), sum(st.cache_misses.values())


def _cache_source(entry: Any, before: dict[str, tuple[int, int]]) -> str:
    """How the entry's kernels got their machine code: ``numba`` (compiled: a cold cache),
    ``disk`` (loaded from Numba's disk cache) or ``memory`` (already in this process).
    Derived from the Numba dispatchers' own hit/miss counters, before and after."""
    from .backend.numba import cache

    hits = misses = 0
    for k in (entry.kernel, getattr(entry, "bwd_kernel", None)):
        if k is None:
            continue
        h0, m0 = before.get(cache.digest_of(k.source), (0, 0))
        h1, m1 = _hits_misses(k.fn)
        hits, misses = hits + h1 - h0, misses + m1 - m0
    return "numba" if misses else ("disk" if hits else "memory")


_WARMED_UP: float | None = None


def warm_up() -> float:
    """Pay, once per process, for what belongs to no workload: Numba's import, LLVM's
    and Numba's typing machinery's first-use initialisation (~0.6 s on the first compile)
    and the kernel helper modules. Returns the seconds it took (0 after the first time)."""
    global _WARMED_UP
    if _WARMED_UP is not None:
        return 0.0
    t0 = time.perf_counter()
    import math

    import numba

    from .backend.numba import blas, kernels  # noqa: F401 - imported for their set-up

    @numba.njit(cache=False)
    def probe(a):  # pragma: no cover - compiled
        s = 0.0
        for i in range(a.shape[0]):
            s += math.exp(a[i])
        return s

    probe(np.ones(2, np.float32))
    _WARMED_UP = time.perf_counter() - t0
    return _WARMED_UP


def _saved_bytes(outs: list) -> int:
    """Bytes eager autograd keeps alive for backward: saved inputs and outputs."""
    seen: set[int] = set()
    total = 0
    stack = [o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None]
    visited: set[int] = set()
    while stack:
        fn = stack.pop()
        if id(fn) in visited or not isinstance(fn, A.Function):
            continue
        visited.add(id(fn))
        for a in saved_arrays(fn):
            if id(a) not in seen:
                seen.add(id(a))
                total += a.nbytes
        stack.extend(i for i in fn.inputs if isinstance(i, A.Function))
    return total


# ------------------------------------------------------------------- tape <-> trace
def _fates(traced: Graph, optimized: Graph) -> dict[int, str]:
    """uid -> what the passes did to that traced node."""
    present = {n.uid for n in traced.nodes}
    fate = {u: "kept" for u in present}
    for stat in optimized.pass_stats:
        g = stat.graph
        now: dict[int, Node] = {}
        kernels: dict[int, int] = {}
        k = 0
        for n in g.nodes:
            now[n.uid] = n
            if n.op == "fused":
                for m in n.attrs["body"].nodes:
                    kernels[m.uid] = k
                k += 1
        for u in list(present):
            if u in kernels:
                fate[u] = f"fused into kernel {kernels[u]}"
            elif u not in now:
                fate[u] = {"simplify": "rewritten by simplify", "cse": "merged by CSE",
                           "dce": "removed by DCE"}.get(stat.name, f"removed by {stat.name}")
                present.discard(u)
            elif now[u].op == "const" and fate[u] == "kept":
                fate[u] = "folded to a constant"
                present.discard(u)
    return fate


def _tape_trace_diff(tape: Graph, traced: Graph, optimized: Graph) -> list[dict]:
    fates = _fates(traced, optimized)
    ev = [n for n in tape.nodes if n.op != "const"]
    tr = [n for n in traced.nodes if n.op != "const"]
    key = lambda n: (n.op, os.path.basename(n.loc) if n.loc else None)
    sm = difflib.SequenceMatcher(a=[key(n) for n in ev], b=[key(n) for n in tr],
                                 autojunk=False)
    rows = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for a, b in zip(ev[i1:i2], tr[j1:j2]):
                rows.append({"eager": a.op, "traced": b.op, "loc": b.loc,
                             "fate": fates.get(b.uid, "kept")})
            continue
        for a in ev[i1:i2]:
            rows.append({"eager": a.op, "traced": None, "loc": a.loc,
                         "fate": "eager only (not traced)"})
        for b in tr[j1:j2]:
            rows.append({"eager": None, "traced": b.op, "loc": b.loc,
                         "fate": fates.get(b.uid, "kept") + " (not on the outputs' tape)"})
    return rows


def _fusion_report(graph: Graph) -> list[dict]:
    """Each group's members, the rule that admitted each one, the neighbours it blocked."""
    decisions: list[dict] = []
    groups = P.fusion_groups(graph, decisions)
    by_node = {id(d["node"]): d for d in decisions}
    report = []
    for root, members, kind in groups:
        ids = {id(m) for m in members}
        admitted = [f"{m.op}: {by_node[id(m)]['rule']}" for m in members
                    if by_node.get(id(m), {}).get("action") == "join"]
        blocked = []
        for m in members:
            for i in m.inputs:
                if isinstance(i, Node) and id(i) not in ids and id(i) in by_node:
                    d = by_node[id(i)]
                    blocked.append(f"{i.op} (feeds {m.op}): {d['rule']}")
        saved = sum(int(np.prod(m.shape)) * m.dtype.itemsize for m in members if m is not root)
        report.append({"kind": kind, "members": [m.op for m in members],
                       "admitted": admitted, "blocked": sorted(set(blocked)),
                       "bytes_saved": saved})
    return report


# ---------------------------------------------------------------------- compare
@contextlib.contextmanager
def _fresh_cache(directory: str):
    """Compile as a new process would against ``directory``: no in-memory kernels."""
    from .backend.numba import cache

    old_env = os.environ.get("DUALGRAPH_CACHE_DIR")
    old_kernels = dict(cache._KERNELS)
    os.environ["DUALGRAPH_CACHE_DIR"] = directory
    cache._KERNELS.clear()
    import sys

    mods = {k: v for k, v in sys.modules.items() if k.startswith("dualgraph_kernels.")}
    for k in mods:
        del sys.modules[k]
    try:
        yield
    finally:
        cache._KERNELS.clear()
        cache._KERNELS.update(old_kernels)
        sys.modules.update(mods)
        if old_env is None:
            os.environ.pop("DUALGRAPH_CACHE_DIR", None)
        else:
            os.environ["DUALGRAPH_CACHE_DIR"] = old_env


def compare(fn: Callable, *args: Any, name: str | None = None, repeats: int = 5,
            cold_warm: bool = True, ablation: bool = False, budget: float = 1.0,
            threads: int | None = None, compiled: bool = True) -> CompareReport:
    """Run ``fn(*args)`` eagerly and compiled and report the differences (see `_compare`).

    Each timing takes at least ``repeats`` rounds, and more (within ``budget`` seconds)
    until its interquartile range settles; a row with a wide spread, too few rounds or a
    busy machine is flagged ``noisy`` with its reasons. The process's one-off start-up
    costs (`warm_up`) are paid before anything is timed.

    Timings are single-threaded: NumPy (eager) and SciPy (whose BLAS the compiled kernels
    call) each bundle an OpenBLAS thread pool, and two pools spinning on a small machine
    slow each other down by orders of magnitude, which would measure the machine, not
    dualgraph. ``threads=N`` sets every thread pool (BLAS, OpenMP, Numba's) to ``N``
    instead, and compiles with ``parallel=True`` when ``N > 1``. ``compiled=False``
    measures the eager side only (no tracing, no compile).
    """
    from threadpoolctl import threadpool_limits

    warm_up()
    if threads is None:
        with threadpool_limits(limits=1, user_api="blas"):
            return _compare(fn, *args, name=name, repeats=repeats, cold_warm=cold_warm,
                            ablation=ablation, budget=budget, compiled=compiled)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    with threadpool_limits(limits=threads), _numba_threads(threads) as n:
        report = _compare(fn, *args, name=name, repeats=repeats, cold_warm=cold_warm,
                          ablation=ablation, budget=budget, compiled=compiled,
                          parallel=threads > 1)
    report.threads = threads
    if n < threads:
        report.notes.append(f"Numba has {n} threads at most in this process "
                            f"(NUMBA_NUM_THREADS), not {threads}")
    return report


@contextlib.contextmanager
def _numba_threads(n: int):
    """Numba's thread count set to ``n`` (capped at its pool's size), then restored;
    yields the count in effect."""
    import numba

    old = numba.get_num_threads()
    k = min(n, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(k)
    try:
        yield k
    finally:
        numba.set_num_threads(old)


def _compare(fn: Callable, *args: Any, name: str | None = None, repeats: int = 5,
             cold_warm: bool = True, ablation: bool = False, budget: float = 1.0,
             compiled: bool = True, parallel: bool = False) -> CompareReport:
    """Run ``fn(*args)`` eagerly and compiled and report the differences.

    Gradients are of the sum of the outputs, for the arguments that require grad and the
    tensors ``fn`` captures that do (module parameters). ``fn`` should be free of side
    effects: it is called many times. A function that cannot be traced still gets its
    eager side, with the `TraceError` in ``report.trace_error``.

    >>> report = dg.compare(lambda x: (x * 2).exp().sum(), dg.randn(100, requires_grad=True))
    >>> report.speedup, report.max_abs_error            # doctest: +SKIP
    """
    from .compile import CompiledFunction
    from .compile.random_state import random_outputs

    report = CompareReport(name or getattr(fn, "__name__", type(fn).__name__))
    traced = None
    try:
        traced = trace(fn, *args) if compiled else None
    except TraceError as e:
        report.trace_error = str(e)
    captured = list(traced.captured) if traced is not None else []
    leaves = _grad_leaves(args, captured)
    # Eager, with user locations on the tape for the diff.
    with A.record_locations():
        out = fn(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    tape = graph_of(*outs)
    report.eager_tape_nodes = sum(1 for n in tape.nodes if n.op != "const")
    report.eager_saved_bytes = _saved_bytes(outs)
    e_vals, e_grads = _run(fn, args, leaves)

    def eager_call() -> None:
        _run(fn, args, leaves)

    timings = {"eager": _measure(eager_call, repeats, budget)}
    report.eager_time = timings["eager"].median
    report.eager_spread = (timings["eager"].q1, timings["eager"].q3)
    report.timings = {k: asdict(t) for k, t in timings.items()}
    if traced is None:
        _flag(report, timings, None)
        return report
    with _as_float64(args, captured) as args64:
        leaves64 = _grad_leaves(args64, captured)
        r_vals, r_grads = _run(fn, args64, leaves64)
    # Blocking: the compile is measured.
    cf = CompiledFunction(fn, tiered=False, parallel=parallel)
    before = _cache_counts()
    w0, c0 = _wall(), _cpu()
    c_vals, c_grads = _run(cf, args, leaves)
    w1, c1 = _wall(), _cpu()
    compile_cpu = min(1.0, (c1 - c0) / (w1 - w0)) if w1 > w0 else 1.0
    st = cf.stats
    report.compile_time = st.compile_seconds
    # One compile, one measurement: had the process had the CPU throughout, it would
    # have taken as little as its CPU time (Numba and LLVM compile on one thread).
    report.compile_spread = (report.compile_time * compile_cpu, report.compile_time)
    report.compile_cache_source = _cache_source(cf.entries()[0], before)
    report.compile_cache = "cold" if report.compile_cache_source == "numba" else "warm"
    report.compile_breakdown = {"trace": st.trace_seconds, "passes": st.passes_seconds,
                                "numba": st.numba_seconds}
    names = [f"output {k}" for k in range(len(e_vals))] + [n for n, _ in leaves]
    # Random ops draw NumPy's stream eagerly and a counter-based one compiled: values that
    # depend on them differ by design. Gradients are counted as random when any output is
    # (a dropout mask enters the backward).
    random = random_outputs(traced)
    random += [any(random)] * len(leaves)
    if any(random):
        report.notes.append(RANDOM_NOTE)
    for k, (nm, e, c, r) in enumerate(zip(names, e_vals + e_grads, c_vals + c_grads,
                                          r_vals + r_grads)):
        if e is None or c is None:
            continue
        if random[k]:
            nan = float("nan")
            report.numerics.append(Diff(nm, nan, nan, nan, nan, random=True))
            continue
        ab, rel = _errors(c, e)
        report.numerics.append(Diff(nm, ab, rel, _errors(e, r)[0], _errors(c, r)[0]))
    measured = [d for d in report.numerics if not d.random]
    report.max_abs_error = max((d.max_abs_error for d in measured), default=0.0)
    report.max_rel_error = max((d.max_rel_error for d in measured), default=0.0)

    def compiled_call() -> None:
        _run(cf, args, leaves)

    timings["compiled"] = c = _measure(compiled_call, repeats, budget)
    e = timings["eager"]
    report.timings = {k: asdict(t) for k, t in timings.items()}
    report.compiled_time, report.compiled_spread = c.median, (c.q1, c.q3)
    report.speedup = e.median / c.median
    # The interquartile ranges paired worst with best.
    report.speedup_spread = (e.q1 / c.q3, e.q3 / c.q1)
    report.break_even_calls, report.break_even_spread = _break_even(
        report.compile_time, report.compile_spread, e, c)
    _flag(report, timings, compile_cpu)
    entry = cf.entries()[0]
    report.traced_nodes = P.op_count(traced)
    report.optimized_nodes = P.op_count(entry.optimized)
    report.value_and_grad = entry.joint
    if entry.backward_graph is not None:
        report.backward_nodes = P.op_count(entry.backward_graph)
        d = entry.differentiated
        report.compiled_residual_bytes = d.residual_bytes
        report.recomputed = list(d.recomputed)
    # Numba functions compiled (forward and backward), and the fused groups inside them.
    report.kernels = st.kernels
    report.fused_kernels = sum(1 for g in (entry.optimized, entry.backward_graph)
                               if g is not None for n in g.nodes if n.op == "fused")
    optimized = P.optimize(traced)
    report.diff = _tape_trace_diff(tape, traced, optimized)
    report.fusion = _fusion_report(optimized.pass_stats.before("fuse"))
    if cold_warm:
        with tempfile.TemporaryDirectory() as d:
            for attr in ("cold_compile_time", "warm_compile_time"):
                with _fresh_cache(d):
                    f2 = CompiledFunction(fn, tiered=False, parallel=parallel)
                    _run(f2, args, leaves)
                    setattr(report, attr, f2.stats.compile_seconds)
    if ablation:
        report.ablation = _ablation(traced, args, e_vals, repeats, budget)
    return report


def _break_even(compile_time: float, compile_spread: tuple, e: Timing, c: Timing
                ) -> tuple[float | None, tuple | None]:
    """Calls after which blocking compilation has paid for itself, and its range from the
    compile time's range and the per-call interquartile ranges (``None`` at the high end:
    the compiled function may be no faster, so it may never pay)."""
    gain = e.median - c.median
    if gain <= 0:
        return None, None
    best, worst = e.q3 - c.q1, e.q1 - c.q3
    lo = compile_spread[0] / best
    hi = compile_spread[1] / worst if worst > 0 else None
    return compile_time / gain, (lo, hi)


def _flag(report: CompareReport, timings: dict[str, Timing], compile_cpu: float | None
          ) -> None:
    report.noise_reasons = _noise(timings, compile_cpu)
    report.noisy = bool(report.noise_reasons)


def _ablation(traced: Graph, args: tuple, eager_values: list, repeats: int,
              budget: float = 1.0) -> list[dict]:
    """The forward graph compiled with each pass switched off in turn (and with none off)."""
    from .backend.numba import build
    from .compile.random_state import random_outputs

    random = random_outputs(traced)  # another stream than eager's: not compared
    arrays = [array_of(a) if isinstance(a, Tensor) else a for a in args
              if isinstance(a, (Tensor, np.ndarray))] + [array_of(t) for t in traced.captured]
    rows = []
    for off in (None,) + tuple(name for name, _ in P.DEFAULT_PIPELINE):
        g = P.optimize(traced, skip=(off,) if off else ())
        kernel = build(g)
        kernel.compile(arrays)
        outs = kernel(*arrays)
        err = max((_errors(o, e)[0] for o, e, r in zip(outs, eager_values, random)
                   if not r), default=0.0)
        t = _measure(lambda k=kernel: k(*arrays), repeats, budget)
        rows.append({"off": off or "(none)", "nodes": P.op_count(g),
                     "kernels": sum(1 for n in g.nodes if n.op == "fused"),
                     "max_abs_error": err, "time": t.median, "spread": [t.q1, t.q3]})
    return rows
