"""`dg.compare`: one program, eager and compiled, side by side.

The report opens with a one-line verdict (how much faster compiled is, with its 95%
interval, and after how many calls compiling pays), then covers time (eager and compiled
measured in alternating rounds of the same call count, so a change in the machine's load
cancels out of their ratio; wall and CPU time), numerics (outputs and gradients, eager
float32 vs compiled float32, both refereed by an eager float64 run), the distance to the
machine's limits (per kernel: bytes moved, flops, time, share of the measured memory
bandwidth or GEMM peak), structure (tape nodes, traced, optimized, kernels), memory (what
eager autograd saves vs the compiled residuals), a node-by-node diff of the eager tape and
the traced graph with what each pass did, and the fusion decisions.
``compare(..., ablation=True)`` also reruns the compiled path with each pass switched off.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import sys
import tempfile
import time
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import passes as P
from .backend import import_backend
from .eager import autograd as A
from .eager.export import graph_of
from .eager.internal import array_of, make_tensor, saved_arrays, set_array, set_grad
from .eager.tensor import Tensor
from .errors import TraceError
from .ir.graph import Graph, Node
from .ops import OPS
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
    verdict: str = ""
    numerics: list = field(default_factory=list)
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    eager_time: float = float("nan")
    eager_spread: tuple = (float("nan"), float("nan"))
    compiled_time: float | None = None
    compiled_spread: tuple | None = None
    timings: dict = field(default_factory=dict)
    rounds: int = 0
    compile_time: float | None = None
    compile_spread: tuple | None = None
    compile_cache: str | None = None
    compile_cache_source: str | None = None
    compile_breakdown: dict = field(default_factory=dict)
    cold_compile_time: float | None = None
    warm_compile_time: float | None = None
    # The speed-up the verdict uses (`speedup_basis`, see `_basis`): of wall time; or,
    # when other processes took the CPU, of the wall time of the undisturbed rounds, or of
    # CPU time when too few rounds were undisturbed. All three are kept beside it.
    speedup: float | None = None
    speedup_spread: tuple | None = None
    speedup_basis: str | None = None
    wall_speedup: float | None = None
    wall_speedup_spread: tuple | None = None
    cpu_speedup: float | None = None
    cpu_speedup_spread: tuple | None = None
    clean_speedup: float | None = None
    clean_speedup_spread: tuple | None = None
    clean_rounds: int = 0  # rounds in which no other process took the CPU from either side
    cpu_share: dict = field(default_factory=dict)
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
    roofline: list = field(default_factory=list)
    limits: dict = field(default_factory=dict)
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
        out = [f"{self.name}: {self.verdict}" if self.verdict else self.name]
        if self.trace_error:
            out.append(f"  compiled side unavailable, tracing failed:\n    {self.trace_error}")
        self._time_lines(out)
        self._numerics_lines(out)
        self._structure_lines(out)
        self._pass_lines(out)
        return "\n".join(out)

    def _time_lines(self, out: list) -> None:
        """Times, speed-ups, compile times, break-even and noise warnings."""
        out.append("time (median per call, [interquartile range]; eager and compiled in "
                   f"{self.rounds} alternating rounds"
                   + (f"; {self.threads} threads)" if self.threads else ")"))
        out.append(f"  eager            {_timing_line(self.timings.get('eager'), self.eager_time)}")
        if self.compiled_time is not None:
            out.append(f"  compiled         "
                       f"{_timing_line(self.timings.get('compiled'), self.compiled_time)}")
            wall = _ratio(self.wall_speedup, self.wall_speedup_spread)
            cpu = _ratio(self.cpu_speedup, self.cpu_speedup_spread)
            clean = _ratio(self.clean_speedup, self.clean_speedup_spread)
            out.append(f"  speed-up         wall {wall}   CPU time {cpu}   undisturbed "
                       f"{clean} in {self.clean_rounds} rounds   (median of per-round "
                       f"ratios, 95% interval; {self.speedup_basis} used)")
            share = ", ".join(f"{k} {v:.0%}" for k, v in self.cpu_share.items())
            out.append(f"  CPU share        {share} (CPU time over wall time while measured)")
            b = self.compile_breakdown
            lo, hi = self.compile_spread or (self.compile_time, self.compile_time)
            out.append(f"  compile          {self.compile_time:.3f} s {self.compile_cache} "
                       f"[{lo:.3f} .. {hi:.3f}] (trace {b['trace']:.3f}, passes "
                       f"{b['passes']:.3f}, numba {b['numba']:.3f}; "
                       f"{_CACHE_WORDS.get(self.compile_cache_source, '')})")
            if self.cold_compile_time is not None:
                out.append(f"  compile cold/warm cache  {self.cold_compile_time:.3f} s / "
                           f"{self.warm_compile_time:.3f} s")
            else:
                out.append("  compile cold/warm cache  not measured (cold_warm=True measures "
                           "both)")
            be = ("never (compiled is not faster)" if self.break_even_calls is None
                  else f"{self.break_even_calls:,.0f} calls "
                  f"({_range_calls(self.break_even_spread)}) with blocking compilation")
            out.append(f"  break-even       {be}")
        if self.noisy:
            out.append(f"  NOISY: {'; '.join(self.noise_reasons)}")

    def _numerics_lines(self, out: list) -> None:
        """The numerics table and the roofline."""
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
        if self.roofline:
            out += roofline_lines(self.roofline, self.limits)

    def _structure_lines(self, out: list) -> None:
        """Node and kernel counts, and what each side keeps for backward."""
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

    def _pass_lines(self, out: list) -> None:
        """What the passes did: the tape-to-trace diff, fusion and the ablation."""
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


def _t(s: float | None) -> str:
    if s is None or s != s:
        return "n/a"
    return f"{s * 1e6:8.1f} us" if s < 1e-3 else f"{s * 1e3:8.3f} ms"


def _ratio(s: float | None, spread: tuple | None) -> str:
    if s is None:
        return "n/a"
    lo, hi = spread or (s, s)
    return f"{s:.2f}x ({lo:.2f}-{hi:.2f})"


_CACHE_WORDS = {"numba": "Numba compiled the machine code",
                "disk": "Numba loaded the machine code from the disk cache",
                "memory": "kernels already loaded in this process"}


def _timing_line(t: dict | None, median: float) -> str:
    if not t:
        return _t(median)
    return (f"{_t(t['median'])} [{_t(t['q1']).strip()} .. {_t(t['q3']).strip()}] "
            f"CPU {_t(t['cpu_median']).strip()}, {t['repeats']} x {t['number']} calls")


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
                c = make_tensor(array_of(a).astype(np.float64), False, None)
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
# The clocks, as module attributes so that tests can make them jittery or busy. The CPU
# clock is the calling thread's: single-threaded, every measured call runs on it, and the
# time other threads of the process spend (a tiered compile's reader, an idle pool) is not
# charged to the call. Threaded runs use the process's CPU time (`_process_cpu`).
_wall = time.perf_counter
_cpu = time.thread_time
_process_cpu = time.process_time

BUSY_CPU = 0.8  # a side with less CPU than this per wall second waited for other processes
# A round in which a side had at least this share of the wall time ran without being
# preempted: its time is what the call costs on a quiet machine. Preemption inflates CPU
# time too (the caches refill after the other process ran), and more for a side that
# streams over memory, so on a busy machine the ratio of such rounds is the honest one.
CLEAN_SHARE = 0.9
MIN_ROUNDS = 6  # the fewest rounds whose extreme values bracket the median at 95%
NOISY_INTERVAL = 0.15  # an interval wider than this share of the speed-up either side: noisy
_SETTLED = 0.04  # stop adding rounds (past the minimum) once the interval is this tight
WALL_CAP = 4.0  # a paired timing takes at most this many times its budget in wall time
# Seconds of CPU per paired round (both sides): short, so that on a busy machine many
# rounds fall between two preemptions (a scheduler's time slice is a few milliseconds).
ROUND = 0.002


@dataclass
class Timing:
    """Seconds per call over rounds of ``number`` calls: the median and quartiles of wall
    time, the median of CPU time, and the share of the wall time the side had the CPU."""

    median: float
    q1: float
    q3: float
    repeats: int
    number: int
    cpu_ratio: float
    cpu_median: float = float("nan")
    clean_median: float = float("nan")  # wall time in the rounds no other process entered

    @property
    def iqr_ratio(self) -> float:
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(median, low, high)``: the sample median and a distribution-free interval for the
    true median from order statistics (the binomial rule: the k-th smallest and k-th
    largest values, k as large as keeps the coverage at least ``level``). With fewer than
    6 values no pair reaches 95%, and the interval is the range.

    >>> median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    (3.5, 1.0, 6.0)
    """
    s = sorted(values)
    n = len(s)
    med = float(np.median(s))
    alpha = (1.0 - level) / 2
    k, cdf = 0, 0.0
    for j in range(n):
        cdf += math.comb(n, j) / 2.0 ** n  # P(fewer than j+1 values below the median)
        if cdf > alpha:
            break
        k = j + 1
    k = max(k, 1)
    return med, float(s[k - 1]), float(s[n - k])


