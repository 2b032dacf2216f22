"""The per-call cost of a guard on a value read into Python (`compile.speculate`).

One tiny SGD step, three ways, in one process, alternated round by round: compiled with a
value Python reads (each call computes it in NumPy for the guard, then runs the kernel),
compiled with the same step kept in tensors, and eager (what a compiled call that falls
back runs). ``--step max``: a normaliser ``max(1, n.item())`` against
``dg.clamp(n, min=1)``. ``--step clip``: d2l's hand-written gradient clipping of a small
MLP, ``if norm > theta: p.grad[:] *= theta / norm`` (the guard computes the forward and
backward for the norm) against ``p.grad *= dg.clamp(theta / norm, max=1)``. Each ratio
is the median of the per-round ratios of CPU time per call, with its interquartile range.

    taskset -c 1 python benchmarks/read_guard.py [--step max|clip] [--rounds 15] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dualgraph as dg


def make(kind: str):
    """The ``max`` step, with its own parameter and optimizer."""
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


def make_clip(kind: str):
    """The ``clip`` step: a 16-32-4 MLP, its gradients clipped to norm 1 by hand."""
    rng = np.random.default_rng(0)
    params = [dg.tensor(rng.standard_normal(s).astype(np.float32) * 0.5, requires_grad=True)
              for s in ((16, 32), (32,), (32, 4), (4,))]
    w1, b1, w2, b2 = params

    def step(x):
        for p in params:
            p.grad = None
        loss = (dg.tanh(x @ w1 + b1) @ w2 + b2).square().mean()
        loss.backward()
        norm = dg.sqrt(sum(dg.sum(p.grad ** 2) for p in params))
        if kind == "tensor":
            for p in params:
                p.grad *= dg.clamp(1.0 / norm, max=1.0)
        elif norm > 1.0:
            for p in params:
                p.grad[:] *= 1.0 / norm
        with dg.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=0.01)
        return loss

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", choices=("max", "clip"), default="max")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    if a.step == "max":
        mk, x = make, dg.tensor([1.0, -1.0, 2.0, 3.0])
    else:
        mk = make_clip
        x = dg.tensor(np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32))
    fns = {"read": dg.compile(mk("read")), "tensor": dg.compile(mk("tensor")),
           "eager": mk("read")}
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
    print("traces:", fns["read"].stats.traces, fns["tensor"].stats.traces,
          fns["read"].stats.retrace_reasons)


if __name__ == "__main__":
    main()
