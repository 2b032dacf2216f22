"""Where a model step's cold compile goes: each distinct function of its kernels compiled
alone, in this process, from an empty cache, timed by this thread's CPU time (a loaded
machine's waiting is not counted), with Numba's own split of it (``llvm``: the time spent
holding its LLVM lock, i.e. optimising and emitting machine code; the rest is typing and
lowering to LLVM IR) and what the function holds, counted on its kernel IR.

    python -m tools.compile_profile [cnn|transformer|transformer-4] [--segment-lines N]
        [--json FILE] [--phases]

Prints one Markdown row per function, then the totals by construct, then where Numba's
compile time went by function compiled: the kernel parts, and each helper they pull in
(typed once per process and argument types, so every compile process pays it again).
``--phases`` prints instead where it went by phase of Numba's compiler: each pass of its
pipeline, and inside native lowering the Python lowering to LLVM IR, the entry wrappers,
LLVM's per-function and module optimisation, machine code emission and the cache write.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any


class TakenError(Exception):
    """Raised by a stand-in for ``backend.build`` to stop `dg.compile` once it has what
    it wanted (a graph, a built kernel)."""


@contextlib.contextmanager
def build_swapped(stand_in: Callable) -> Iterator[Callable]:
    """``dualgraph.backend.numba.build`` replaced by ``stand_in`` (called as the backend
    is: ``(graph, parallel=..., use_cache=..., name=..., write_to=..., ...)``) while the
    block runs; yields the real one. A stand-in raises `TakenError` to stop the caller."""
    import dualgraph.backend.numba as backend

    real = backend.build
    backend.build = stand_in
    try:
        yield real
    finally:
        backend.build = real


def step_graphs(workload: str, quick: bool = False) -> list[tuple[Any, dict]]:
    """The optimized graphs (and in-place writes) `dg.compile` hands the backend for the
    workload's Adam step, taken without compiling them."""
    import dualgraph as dg
    from dualgraph.workloads import model_step

    seen: list = []

    def take(graph, parallel=False, use_cache=True, name="kernel", write_to=None, **kw):
        seen.append((graph, dict(write_to or {})))
        raise TakenError

    with build_swapped(take):
        step, args, _ = model_step(workload, quick=quick)
        try:
            dg.compile(step, tiered=False)(*args)
        except TakenError:
            pass
    return seen


def counts(stmts: list) -> Counter:
    """What a kernel's IR holds: loop nests (top-level loops), loops, scalar lets, math
    calls by name, GEMMs (batched ones by their item count), library calls, views."""
    from dualgraph.backend import kir

    c: Counter = Counter()
    for s in stmts:
        if isinstance(s, kir.Loop):
            c["nests"] += 1
    for s in kir.walk(stmts):
        if isinstance(s, kir.Loop):
            c["loops"] += 1
        elif isinstance(s, kir.Let):
            c["lets"] += 1
        elif isinstance(s, kir.Gemm):
            c["gemm" if s.batch == 1 else "gemm-batched"] += 1
        elif isinstance(s, kir.LibCall):
            c[f"lib:{s.fn}"] += 1
        elif isinstance(s, kir.View):
            c["views"] += 1
        for e in kir.exprs_of(s):
            for x in kir.subexprs(e):
                if isinstance(x, kir.Call):
                    c[f"call:{x.fn}"] += 1
                elif isinstance(x, kir.Bin) and x.op == "**":
                    c["pow"] += 1
    return c


class _LlvmCpu:
    """This thread's CPU seconds inside Numba's LLVM lock (optimising and emitting code)."""

    def __init__(self) -> None:
        from numba.core import event

        self.seconds = 0.0
        self._t0 = 0.0
        outer = self

        class L(event.Listener):
            def on_start(self, ev: Any) -> None:
                outer._t0 = time.thread_time()

            def on_end(self, ev: Any) -> None:
                outer.seconds += time.thread_time() - outer._t0

        event.register("numba:llvm_lock", L())


class _ByFunction:
    """This thread's CPU seconds per function Numba compiles (``numba:compile`` events,
    nested ones subtracted from their caller): the generated kernels, grouped as "kernel
    parts", and each helper they pull in (dualgraph's BLAS and math helpers, Numba's
    implementations of NumPy functions), typed once per process and argument types."""

    def __init__(self) -> None:
        from collections import defaultdict

        from numba.core import event

        self.own: dict = defaultdict(float)
        self.count: Counter = Counter()
        stack: list = []
        outer = self

        class L(event.Listener):
            def on_start(self, ev: Any) -> None:
                stack.append([time.thread_time(), 0.0])

            def on_end(self, ev: Any) -> None:
                t0, nested = stack.pop()
                spent = time.thread_time() - t0
                fn = ev.data["dispatcher"].py_func
                key = ("kernel parts" if fn.__module__.startswith("dualgraph_kernels") else
                       f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__qualname__}")
                outer.own[key] += spent - nested
                outer.count[key] += 1
                if stack:
                    stack[-1][1] += spent

        event.register("numba:compile", L())