@dataclass
class Paired:
    """Per-call seconds of each round, each side: wall and CPU time."""

    number: int
    eager_wall: list = field(default_factory=list)
    eager_cpu: list = field(default_factory=list)
    compiled_wall: list = field(default_factory=list)
    compiled_cpu: list = field(default_factory=list)

    @property
    def rounds(self) -> int:
        return len(self.eager_wall)

    def clean(self, start: int = 0) -> list[bool]:
        """Per round from ``start``: whether both sides had the CPU throughout (at least
        `CLEAN_SHARE` of the round's wall time)."""
        def had_it(w: float, c: float) -> bool:
            return w <= 0 or c >= CLEAN_SHARE * w

        return [had_it(ew, ec) and had_it(cw, cc) for ew, ec, cw, cc in
                zip(self.eager_wall[start:], self.eager_cpu[start:],
                    self.compiled_wall[start:], self.compiled_cpu[start:])]

    def ratios(self, clock: str) -> list[float]:
        """Per-round ratios, eager over compiled: of ``wall`` or ``cpu`` time, or of wall
        time in the ``clean`` rounds only."""
        e, c = ((self.eager_cpu, self.compiled_cpu) if clock == "cpu"
                else (self.eager_wall, self.compiled_wall))
        if clock == "clean":
            keep = self.clean()
            e = [v for v, k in zip(e, keep) if k]
            c = [v for v, k in zip(c, keep) if k]
        return [a / b if b > 0 else float("inf") for a, b in zip(e, c)]

    def share(self, side: str, threads: int = 1) -> float:
        wall = sum(getattr(self, f"{side}_wall"))
        cpu = sum(getattr(self, f"{side}_cpu"))
        return cpu / (wall * threads) if wall > 0 else 1.0

    def timing(self, side: str, threads: int = 1) -> Timing:
        wall = getattr(self, f"{side}_wall")
        q1, med, q3 = (float(v) for v in np.percentile(wall, [25, 50, 75]))
        clean = [w for w, k in zip(wall, self.clean()) if k]
        return Timing(med, q1, q3, len(wall), self.number, self.share(side, threads),
                      float(np.median(getattr(self, f"{side}_cpu"))),
                      float(np.median(clean)) if clean else float("nan"))


