"""The ``dualgraph`` command (also ``python -m dualgraph``).

    dualgraph compare [--quick] [--workload NAME] [--json PATH] [--plot PNG] [--ablation]
    dualgraph explain MODULE:FUNC [--shape 3,4 ...]
    dualgraph demo
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any


def _progress(items: list, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # a plain line per item still shows progress
        def plain(xs):
            for i, x in enumerate(xs):
                print(f"[{i + 1}/{len(xs)}] {desc} {x}", file=sys.stderr, flush=True)
                yield x
        return plain(items)
    bar = tqdm(items, desc=desc, file=sys.stderr, leave=False)

    def named(xs):  # the bar says which workload is running: compiles take seconds
        for x in xs:
            bar.set_postfix_str(str(x))
            yield x
    return named(bar)


def _fmt_t(s: float | None) -> str:
    if s is None or s != s:
        return "n/a"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def _table(reports: list, classifier: dict | None) -> str:
    head = (f"{'workload':10s} {'eager':>10s} {'compiled':>10s} {'speed-up':>9s} "
            f"{'compile':>8s} {'break-even':>11s} {'max rel err':>11s} {'nodes t/tr/opt/k':>17s}")
    lines = [head, "-" * len(head)]
    for r in reports:
        if r.trace_error:
            lines.append(f"{r.name:10s} {_fmt_t(r.eager_time):>10s}  (compiled: trace failed)")
            continue
        be = "never" if r.break_even_calls is None else f"{r.break_even_calls:,.0f}"
        nodes = f"{r.eager_tape_nodes}/{r.traced_nodes}/{r.optimized_nodes}/{r.kernels}"
        lines.append(
            f"{r.name:10s} {_fmt_t(r.eager_time):>10s} {_fmt_t(r.compiled_time):>10s} "
            f"{r.speedup:8.2f}x {r.compile_time:7.2f}s {be:>11s} {r.max_rel_error:11.1e} "
            f"{nodes:>17s}")
    if classifier:
        e, c = classifier["eager"], classifier["compiled"]
        lines.append("")
        per_e = e["seconds"] / e["steps"]
        per_c = (c["seconds"] - c["first_step_seconds"]) / max(c["steps"] - 1, 1)
        lines.append(f"classifier (16->32->4 MLP, Adam, synthetic blobs, {e['steps']} steps):")
        lines.append(f"  eager:    {e['seconds']:.2f} s, {_fmt_t(per_e)} per step, "
                     f"accuracy {e['accuracy']:.3f}")
        lines.append(f"  compiled: {c['seconds']:.2f} s, of which the first step (trace and "
                     f"compile) {c['first_step_seconds']:.2f} s, then {_fmt_t(per_c)} per "
                     f"step; accuracy {c['accuracy']:.3f}")
    lines.append("")
    lines.append("nodes: eager tape / traced / optimized / kernels.  break-even: calls after "
                 "which compiling has paid for itself.")
    return "\n".join(lines)


def _plot(reports: list, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install matplotlib "
                         "(or pip install 'dualgraph[plot]')") from None
    ok = [r for r in reports if not r.trace_error]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.bar([r.name for r in ok], [r.speedup for r in ok], color="tab:blue")
    ax1.axhline(1.0, color="grey", lw=0.8)
    ax1.set_ylabel("speed-up of compiled over eager (x)")
    ax1.set_title("steady-state speed-up")
    for r in ok:
        calls = [0, max(1, int((r.break_even_calls or 1000) * 2))]
        ax2.plot(calls, [n * r.eager_time for n in calls], "--", label=f"{r.name} eager")
        ax2.plot(calls, [r.compile_time + n * r.compiled_time for n in calls],
                 label=f"{r.name} compiled")
    ax2.set_xlabel("calls")
    ax2.set_ylabel("total seconds")
    ax2.set_title("break-even: compile time paid back")
    ax2.set_xscale("symlog")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _compare(args: argparse.Namespace) -> int:
    from .compare import compare
    from .workloads import WORKLOADS, train_classifier

    names = args.workload or list(WORKLOADS) + ["classifier"]
    valid = list(WORKLOADS) + ["classifier"]
    bad = [n for n in names if n not in valid]
    if bad:
        print(f"unknown workload {bad[0]!r}; valid workloads: {', '.join(valid)}",
              file=sys.stderr)
        return 2
    reports = []
    classifier = None
    t0 = time.perf_counter()
    for name in _progress(names, "compare"):
        if name == "classifier":
            epochs = 3 if args.quick else 10
            classifier = {"eager": train_classifier(False, epochs),
                          "compiled": train_classifier(True, epochs)}
            continue
        fn, fargs = WORKLOADS[name].build(args.quick)
        r = compare(fn, *fargs, name=name, repeats=3 if args.quick else 7,
                    cold_warm=not args.quick, ablation=args.ablation)
        reports.append(r)
    print(_table(reports, classifier))
    if args.verbose:
        for r in reports:
            print()
            print(r)
    print(f"\n({time.perf_counter() - t0:.1f} s in all)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workloads": [json.loads(r.to_json()) for r in reports],
                       "classifier": classifier}, f, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        _plot(reports, args.plot)
        print(f"wrote {args.plot}")
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
    cmp_.add_argument("-v", "--verbose", action="store_true", help="print every full report")
    cmp_.set_defaults(func=_compare)
    exp = sub.add_parser("explain", help="trace, optimize and lower a function of yours")
    exp.add_argument("target", help="MODULE:FUNC")
    exp.add_argument("--shape", action="append", help="an input's shape, e.g. 64,784")
    exp.set_defaults(func=_explain)
    demo = sub.add_parser("demo", help="the eager engine on the classic autograd example")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