class Phases:
    """This thread's CPU seconds per phase of Numba's compiler, each phase's own time (the
    phases it calls, such as a nested compile's passes, subtracted): ``pass:<name>`` per
    pass of the pipeline, and inside native lowering ``lower:*`` (Numba's Python code
    building LLVM IR), ``llvm:*`` (LLVM's work, reached through llvmlite) and
    ``cache:write``. Wraps Numba's methods while the block runs."""

    def __init__(self) -> None:
        from collections import defaultdict

        self.own: dict[str, float] = defaultdict(float)
        self._stack: list = []
        self._undo: list = []

    def _wrap(self, owner: Any, attr: str, name: Callable[..., str]) -> None:
        real = getattr(owner, attr)
        outer = self

        def timed(*a: Any, **k: Any) -> Any:
            outer._stack.append([time.thread_time(), 0.0])
            try:
                return real(*a, **k)
            finally:
                t0, nested = outer._stack.pop()
                spent = time.thread_time() - t0
                outer.own[name(*a)] += spent - nested
                if outer._stack:
                    outer._stack[-1][1] += spent

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, real))

    def __enter__(self) -> Phases:
        from numba.core import codegen, compiler_machinery, cpu, lowering

        from dualgraph.backend.numba import cache

        self._wrap(compiler_machinery.PassManager, "_runPass",
                   lambda pm, i, pss, state: f"pass:{pss.name()}")
        lib = codegen.CPUCodeLibrary
        self._wrap(lib, "add_ir_module", lambda *a: "lower:IR module as text, parsed")
        self._wrap(codegen.ll, "parse_assembly", lambda *a: "llvm:parse IR")
        self._wrap(lib, "_optimize_functions", lambda *a: "llvm:function passes")
        self._wrap(lib, "_optimize_final_module", lambda *a: "llvm:module passes")
        self._wrap(codegen.JITCodeLibrary, "_finalize_specific",
                   lambda *a: "llvm:machine code emission")
        self._wrap(lowering.Lower, "lower_normal_function", lambda *a: "lower:function body")
        self._wrap(cpu.CPUContext, "create_cpython_wrapper", lambda *a: "lower:Python entry")
        self._wrap(cpu.CPUContext, "create_cfunc_wrapper", lambda *a: "lower:C entry")
        self._wrap(cache._SignedCache, "save_overload", lambda *a: "cache:write")
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, attr, real in reversed(self._undo):
            setattr(owner, attr, real)


def warm_up() -> float:
    """CPU seconds of Numba's first compile in a process (its own start), on a function
    that calls the helpers generated kernels use, so no part below is charged for it."""
    import numba
    import numpy as np

    from dualgraph.backend.numba import blas as dgb  # noqa: F401 - typed on first use
    from dualgraph.backend.numba import kernels as dgk

    t0 = time.thread_time()

    @numba.njit(error_model="numpy", nogil=True)
    def first(x, o):
        for i in range(x.shape[0]):
            o[i] = dgk.exp_f32(x[i])
        return 0

    first(np.zeros(4, np.float32), np.zeros(4, np.float32))
    return time.thread_time() - t0


def phases(workload: str, quick: bool = False) -> None:
    """Print the step's cold compile by phase of Numba's compiler (`Phases`): each distinct
    function compiled once, in this process, from an empty cache."""
    import numpy as np

    from dualgraph.backend.numba import build, cache, compile_dispatcher

    graphs = step_graphs(workload, quick)
    with tempfile.TemporaryDirectory() as d, cache.isolated(d):
        warm_up()
        seen: set = set()
        with Phases() as ph:
            t0 = time.thread_time()
            for graph, write_to in graphs:
                k = build(graph, write_to=write_to)
                arrays = [np.zeros(tuple(n.shape) or (1,), n.dtype) for n in graph.inputs]
                sig = k.signature(arrays, prepared=True)
                for owner, s in ([(k, sig)] if not k.parts else zip(k.parts, sig)):
                    digest = cache.digest_of(owner.code)
                    if digest not in seen:
                        seen.add(digest)
                        compile_dispatcher(owner.fn, owner.path, tuple(s))
            total = time.thread_time() - t0
    print(f"load average {os.getloadavg()}; {len(seen)} functions", file=sys.stderr)
    print(f"| phase ({workload}) | CPU s | share |")
    print("|---|---|---|")
    for name, sec in sorted(ph.own.items(), key=lambda kv: -kv[1]):
        if sec >= 0.05:
            print(f"| {name} | {sec:.2f} | {sec / total:.0%} |")
    rest = total - sum(v for v in ph.own.values() if v >= 0.05)
    print(f"| other (smaller phases, building kernels) | {rest:.2f} | {rest / total:.0%} |")
    print(f"| **total** | **{total:.2f}** | |")