def _calibrate(calls: list[Callable[[], Any]], target: float,
               cpu: Callable[[], float] | None = None) -> int:
    """Calls per side per round, so that one round of every side lasts about ``target``
    seconds (of CPU time when ``cpu`` is given: a busy machine gets the same count). The
    count is doubled until a round lasts a quarter of that, then scaled from the faster of
    two such rounds: a preempted measurement (whose CPU time includes refilling the
    caches) would otherwise halve or double the count from run to run."""
    clock = cpu or _wall

    def seconds(n: int) -> float:
        t0 = clock()
        for call in calls:
            for _ in range(n):
                call()
        return clock() - t0

    n = 1
    while True:
        t = seconds(n)
        if t > target / 4 or n >= 1 << 16:
            break
        n *= 2
    t = min(t, seconds(n))
    return max(1, min(1 << 16, round(n * target / t))) if t > 0 else n


def _round(call: Callable[[], Any], n: int, cpu: Callable[[], float]) -> tuple[float, float]:
    w0, c0 = _wall(), cpu()
    for _ in range(n):
        call()
    return (_wall() - w0) / n, (cpu() - c0) / n


def _measure(call: Callable[[], Any], repeats: int = MIN_ROUNDS, budget: float = 1.0,
             target: float = 0.01, max_repeats: int = 100, threads: int = 1) -> Timing:
    """Time one side alone (the eager-only and ablation timings): at least ``repeats``
    rounds of enough calls to last ``target`` s, more within ``budget`` seconds until the
    interquartile range settles."""
    cpu = _cpu if threads == 1 else _process_cpu
    call()
    n = _calibrate([call], target)
    p = Paired(n)
    w0 = _wall()
    while True:
        w, c = _round(call, n, cpu)
        p.eager_wall.append(w)
        p.eager_cpu.append(c)
        k = p.rounds
        if k >= max_repeats or (k >= repeats and _wall() - w0 > budget):
            break
        if k >= max(repeats, MIN_ROUNDS):
            q1, med, q3 = np.percentile(p.eager_wall, [25, 50, 75])
            if q3 - q1 <= 2 * _SETTLED * med:
                break
    return p.timing("eager", threads)


def measure_paired(eager: Callable[[], Any], compiled: Callable[[], Any], repeats: int = 10,
                   budget: float = 1.0, target: float = ROUND, max_rounds: int = 400,
                   threads: int = 1, tick: Callable[[], None] | None = None) -> Paired:
    """Eager and compiled in alternating rounds of the same calibrated call count.

    Round k runs eager then compiled when k is even, compiled then eager when it is odd
    (each side one untimed call before its timed ones),
    so a trend in the machine's load hits both sides alike and cancels out of each
    round's ratio. Rounds are short (`ROUND` seconds of CPU), so that on a busy machine
    many of them run between two preemptions (`Paired.clean`). Rounds continue past
    ``repeats`` until the 95% interval of the median ratio (of the rounds and clock the
    verdict will use, `_basis`) is within 4% or ``budget`` seconds of CPU time are spent
    (at most `WALL_CAP` times that in wall time).
    """
    cpu = _cpu if threads == 1 else _process_cpu
    eager()
    compiled()
    n = _calibrate([eager, compiled], target, cpu if threads == 1 else None)
    p = Paired(n)
    w0, c0 = _wall(), cpu()
    clean = 0
    while True:
        order = ("eager", "compiled") if p.rounds % 2 == 0 else ("compiled", "eager")
        for side in order:
            call = eager if side == "eager" else compiled
            # One untimed call first: a short round would otherwise pay for the caches
            # the other side just filled, which a loop of one side never does.
            call()
            w, c = _round(call, n, cpu)
            getattr(p, f"{side}_wall").append(w)
            getattr(p, f"{side}_cpu").append(c)
        if tick is not None:
            tick()
        k = p.rounds
        clean += p.clean(k - 1)[0]
        # The budget is of this process's CPU time: on a busy machine the rounds take
        # longer in wall time, but as many are run as on an idle one (up to 4x the wall).
        # While the undisturbed rounds are too few for their own interval, the wall-time
        # cap doubles: the CPU-time ratio they would leave is biased.
        spent = min(_wall() - w0, (cpu() - c0) / threads)
        short = threads == 1 and clean < 2 * MIN_ROUNDS and _basis(p, threads) != "wall"
        cap = WALL_CAP * budget * (2 if short else 1)
        if k >= max_rounds or (k >= repeats and (spent > budget or _wall() - w0 > cap)):
            break
        if k >= max(repeats, MIN_ROUNDS):
            med, lo, hi = median_interval(p.ratios(_basis(p, threads)))
            if hi - lo <= 2 * _SETTLED * med:
                break
    return p


def _basis(p: Paired, threads: int = 1) -> str:
    """The rounds and clock to trust: ``wall`` (every round's wall time) when both sides
    had the CPU; when other processes took it, ``clean`` (the wall time of the rounds
    that no other process entered, `Paired.clean`) if there are at least `MIN_ROUNDS`
    of them, else ``cpu`` (every round's CPU time, which counts no waiting but does
    count the caches refilling after each preemption: it overstates a memory-bound
    side's cost). Threaded runs use wall time: a threaded side's CPU time is summed over
    its threads and says little about waiting."""
    if threads > 1:
        return "wall"
    if min(p.share("eager"), p.share("compiled")) >= BUSY_CPU:
        return "wall"
    return "clean" if sum(p.clean()) >= MIN_ROUNDS else "cpu"


BASIS_NAMES = {"wall": "wall time", "cpu": "CPU time", "clean": "undisturbed rounds"}


