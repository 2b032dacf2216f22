"""The per-call cost of a GAN-style step that freezes the discriminator for the generator's
loss and unfreezes it (``requires_grad_(False)`` ... ``requires_grad_(True)`` inside the
step), compiled against eager (what the step ran as while a compiled call refused the
flip). Two nets of one layer each, SGD on both; the two ways alternated round by round in
one process; the ratio is the median of the per-round ratios of CPU time per call, with
its range, and the compiled function's first call (trace and compile) in CPU seconds.

    taskset -c 1 python benchmarks/freeze_step.py [--rounds 11] [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import dualgraph as dg


def make(width: int):
    """The step over its own generator, discriminator and optimizers."""
    dg.manual_seed(2)
    g, d = dg.nn.Linear(width, width), dg.nn.Linear(width, 1)
    og = dg.optim.SGD(g.parameters(), lr=0.01)
    od = dg.optim.SGD(d.parameters(), lr=0.01)

    def step(x):
        od.zero_grad()
        loss_d = d(x).pow(2).mean() + d(g(x).detach()).mean()
        loss_d.backward()
        od.step()
        for p in d.parameters():
            p.requires_grad_(False)
        og.zero_grad()
        loss_g = d(g(x)).pow(2).mean()
        loss_g.backward()
        og.step()
        for p in d.parameters():
            p.requires_grad_(True)
        return loss_d.detach(), loss_g.detach()

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--width", type=int, default=16)
    a = ap.parse_args()
    x = dg.randn(32, a.width)
    eager = make(a.width)
    t0 = time.process_time()
    compiled = dg.compile(make(a.width), tiered=False)
    compiled(x)
    first = time.process_time() - t0
    for _ in range(20):
        eager(x)
        compiled(x)
    ratios, per = [], {}
    for _ in range(a.rounds):
        for name, f in (("eager", eager), ("compiled", compiled)):
            t = time.process_time()
            for _ in range(a.calls):
                f(x)
            per[name] = (time.process_time() - t) / a.calls
        ratios.append(per["compiled"] / per["eager"])
    print(f"first compiled call: {first:.2f} CPU s; traces {compiled.stats.traces}")
    print(f"last round: eager {per['eager'] * 1e6:.1f} us/call, compiled "
          f"{per['compiled'] * 1e6:.1f} us/call")
    print(f"compiled/eager CPU per call: median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}, {a.rounds} rounds)")


if __name__ == "__main__":
    main()
