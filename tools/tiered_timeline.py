"""When a model step's compiled kernels arrive in tiered mode, with the training loop running,
against the blocking compile of the same step: a timeline of each phase and the wall and CPU
time of every process taking part.

    python -m tools.tiered_timeline [cnn|transformer] [--rounds N] [--quiet] [--json FILE]
        [--fresh] [--variant LABEL[=DIR][,KEY=VALUE...]]...

Each round runs two fresh processes, each with an empty kernel cache (``--fresh``: and an
empty Numba cache, as on a fresh installation, which builds the library's routines): one calls
``dg.compile(step, tiered=False)`` once (the blocking compile), the other calls the tiered
step back to back until a call runs at tier 1 (the kernels have arrived). The two alternate,
so a load that changes over the sitting weighs on both; the verdict is the median over the
rounds of each round's ratio, tiered over blocking, with its range. ``--variant`` measures
another dualgraph directory (``main=/path/to/checkout``) or environment
(``y2=,DUALGRAPH_TIER0_YIELD=2``) in the same rounds, each against its own blocking compile.

A thread of the measured process samples ``/proc`` every 20 ms for the processes it started
(the compile worker, compile helpers) and their CPU time, and the timeline lists each
process's start, last sighting and CPU seconds with this process's events (first call,
worker start, worker reply, kernels loaded) and those the compile processes note
(``DUALGRAPH_WORKER_EVENTS``: imported, job read, lowered, each function compiled). Linux
only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_table() -> dict[int, tuple[int, float]]:
    """Every process: its parent and CPU seconds (user + system)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2:].split()
        table[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK)
    return table


class Sampler:
    """The descendants of this process: first and last time seen, parent, CPU seconds."""

    def __init__(self, t0: float, period: float = 0.02) -> None:
        self.t0 = t0
        self.period = period
        self.procs: dict[int, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="sampler")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            now = time.perf_counter() - self.t0
            table = _proc_table()
            mine = {me}
            grew = True
            while grew:
                grew = False
                for pid, (ppid, _) in table.items():
                    if ppid in mine and pid not in mine:
                        mine.add(pid)
                        grew = True
            for pid in mine - {me}:
                ppid, cpu = table[pid]
                p = self.procs.setdefault(pid, {"parent": ppid, "start": now, "cpu": 0.0})
                p["end"] = now
                p["cpu"] = cpu
            self._stop.wait(self.period)


def _measure(name: str, blocking: bool, limit: float) -> dict:
    """One measured run in this (fresh) process: see the module docstring."""
    t_import = time.perf_counter()
    import dualgraph as dg
    from dualgraph.compile import tiered
    from dualgraph.workloads import model_step

    step, args, *_ = model_step(name)
    events: dict[str, float] = {}
    # The compile processes note their phases in this file (wall-clock times).
    log = tempfile.NamedTemporaryFile(prefix="dg-worker-events-", delete=False)
    log.close()
    os.environ["DUALGRAPH_WORKER_EVENTS"] = log.name
    wall0 = time.time()
    t0 = time.perf_counter()
    c0 = time.process_time()

    def mark(what: str) -> None:
        events.setdefault(what, round(time.perf_counter() - t0, 3))

    original_load = tiered._Job.load

    def load(job: Any) -> None:
        mark("worker replied; load starts")
        original_load(job)
        mark("kernels loaded")

    tiered._Job.load = load
    original_init = tiered._Worker.__init__

    def init(self: Any) -> None:
        mark("worker start")
        original_init(self)

    tiered._Worker.__init__ = init
    sampler = Sampler(t0)
    sampler.start()
    f = dg.compile(step, tiered=not blocking)
    calls = 0
    tier0_seconds = []
    while True:
        c = time.perf_counter()
        f(*args)
        calls += 1
        if calls == 1:
            mark("first call returned")
        if blocking or f.stats.tier1_calls:
            break
        tier0_seconds.append(time.perf_counter() - c)
        if time.perf_counter() - t0 > limit:
            break
    arrive = time.perf_counter() - t0
    cpu = time.process_time() - c0
    time.sleep(0.05)
    sampler.stop()
    with open(log.name) as fh:
        for line in fh:
            stamp, pid, what = line.rstrip("\n").split(" ", 2)
            events.setdefault(f"pid {pid}: {what}", round(float(stamp) - wall0, 3))
    os.unlink(log.name)
    s = f.stats
    return {
        "mode": "blocking" if blocking else "tiered",
        "arrive": round(arrive, 3), "calls": calls, "caller_cpu": round(cpu, 3),
        "import": round(t0 - t_import, 3),
        "tier0_call_median": round(statistics.median(tier0_seconds), 4) if tier0_seconds
        else None,
        "numba_seconds": round(s.numba_seconds, 3),
        "worker_seconds": round(s.worker_seconds, 3),
        "events": events,
        "procs": {str(pid): {k: round(v, 3) if isinstance(v, float) else v
                             for k, v in p.items()} for pid, p in sampler.procs.items()},
        "load_average": os.getloadavg()[0],
    }


