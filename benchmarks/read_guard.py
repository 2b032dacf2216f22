"""The per-call cost of a guard on a number read with ``.item()`` (`compile.speculate`).

One tiny SGD step, three ways, in one process, alternated round by round: compiled with a
normaliser ``max(1, n.item())`` (each call computes ``n`` in NumPy for the guard, then
runs the kernel), compiled with the normaliser kept in tensors (``dg.clamp(n, min=1)``),
and eager (what a compiled call that falls back runs). Each ratio is the median of the
per-round ratios of CPU time per call, with its interquartile range.

    taskset -c 1 python benchmarks/read_guard.py [--rounds 15] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import dualgraph as dg


def make(kind: str):
    """The step, with its own parameter and optimizer."""
    w = dg.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
    opt = dg.optim.SGD([w], lr=0.01)

    def step(x):
        opt.zero_grad()
        loss = (w * x).sum()
        if kind == "tensor":
            loss = loss / dg.clamp((x > 0).sum(), min=1)
        else:
            loss = loss / max(1, (x > 0).sum().item())
        loss.backward()
        opt.step()
        return loss

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    x = dg.tensor([1.0, -1.0, 2.0, 3.0])
    fns = {"read": dg.compile(make("read")), "tensor": dg.compile(make("tensor")),
           "eager": make("read")}
    for name, f in fns.items():
        t0 = time.process_time()
        f(x)
        print(f"{name}: first call {time.process_time() - t0:.3f} CPU s")
    per: dict = {k: [] for k in fns}
    for _ in range(a.rounds):
        for name, f in fns.items():
            t0 = time.process_time()
            for _ in range(a.calls):
                f(x)
            per[name].append((time.process_time() - t0) / a.calls * 1e6)
    for name, v in per.items():
        print(f"{name}: {statistics.median(v):.1f} us/call (median CPU)")
    for num, den in (("read", "tensor"), ("eager", "read")):
        r = [p / q for p, q in zip(per[num], per[den])]
        q = statistics.quantiles(r, n=4)
        print(f"{num}/{den}: {statistics.median(r):.2f} (IQR {q[0]:.2f}-{q[2]:.2f})")
    print("traces:", fns["read"].stats.traces, fns["tensor"].stats.traces)


if __name__ == "__main__":
    main()
