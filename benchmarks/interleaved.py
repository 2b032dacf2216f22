"""Same-process, interleaved timing: the ratio tables' method.

pyperf runs all of one implementation's worker processes before the next one's, so on a
shared machine a load that drifts between them moves the ratios (by up to 30% measured).
Here every implementation of a workload lives in one process, pinned to one CPU, and the
rounds alternate them: round ``r`` times one block of calls of each, in an order rotated by
``r``, with every result read back. A ratio is computed per round, between blocks timed
seconds apart under the same load, and a row reports the median of those per-round ratios
with their interquartile range.

``compiled.py --interleaved`` and ``eager_overhead.py --interleaved`` use it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
import single_thread

BEST = "best peer"  # a pair's second member: the fastest peer of each round


def measure(factories: dict[str, Callable], rounds: int, block_seconds: float,
            finish: Callable, log: Callable = print) -> dict[str, dict[str, list[float]]]:
    """Per implementation, the per-call wall and CPU seconds of each round.

    Each factory builds a zero-argument step (not timed; its first call, which may
    compile, is not timed either). A block repeats a step for about ``block_seconds``
    (one call at least); ``finish`` reads each call's result back."""
    steps = {}
    for impl, factory in factories.items():
        t0 = time.perf_counter()
        step = factory()
        single_thread.limit()  # libraries the build loaded
        finish(step())
        log(f"  built {impl} ({time.perf_counter() - t0:.1f} s)")
        steps[impl] = step
    loops = {}
    for impl, step in steps.items():
        t0 = time.perf_counter()
        finish(step())
        one = time.perf_counter() - t0
        loops[impl] = max(1, int(block_seconds / max(one, 1e-9)))
        _block(step, loops[impl], finish)  # warm: caches, allocator, branch predictors
    names = list(steps)
    out: dict[str, dict[str, list[float]]] = {i: {"wall": [], "cpu": []} for i in names}
    for r in range(rounds):
        k = r % len(names)
        for impl in names[k:] + names[:k]:
            wall, cpu = _block(steps[impl], loops[impl], finish)
            out[impl]["wall"].append(wall / loops[impl])
            out[impl]["cpu"].append(cpu / loops[impl])
    return out


def _block(step: Callable, loops: int, finish: Callable) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(loops):
        finish(step())
    return time.perf_counter() - t0, time.process_time() - c0


def ratio(times: dict, a: str, b: str, peers: tuple = (),
          clock: str = "wall") -> dict | None:
    """Median and interquartile range of ``a``'s per-round time over ``b``'s (``b`` may be
    `BEST`: the fastest of ``peers`` in each round, named by its most frequent winner)."""
    if a not in times:
        return None
    ta = np.asarray(times[a][clock])
    if b == BEST:
        present = [p for p in peers if p in times]
        if not present:
            return None
        tb_all = np.asarray([times[p][clock] for p in present])
        tb = tb_all.min(axis=0)
        winners = np.bincount(tb_all.argmin(axis=0), minlength=len(present))
        who = present[int(winners.argmax())]
    elif b in times:
        tb = np.asarray(times[b][clock])
        who = b
    else:
        return None
    r = ta / tb
    q1, med, q3 = np.percentile(r, [25, 50, 75])
    return {"a": a, "b": who, "median": float(med), "q1": float(q1), "q3": float(q3),
            "rounds": len(r)}


def fmt_time(t: float) -> str:
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    return f"{t * 1e3:.2f} ms" if t < 1 else f"{t:.3f} s"


def fmt_ratio(r: dict | None) -> str:
    if r is None:
        return ""
    return f"{r['median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f})"


def table(results: dict, pairs: list[tuple[str, str]], peers: tuple = (),
          clock: str = "wall") -> str:
    """Markdown: a row per workload, the median per-call time of each implementation, then
    each pair's median per-round ratio with its interquartile range, by ``clock`` ("wall",
    or "cpu": the process's CPU seconds, which a loaded machine's waiting does not count)."""
    impls: list[str] = []
    for times in results.values():
        impls += [i for i in times if i not in impls]
    head = [f"{a} / {b}" for a, b in pairs]
    lines = ["| workload | " + " | ".join(impls + head) + " |",
             "|---" * (len(impls) + len(head) + 1) + "|"]
    for wl, times in results.items():
        cells = [fmt_time(float(np.median(times[i][clock]))) if i in times else ""
                 for i in impls]
        for a, b in pairs:
            r = ratio(times, a, b, peers, clock)
            cell = fmt_ratio(r)
            if r is not None and b == BEST:
                cell += f" {r['b']}"
            cells.append(cell)
        lines.append(f"| {wl} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def save(path: str, results: dict, meta: dict) -> None:
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


def machine() -> dict:
    """What the figures depend on: CPU model, load while measuring, pinned CPUs."""
    import os
    import platform

    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = {"cpu": model, "python": platform.python_version()}
    if hasattr(os, "getloadavg"):
        info["load"] = os.getloadavg()
    if hasattr(os, "sched_getaffinity"):
        info["cpus"] = sorted(os.sched_getaffinity(0))
    return info
