"""The ``dualgraph`` command (also ``python -m dualgraph``).

    dualgraph compare [--quick] [--workload NAME] [--json PATH] [--plot PNG] [--ablation]
                      [--threads N] [--budget S] [--cold-warm] [-v]
    dualgraph sweep --workload NAME --param NAME=V1,V2 [--modes ...] [--threads 1,2]
                    [--out JSON] [--plot PNG] ...
    dualgraph explain MODULE:FUNC [--shape 3,4 ...]
    dualgraph demo
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

_IMPORTED_AT = time.perf_counter()


def _process_seconds() -> float:
    """Wall seconds since this process started (Python's start-up and every import
    included), from the kernel's record of the start; since this module's import
    elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED_AT


TIMES_FILE = "compare-times.json"  # seconds each workload took last time, for the ETA
_DEFAULT_GUESS = 10.0  # a workload never run here: its compile is unknown
# ... except the model workloads, whose first run on a fresh installation also builds the
# C routines they call (docs/comparison.md), so a first run's estimate is not off by much.
_FIRST_GUESS = {"cnn": 10.0, "transformer": 20.0}


class _Eta:
    """A progress bar over the workloads, in seconds: each workload's share is what it
    took the last time it ran here (compile included, as measured), so the time left is
    an estimate from this machine's own history; a workload never run counts as
    `_DEFAULT_GUESS` seconds (`_FIRST_GUESS` for the model workloads). Plain lines without
    tqdm."""

    def __init__(self, names: list[str], key: str) -> None:
        from .compare import read_state

        self.key = key
        self.past = read_state(TIMES_FILE)
        self.guess = {n: float(self.past.get(f"{key}:{n}",
                                             _FIRST_GUESS.get(n, _DEFAULT_GUESS)))
                      for n in names}
        self.names = names
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=round(sum(self.guess.values()), 1), desc="compare",
                            file=sys.stderr, leave=False, unit="s",
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix} "
                            "[{elapsed}<{remaining} est.]")

    def __iter__(self):
        done = 0.0
        for i, name in enumerate(self.names):
            if self.bar is None:
                print(f"[{i + 1}/{len(self.names)}] compare {name}", file=sys.stderr,
                      flush=True)
            else:
                self.bar.set_postfix_str(name)
            t0 = time.perf_counter()
            yield name
            took = time.perf_counter() - t0
            self.past[f"{self.key}:{name}"] = round(took, 2)
            done += took
            if self.bar is not None:
                # Re-base on what was measured: done so far plus the estimates left.
                left = sum(self.guess[n] for n in self.names[i + 1:])
                self.bar.total = round(done + left, 1)
                self.bar.n = round(done, 1)
                self.bar.refresh()
        if self.bar is not None:
            self.bar.close()
        from .compare import write_state

        write_state(TIMES_FILE, self.past)


def _fmt_t(s: float | None) -> str:
    if s is None or s != s:
        return "n/a"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def _pm(t: dict | None) -> str:
    """'±6%': half the interquartile range as a share of the median."""
    if not t or not t["median"]:
        return ""
    return f"±{(t['q3'] - t['q1']) / 2 / t['median']:.0%}"


def _steps(seconds: list[float]) -> str:
    """Median per-step time with its spread, e.g. '1.18 ms ±4% (23 steps)'."""
    import numpy as np

    if not seconds:
        return "n/a"
    q1, med, q3 = np.percentile(seconds, [25, 50, 75])
    return (f"{_fmt_t(float(med))} ±{(q3 - q1) / 2 / med:.0%} "
            f"({len(seconds)} steps)")


