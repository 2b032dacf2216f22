"""Compiled dualgraph against eager, hand-written NumPy and Numba, and peers when installed.

Workloads:
  W1      scalar  z = x*y + y**2, forward + backward
  W2tiny  TinyNet 2->3->1 train step (MSE, SGD), batch 10, whole step compiled
  W2mlp   MLP 784->256->10 train step (cross-entropy, SGD), batch 64, whole step compiled
  W3      1M float32 sum(tanh(.5x+1)*sigmoid(x)+.1x^2), value and gradient
  W4cnn   LeNet-5 style CNN train step (cross-entropy, Adam), batch 64 of 1x28x28
  W5tr    pre-norm transformer encoder block train step (next-token cross-entropy, Adam),
          batch 16 x seq 64 x width 128, vocab 256
and the compile-time rows (fresh processes): cold compile of the MLP step, and the first
result with a warm disk cache, import included (``compile_latency.py`` has the full
fresh-process comparison with the peers).

Implementations: ``numpy`` and ``numba-hand`` (hand-written), dualgraph ``eager`` and
``compiled``, and the peers ``torch`` (eager), ``torch.compile``, ``jax`` (``jax.jit``) and
``pytensor`` (``mode="NUMBA"``), each only when its library is installed (``peers.py``;
W4cnn/W5tr have NumPy, dualgraph, torch, ``torch.compile`` and ``jax.jit`` versions).

Every step's result is read back on every call (the loss with ``float()``/``.item()``, value
and gradients with ``np.asarray``), as a training loop that logs its loss does: that is the
default and the ratio table's mode. ``--no-readback`` only waits for the result (JAX's
dispatch is asynchronous) and leaves it in the library's own type. Every library is pinned
to one thread (``single_thread.py``: BLAS, ``NUMBA_NUM_THREADS=1``, ``torch.set_num_threads(1)``,
XLA's ``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``).

    python benchmarks/compiled.py --fast --table -o compiled.json
    python benchmarks/compiled.py --compile-times          # the fresh-process rows only
    python benchmarks/compiled.py --scaling --fast --table  # W3 and MLP step by size
    python benchmarks/compiled.py --interleaved --workload W1   # the ratio tables' method

``--interleaved`` times every implementation of a workload in one process, pinned to one
CPU, alternating them round by round, and reports each ratio as the median of per-round
ratios with its interquartile range (``interleaved.py``): the method behind the ratio
tables in ``docs/benchmarks.md``, since pyperf's workers run one implementation after
another and a shared machine's load drifts between them.

``--scaling`` times W3 at 1e3..1e7 elements and the MLP step at batch 16..1024, and prints
dualgraph-compiled against the best peer of the same run. Each step is built lazily in the
pyperf worker that times it (the build, including any compile, is never timed).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import single_thread  # noqa: E402

single_thread.set_env()  # the targets are single-thread figures
# Blocking compiles: the compile rows measure the compile itself, and a call must not be
# timed while a background worker competes for the cores (pyperf's workers inherit it).
os.environ.setdefault("DUALGRAPH_TIERED", "0")

import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pyperf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import interleaved  # noqa: E402  (benchmarks/ is on sys.path)
import models_numpy  # noqa: E402
import peers  # noqa: E402

import dualgraph as dg  # noqa: E402
from dualgraph.optim import SGD  # noqa: E402
from dualgraph.workloads import (  # noqa: E402
    MLPS,
    TRANSFORMER_SIZES,
    WORKLOADS,
    chain_data,
    mlp_data,
    mlp_model,
    model_step,
)

LR = peers.LR
PEERS = ("numpy", "numba-hand", "torch", "torch.compile", "jax", "pytensor")


# ------------------------------------------------------------------ dualgraph's steps
def w1_dualgraph(compiled: bool):
    def run():
        f, (x, y) = WORKLOADS["scalar"].build(False)
        if compiled:
            f = dg.compile(f)

        def step():
            x.grad = None
            y.grad = None
            z = f(x, y)
            z.backward()
            return z, x.grad, y.grad

        return step
    return run


def mlp_dualgraph(sizes: tuple, batch: int, loss: str, compiled: bool, parallel: bool = False):
    """One SGD step of dualgraph.workloads' MLP ``sizes`` at batch ``batch`` (compiled with
    ``parallel=`` when ``compiled``)."""
    def run():
        net, loss_fn = mlp_model(sizes, loss)
        opt = SGD(net.parameters(), lr=LR)
        x, t = (dg.tensor(a) for a in mlp_data(sizes, batch, loss))

        def train(x, t):
            opt.zero_grad()
            out = loss_fn(net(x), t)
            out.backward()
            opt.step()
            return out

        f = dg.compile(train, parallel=parallel) if compiled else train
        return lambda: f(x, t)
    return run


def chain_dualgraph(n: int, compiled: bool, parallel: bool = False):
    """The ``chain`` workload's value and gradient at ``n`` elements (compiled with
    ``parallel=`` when ``compiled``)."""
    def run():
        f, _ = WORKLOADS["chain"].build(True)
        x = dg.tensor(chain_data(n), requires_grad=True)
        if compiled:
            f = dg.compile(f, parallel=parallel)

        def step():
            x.grad = None
            v = f(x)
            v.backward()
            return v, x.grad

        return step
    return run


def _peer(impl: str, *params):
    return lambda: peers.build(impl, *params)


# --------------------------------------------------------------- W4 (cnn), W5 (transformer)
MODEL_LR = peers.MODEL_LR
_MODELS = {"cnn": "W4cnn", "transformer": "W5tr"}


def _model_numpy_args(name: str):
    """The hand-written step's loss function, fixed leading arguments and data."""
    _, (x, t), net = model_step(name, MODEL_LR)
    params = {k: v.numpy().copy() for k, v in net.named_parameters()}
    if name == "cnn":
        return models_numpy.cnn_loss_and_grads, params, (), (x.numpy(), t.numpy())
    heads = TRANSFORMER_SIZES[name]["heads"]
    return models_numpy.transformer_loss_and_grads, params, (heads,), (x.numpy(), t.numpy())