def _noise(p: Paired, basis: str, budget: float, threads: int = 1) -> list[str]:
    """Why the verdict's figure should not be trusted, each with its cause and what to do
    (empty when it can be)."""
    reasons = []
    if p.rounds < MIN_ROUNDS:
        reasons.append(f"too few rounds: {p.rounds} (< {MIN_ROUNDS}) within the {budget:g} s "
                       "budget, so the interval is only the range; give a larger budget "
                       "(budget=, or --budget)")
    ratios = p.ratios(basis)
    med, lo, hi = median_interval(ratios)
    if med > 0 and (med - lo > NOISY_INTERVAL * med or hi - med > NOISY_INTERVAL * med):
        where = f"the 95% interval {lo:.2f}-{hi:.2f}x is wide"
        half = len(ratios) // 2
        shares = {s: p.share(s, threads) for s in ("eager", "compiled")}
        # Drift: the two halves' own intervals do not overlap (with 6 rounds each at least).
        a = median_interval(ratios[:half]) if half >= MIN_ROUNDS else None
        b = median_interval(ratios[half:]) if half >= MIN_ROUNDS else None
        first, second = (a[0], b[0]) if a and b else (med, med)
        if a and b and (a[1] > b[2] or b[1] > a[2]):
            reasons.append(f"{where}: the ratio drifted between rounds ({first:.2f}x in the "
                           f"first half, {second:.2f}x in the second): something changed "
                           "during the run (a cache warming, a tier swap, the CPU's clock); "
                           "run it again, or raise repeats")
        elif min(shares.values()) < BUSY_CPU:
            got = ", ".join(f"{s} {v:.0%}" for s, v in shares.items())
            used = {"cpu": "; the CPU-time ratio is used",
                    "clean": "; the ratio of the undisturbed rounds is used"}.get(basis, "")
            reasons.append(f"{where}: other processes took the CPU ({got} of the wall "
                           f"time){used}; "
                           "stop other work, or pin the run to an idle core "
                           "(taskset -c N), or raise the budget")
        else:
            reasons.append(f"{where} with the CPU to itself: calls too short for the "
                           "clock, or garbage collection; raise the budget")
    return reasons


def _break_even(compile_time: float, compile_spread: tuple, per_call: float,
                speedup: float, spread: tuple) -> tuple[float | None, tuple | None]:
    """Calls after which blocking compilation has paid for itself: the compile time over
    the saving per call (``per_call`` eager seconds times ``1 - 1/speedup``), and its
    range from the compile time's range and the speed-up's interval (``None`` at the high
    end: the compiled function may be no faster, so it may never pay)."""
    if speedup <= 1:
        return None, None

    def calls(c: float, s: float) -> float:
        return c / (per_call * (1 - 1 / s))

    lo = calls(compile_spread[0], spread[1])
    hi = calls(compile_spread[1], spread[0]) if spread[0] > 1 else None
    return calls(compile_time, speedup), (lo, hi)


def _approx(x: float, whole: bool = True) -> str:
    """Two significant figures, as a reader says them: 137 -> '140', 0.0613 -> '0.061',
    209.6 -> '210'; with ``whole`` (a count of calls) below 10 round up: 0.7 -> '1'."""
    if x <= 0 or not math.isfinite(x):
        return f"{x:g}"
    if whole and x < 10:
        return f"{math.ceil(x)}"
    digits = 1 - int(math.floor(math.log10(x)))
    v = round(x, digits)
    return f"{v:,.0f}" if v >= 10 else f"{v:g}"


def verdict(r: CompareReport) -> str:
    """The report's first line: the answer, its interval, when compiling pays, and how
    far to trust it."""
    if r.trace_error:
        return f"eager only ({_t(r.eager_time).strip()} per call): tracing failed, see below"
    if r.speedup is None:
        return f"eager only: {_t(r.eager_time).strip()} per call"
    s, (lo, hi) = r.speedup, r.speedup_spread
    if lo > 1:
        text = f"compiled is {s:.3g}x faster ({lo:.3g}-{hi:.3g})"
        if r.break_even_calls is not None:
            loop = r.break_even_calls * _per_call(r, "eager")
            text += (f"; compiling ({_approx(r.compile_time, whole=False)} s, "
                     f"{r.compile_cache} cache) pays "
                     f"after ~{_approx(r.break_even_calls)} calls, about "
                     f"{_approx(loop, whole=False)} s of your loop")
    elif hi < 1:
        text = (f"compiled is {1 / s:.3g}x slower ({1 / hi:.3g}-{1 / lo:.3g}); compiling "
                "does not pay")
    else:
        text = (f"uncertain: compiled runs at {s:.3g}x eager's speed ({lo:.3g}-{hi:.3g}), "
                "an interval that spans 1, so neither is clearly faster")
    if r.speedup_basis in ("CPU time", "undisturbed rounds"):
        got = ", ".join(f"{k} {v:.0%}" for k, v in r.cpu_share.items())
        used = ("CPU-time ratio used" if r.speedup_basis == "CPU time" else
                f"ratio of the {r.clean_rounds} of {r.rounds} rounds no other process "
                "entered used")
        text += f"; measured on a busy machine (CPU share {got}), {used}"
    else:
        text += "; measured with the CPU to itself, wall-time ratio used"
    if r.noisy:
        text += "; NOISY (see below)"
    return text


def _per_call(r: CompareReport, side: str) -> float:
    """Seconds per call on the verdict's clock."""
    t = r.timings[side]
    key = {"CPU time": "cpu_median", "undisturbed rounds": "clean_median"}
    return t[key.get(r.speedup_basis, "median")]