def _table(reports: list, classifier: dict | None, warm_up: float | None = None) -> str:
    head = (f"{'workload':10s} {'eager':>14s} {'compiled':>14s} {'speed-up':>18s} "
            f"{'compile':>12s} {'break-even':>22s} {'max rel err':>11s} "
            f"{'nodes t/tr/opt/k':>17s}")
    lines = [f"{r.name}: {r.verdict}" for r in reports]
    lines += ["", head, "-" * len(head)]
    notes = []
    for r in reports:
        if r.trace_error:
            lines.append(f"{r.name:10s} {_fmt_t(r.eager_time):>10s}  (compiled: trace failed)")
            continue
        eager = f"{_fmt_t(r.eager_time)} {_pm(r.timings.get('eager'))}"
        comp = f"{_fmt_t(r.compiled_time)} {_pm(r.timings.get('compiled'))}"
        lo, hi = r.speedup_spread
        cpu = {"CPU time": "c", "undisturbed rounds": "u"}.get(r.speedup_basis, "")
        speed = f"{r.speedup:.2f}x ({lo:.1f}-{hi:.1f}){cpu}"
        compile_ = f"{r.compile_time:.2f}s {r.compile_cache}"
        if r.break_even_calls is None:
            be = "never"
        elif r.break_even_spread is None:
            be = f"{r.break_even_calls:,.0f}"
        else:
            blo, bhi = r.break_even_spread
            be = (f"{r.break_even_calls:,.0f} ({blo:,.0f}-"
                  f"{'never' if bhi is None else f'{bhi:,.0f}'})")
        nodes = f"{r.eager_tape_nodes}/{r.traced_nodes}/{r.optimized_nodes}/{r.kernels}"
        lines.append(
            f"{r.name:10s} {eager:>14s} {comp:>14s} {speed:>18s} {compile_:>12s} "
            f"{be:>22s} {r.max_rel_error:11.1e} {nodes:>17s}"
            + ("  NOISY" if r.noisy else ""))
        if r.noisy:
            notes.append(f"  {r.name}: {'; '.join(r.noise_reasons)}")
    if notes:
        lines.append("")
        lines.append("NOISY rows (their causes, and what to do):")
        lines.extend(notes)
    if classifier:
        e, c = classifier["eager"], classifier["compiled"]
        lines.append("")
        lines.append(f"classifier (16->32->4 MLP, Adam, synthetic blobs, {e['steps']} steps):")
        lines.append(f"  eager:    {e['seconds']:.2f} s, {_steps(e['step_seconds'])} per step, "
                     f"accuracy {e['accuracy']:.3f}")
        lines.append(f"  compiled: {c['seconds']:.2f} s, of which the first step (trace and "
                     f"compile) {c['first_step_seconds']:.2f} s, then "
                     f"{_steps(c['step_seconds'][1:])} per step; accuracy {c['accuracy']:.3f}")
    lines.append("")
    lines.append("times: median wall time per call, ± half the interquartile range over the "
                 "rounds.  speed-up: median of the ratios of alternating eager and compiled "
                 "rounds (95% interval); other processes took the CPU: 'u' of the rounds "
                 "none of them entered, 'c' of CPU time (too few such rounds).")
    lines.append("compile: cold = Numba compiled the kernels, warm = loaded from the disk "
                 "cache or already in memory.")
    lines.append("break-even: calls after which blocking compilation has paid for itself "
                 "(range).  nodes: eager tape / traced / optimized / kernels.")
    lines.append("compile: measured once, as it happened (--cold-warm also measures an empty "
                 "and a warm kernel cache, as a new process).")
    if warm_up:
        lines.append(f"process warm-up (imports, Numba's first-use initialisation): "
                     f"{warm_up:.2f} s, charged to no workload.")
    return "\n".join(lines)