def signature_only(body: str) -> tuple[str, str]:
    """``body`` (a kernel function's source as `lower` makes it) cut to its ``def`` line
    and ``return 0``, and the function's name: compiled with the same argument types, what
    the function's arguments alone cost (their unboxing, the Python entry, each array
    value the function holds)."""
    for line in body.splitlines():
        if line.startswith("def "):
            return f"{line}\n    return 0", line[4:line.index("(")]
    raise ValueError("no function definition in the kernel source")


def profile(workload: str, segment_lines: int | None = None, quick: bool = False,
            reverse: bool = False, graphs: list | None = None,
            signatures: bool = False) -> list:
    """One row per part of the workload's kernels (``graphs``: these `step_graphs`
    instead), its first compile timed; shared parts are marked, not compiled again.
    ``signatures``: each row also times the compile of the part's `signature_only`
    (``signature``) and counts its arguments (``args``)."""
    from dualgraph.backend.numba import build, cache, compile_dispatcher

    rows = []
    llvm = _LlvmCpu()
    by_fn = _ByFunction()
    with tempfile.TemporaryDirectory() as d, cache.isolated(d):
        rows.append({"warm_up": warm_up()})
        graphs = step_graphs(workload, quick) if graphs is None else graphs
        seen: set = set()
        for gi, (graph, write_to) in enumerate(graphs):
            k = build(graph, write_to=write_to, segment_lines=segment_lines)
            # Argument types of the step's own call: arrays as the runtime passes them.
            import numpy as np

            arrays = [np.zeros(tuple(n.shape) or (1,), n.dtype) for n in graph.inputs]
            sig = k.signature(arrays, prepared=True)
            owners = list(enumerate([(k, sig)] if not k.parts else zip(k.parts, sig)))
            # Compiled last part first: what the first compile of a process pays moves
            # to whichever part comes first.
            for pi, (owner, s) in (owners[::-1] if reverse else owners):
                digest = cache.digest_of(owner.code)
                if digest in seen:
                    rows.append({"graph": gi, "part": pi, "shared": True})
                    continue
                seen.add(digest)
                t0, w0, l0 = time.thread_time(), time.perf_counter(), llvm.seconds
                compile_dispatcher(owner.fn, owner.path, tuple(s))
                cpu, wall = time.thread_time() - t0, time.perf_counter() - w0
                first = next((c.text for c in owner.lowered.ir
                              if type(c).__name__ == "Comment" and c.node), "")
                rows.append({"graph": gi, "part": pi, "shared": False, "cpu": cpu,
                             "wall": wall, "llvm": llvm.seconds - l0,
                             "lines": owner.lowered.source.count("\n") + 1,
                             "first": first[:60], "counts": dict(counts(owner.lowered.ir))})
                if signatures:
                    stub, name = signature_only(owner.lowered.code)
                    fn, _, _ = cache.load(stub, name, owner.parallel, False, owner.contract)
                    t0 = time.thread_time()
                    compile_dispatcher(fn, None, tuple(s))
                    rows[-1].update(signature=time.thread_time() - t0, args=len(s))
    rows.append({"by_function": {k: (by_fn.count[k], v) for k, v in by_fn.own.items()}})
    return rows


