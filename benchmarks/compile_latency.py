"""Compile latency, fresh process by fresh process: dualgraph against its peers (issue 13).

Every measurement is a new ``python -c`` process. A *cold* one starts with an empty cache
directory of its own (dualgraph's ``DUALGRAPH_CACHE_DIR``, Numba's ``NUMBA_CACHE_DIR``,
JAX's persistent compilation cache, TorchInductor's cache, PyTensor's compiledir); the
*warm* one after it gets the directory that cold process filled. Per workload:

dualgraph, ``tiered=False``  cold: the blocking first call (trace, passes, Numba compile, run),
                             wall and CPU seconds; warm: a fresh process that imports
                             dualgraph, compiles and runs one step, import included
dualgraph, tiered (default)  cold: the first call's result (tier 0: the optimized graph in
                             NumPy while a worker process compiles), and the seconds after
                             the first call at which a loop of calls swaps to tier 1;
                             warm: as above, with the default tiering
peers, when importable       ``jax.jit``, ``torch.compile``, PyTensor (``mode="NUMBA"``), a
                             hand-written ``numba.njit`` step (``numba_hand.py``): cold
                             first call (compile + run; PyTensor: ``pytensor.function`` +
                             run), warm first result from process start, import included

A first result is read back (``float(loss)``, ``np.asarray(grad)``). Each cell is the median
of ``--repeat`` processes, the processes interleaved, one at a time. The peers can run under
another interpreter (``--peers-python /path/to/venv/bin/python``), so this project's venv
needs no torch or jax; a peer that is not installed there is skipped.

    python benchmarks/compile_latency.py --table --json latency.json
    python benchmarks/compile_latency.py --workload mlp --repeat 1 --no-peers --table
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)

# workload -> the arguments of `peers.build` after the implementation.
WORKLOADS = {
    "scalar": ("scalar",),
    "tinynet": ("mlp", (2, 3, 1), 10, "mse"),
    "mlp": ("mlp", (784, 256, 10), 64, "ce"),
    "chain": ("chain", 1_000_000),
}
DESCRIPTION = {
    "scalar": "scalar z = x*y + y**2, value and gradients",
    "tinynet": "TinyNet 2-3-1 step, batch 10, MSE, SGD",
    "mlp": "MLP step 784-256-10, batch 64, cross-entropy, SGD",
    "chain": "chain, 1M float32, value and gradient",
}
PEERS = ("jax", "torch.compile", "pytensor", "numba-hand")
LABEL = {"dg-blocking": "dualgraph tiered=False", "dg-tiered": "dualgraph (tiered)",
         "jax": "jax.jit", "torch.compile": "torch.compile",
         "pytensor": 'PyTensor mode="NUMBA"', "numba-hand": "hand numba.njit"}

# --------------------------------------------------------------------- child programs
# dualgraph: the clock starts before `import dualgraph`.
_DG = """
import json, sys, time
T0 = time.perf_counter()
sys.path.insert(0, {root!r})
import dualgraph as dg
from dualgraph.workloads import WORKLOADS, train_step
T_IMPORT = time.perf_counter() - T0
t, c = time.perf_counter(), time.process_time()
if {workload!r} in ("mlp", "tinynet"):
    fn, args = train_step({workload!r})
    f = dg.compile(fn, tiered={tiered})
    def run():
        return float(f(*args))
else:
    fn, args = WORKLOADS[{workload!r}].build(False)
    f = dg.compile(fn, tiered={tiered})
    def run():
        for a in args:
            a.grad = None
        z = f(*args)
        z.backward()
        return [float(z)] + [a.grad.numpy() for a in args]
run()
out = {{"import_s": T_IMPORT, "first_s": time.perf_counter() - t,
        "cpu_s": time.process_time() - c, "since_start_s": time.perf_counter() - T0}}
if {tiered} and {wait_swap}:
    deadline = time.perf_counter() + {timeout}
    while f.stats.swap_call is None and f.stats.tier_failure is None \\
            and time.perf_counter() < deadline:
        run()
    out.update(swap_s=f.stats.swap_seconds, swap_call=f.stats.swap_call,
               tier0_calls=f.stats.tier0_calls, worker_s=f.stats.worker_seconds,
               tier_failure=f.stats.tier_failure)