def _import_pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot(reports: list, path: str) -> None:
    """Speed-ups with their ranges, and each mode's cumulative cost over calls (log-log,
    so small workloads are visible) with the break-even point where the lines cross."""
    plt = _import_pyplot()
    import numpy as np

    ok = [r for r in reports if not r.trace_error]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    x = np.arange(len(ok))
    sp = np.array([r.speedup for r in ok])
    err = np.array([[r.speedup - r.speedup_spread[0], r.speedup_spread[1] - r.speedup]
                    for r in ok]).T.reshape(2, len(ok))
    ax1.bar(x, sp, color=[colors[k % len(colors)] for k in range(len(ok))],
            hatch=None, yerr=err, capsize=4)
    for k, r in enumerate(ok):
        if r.noisy:
            ax1.annotate("noisy", (k, r.speedup_spread[1]), ha="center", va="bottom",
                         fontsize=8, color="tab:red")
    ax1.set_xticks(x, [r.name for r in ok])
    ax1.axhline(1.0, color="grey", lw=0.8)
    ax1.set_ylabel("speed-up of compiled over eager (x)")
    ax1.set_title("steady-state speed-up (bars: interquartile range)")
    ends = [r.break_even_spread[1] or r.break_even_calls for r in ok
            if r.break_even_calls is not None]
    n_max = 10 ** np.ceil(np.log10(max(ends + [1e3]) * 10))
    n = np.logspace(0, np.log10(n_max), 200)
    for k, r in enumerate(ok):
        col = colors[k % len(colors)]
        e, c = r.timings["eager"], r.timings["compiled"]
        ax2.plot(n, n * e["median"], "--", color=col, lw=1.2, label=f"{r.name} eager")
        ax2.fill_between(n, n * e["q1"], n * e["q3"], color=col, alpha=0.12, lw=0)
        clo, chi = r.compile_spread
        ax2.plot(n, r.compile_time + n * c["median"], "-", color=col, lw=1.6,
                 label=f"{r.name} compiled ({r.compile_cache})")
        ax2.fill_between(n, clo + n * c["q1"], chi + n * c["q3"], color=col, alpha=0.12,
                         lw=0)
        if r.break_even_calls is not None:
            b = r.break_even_calls
            lo, hi = r.break_even_spread
            ax2.errorbar([b], [b * e["median"]],
                         xerr=[[b - lo], [(hi if hi is not None else n_max) - b]],
                         fmt="o", color=col, ms=6, capsize=3, mec="black")
            ax2.annotate(f"{b:,.0f}", (b, b * e["median"]), textcoords="offset points",
                         xytext=(6, -12), fontsize=8, color=col)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlim(1, n_max)
    ax2.set_xlabel("calls")
    ax2.set_ylabel("cumulative seconds (compile + calls x per-call time)")
    ax2.set_title("break-even (blocking compilation): where the lines cross")
    ax2.grid(True, which="major", alpha=0.3)
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _check_writable(path: str, flag: str) -> str | None:
    """Why ``path`` cannot be written (None if it can), found before a run that would
    otherwise end with its results lost to a traceback."""
    if os.path.isdir(path):
        return f"{flag} {path}: is a directory"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"{flag} {path}: no such directory {parent}"
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        return f"{flag} {path}: cannot write ({e.strerror or e})"
    if not existed:
        os.remove(path)  # leave nothing behind if the run fails
    return None


def _preflight(args: argparse.Namespace) -> str | None:
    """Everything that would fail after the run, checked before it."""
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            problem = _check_writable(path, flag)
            if problem:
                return problem
    if args.plot:
        try:
            _import_pyplot()
        except ImportError:
            return ("--plot needs matplotlib: pip install matplotlib "
                    "(or pip install 'dualgraph[plot]')")
    return None


def _compare(args: argparse.Namespace) -> int:
    from .workloads import WORKLOADS

    names = args.workload or [n for n, w in WORKLOADS.items() if w.quick or not args.quick
                              ] + ["classifier"]
    valid = list(WORKLOADS) + ["classifier"]
    bad = [n for n in names if n not in valid]
    if bad:
        print(f"unknown workload {bad[0]!r}; valid workloads: {', '.join(valid)}",
              file=sys.stderr)
        return 2
    problem = _preflight(args)
    if problem:
        print(f"dualgraph compare: {problem}", file=sys.stderr)
        return 2
    from .compare import compare, warm_up
    from .workloads import train_classifier

    reports = []
    classifier = None
    warm = warm_up()  # before any timing: no workload pays for the process's start-up
    key = f"{'quick' if args.quick else 'full'}:{args.threads or 1}:{args.budget}"
    for name in _Eta(names, key):
        if name == "classifier":
            epochs = 3 if args.quick else 10
            classifier = {"eager": train_classifier(False, epochs),
                          "compiled": train_classifier(True, epochs)}
            continue
        fn, fargs = WORKLOADS[name].build(args.quick)
        budget = args.budget if args.budget is not None else (0.5 if args.quick else 2.0)
        r = compare(fn, *fargs, name=name, repeats=10, budget=budget,
                    cold_warm=args.cold_warm, ablation=args.ablation, threads=args.threads,
                    progress=False)
        reports.append(r)
    print(_table(reports, classifier, warm))
    if args.verbose:
        for r in reports:
            print()
            print(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workloads": [json.loads(r.to_json()) for r in reports],
                       "classifier": classifier, "warm_up_seconds": warm}, f, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        _plot(reports, args.plot)
        print(f"wrote {args.plot}")
    # Last, so that writing the files (and the plot's matplotlib import) is counted.
    print(f"\n({_process_seconds():.1f} s in all, start-up and imports included)")
    return 0


