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
    compile_time: float | None = None
    compile_breakdown: dict = field(default_factory=dict)
    cold_compile_time: float | None = None
    warm_compile_time: float | None = None
    speedup: float | None = None
    speedup_spread: tuple | None = None
    break_even_calls: float | None = None
    eager_tape_nodes: int = 0
    traced_nodes: int = 0
    optimized_nodes: int = 0
    backward_nodes: int = 0
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
        out.append("time")
        out.append(f"  eager            {_t(self.eager_time)} (spread {_t(self.eager_spread[0])}"
                   f" .. {_t(self.eager_spread[1])})")
        if self.compiled_time is not None:
            out.append(f"  compiled         {_t(self.compiled_time)} (spread "
                       f"{_t(self.compiled_spread[0])} .. {_t(self.compiled_spread[1])})")
            b = self.compile_breakdown
            out.append(f"  compile          {self.compile_time:.3f} s (trace {b['trace']:.3f}, "
                       f"passes {b['passes']:.3f}, numba {b['numba']:.3f})")
            if self.cold_compile_time is not None:
                out.append(f"  compile cold/warm cache  {self.cold_compile_time:.3f} s / "
                           f"{self.warm_compile_time:.3f} s")
            lo, hi = self.speedup_spread
            out.append(f"  speed-up         {self.speedup:.2f}x (spread {lo:.2f}x .. {hi:.2f}x)")
            be = ("never (compiled is not faster)" if self.break_even_calls is None
                  else f"{self.break_even_calls:.0f} calls")
            out.append(f"  break-even       {be}")
        out.append("structure")
        out.append(f"  eager tape nodes {self.eager_tape_nodes}   traced {self.traced_nodes}   "
                   f"optimized {self.optimized_nodes} (+{self.backward_nodes} backward)   "
                   f"kernels {self.kernels} (Numba functions; {self.fused_kernels} fused "
                   "loop nests)")
        out.append("memory")
        out.append(f"  eager autograd saves {self.eager_saved_bytes} bytes for backward; "
                   f"compiled keeps {self.compiled_residual_bytes} bytes of residuals")
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


def _timeit(call: Callable[[], Any], repeats: int, target: float = 0.02) -> tuple:
    """Median seconds per call over ``repeats`` rounds, and the (min, max) spread."""
    call()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        dt = time.perf_counter() - t0
        if dt > target or n >= 1 << 16:
            break
        n *= 2
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        times.append((time.perf_counter() - t0) / n)
    return float(np.median(times)), (float(min(times)), float(max(times)))


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
            cold_warm: bool = True, ablation: bool = False) -> CompareReport:
    """Run ``fn(*args)`` eagerly and compiled and report the differences (see `_compare`).

    Timings are single-threaded: NumPy (eager) and SciPy (whose BLAS the compiled kernels
    call) each bundle an OpenBLAS thread pool, and two pools spinning on a small machine
    slow each other down by orders of magnitude, which would measure the machine, not
    dualgraph.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _compare(fn, *args, name=name, repeats=repeats, cold_warm=cold_warm,
                        ablation=ablation)


def _compare(fn: Callable, *args: Any, name: str | None = None, repeats: int = 5,
             cold_warm: bool = True, ablation: bool = False) -> CompareReport:
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
        traced = trace(fn, *args)
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

    report.eager_time, report.eager_spread = _timeit(eager_call, repeats)
    if traced is None:
        return report
    with _as_float64(args, captured) as args64:
        leaves64 = _grad_leaves(args64, captured)
        r_vals, r_grads = _run(fn, args64, leaves64)
    cf = CompiledFunction(fn)
    c_vals, c_grads = _run(cf, args, leaves)
    st = cf.stats
    report.compile_time = st.compile_seconds
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

    report.compiled_time, report.compiled_spread = _timeit(compiled_call, repeats)
    report.speedup = report.eager_time / report.compiled_time
    # Worst and best pairing of the eager and compiled rounds.
    report.speedup_spread = (report.eager_spread[0] / report.compiled_spread[1],
                             report.eager_spread[1] / report.compiled_spread[0])
    gain = report.eager_time - report.compiled_time
    report.break_even_calls = report.compile_time / gain if gain > 0 else None
    entry = cf.entries()[0]
    report.traced_nodes = P.op_count(traced)
    report.optimized_nodes = P.op_count(entry.optimized)
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
                    f2 = CompiledFunction(fn)
                    _run(f2, args, leaves)
                    setattr(report, attr, f2.stats.compile_seconds)
    if ablation:
        report.ablation = _ablation(traced, args, e_vals, repeats)
    return report


def _ablation(traced: Graph, args: tuple, eager_values: list, repeats: int) -> list[dict]:
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
        t, _ = _timeit(lambda k=kernel: k(*arrays), repeats)
        rows.append({"off": off or "(none)", "nodes": P.op_count(g),
                     "kernels": sum(1 for n in g.nodes if n.op == "fused"),
                     "max_abs_error": err, "time": t})
    return rows