def wm_dualgraph(name: str, compiled: bool):
    def run():
        step, (x, t), _ = model_step(name, MODEL_LR)
        f = dg.compile(step, tiered=False) if compiled else step
        return lambda: f(x, t)
    return run


def wm_numpy(name: str):
    def run():
        fn, params, fixed, data = _model_numpy_args(name)
        step = models_numpy.train_step(fn, params, MODEL_LR, *fixed)
        return lambda: step(*data)
    return run


_MLP = {"W2tiny": MLPS["tinynet"], "W2mlp": MLPS["mlp"]}
W3_N = 1_000_000


def workloads(available: list[str]) -> dict:
    """workload -> {implementation: factory returning a zero-argument step}, with the peers
    in ``available`` only."""
    table = {"W1": {"eager": w1_dualgraph(False), "compiled": w1_dualgraph(True),
                    **{p: _peer(p, "scalar") for p in PEERS}}}
    for wl, params in _MLP.items():
        table[wl] = {"eager": mlp_dualgraph(*params, compiled=False),
                     "compiled": mlp_dualgraph(*params, compiled=True),
                     **{p: _peer(p, "mlp", *params) for p in PEERS}}
    table["W3"] = {"eager": chain_dualgraph(W3_N, False), "compiled": chain_dualgraph(W3_N, True),
                   **{p: _peer(p, "chain", W3_N) for p in PEERS}}
    for name, wl in _MODELS.items():
        table[wl] = {"numpy": wm_numpy(name), "eager": wm_dualgraph(name, False),
                     "compiled": wm_dualgraph(name, True),
                     **{p: _peer(p, name) for p in PEERS if peers.has(p, name)}}
    return _only(table, available)


SCALING_N = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
SCALING_BATCH = (16, 64, 256, 1024)


def scaling_workloads(available: list[str]) -> dict:
    """W3 at each of `SCALING_N` elements and the MLP step at each of `SCALING_BATCH`."""
    table = {}
    for n in SCALING_N:
        table[f"W3@{n:.0e}"] = {"compiled": chain_dualgraph(n, True),
                                **{p: _peer(p, "chain", n) for p in PEERS}}
    sizes, _, loss = MLPS["mlp"]
    for b in SCALING_BATCH:
        table[f"MLP@{b}"] = {"compiled": mlp_dualgraph(sizes, b, loss, True),
                             **{p: _peer(p, "mlp", sizes, b, loss) for p in PEERS}}
    return _only(table, available)


def _only(table: dict, available: list[str]) -> dict:
    return {wl: {i: f for i, f in impls.items() if i not in PEERS or i in available}
            for wl, impls in table.items()}