def _explain(args: argparse.Namespace) -> int:
    import numpy as np

    from . import explain
    from .eager.tensor import tensor

    mod_name, _, func_name = args.target.partition(":")
    if not func_name:
        print("explain takes MODULE:FUNC, e.g. mypkg.models:loss", file=sys.stderr)
        return 2
    sys.path.insert(0, ".")
    try:
        fn = getattr(importlib.import_module(mod_name), func_name)
    except (ImportError, AttributeError) as e:
        print(f"cannot load {args.target}: {e}", file=sys.stderr)
        return 2
    if args.shape:
        rng = np.random.default_rng(0)
        fargs = [tensor(rng.standard_normal(tuple(int(d) for d in s.split(",") if d))
                        .astype(np.float32), requires_grad=True) for s in args.shape]
    else:
        fargs = list(getattr(fn, "example_args", ()))
        if not fargs:
            print(f"{args.target} needs example inputs: pass --shape for each argument "
                  "(e.g. --shape 64,784) or give the function an example_args attribute",
                  file=sys.stderr)
            return 2
    print(explain(fn, *fargs))
    return 0


def _demo(args: argparse.Namespace) -> int:
    import dualgraph as dg

    print("dualgraph eager demo: define-by-run tensors with a tape of IR nodes\n")
    x = dg.tensor(2.0, requires_grad=True)
    y = dg.tensor(3.0, requires_grad=True)
    z = x * y + y ** 2
    print(f"z = x*y + y**2 = {z}")
    print("the tape as an IR graph (dg.graph_of(z)):")
    print(dg.graph_of(z))
    z.backward()
    print(f"z.backward(): x.grad = {x.grad}, y.grad = {y.grad}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from .sweeps import SweepError, cells, parse_param, plot, short_threads, table

    try:
        params: dict[str, list[str]] = {}
        for p in args.param or []:
            name, values = parse_param(p)
            params.setdefault(name, []).extend(values)
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        threads = [_positive_int(t) for t in args.threads.split(",") if t.strip()]
        cells(args.workload or [], params, modes, threads)  # every check, before any run
    except (SweepError, argparse.ArgumentTypeError) as e:
        print(f"dualgraph sweep: {e}", file=sys.stderr)
        return 2
    for flag, path in (("--out", args.out), ("--plot", args.plot)):
        problem = path and _check_writable(path, flag)
        if problem:
            print(f"dualgraph sweep: {problem}", file=sys.stderr)
            return 2
    if args.out:  # even --fresh never overwrites a file that is not a results file
        from .sweeps import check_results_file

        try:
            check_results_file(args.out)
        except SweepError as e:
            print(f"dualgraph sweep: {e}", file=sys.stderr)
            return 2
    short = short_threads(threads)
    if short:
        print(f"dualgraph sweep: warning: {short}", file=sys.stderr)
    if args.plot:
        try:
            _import_pyplot()
        except ImportError:
            print("dualgraph sweep: --plot needs matplotlib: pip install "
                  "'dualgraph[sweep]'", file=sys.stderr)
            return 2
    from .sweeps import sweep

    scheduler = "serial" if args.serial else args.scheduler
    t0, c0 = time.perf_counter(), _cpu_with_children()
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="this process may use")  # said above
            rs = sweep(args.workload, params, modes=modes, threads=threads, repeats=args.repeats,
                       budget=args.budget, out=args.out, fresh=args.fresh,
                       scheduler=scheduler, workers=args.workers, retries=args.retries,
                       cold_warm=args.cold_warm, cold_cache=args.cold_cache,
                       timeout=args.timeout)
    except SweepError as e:
        print(f"dualgraph sweep: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        where = f"; finished cells are in {args.out} (rerun to resume)" if args.out else ""
        print(f"\ndualgraph sweep: interrupted{where}", file=sys.stderr)
        return 130
    wall, cpu = time.perf_counter() - t0, _cpu_with_children() - c0
    machines = _machines(args.out)
    print(table(rs, machines))
    failed = sum(r["status"] != "ok" for r in rs)
    print(f"\n{len(rs)} cells ({failed} failed); {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"(this process and its children){'; serial' if args.serial else ''}")
    if args.out:
        print(f"wrote {args.out}")
    if args.plot:
        plot(rs, args.plot)
        print(f"wrote {args.plot}")
    return 1 if failed else 0


def _cpu_with_children() -> float:
    import resource

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _machines(path: str | None) -> dict:
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            return json.load(f).get("machines", {})
    except (OSError, ValueError, AttributeError):
        return {}


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return x


def _nonnegative_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {text!r}")
    return n


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dualgraph",
        description="Run numerical programs define-by-run and as compiled graphs, and compare.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cmp_ = sub.add_parser("compare", help="eager vs compiled on the built-in workloads")
    cmp_.add_argument("--quick", action="store_true", help="smaller sizes; under a minute")
    cmp_.add_argument("--workload", action="append", help="only this workload (repeatable)")
    cmp_.add_argument("--json", metavar="PATH", help="write the reports as JSON")
    cmp_.add_argument("--plot", metavar="PNG", help="speed-up and break-even plot (matplotlib)")
    cmp_.add_argument("--ablation", action="store_true", help="also rerun with each pass off")
    cmp_.add_argument("--threads", type=_positive_int, metavar="N",
                      help="thread pools (BLAS, Numba) of N threads; compiled with "
                      "parallel=True when N > 1 (default: single-threaded BLAS)")
    cmp_.add_argument("--budget", type=_positive_float, metavar="S",
                      help="seconds of timing rounds per workload (default 0.5 quick, 2 full)")
    cmp_.add_argument("--cold-warm", action="store_true",
                      help="also compile each workload as a new process would, with an "
                      "empty kernel cache and then a warm one (slow for cnn, transformer)")
    cmp_.add_argument("-v", "--verbose", action="store_true", help="print every full report")
    cmp_.set_defaults(func=_compare)
    sw = sub.add_parser("sweep", help="a grid of compare cells on a Dask cluster "
                        "(pip install 'dualgraph[sweep]')")
    sw.add_argument("--workload", action="append", help="a workload (repeatable)")
    sw.add_argument("--param", action="append", metavar="NAME=V1,V2",
                    help="a parameter the workloads declare and its values (repeatable)")
    sw.add_argument("--modes", default="eager,compiled", help="eager,compiled (default)")
    sw.add_argument("--threads", default="1", help="thread counts, e.g. 1,2 (default 1)")
    sw.add_argument("--repeats", type=_positive_int, default=5, help="timing rounds (min)")
    sw.add_argument("--budget", type=_positive_float, default=0.5,
                    help="seconds per timing (about)")
    sw.add_argument("--out", metavar="JSON", help="results file (finished cells are kept)")
    sw.add_argument("--plot", metavar="PNG", help="speed-up and break-even curves")
    grp = sw.add_mutually_exclusive_group()
    grp.add_argument("--resume", dest="fresh", action="store_false",
                     help="skip cells already in --out (the default)")
    grp.add_argument("--fresh", action="store_true", help="start over, ignore --out")
    where = sw.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="an existing Dask scheduler, e.g. tcp://host:8786 "
                       "(default: a local cluster, one pinned worker per core)")
    where.add_argument("--serial", action="store_true",
                       help="no Dask: the cells one after another (for comparison)")
    sw.add_argument("--workers", type=_positive_int, help="local workers (default: cores)")
    sw.add_argument("--retries", type=_nonnegative_int, default=2,
                    help="reruns of a cell that dies")
    sw.add_argument("--timeout", type=_positive_float, help="seconds before a cell is killed")
    sw.add_argument("--cold-warm", action="store_true",
                    help="also measure cold and warm compiles in each compiled cell")
    sw.add_argument("--cold-cache", action="store_true",
                    help="every cell compiles with an empty kernel cache")
    sw.set_defaults(func=_sweep, fresh=False)
    exp = sub.add_parser("explain", help="trace, optimize and lower a function of yours")
    exp.add_argument("target", help="MODULE:FUNC")
    exp.add_argument("--shape", action="append", help="an input's shape, e.g. 64,784")
    exp.set_defaults(func=_explain)
    demo = sub.add_parser("demo", help="the eager engine on the classic autograd example")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    rc = args.func(args)
    if argv is None:
        # Run as the command: the process ends now. Without this, the interpreter's last
        # garbage collection walks every object the compiles left (Numba's and LLVM's),
        # seconds after the "in all" line; frozen objects are not collected at exit.
        gc.freeze()
    return rc


if __name__ == "__main__":
    sys.exit(main())