def _apply_timing(r: CompareReport, p: Paired, compile_cpu: float, budget: float,
                  threads: int = 1) -> None:
    """Fill ``r``'s time fields from the paired rounds and the compile."""
    e, c = p.timing("eager", threads), p.timing("compiled", threads)
    r.timings = {"eager": asdict(e), "compiled": asdict(c)}
    r.rounds = p.rounds
    r.eager_time, r.eager_spread = e.median, (e.q1, e.q3)
    r.compiled_time, r.compiled_spread = c.median, (c.q1, c.q3)
    r.cpu_share = {"eager": e.cpu_ratio, "compiled": c.cpu_ratio}
    med, lo, hi = median_interval(p.ratios("wall"))
    r.wall_speedup, r.wall_speedup_spread = med, (lo, hi)
    med, lo, hi = median_interval(p.ratios("cpu"))
    r.cpu_speedup, r.cpu_speedup_spread = med, (lo, hi)
    clean = p.ratios("clean")
    r.clean_rounds = len(clean)
    if clean:
        med, lo, hi = median_interval(clean)
        r.clean_speedup, r.clean_speedup_spread = med, (lo, hi)
    basis = _basis(p, threads)
    r.speedup_basis = BASIS_NAMES[basis]
    if basis == "wall":
        r.speedup, r.speedup_spread = r.wall_speedup, r.wall_speedup_spread
        compile_t, compile_spread = r.compile_time, r.compile_spread
    else:
        # The compile's CPU time, like the calls': what it costs without the other load.
        r.speedup, r.speedup_spread = ((r.cpu_speedup, r.cpu_speedup_spread) if basis == "cpu"
                                       else (r.clean_speedup, r.clean_speedup_spread))
        compile_t = r.compile_time * compile_cpu
        compile_spread = (compile_t, compile_t)
    r.break_even_calls, r.break_even_spread = _break_even(
        compile_t, compile_spread, _per_call(r, "eager"), r.speedup, r.speedup_spread)
    r.noise_reasons = _noise(p, basis, budget, threads)
    r.noisy = bool(r.noise_reasons)


# ------------------------------------------------------------------------ roofline
# What each kernel costs the machine, from the graph alone: bytes moved (its inputs read
# once, its output written once: what a loop nest that keeps its intermediates in
# registers must move) and flops (a matmul 2*M*N*K, an elementwise op one per element, a
# reduction one per element reduced; data movement such as gather or concatenate none).
# A kernel is a top-level node of an optimized graph: a fused loop nest or one op.


@dataclass
class KernelCost:
    """One kernel's bytes and flops, and (when timed) its time and share of the machine's
    limit: ``bound`` is ``memory`` when moving its bytes at full bandwidth takes longer than
    its flops at the GEMM peak, else ``compute``; ``share`` is that ideal time over the
    measured one."""

    graph: str
    index: int
    what: str
    dtype: str
    bytes: int
    flops: int
    ideal: float | None = None
    bound: str | None = None
    time: float | None = None
    share: float | None = None


def _numel(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def _storage_bytes(n: Node) -> int:
    """Bytes of the array behind ``n``: through broadcasts to what is really stored."""
    while (n.op in OPS and OPS[n.op].fusible and n.inputs
           and isinstance(n.inputs[0], Node)):
        n = n.inputs[0]
    return _numel(n.shape) * np.dtype(n.dtype).itemsize


def node_flops(n: Node) -> int:
    """Floating-point operations of one node, from its op's traits and shapes."""
    d = OPS.get(n.op)
    if d is None or d.view:
        return 0
    out = _numel(n.shape)
    if d.contraction:
        a = n.inputs[1 if d.contraction_bias else 0]
        k = a.shape[-1] if getattr(a, "shape", ()) else 1
        return 2 * out * int(k) + (out if d.contraction_bias else 0)
    if d.reduction is not None:
        src = n.inputs[0]
        return _numel(src.shape) if isinstance(src, Node) else out
    return out if d.elementwise else 0


def kernel_costs(graph: Graph, name: str = "forward") -> list[KernelCost]:
    """Bytes and flops of each kernel of an optimized graph (views move nothing and are
    left out).

    >>> from dualgraph.compare import kernel_costs
    >>> g = dg.passes.optimize(dg.trace(lambda a, b: a @ b, dg.randn(8, 4), dg.randn(4, 2)))
    >>> [(k.what, k.bytes, k.flops) for k in kernel_costs(g)]
    [('matmul', 224, 128)]
    """
    out = []
    for n in graph.nodes:
        if n.op in ("input", "const") or (n.op in OPS and OPS[n.op].view):
            continue
        if n.op == "fused":
            members = [m for m in n.attrs["body"].nodes if m.op != "const"]
            what = f"fused {n.attrs.get('kind', '')}: " + " -> ".join(m.op for m in members)
        else:
            members, what = [n], n.op
        seen: set[int] = set()
        moved = _numel(n.shape) * np.dtype(n.dtype).itemsize
        for i in n.inputs:
            if isinstance(i, Node) and id(i) not in seen:
                seen.add(id(i))
                moved += _storage_bytes(i)
        out.append(KernelCost(name, len(out), what, np.dtype(n.dtype).name, moved,
                              sum(node_flops(m) for m in members)))
    return out


@dataclass
class MachineLimits:
    """One core's measured limits: memory bandwidth (bytes/s, a STREAM triad counting 24
    bytes per element) and the BLAS GEMM peak (flop/s) per dtype."""

    bandwidth: float
    gemm_peak: dict
    key: str = ""
    measured: str = ""
    # The share of the CPU the measurement had (below `BUSY_CPU` its figures read low),
    # and how many measurements the figures are the best of.
    cpu_share: float = 1.0
    measurements: int = 1

    def peak(self, dtype: str) -> float:
        return self.gemm_peak.get(dtype) or self.gemm_peak["float32"]

    def describe(self) -> str:
        peaks = ", ".join(f"{v / 1e9:.1f} {k}" for k, v in self.gemm_peak.items())
        return (f"one core: memory bandwidth {self.bandwidth / 1e9:.1f} GB/s (triad), BLAS "
                f"GEMM peak {peaks} GFLOP/s")


def _state_dir() -> Path:
    """Where compare keeps what it measured about this machine: the kernel cache's
    directory (``$DUALGRAPH_CACHE_DIR``, default the user cache dir)."""
    env = os.environ.get("DUALGRAPH_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dualgraph"


def read_state(name: str) -> dict:
    """The JSON state file ``name`` in dualgraph's state directory ({} when missing)."""
    try:
        with open(_state_dir() / name) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # missing or damaged: measured again


def write_state(name: str, data: dict) -> None:
    """Write ``data`` as the JSON state file ``name`` (best effort: a read-only home is fine)."""
    d = _state_dir()
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=d)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, d / name)
    except OSError:
        pass  # a read-only cache costs a remeasurement next time, nothing else