# ------------------------------------------------------------ compile-time (fresh process)
_COLD = """
import time, sys
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import dualgraph as dg
from dualgraph.workloads import train_step
step, args = train_step("mlp")
step = dg.compile(step)
step(*args)
print(time.perf_counter() - t0, step.stats.compile_seconds)
"""


def compile_times(repeats: int = 3) -> dict:
    """Cold compile (empty cache) and warm first result (cache from a previous process),
    each in a fresh process, median of ``repeats``; seconds since interpreter start."""
    script = _COLD.format(root=ROOT)
    cold, warm = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, DUALGRAPH_CACHE_DIR=d)
            for bucket in (cold, warm):
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                     capture_output=True, text=True).stdout.split()
                total = time.perf_counter() - t0
                bucket.append((total, float(out[0]), float(out[1])))
    med = lambda xs, k: float(np.median([x[k] for x in xs]))
    return {"cold_process_s": med(cold, 0), "cold_compile_s": med(cold, 2),
            "warm_process_s": med(warm, 0), "warm_first_result_s": med(warm, 1)}


# ---------------------------------------------------------------------------- running
def _loop(factory, readback: bool):
    """pyperf's time function: builds the step on its first call (in the worker that
    times it; not timed), then times ``loops`` steps, each read back or waited for."""
    state = {}
    finish = peers.readback if readback else peers.sync

    def run(loops):
        step = state.get("step")
        if step is None:
            step = state["step"] = factory()
            single_thread.limit()  # libraries the build loaded
            finish(step())  # compile / warm up outside the timings
        t0 = pyperf.perf_counter()
        for _ in range(loops):
            finish(step())
        return pyperf.perf_counter() - t0
    return run


def _fmt(t: float | None) -> str:
    if t is None:
        return ""
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    return f"{t * 1e3:.3f} ms" if t < 1 else f"{t:.3f} s"


def _best_peer(med: dict, wl: str, impls) -> tuple[str | None, float | None]:
    times = {i: med[f"{wl}/{i}"] for i in impls if i in PEERS and f"{wl}/{i}" in med}
    if not times:
        return None, None
    best = min(times, key=times.get)
    return best, times[best]


def print_table(suite, table: dict, readback: bool, extra: dict | None = None) -> None:
    """Markdown: a row per workload, a column per implementation (ratio to hand NumPy),
    and compiled against the best peer."""
    med = {b.get_name(): b.median() for b in suite.get_benchmarks()}
    impls = ["numpy", "numba-hand", "eager", "compiled", *PEERS[2:]]
    impls = [i for i in impls if any(f"{wl}/{i}" in med for wl in table)]
    print(f"\nresults {'read back on every call' if readback else 'not read back'}; "
          "ratio to hand NumPy in brackets\n")
    print("| workload | " + " | ".join(impls) + " | compiled / best peer |")
    print("|---" * (len(impls) + 2) + "|")
    for wl in table:
        base = med.get(f"{wl}/numpy")
        cells = []
        for i in impls:
            t = med.get(f"{wl}/{i}")
            cell = _fmt(t)
            if t is not None and base:
                cell += f" ({t / base:.2f}x)"
            cells.append(f"**{cell}**" if i == "compiled" and cell else cell)
        best, bt = _best_peer(med, wl, impls)
        c = med.get(f"{wl}/compiled")
        ratio = f"{c / bt:.2f}x ({best})" if c and bt else ""
        print(f"| {wl} | " + " | ".join(cells) + f" | {ratio} |")
    for k, v in (extra or {}).items():
        print(f"{k:30s} {v:.2f} s")


def print_scaling(suite, table: dict, readback: bool) -> None:
    """Markdown: compiled time per size, every peer, and compiled / best peer."""
    med = {b.get_name(): b.median() for b in suite.get_benchmarks()}
    cols = [p for p in PEERS if any(f"{wl}/{p}" in med for wl in table)]
    print(f"\nresults {'read back on every call' if readback else 'not read back'}\n")
    print("| workload @ size | **dualgraph compiled** | " + " | ".join(cols)
          + " | compiled / best peer |")
    print("|---" * (len(cols) + 3) + "|")
    for wl in table:
        best, bt = _best_peer(med, wl, cols)
        c = med.get(f"{wl}/compiled")
        ratio = f"{c / bt:.2f}x ({best})" if c and bt else ""
        print(f"| {wl} | **{_fmt(c)}** | " + " | ".join(_fmt(med.get(f"{wl}/{p}"))
                                                         for p in cols) + f" | {ratio} |")


