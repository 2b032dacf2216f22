"""The report of a sweep: one flat row per cell, a table grouped by machine, and curves of
speed-up and break-even against each parameter (matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .machine import describe

# The columns of a row besides the workload's own parameters.
BASE = ("workload", "mode", "threads", "status", "error", "machine")


def rows(records: Sequence[Mapping[str, Any]], machines: Mapping[str, Mapping] | None = None
         ) -> list[dict[str, Any]]:
    """One flat dict per cell: its coordinates (workload, mode, threads and each
    parameter), status, machine id and the numbers of its `compare` report."""
    out = []
    for c in records:
        r = {k: c.get(k) for k in BASE}
        r.update(c.get("params", {}))
        rep = c.get("report") or {}
        et = (rep.get("timings") or {}).get("eager") or {}
        ct = (rep.get("timings") or {}).get("compiled") or {}
        sp = rep.get("speedup_spread") or (None, None)
        be = rep.get("break_even_spread") or (None, None)
        r.update(
            eager_time=rep.get("eager_time"), eager_q1=et.get("q1"), eager_q3=et.get("q3"),
            compiled_time=rep.get("compiled_time"), compiled_q1=ct.get("q1"),
            compiled_q3=ct.get("q3"), speedup=rep.get("speedup"), speedup_lo=sp[0],
            speedup_hi=sp[1], compile_time=rep.get("compile_time"),
            compile_cache=rep.get("compile_cache"),
            cold_compile_time=rep.get("cold_compile_time"),
            warm_compile_time=rep.get("warm_compile_time"),
            break_even=rep.get("break_even_calls"), break_even_lo=be[0], break_even_hi=be[1],
            max_abs_error=rep.get("max_abs_error"), max_rel_error=rep.get("max_rel_error"),
            noisy=rep.get("noisy"), trace_error=rep.get("trace_error"),
            speedup_basis=rep.get("speedup_basis"), wall_speedup=rep.get("wall_speedup"),
            cpu_speedup=rep.get("cpu_speedup"), verdict=rep.get("verdict"),
            wall_seconds=c.get("wall_seconds"), cpu_seconds=c.get("cpu_seconds"),
            threads_used=c.get("threads_used"))
        if machines and c.get("machine") in machines:
            r["host"] = machines[c["machine"]].get("host")
        out.append(r)
    return out


def _params(rs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The parameter columns present in ``rs`` (in first-seen order)."""
    known = set(BASE) | set(rows([{}])[0]) | {"host"}
    seen: dict[str, None] = {}
    for r in rs:
        for k in r:
            if k not in known:
                seen.setdefault(k)
    return list(seen)


def _t(s: float | None) -> str:
    if s is None or s != s:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f}us"
    return f"{s * 1e3:.2f}ms" if s < 1 else f"{s:.2f}s"


def _be(r: Mapping[str, Any]) -> str:
    if r["mode"] != "compiled" or r["speedup"] is None:
        return "-"
    if r["break_even"] is None:
        return "never"
    hi = r["break_even_hi"]
    return (f"{r['break_even']:,.0f} ({r['break_even_lo']:,.0f}-"
            f"{'never' if hi is None else f'{hi:,.0f}'})")


def by_machine(rs: Sequence[Mapping[str, Any]]) -> dict[str, list]:
    """Rows grouped by machine fingerprint id."""
    groups: dict[str, list] = {}
    for r in rs:
        groups.setdefault(r.get("machine") or "unknown", []).append(r)
    return groups


def table(rs: Sequence[Mapping[str, Any]], machines: Mapping[str, Mapping] | None = None
          ) -> str:
    """Speed-up and break-even of every cell against its parameters, a section per
    machine (cells from different machines are never compared)."""
    names = _params(rs)
    groups = by_machine(rs)
    lines = []
    if len(groups) > 1:
        lines.append(f"cells from {len(groups)} machines with different fingerprints: "
                     "one section each, never compared across machines")
    for mid, grp in groups.items():
        fp = (machines or {}).get(mid)
        lines.append(f"machine {mid}: {describe(fp) if fp else 'fingerprint not recorded'}")
        head = (f"{'workload':10s} {'point':24s} {'thr':>3s} {'mode':8s} {'eager':>9s} "
                f"{'compiled':>9s} {'speed-up':>16s} {'compile':>10s} {'break-even':>22s} "
                f"{'rel err':>8s}")
        lines += [head, "-" * len(head)]
        key = lambda r: (r["workload"], [str(r.get(n)) for n in names], r["threads"],
                         r["mode"])
        for r in sorted(grp, key=key):
            point = " ".join(f"{n}={r[n]}" for n in names if r.get(n) is not None)
            used = r.get("threads_used")
            thr = (f"{r['threads']}({used})" if used is not None and used != r["threads"]
                   else str(r["threads"]))
            if r["status"] != "ok":
                lines.append(f"{r['workload']:10s} {point:24s} {thr:>3} "
                             f"{r['mode']:8s} FAILED: {r['error']}")
                continue
            cpu = {"CPU time": "c", "undisturbed rounds": "u"}.get(r.get("speedup_basis"), "")
            sp = ("-" if r["speedup"] is None else
                  f"{r['speedup']:.2f}x ({r['speedup_lo']:.1f}-{r['speedup_hi']:.1f}){cpu}")
            comp = ("-" if r["compile_time"] is None else
                    f"{r['compile_time']:.2f}s {r['compile_cache']}")
            err = "-" if r["mode"] != "compiled" or r["max_rel_error"] is None else \
                f"{r['max_rel_error']:.1e}"
            lines.append(f"{r['workload']:10s} {point:24s} {thr:>3} {r['mode']:8s} "
                         f"{_t(r['eager_time']):>9s} {_t(r['compiled_time']):>9s} {sp:>16s} "
                         f"{comp:>10s} {_be(r):>22s} {err:>8s}"
                         + ("  NOISY" if r.get("noisy") else ""))
        lines.append("")
    lines.append("speed-up: median of the ratios of alternating eager and compiled rounds, in "
                 "the same cell (95% interval; other processes took the CPU: 'u' of the "
                 "rounds none of them entered, 'c' of CPU time); break-even: calls until "
                 "blocking compilation pays.  thr: threads "
                 "asked for (and, in brackets, the cores the cell really had when fewer).")
    return "\n".join(lines)