def opt_levels(workload: str, levels: list[int], rounds: int, quick: bool = False) -> None:
    """The step's kernels compiled cold at each LLVM optimisation level (CPU seconds of
    this thread, each level in an empty cache of its own), then run in interleaved rounds:
    per round, one call of each level's kernels timed by CPU time; prints the median
    compile time and the median per-round run-time ratio to the first level."""
    import statistics

    import numpy as np

    from dualgraph.backend.numba import build, cache, compile_dispatcher

    (graph, write_to), *_ = step_graphs(workload, quick)
    rng = np.random.default_rng(0)
    base = [np.abs(rng.standard_normal(tuple(n.shape) or (1,))).astype(n.dtype) * 0.1
            if np.dtype(n.dtype).kind == "f" else np.zeros(tuple(n.shape) or (1,), n.dtype)
            for n in graph.inputs]
    warm_up()
    kernels, compile_cpu = {}, {}
    for level in levels:
        with tempfile.TemporaryDirectory() as d, cache.isolated(d):
            k = build(graph, write_to=write_to, opt=level)
            sig = k.signature([a.copy() for a in base], prepared=True)
            t0 = time.thread_time()
            for owner, s in ([(k, sig)] if not k.parts else zip(k.parts, sig)):
                if tuple(s) not in owner.fn.overloads:
                    compile_dispatcher(owner.fn, owner.path, tuple(s))
            compile_cpu[level] = time.thread_time() - t0
            kernels[level] = k
        print(f"opt {level}: compile {compile_cpu[level]:.1f} s CPU, load "
              f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    state = {lv: ([a.copy() for a in base], k.new_outputs()) for lv, k in kernels.items()}
    times: dict = {lv: [] for lv in levels}
    for r in range(rounds):
        order = levels[r % len(levels):] + levels[:r % len(levels)]
        for lv in order:
            ins, outs = state[lv]
            t0 = time.thread_time()
            for _ in range(3):
                kernels[lv].run(ins, outs)
            times[lv].append((time.thread_time() - t0) / 3)
    first = levels[0]
    print(f"load average {os.getloadavg()}")
    print("| LLVM level | cold compile, CPU s | step, CPU ms (median) | step / level "
          f"{first} (median per round, IQR) |")
    print("|---|---|---|---|")
    for lv in levels:
        ratios = sorted(t / f for t, f in zip(times[lv], times[first]))
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        print(f"| {lv} | {compile_cpu[lv]:.1f} | {statistics.median(times[lv]) * 1e3:.1f} | "
              f"{statistics.median(ratios):.3f} ({q[0]:.3f}-{q[2]:.3f}) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", nargs="?", default="transformer")
    ap.add_argument("--segment-lines", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--opt-levels", help="comma-separated LLVM levels to compare, e.g. 3,1")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reverse", action="store_true",
                    help="compile each graph's parts last to first")
    ap.add_argument("--phases", action="store_true",
                    help="where the compile goes by phase of Numba's compiler")
    a = ap.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    os.environ["DUALGRAPH_COMPILE_JOBS"] = "1"
    if a.phases:
        phases(a.workload, a.quick)
        return
    if a.opt_levels:
        opt_levels(a.workload, [int(x) for x in a.opt_levels.split(",")], a.rounds, a.quick)
        return
    t0 = time.process_time()
    rows = profile(a.workload, a.segment_lines, a.quick, a.reverse)
    total_cpu = time.process_time() - t0
    print(f"load average {os.getloadavg()}; process CPU {total_cpu:.1f} s", file=sys.stderr)
    print("| kernel.part | lines | CPU s | of it LLVM s | nests | loops | lets | GEMMs | "
          "math calls | first node |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    tot: Counter = Counter()
    for r in rows:
        if "by_function" in r:
            continue
        if "warm_up" in r:
            print(f"| Numba's first compile | | {r['warm_up']:.2f} | | | | | | | |")
            continue
        if r["shared"]:
            print(f"| {r['graph']}.{r['part']} | shared | | | | | | | | |")
            continue
        c = Counter(r["counts"])
        tot.update(c)
        tot["cpu"] += r["cpu"]
        tot["llvm"] += r["llvm"]
        tot["lines"] += r["lines"]
        calls = ", ".join(f"{k[5:]} {v}" for k, v in sorted(c.items()) if k.startswith("call:"))
        if c["pow"]:
            calls += f", ** {c['pow']}"
        print(f"| {r['graph']}.{r['part']} | {r['lines']} | {r['cpu']:.2f} | {r['llvm']:.2f} | "
              f"{c['nests']} | {c['loops']} | {c['lets']} | "
              f"{c['gemm'] + c['gemm-batched']} | {calls} | `{r['first']}` |")
    print(f"| total | {tot['lines']} | {tot['cpu']:.2f} | {tot['llvm']:.2f} | {tot['nests']} | "
          f"{tot['loops']} | {tot['lets']} | {tot['gemm'] + tot['gemm-batched']} | | |")
    funcs = rows[-1]["by_function"]
    print("\n| function Numba compiled (own CPU, nested compiles excluded) | compiles | CPU s |")
    print("|---|---|---|")
    shown = sorted(funcs.items(), key=lambda kv: -kv[1][1])
    for k, (n, sec) in shown[:12]:
        print(f"| `{k}` | {n} | {sec:.2f} |")
    rest = shown[12:]
    print(f"| {len(rest)} others | {sum(n for _, (n, _) in rest)} | "
          f"{sum(sec for _, (_, sec) in rest):.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "process_cpu": total_cpu,
                       "load": os.getloadavg()}, f, indent=1)


if __name__ == "__main__":
    main()