def _run_child(name: str, blocking: bool, limit: float, code: str | None,
               extra: dict, fresh: bool = False) -> dict:
    env = dict(os.environ)
    env.update(extra)
    env["DUALGRAPH_CACHE_DIR"] = tempfile.mkdtemp(prefix="dg-timeline-")
    if fresh:  # a fresh installation: the library's routines are built on first use
        env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="dg-timeline-numba-")
    env.pop("DUALGRAPH_TIERED", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # ``code``: the dualgraph to measure, ahead of the one holding this tool.
    env["PYTHONPATH"] = os.pathsep.join(
        [p for p in (code, root) if p] + [p for p in [env.get("PYTHONPATH")] if p])
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(root=root, name=name,
                                             blocking=blocking, limit=limit)],
        env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# The measured process imports this file by path: the dualgraph it measures comes first on
# its path, and may hold no copy of this tool.
_CHILD = (
    "import importlib.util, json\n"
    "spec = importlib.util.spec_from_file_location('tiered_timeline', {root!r} + "
    "'/tools/tiered_timeline.py')\n"
    "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
    "print(json.dumps(m._measure({name!r}, {blocking!r}, {limit!r})))\n"
)


def _variant(text: str) -> tuple[str, str | None, dict]:
    """``LABEL[=DIR][,KEY=VALUE...]``: a label, the dualgraph directory, environment."""
    head, *pairs = text.split(",")
    label, _, code = head.partition("=")
    return label, code or None, dict(p.split("=", 1) for p in pairs)


def _timeline(r: dict) -> str:
    rows = [f"  {t:7.2f} s  {what}" for what, t in sorted(r["events"].items(),
                                                           key=lambda kv: kv[1])]
    for pid, p in sorted(r["procs"].items(), key=lambda kv: kv[1]["start"]):
        role = (f"child of {p['parent']}" if str(p["parent"]) in r["procs"]
                else "child of the caller")
        rows.append(f"  {p['start']:7.2f} s  pid {pid} ({role}) seen until "
                    f"{p['end']:.2f} s, {p['cpu']:.2f} s CPU")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", default="cnn")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=float, default=300.0)
    parser.add_argument("--variant", action="append", default=[],
                        help="LABEL[=DIR][,KEY=VALUE...]: a dualgraph directory and "
                        "environment to measure (repeat to interleave several)")
    parser.add_argument("--quiet", action="store_true", help="no timelines")
    parser.add_argument("--fresh", action="store_true",
                        help="each process with an empty Numba cache too (a fresh "
                        "installation's first compile)")
    parser.add_argument("--json")
    a = parser.parse_args()
    variants = [_variant(v) for v in a.variant] or [("this", None, {})]
    results: dict[str, list] = {label: [] for label, _, _ in variants}
    for k in range(a.rounds):
        order = variants if k % 2 == 0 else variants[::-1]
        for label, code, extra in order:
            pair = {}
            for blocking in ((True, False) if k % 2 == 0 else (False, True)):
                r = _run_child(a.name, blocking, a.limit, code, extra, a.fresh)
                pair[r["mode"]] = r
            b, t = pair["blocking"], pair["tiered"]
            ratio = t["arrive"] / b["arrive"]
            results[label].append({"blocking": b, "tiered": t, "ratio": ratio})
            print(f"round {k + 1} {label}: blocking {b['arrive']:.2f} s (caller CPU "
                  f"{b['caller_cpu']:.2f} s), tiered {t['arrive']:.2f} s ({t['calls']} calls,"
                  f" tier 0 median {(t['tier0_call_median'] or 0) * 1e3:.1f} ms, caller CPU "
                  f"{t['caller_cpu']:.2f} s, worker Numba {t['worker_seconds']:.2f} s): "
                  f"{ratio:.2f}x; load average {b['load_average']:.1f}/"
                  f"{t['load_average']:.1f}", flush=True)
            if not a.quiet:
                print(" blocking:\n" + _timeline(b) + "\n tiered:\n" + _timeline(t),
                      flush=True)
    for label, rs in results.items():
        ratios = sorted(r["ratio"] for r in rs)
        arrive = statistics.median(r["tiered"]["arrive"] for r in rs)
        block = statistics.median(r["blocking"]["arrive"] for r in rs)
        print(f"{a.name} {label}: tiered {arrive:.2f} s, blocking {block:.2f} s (medians); "
              f"tiered / blocking median {statistics.median(ratios):.2f}x "
              f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}, {len(ratios)} rounds)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
