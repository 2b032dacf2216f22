"""Before/after in one run: dualgraph's compiled (or eager) steps from two checkouts.

A change to the backend is judged by the generated code's speed before and after it. Timing
one checkout and then the other on a shared machine compares two loads, not two programs.
Here one long-lived worker process per checkout builds and warms each step (the compile is
not timed), both pinned to the same CPU, and the parent alternates them round by round:
round ``r`` times one block of calls of each, in an order rotated by ``r``, every result
read back (as ``compiled.py`` does). Each row reports the median of the per-round ratios
``after / before`` with its interquartile range, and both medians.

    python benchmarks/ab.py --before /path/to/old/checkout [--after .] \\
        --workload W1 --workload W5tr --rounds 15 --block 0.3

``--before``/``--after`` are checkout directories (``git worktree add /tmp/old <rev>`` makes
one); each worker imports ``dualgraph`` and ``benchmarks/compiled.py`` from its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

# A worker's script: WORKER_HEAD, lines that build ``step`` from ``factory`` (a
# workload's step factory), then WORKER_LOOP, which times blocks of calls on request.
WORKER_HEAD = r"""
import os, sys, time
root = sys.argv[1]
sys.path[:0] = [root, os.path.join(root, "benchmarks")]
import single_thread
single_thread.set_env()
import peers
wl, impl = sys.argv[2], sys.argv[3]
"""
WORKER_LOOP = r"""
t0 = time.perf_counter()
step = factory()
single_thread.limit()
peers.readback(step())
print(f"ready {time.perf_counter() - t0:.3f}", flush=True)
for line in sys.stdin:
    loops = int(line)
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(loops):
        peers.readback(step())
    print(f"{time.perf_counter() - t0!r} {time.process_time() - c0!r}", flush=True)
"""
_WORKER = WORKER_HEAD + """
import compiled
factory = compiled.workloads([])[wl][impl]
""" + WORKER_LOOP


class Worker:
    """One checkout's step in its own process, timed on request."""

    def __init__(self, root: str, workload: str, impl: str, cpu: int | None,
                 script: str = _WORKER) -> None:
        cmd = [sys.executable, "-c", script, os.path.abspath(root), workload, impl]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        env = dict(os.environ, PYTHONPATH="")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=os.path.abspath(root))
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"worker for {root} {workload} failed to start: {line!r}")
        self.build_seconds = float(line.split()[1])

    def time(self, loops: int) -> tuple[float, float]:
        """Wall and CPU seconds per call over ``loops`` calls."""
        self.proc.stdin.write(f"{loops}\n")
        self.proc.stdin.flush()
        wall, cpu = map(float, self.proc.stdout.readline().split())
        return wall / loops, cpu / loops

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def measure(workers: dict[str, Worker], rounds: int, block: float) -> dict[str, list]:
    """Per side, the per-call (wall, CPU) seconds of each round (alternating sides, order
    rotated)."""
    once = {k: w.time(1)[0] for k, w in workers.items()}
    loops = {k: max(1, int(block / max(t, 1e-9))) for k, t in once.items()}
    times: dict[str, list] = {k: [] for k in workers}
    names = list(workers)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for k in order:
            times[k].append(workers[k].time(loops[k]))
    return times


def summary(times: dict[str, list]) -> dict:
    """Median per-call times and per-round after/before ratios, wall and CPU."""
    before, after = np.array(times["before"]), np.array(times["after"])
    ratios = after / before
    q1, med, q3 = np.percentile(ratios[:, 0], [25, 50, 75])
    return {"before": float(np.median(before[:, 0])), "after": float(np.median(after[:, 0])),
            "ratio": float(med), "iqr": (float(q1), float(q3)),
            "cpu_ratio": float(np.median(ratios[:, 1]))}


def _fmt(t: float) -> str:
    return f"{t * 1e6:.1f} us" if t < 1e-3 else f"{t * 1e3:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="checkout directory of the old code")
    ap.add_argument("--after", default=".", help="checkout directory of the new code")
    ap.add_argument("--workload", action="append",
                    help="W1, W2tiny, W2mlp, W3, W4cnn, W5tr (default: all)")
    ap.add_argument("--impl", default="compiled", choices=("compiled", "eager"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--block", type=float, default=0.3, help="seconds per timed block")
    ap.add_argument("--cpu", type=int, default=1, help="CPU both workers are pinned to "
                    "(-1: not pinned)")
    ap.add_argument("--json", help="write the per-round times and the summary here")
    args = ap.parse_args()
    cpu = None if args.cpu < 0 else args.cpu
    names = args.workload or ["W1", "W2tiny", "W2mlp", "W3", "W4cnn", "W5tr"]
    out = {}
    load0 = os.getloadavg()[0]
    for wl in names:
        t0 = time.perf_counter()
        workers = {"before": Worker(args.before, wl, args.impl, cpu),
                   "after": Worker(args.after, wl, args.impl, cpu)}
        try:
            times = measure(workers, args.rounds, args.block)
        finally:
            for w in workers.values():
                w.close()
        s = summary(times)
        s["build_seconds"] = {k: w.build_seconds for k, w in workers.items()}
        out[wl] = {"summary": s, "times": times}
        print(f"{wl:7s} before {_fmt(s['before']):>10s}  after {_fmt(s['after']):>10s}  "
              f"after/before {s['ratio']:.3f} (IQR {s['iqr'][0]:.3f}-{s['iqr'][1]:.3f}), "
              f"CPU time {s['cpu_ratio']:.3f}  "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)
    print(f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}; {args.impl}; "
          f"{args.rounds} rounds; pinned to CPU {cpu}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