def _spans_decades(values: Sequence[Any]) -> bool:
    nums = [v for v in values if isinstance(v, (int, float)) and v > 0]
    return len(nums) == len(values) and len(nums) > 1 and max(nums) / min(nums) >= 10


def plot(rs: Sequence[Mapping[str, Any]], path: str) -> list[str]:
    """Speed-up and break-even against each parameter that varies (a row of two panels
    each); one curve per combination of the other coordinates (mode, dtype, threads,
    workload) and per machine, log axes where the values span decades. Returns the
    parameters plotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rs if r["status"] == "ok"]
    coords = _params(ok) + ["threads"]
    varying = [n for n in coords if len({str(r.get(n)) for r in ok if n in r}) > 1]
    xs = varying or coords[:1]
    multi_machine = len(by_machine(ok)) > 1
    multi_workload = len({r["workload"] for r in ok}) > 1
    fig, axes = plt.subplots(len(xs), 2, figsize=(11, 3.3 * len(xs)), squeeze=False)
    for (ax_sp, ax_be), x in zip(axes, xs):
        have = [r for r in ok if r.get(x) is not None]
        values = sorted({r[x] for r in have}, key=lambda v: (isinstance(v, str), v))
        numeric = all(isinstance(v, (int, float)) for v in values)
        pos = (lambda v: v) if numeric else (lambda v, vs=values: vs.index(v))
        curves: dict[tuple, list] = {}
        for r in have:
            if r["mode"] != "compiled" or r["speedup"] is None:
                continue
            label = ([r["machine"]] if multi_machine else []) + \
                    ([r["workload"]] if multi_workload else []) + [r["mode"]] + \
                    [f"{n}={r.get(n)}" for n in varying if n != x and r.get(n) is not None]
            curves.setdefault(tuple(label), []).append(r)
        for label, pts in curves.items():
            pts.sort(key=lambda r: pos(r[x]))
            px = [pos(r[x]) for r in pts]
            sp = [r["speedup"] for r in pts]
            err = [[s - r["speedup_lo"] for s, r in zip(sp, pts)],
                   [r["speedup_hi"] - s for s, r in zip(sp, pts)]]
            line = ax_sp.errorbar(px, sp, yerr=err, marker="o", ms=4, capsize=3,
                                  label=" ".join(label))
            be = [(p, r) for p, r in zip(px, pts) if r["break_even"] is not None]
            if be:
                ax_be.plot([p for p, _ in be], [r["break_even"] for _, r in be], "o-",
                           ms=4, color=line[0].get_color(), label=" ".join(label))
                ax_be.fill_between([p for p, _ in be], [r["break_even_lo"] for _, r in be],
                                   [r["break_even_hi"] or r["break_even"] for _, r in be],
                                   color=line[0].get_color(), alpha=0.12, lw=0)
        ax_sp.axhline(1.0, color="grey", lw=0.8, ls="--", label="eager (1x)")
        for ax in (ax_sp, ax_be):
            if numeric and _spans_decades(values):
                ax.set_xscale("log")
            if numeric and len(values) <= 8:  # the swept values, not matplotlib's ticks
                ax.set_xticks(values, [f"{v:g}" for v in values])
                ax.minorticks_off()
            if not numeric:
                ax.set_xticks(range(len(values)), [str(v) for v in values])
            ax.set_xlabel(x)
            ax.grid(True, alpha=0.3)
        ax_sp.set_ylabel("speed-up (x)")
        ax_be.set_ylabel("break-even (calls)")
        bes = [r["break_even"] for r in have if r.get("break_even")]
        if bes and max(bes) / max(min(bes), 1e-9) >= 100:
            ax_be.set_yscale("log")
        ax_sp.set_title(f"compiled speed-up over eager vs {x}", fontsize=10)
        ax_be.set_title(f"break-even vs {x}", fontsize=10)
        ax_sp.legend(fontsize=7)
    if multi_machine:
        fig.suptitle("cells from several machines: one curve per machine fingerprint",
                     fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return xs