print("RESULT " + json.dumps(out))
"""

# A peer: the data come from dualgraph.workloads, imported before the clock starts.
_PEER = """
import importlib, json, sys, time
sys.path.insert(0, {bench!r})
sys.path.insert(0, {root!r})
import peers
T0 = time.perf_counter()
importlib.import_module(peers.MODULE[{impl!r}])
T_IMPORT = time.perf_counter() - T0
t, c = time.perf_counter(), time.process_time()
peers.readback(peers.build({impl!r}, *{params!r})())
print("RESULT " + json.dumps({{"import_s": T_IMPORT, "first_s": time.perf_counter() - t,
                             "cpu_s": time.process_time() - c,
                             "since_start_s": time.perf_counter() - T0}}))
"""


def _cache_env(impl: str, d: str) -> dict:
    """The environment that points ``impl``'s compilation cache at directory ``d``."""
    env = {"NUMBA_CACHE_DIR": os.path.join(d, "numba")}
    if impl.startswith("dg-"):
        env["DUALGRAPH_CACHE_DIR"] = os.path.join(d, "dualgraph")
    elif impl == "jax":
        env.update(JAX_COMPILATION_CACHE_DIR=os.path.join(d, "jax"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    elif impl == "torch.compile":
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(d, "inductor")
    elif impl == "pytensor":
        env["PYTENSOR_FLAGS"] = f"base_compiledir={os.path.join(d, 'pytensor')}"
    return env


def _script(impl: str, workload: str, wait_swap: bool, timeout: float) -> str:
    if impl.startswith("dg-"):
        return _DG.format(root=ROOT, workload=workload, tiered=impl == "dg-tiered",
                          wait_swap=wait_swap, timeout=timeout)
    return _PEER.format(bench=BENCH, root=ROOT, impl=impl, params=WORKLOADS[workload])


def measure(python: str, impl: str, workload: str, cache: str, wait_swap: bool,
            timeout: float = 600.0) -> dict:
    """One fresh process; its own figures plus the whole process's wall seconds."""
    env = dict(os.environ, **_cache_env(impl, cache))
    env.pop("DUALGRAPH_TIERED", None)  # the tiered row must tier, whatever the caller set
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([python, "-c", _script(impl, workload, wait_swap, timeout)],
                           env=env, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout + 60:.0f} s"}
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {p.returncode}: {tail[:300]}"}
    out = json.loads(lines[-1][len("RESULT "):])
    out["process_s"] = wall
    # CPU of the whole process tree (compile workers included, once they were reaped).
    out["tree_cpu_s"] = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return out


def peers_available(python: str) -> list[str]:
    """The peers that import (and, for torch.compile, compile) under ``python``."""
    code = (f"import json, sys; sys.path[:0] = [{BENCH!r}, {ROOT!r}]; import peers; "
            "print(json.dumps(peers.available()))")
    try:
        p = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
        return [i for i in json.loads(p.stdout.strip().splitlines()[-1]) if i in PEERS]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return []


# ------------------------------------------------------------------------ the runs
def run(workloads: list[str], repeat: int, peers_python: str | None, use_peers: bool,
        verbose: bool = True) -> dict:
    impls = [("dg-blocking", sys.executable), ("dg-tiered", sys.executable)]
    if use_peers:
        py = peers_python or sys.executable
        impls += [(i, py) for i in PEERS if i in peers_available(py)]
    runs: dict = {w: {i: {"cold": [], "warm": []} for i, _ in impls} for w in workloads}
    for r in range(repeat):  # interleaved: one process at a time, round after round
        for w in workloads:
            for impl, py in impls:
                d = tempfile.mkdtemp(prefix="dg-latency-")
                try:
                    for kind in ("cold", "warm"):  # the warm process reuses the cold's cache
                        m = measure(py, impl, w, d, wait_swap=kind == "cold")
                        runs[w][impl][kind].append(m)
                        if verbose:
                            print(f"[{r + 1}/{repeat}] {w:8s} {impl:14s} {kind}: "
                                  + _brief(m), file=sys.stderr, flush=True)
                finally:
                    shutil.rmtree(d, ignore_errors=True)
    return {"meta": _meta(peers_python), "repeat": repeat,
            "results": {w: {i: _summary(v) for i, v in per.items()}
                        for w, per in runs.items()}, "runs": runs}


def _brief(m: dict) -> str:
    if "error" in m:
        return "ERROR " + m["error"]
    return " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in m.items())


def _median(ms: list[dict], key: str) -> float | None:
    xs = [m[key] for m in ms if m.get(key) is not None]
    return statistics.median(xs) if xs else None


def _summary(v: dict) -> dict:
    cold, warm = v["cold"], v["warm"]
    out = {"cold_import_s": _median(cold, "import_s"), "cold_first_s": _median(cold, "first_s"),
           "cold_cpu_s": _median(cold, "cpu_s"), "cold_process_s": _median(cold, "process_s"),
           "cold_tree_cpu_s": _median(cold, "tree_cpu_s"),
           "warm_first_s": _median(warm, "since_start_s"),
           "warm_process_s": _median(warm, "process_s"),
           "swap_s": _median(cold, "swap_s"), "worker_s": _median(cold, "worker_s"),
           "tier0_calls": _median(cold, "tier0_calls")}
    errors = [m["error"] for m in cold + warm if "error" in m]
    if errors:
        out["errors"] = errors
    return out


def _meta(peers_python: str | None) -> dict:
    cpu = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"date": time.strftime("%Y-%m-%d"), "cpu": cpu, "cores": os.cpu_count(),
            "python": platform.python_version(), "executable": sys.executable,
            "peers_python": peers_python}


# --------------------------------------------------------------------------- output
def _s(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:.3f} s" if x < 1 else f"{x:.2f} s"


def table(data: dict) -> str:
    """The markdown table: one block of rows per workload."""
    rows = ["| workload | implementation | import | cold: first result | cold: CPU of the call "
            "| cold: CPU of the whole process tree | tier 1 at "
            "| warm: first result, import included |",
            "|---|---|---|---|---|---|---|---|"]
    for w, per in data["results"].items():
        for k, (impl, s) in enumerate(per.items()):
            cold = _s(s["cold_first_s"])
            if impl == "dg-tiered" and cold:
                cold += " (tier 0)"
            swap = _s(s["swap_s"])
            if s.get("errors"):
                cold = cold or "failed"
            rows.append(f"| {w if k == 0 else ''} | {LABEL[impl]} | {_s(s['cold_import_s'])} "
                        f"| {cold} | {_s(s['cold_cpu_s'])} | {_s(s['cold_tree_cpu_s'])} "
                        f"| {swap} | {_s(s['warm_first_s'])} |")
    legend = "; ".join(f"{w}: {DESCRIPTION[w]}" for w in data["results"])
    return "\n".join(rows) + f"\n\n{legend}."


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", action="append", choices=sorted(WORKLOADS),
                    help="default: scalar, mlp, chain")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per cell (median)")
    ap.add_argument("--peers-python", help="interpreter for the peers (e.g. a venv with "
                    "torch, jax, pytensor); default: this one")
    ap.add_argument("--no-peers", action="store_true", help="dualgraph only")
    ap.add_argument("--table", action="store_true", help="print the markdown table")
    ap.add_argument("--json", help="write every measurement and the medians here")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-process lines")
    ap.add_argument("--from-json", help="print the table of an earlier --json file")
    args = ap.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        print(table(data))
        return
    data = run(args.workload or ["scalar", "mlp", "chain"], args.repeat, args.peers_python,
               not args.no_peers, verbose=not args.quiet)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    if args.table or not args.json:
        m = data["meta"]
        print(f"{m['date']}, {m['cpu']}, {m['cores']} cores, median of {data['repeat']}\n")
        print(table(data))


if __name__ == "__main__":
    main()