def _machine_key() -> str:
    import platform

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f
                          if ln.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}|{os.cpu_count()}|numpy {np.__version__}"


_LIMITS: MachineLimits | None = None
LIMITS_FILE = "machine-limits.json"


BUSY_REMEASURES = 3  # measurements taken on a busy machine before the best one is kept


def machine_limits(refresh: bool = False) -> MachineLimits:
    """This machine's limits, measured once (about a second) and kept in the cache
    directory; ``refresh=True`` measures again. A measurement taken while other processes
    had the CPU reads low: the next processes measure again (`BUSY_REMEASURES` times at
    most) and keep the best figures seen."""
    global _LIMITS
    key = _machine_key()
    if _LIMITS is not None and _LIMITS.key == key and not refresh:
        return _LIMITS
    data = {} if refresh else read_state(LIMITS_FILE)
    try:
        old = MachineLimits(float(data["bandwidth"]),
                            {k: float(v) for k, v in data["gemm_peak"].items()},
                            data["key"], data.get("measured", ""),
                            float(data.get("cpu_share", 1.0)), int(data.get("measurements", 1)))
        if old.key != key or old.bandwidth <= 0:
            raise ValueError
    except (KeyError, TypeError, ValueError, AttributeError):
        old = None
    if old is not None and (old.cpu_share >= BUSY_CPU or old.measurements >= BUSY_REMEASURES):
        limits = old
    else:
        limits = measure_limits()
        if old is not None:  # the best of the busy measurements
            limits.bandwidth = max(limits.bandwidth, old.bandwidth)
            limits.gemm_peak = {k: max(v, old.gemm_peak.get(k, 0.0))
                                for k, v in limits.gemm_peak.items()}
            limits.cpu_share = max(limits.cpu_share, old.cpu_share)
            limits.measurements = old.measurements + 1
        write_state(LIMITS_FILE, asdict(limits))
    _LIMITS = limits
    return limits


def measure_limits(repeats: int = 5) -> MachineLimits:
    """Measure one core's memory bandwidth (a triad ``a = b + s*c`` over arrays far larger
    than the caches, compiled with Numba) and BLAS GEMM peak (float32 and float64), the
    best of ``repeats`` each."""
    import numba
    from threadpoolctl import threadpool_limits

    @numba.njit(cache=False)
    def triad(a, b, c, s):  # pragma: no cover - compiled
        for i in range(a.shape[0]):
            a[i] = b[i] + s * c[i]

    w0, c0 = time.perf_counter(), time.thread_time()
    n = 1 << 22  # 32 MB per float64 array: well past the last-level cache
    a, b, c = np.empty(n), np.ones(n), np.ones(n)
    triad(a, b, c, 3.0)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        triad(a, b, c, 3.0)
        best = min(best, time.perf_counter() - t0)
    bandwidth = 24 * n / best
    peaks = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for dtype in ("float32", "float64"):
            m = np.ones((512, 512), dtype)
            np.dot(m, m)
            best = math.inf
            for _ in range(repeats):
                t0 = time.perf_counter()
                np.dot(m, m)
                best = min(best, time.perf_counter() - t0)
            peaks[dtype] = 2 * 512 ** 3 / best
    share = (time.thread_time() - c0) / max(time.perf_counter() - w0, 1e-9)
    return MachineLimits(bandwidth, peaks, _machine_key(),
                         time.strftime("%Y-%m-%dT%H:%M:%S"), min(1.0, share))


def _judge(k: KernelCost, limits: MachineLimits) -> None:
    t_mem = k.bytes / limits.bandwidth
    t_flop = k.flops / limits.peak(k.dtype)
    k.ideal = max(t_mem, t_flop)
    k.bound = "memory" if t_mem >= t_flop else "compute"
    if k.time:
        k.share = k.ideal / k.time


def _kernel_graph(n: Node) -> tuple[Graph, list[np.ndarray]]:
    """``n`` alone as a graph whose inputs are its array inputs, with inputs for it (normal
    floats, zero integers: valid indices)."""
    rng = np.random.default_rng(0)
    ins, consts, arrays, mapping = [], [], [], {}
    new = []
    for i in n.inputs:
        if not isinstance(i, Node):
            new.append(i)
        elif i.op == "const":
            if id(i) not in mapping:
                mapping[id(i)] = i
                consts.append(i)
            new.append(i)
        else:
            if id(i) not in mapping:
                p = Node("input", (), {}, tuple(i.shape), i.dtype)
                mapping[id(i)] = p
                ins.append(p)
                dt = np.dtype(i.dtype)
                arrays.append(rng.standard_normal(i.shape).astype(dt) if dt.kind == "f"
                              else np.zeros(i.shape, dt))
            new.append(mapping[id(i)])
    node = Node(n.op, tuple(new), n.attrs, n.shape, n.dtype, n.loc)
    return Graph(ins, consts + [node], [node]), arrays