def _worker_args(cmd: list, args) -> None:
    """pyperf's workers are new processes: they must build the same list of benchmarks as
    the parent (or they would number them differently and run the wrong ones)."""
    for w in args.workload or ():
        cmd.extend(["--workload", w])
    cmd.extend(["--peers", args.peers])
    if args.impls:
        cmd.extend(["--impls", args.impls])
    if args.scaling:
        cmd.append("--scaling")
    if args.no_readback:
        cmd.append("--no-readback")


INTERLEAVED_PAIRS = [("compiled", interleaved.BEST), ("eager", "torch"),
                     ("compiled", "eager"), ("compiled", "numpy")]


def run_interleaved(table: dict, args) -> None:
    """Every implementation of a workload in this process, alternated round by round;
    the table gives median per-round ratios (see ``interleaved.py``)."""
    finish = peers.readback if not args.no_readback else peers.sync
    results = {}
    meta = interleaved.machine()
    for wl, impls in table.items():
        print(f"{wl}: {', '.join(impls)}", flush=True)
        results[wl] = interleaved.measure(impls, args.rounds, args.block, finish)
    meta["load_after"] = interleaved.machine().get("load")
    print(f"\n{meta}; {args.rounds} rounds; results "
          f"{'not ' if args.no_readback else ''}read back; median per-round ratio "
          "(interquartile range)\n")
    for clock in ("wall", "cpu"):
        print(f"\n{clock} time\n")
        print(interleaved.table(results, INTERLEAVED_PAIRS, PEERS, clock=clock))
    if args.json:
        interleaved.save(args.json, results, meta)


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_worker_args)
    ap = runner.argparser
    ap.add_argument("--table", action="store_true", help="print the table")
    ap.add_argument("--workload", action="append",
                    help="W1, W2tiny, W2mlp, W3, W4cnn, W5tr (with --scaling: W3@1e+03, "
                    "MLP@64, ...)")
    ap.add_argument("--compile-times", action="store_true",
                    help="only measure the fresh-process compile rows")
    ap.add_argument("--scaling", action="store_true",
                    help="W3 at 1e3..1e7 elements and the MLP step at batch 16..1024")
    ap.add_argument("--no-readback", action="store_true",
                    help="do not read results back (only wait for them)")
    ap.add_argument("--peers", help="comma-separated peers to run (default: every one that "
                    "is installed: " + ",".join(PEERS) + ")")
    ap.add_argument("--impls", help="comma-separated implementations to run (default: all; "
                    "e.g. eager,torch)")
    ap.add_argument("--interleaved", action="store_true",
                    help="time every implementation of a workload in this one process, "
                    "alternating them round by round (no pyperf workers)")
    ap.add_argument("--rounds", type=int, default=15, help="--interleaved: rounds")
    ap.add_argument("--block", type=float, default=0.05,
                    help="--interleaved: seconds per block of calls")
    ap.add_argument("--json", help="--interleaved: write the per-round times here")
    args = runner.parse_args()
    if args.compile_times:
        for k, v in compile_times().items():
            print(f"{k:24s} {v:.2f} s")
        return
    if args.peers is None:  # the parent decides once; its workers get the list
        args.peers = ",".join(peers.available())
    available = [p for p in args.peers.split(",") if p]
    single_thread.limit()
    table = (scaling_workloads if args.scaling else workloads)(available)
    if args.workload:
        table = {wl: impls for wl, impls in table.items() if wl in args.workload}
    if args.impls:
        keep = args.impls.split(",")
        table = {wl: {i: f for i, f in impls.items() if i in keep}
                 for wl, impls in table.items()}
    if args.interleaved:
        run_interleaved(table, args)
        return
    readback = not args.no_readback
    suite = []
    for wl, impls in table.items():
        for impl, factory in impls.items():
            b = runner.bench_time_func(f"{wl}/{impl}", _loop(factory, readback))
            if b is not None:
                suite.append(b)
    if args.table and suite and not runner.args.worker:
        suite = pyperf.BenchmarkSuite(suite)
        if args.scaling:
            print_scaling(suite, table, readback)
        else:
            extra = None if args.workload else compile_times(1)
            print_table(suite, table, readback, extra)


if __name__ == "__main__":
    main()
