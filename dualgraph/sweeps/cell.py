"""One cell of a sweep, in a process of its own: ``python -m dualgraph.sweeps.cell``.

The spec (JSON on stdin: workload, params, mode, threads, repeats, budget, cold_warm) is
run through `dualgraph.compare`; the record (JSON) is the last line on stdout. A Python
error is part of the record (``status: failed``, not retried); a process that dies
without a record makes `launch` raise `CellCrashError`, which the runner retries.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

CORES_ENV = "DUALGRAPH_SWEEP_CORES"  # set by the worker plugin: the cores to run on
THREAD_ENVS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMBA_NUM_THREADS")
_DROP = ("diff", "fusion", "ablation")  # large and per-node: not kept in a sweep


class CellCrashError(RuntimeError):
    """The cell's process died (a signal, a timeout, no record on stdout)."""


def launch(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one cell in a fresh Python process and return its record (with its wall time
    and the host and cores it ran on)."""
    import socket

    threads = str(spec["threads"])
    env = dict(os.environ)
    env.update({k: threads for k in THREAD_ENVS})
    root = str(Path(__file__).resolve().parents[2])  # this dualgraph, not another one
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in
                                                  env.get("PYTHONPATH", "").split(os.pathsep)
                                                  if p])
    cache = tempfile.mkdtemp(prefix="dualgraph-cell-") if spec.get("cold_cache") else None
    if cache:
        env["DUALGRAPH_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "dualgraph.sweeps.cell"],
                           input=json.dumps(spec), capture_output=True, text=True, env=env,
                           timeout=spec.get("timeout"))
    except subprocess.TimeoutExpired as e:
        raise CellCrashError(f"cell timed out after {e.timeout} s") from None
    finally:
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
    wall = time.perf_counter() - t0
    lines = p.stdout.strip().splitlines()
    try:
        record = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        raise CellCrashError(f"cell process exited with code {p.returncode} and no record: "
                        f"{tail}") from None
    record.update(wall_seconds=wall, host=socket.gethostname())
    return record


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """The record of one cell, run in this process (`launch` calls it in a new one)."""
    record: dict[str, Any] = {"status": "ok", "error": None}
    try:
        from threadpoolctl import threadpool_limits

        from ..compare import compare
        from ..workloads import WORKLOADS
        from .machine import fingerprint

        threads = int(spec["threads"])
        with threadpool_limits(limits=threads):
            record["machine"] = fingerprint()
        fn, args = WORKLOADS[spec["workload"]].with_params(**spec["params"])
        report = compare(fn, *args, name=spec["workload"], repeats=spec.get("repeats", 5),
                         budget=spec.get("budget", 0.5),
                         cold_warm=bool(spec.get("cold_warm")) and spec["mode"] == "compiled",
                         threads=threads, compiled=spec["mode"] == "compiled", roofline=False)
        d = json.loads(report.to_json())
        record["report"] = {k: v for k, v in d.items() if k not in _DROP}
    except Exception as e:  # a failed cell is recorded, not raised
        record.update(status="failed", error=f"{type(e).__name__}: {e}",
                      traceback=traceback.format_exc(limit=8))
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    record["cpu_seconds"] = ru.ru_utime + ru.ru_stime
    record["cores"] = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else None
    # The threads the cell really had: its label may ask for more cores than it may use.
    usable = len(record["cores"]) if record["cores"] else (os.cpu_count() or 1)
    record["threads_used"] = min(int(spec["threads"]), usable)
    record["pid"] = os.getpid()
    return record


def _pin_from_env() -> None:
    cores = os.environ.get(CORES_ENV)
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cores.split(",")})


def main() -> int:
    """Read a spec on stdin, print its record as the last line of stdout."""
    _pin_from_env()  # before NumPy starts its threads: they inherit the mask
    spec = json.loads(sys.stdin.read())
    record = run(spec)
    sys.stdout.write("\n" + json.dumps(record) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