def kernel_roofline(graphs: list[tuple[Graph, str]], limits: MachineLimits | None = None,
             timed: int = 8, budget: float = 0.05,
             tick: Callable[[], None] | None = None) -> list[KernelCost]:
    """Each kernel of the optimized ``graphs`` with its bytes, flops and ideal time at the
    machine's limits; the ``timed`` kernels with the largest ideal time are also compiled
    alone (with the disk cache: a second time loads them) and timed, which gives their
    share of the limit."""
    build = import_backend().build

    limits = limits or machine_limits()
    rows, nodes = [], []
    for g, name in graphs:
        costs = kernel_costs(g, name)
        kept = [n for n in g.nodes if not (n.op in ("input", "const")
                                          or (n.op in OPS and OPS[n.op].view))]
        for k, n in zip(costs, kept):
            _judge(k, limits)
            rows.append(k)
            nodes.append(n)
    order = sorted(range(len(rows)), key=lambda j: -rows[j].ideal)[:timed]
    for j in order:
        try:
            g, arrays = _kernel_graph(nodes[j])
            kernel = build(g)
            kernel.compile(arrays)
            ins, outs = kernel.prepare(arrays), kernel.new_outputs()
            t = _measure(lambda kernel=kernel, ins=ins, outs=outs: kernel.run(ins, outs),
                         repeats=MIN_ROUNDS, budget=budget, target=0.002)
            rows[j].time = t.median
            _judge(rows[j], limits)
        except Exception:  # noqa: BLE001 - a kernel that cannot run alone stays untimed
            pass
        if tick is not None:
            tick()
    return rows


def format_size(b: float, unit: str) -> str:
    """``b`` with a k/M/G prefix and ``unit`` (bytes or FLOP counts in reports)."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if b >= scale:
            return f"{b / scale:.1f} {prefix}{unit}"
    return f"{b:.0f} {unit}"


def roofline_lines(rows: list, limits: dict, call_time: float | None = None) -> list[str]:
    """The report's section on the distance to the machine's limits (rows as dicts)."""
    rows = [r if isinstance(r, dict) else asdict(r) for r in rows]
    lim = MachineLimits(limits["bandwidth"], limits["gemm_peak"])
    out = [f"distance to the machine's limits ({lim.describe()})",
           f"  {'kernel':44s} {'bytes':>9s} {'flops':>10s} {'time':>10s}  share of the limit"]
    for r in rows:
        what = f"{r['graph']} {r['index']}: {r['what']}"
        what = what if len(what) <= 44 else what[:41] + "..."
        if r["share"] is not None:
            limit = "memory bandwidth" if r["bound"] == "memory" else f"{r['dtype']} GEMM peak"
            share = f"{r['share']:.0%} of {limit}"
            if r["share"] > 1:
                share += " (in cache)" if r["bound"] == "memory" else ""
        else:
            share = f"{r['bound']}-bound, not timed alone"
        size, flops = format_size(r["bytes"], "B"), format_size(r["flops"], "FLOP")
        out.append(f"  {what:44s} {size:>9s} {flops:>10s} {_t(r['time']):>10s}  {share}")
    ideal = sum(r["ideal"] or 0.0 for r in rows)
    if call_time:
        out.append(f"  all kernels at the limits: {_t(ideal).strip()}; a compiled call takes "
                   f"{_t(call_time).strip()} ({ideal / call_time:.0%} of the limit: the rest "
                   "is below the limit in the kernels, and call overhead)")
    return out


def _cache_counts() -> dict[str, tuple[int, int]]:
    """Numba's disk-cache (hits, misses) of every kernel loaded in this process."""
    cache = import_backend().cache

    return {d: cache.hits_misses(fn) for d, fn in cache.loaded()}


def _cache_source(entry: Any, before: dict[str, tuple[int, int]]) -> str:
    """How the entry's kernels got their machine code: ``numba`` (compiled: a cold cache),
    ``disk`` (loaded from Numba's disk cache) or ``memory`` (already in this process).
    Derived from the Numba dispatchers' own hit/miss counters, before and after."""
    cache = import_backend().cache

    hits = misses = 0
    for k in (entry.kernel, getattr(entry, "bwd_kernel", None)):
        if k is None or not hasattr(k, "dispatchers"):
            continue
        # A split kernel's identical parts are one dispatcher: count it once.
        for digest, fn in dict(k.dispatchers()).items():
            h0, m0 = before.get(digest, (0, 0))
            h1, m1 = cache.hits_misses(fn)
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

    import_backend()
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
def _fresh_cache(directory: str) -> Any:
    """Compile as a new process would against ``directory``: no in-memory kernels."""
    cache = import_backend().cache

    return cache.isolated(directory)


def _unwrap(fn: Callable) -> tuple[Callable, str | None]:
    """The Python function (or module) behind a `dg.compile` result, and a note saying so.

    A compiled function passed as ``fn`` would otherwise be the "eager" side: its calls
    run the compiled kernels, or, with tiered compilation, the NumPy interpreter until the
    background worker's kernels swap in, so the eager time depended on when the worker
    finished and the verdict flipped between runs."""
    from .compile import CompiledFunction, CompiledModule

    note = ("fn was a dg.compile result: eager runs its Python {}, compiled is a fresh "
            "blocking compile of it")
    if isinstance(fn, CompiledModule):
        return fn.module, note.format("module")
    if isinstance(fn, CompiledFunction):
        return fn.fn, note.format("function")
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, CompiledFunction):
        return types.MethodType(fn.__func__.fn, fn.__self__), note.format("method")
    return fn, None


