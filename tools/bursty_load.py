"""Bursty CPU load on one core: the load that made ``dualgraph compare`` unrepeatable.

Starts ``--procs`` processes pinned to ``--core``, each alternating busy and idle spells
of random length (uniform in ``--min-ms`` .. ``--max-ms``, each spell drawn afresh), until
``--seconds`` have passed or it is interrupted. A constant busy loop is not enough to test
a benchmark harness: the scheduler then splits the core evenly and every run sees the same
share. Spells of tens to hundreds of milliseconds change the share within one timing.

    python tools/bursty_load.py --core 0 --seconds 600 &
    taskset -c 0 python -m dualgraph compare --quick
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time


def spell_loop(seed: int, lo: float, hi: float, until: float) -> None:
    """Busy for a random spell, idle for another, until ``until`` (a perf_counter time)."""
    rng = random.Random(seed)
    x = 0
    while time.perf_counter() < until:
        end = time.perf_counter() + rng.uniform(lo, hi)
        while time.perf_counter() < end:  # busy: pure Python arithmetic, no syscalls
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        time.sleep(rng.uniform(lo, hi))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--core", type=int, default=0, help="the core to load (default 0)")
    p.add_argument("--procs", type=int, default=2, help="processes on it (default 2)")
    p.add_argument("--min-ms", type=float, default=20.0, help="shortest spell (default 20)")
    p.add_argument("--max-ms", type=float, default=400.0, help="longest spell (default 400)")
    p.add_argument("--seconds", type=float, default=600.0, help="how long (default 600)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    until = time.perf_counter() + args.seconds
    children = []
    for k in range(args.procs):
        pid = os.fork()
        if pid == 0:  # the child: pinned, then spells until the end
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, {args.core})
            spell_loop(args.seed + k, args.min_ms / 1e3, args.max_ms / 1e3, until)
            os._exit(0)
        children.append(pid)
    print(f"bursty load: {args.procs} processes on core {args.core} "
          f"(pids {' '.join(map(str, children))}), spells {args.min_ms:g}-{args.max_ms:g} ms, "
          f"{args.seconds:g} s", file=sys.stderr, flush=True)
    def stop(*_: object) -> None:  # Ctrl-C or kill: the spells stop with this process
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for pid in children:
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