class _Progress:
    """A bar over compare's stages on stderr, shown only once a run has lasted
    `PROGRESS_DELAY` seconds (short runs print nothing)."""

    def __init__(self, enabled: bool | None, total: int, desc: str) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False,
                            delay=PROGRESS_DELAY, bar_format="{desc}: {n}/{total} {postfix}")

    def stage(self, name: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(name)
            self.bar.update(1)

    def tick(self) -> None:
        if self.bar is not None:
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


PROGRESS_DELAY = 1.0


def compare(fn: Callable, *args: Any, name: str | None = None, repeats: int = 10,
            cold_warm: bool = False, ablation: bool = False, budget: float = 1.0,
            threads: int | None = None, compiled: bool = True, roofline: bool = True,
            progress: bool | None = None) -> CompareReport:
    """Run ``fn(*args)`` eagerly and compiled and report the differences (see `_compare`).

    Eager and compiled are timed in alternating rounds of the same call count, at least
    ``repeats`` rounds and more, within ``budget`` seconds, until the 95% interval of the
    speed-up settles; the speed-up is the median of the per-round ratios of wall time; when
    other processes took the CPU, of the rounds that none of them entered (or of CPU time
    when too few were undisturbed, see `_basis`). A wide interval or too few rounds flags
    the report ``noisy``, with the cause and what to do. The process's one-off start-up
    costs (`warm_up`) are paid before anything is timed.

    The compile is measured once, as it happens (``compile_cache`` says whether Numba
    compiled or loaded the kernels); ``cold_warm=True`` also compiles twice more as a new
    process would, with an empty kernel cache and then with the one that left.
    ``roofline`` times the largest kernels alone against the machine's limits (measured
    once per machine, `machine_limits`). ``progress``: a bar on stderr for runs longer than
    a second (None: when stderr is a terminal).

    Timings are single-threaded: NumPy (eager) and SciPy (whose BLAS the compiled kernels
    call) each bundle an OpenBLAS thread pool, and two pools spinning on a small machine
    slow each other down by orders of magnitude, which would measure the machine, not
    dualgraph. ``threads=N`` sets every thread pool (BLAS, OpenMP, Numba's) to ``N``
    instead, and compiles with ``parallel=True`` when ``N > 1``. ``compiled=False``
    measures the eager side only (no tracing, no compile).
    """
    from threadpoolctl import threadpool_limits

    warm_up()
    fn, note = _unwrap(fn)
    opts = dict(name=name, repeats=repeats, cold_warm=cold_warm, ablation=ablation,
                budget=budget, compiled=compiled, roofline=roofline, progress=progress)
    if threads is None:
        with threadpool_limits(limits=1, user_api="blas"):
            report = _compare(fn, *args, **opts)
    else:
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"threads must be a positive int or None, got {threads!r}")
        with threadpool_limits(limits=threads), _numba_threads(threads) as n:
            report = _compare(fn, *args, parallel=threads > 1, threads=threads, **opts)
        report.threads = threads
        if n < threads:
            report.notes.append(f"Numba has {n} threads at most in this process "
                                f"(NUMBA_NUM_THREADS), not {threads}")
    if note:
        report.notes.append(note)
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


def _compare(fn: Callable, *args: Any, name: str | None = None, repeats: int = 10,
             cold_warm: bool = False, ablation: bool = False, budget: float = 1.0,
             compiled: bool = True, parallel: bool = False, threads: int = 1,
             roofline: bool = True, progress: bool | None = None) -> CompareReport:
    """Run ``fn(*args)`` eagerly and compiled and report the differences.

    Gradients are of the sum of the outputs, for the arguments that require grad and the
    tensors ``fn`` captures that do (module parameters). ``fn`` should be free of side
    effects: it is called many times. A function that cannot be traced still gets its
    eager side, with the `TraceError` in ``report.trace_error``.

    >>> report = dg.compare(lambda x: (x * 2).exp().sum(), dg.randn(100, requires_grad=True))
    >>> report.speedup, report.max_abs_error            # doctest: +SKIP
    """
    report = CompareReport(name or getattr(fn, "__name__", type(fn).__name__))
    stages = 4 + bool(roofline) + bool(cold_warm) + bool(ablation)
    bar = _Progress(progress, stages, f"dg.compare {report.name}")
    try:
        _compare_into(report, bar, fn, args, repeats, cold_warm, ablation, budget, compiled,
                      parallel, threads, roofline)
    finally:
        bar.close()
    report.verdict = verdict(report)
    return report


def _compare_into(report: CompareReport, bar: _Progress, fn: Callable, args: tuple,
                  repeats: int, cold_warm: bool, ablation: bool, budget: float,
                  compiled: bool, parallel: bool, threads: int, roofline: bool) -> None:
    from .compile import CompiledFunction
    from .compile.random_state import random_outputs

    bar.stage("tracing")
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

    if traced is None:
        bar.stage("timing eager")
        e = _measure(eager_call, repeats, budget, threads=threads)
        report.timings = {"eager": asdict(e)}
        report.rounds = e.repeats
        report.eager_time, report.eager_spread = e.median, (e.q1, e.q3)
        return
    with _as_float64(args, captured) as args64:
        leaves64 = _grad_leaves(args64, captured)
        r_vals, r_grads = _run(fn, args64, leaves64)
    # Blocking: the compile is measured.
    bar.stage("compiling")
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
    entry = cf.entries()[0]
    report.compile_cache_source = _cache_source(entry, before)
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

    bar.stage("timing eager and compiled")
    p = measure_paired(eager_call, compiled_call, repeats, budget, threads=threads,
                       tick=bar.tick)
    _apply_timing(report, p, compile_cpu, budget, threads)
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
    if roofline:
        bar.stage("kernels against the machine's limits")
        limits = machine_limits()
        report.limits = asdict(limits)
        graphs = [(entry.optimized, "step" if entry.joint else "forward")]
        if entry.backward_graph is not None:
            graphs.append((entry.backward_graph, "backward"))
        report.roofline = [asdict(k) for k in kernel_roofline(
            graphs, limits, budget=min(0.02, budget / 20), tick=bar.tick)]
    if cold_warm:
        bar.stage("cold and warm compiles")
        with tempfile.TemporaryDirectory() as d:
            for attr in ("cold_compile_time", "warm_compile_time"):
                with _fresh_cache(d):
                    f2 = CompiledFunction(fn, tiered=False, parallel=parallel)
                    _run(f2, args, leaves)
                    setattr(report, attr, f2.stats.compile_seconds)
    if ablation:
        bar.stage("pass ablation")
        report.ablation = _ablation(traced, args, e_vals, repeats, budget)


def _ablation(traced: Graph, args: tuple, eager_values: list, repeats: int,
              budget: float = 1.0) -> list[dict]:
    """The forward graph compiled with each pass switched off in turn (and with none off)."""
    build = import_backend().build
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
