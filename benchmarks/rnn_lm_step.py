"""A recurrent language model's training step (embedding, a 2-layer bidirectional LSTM or
GRU, a linear decoder, cross entropy, backward, gradient clipping and an SGD update), as
pytorch/examples' word_language_model trains one: its cold compile's CPU seconds, and its
run time with the recurrent time loops in C functions (``--loops c``) or written into the
kernel (``--loops kernel``).

    python benchmarks/rnn_lm_step.py compile --cell lstm --steps 8 --loops c
    python benchmarks/rnn_lm_step.py run --cell gru --steps 64 --rounds 15

``compile`` runs one cold compile in this process (give it an empty DUALGRAPH_CACHE_DIR);
``run`` builds the step both ways in this process and times them in interleaved rounds
(CPU time of this thread), printing the median per-round ratio and its IQR.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("DUALGRAPH_COMPILE_JOBS", "1")

import numpy as np  # noqa: E402

import dualgraph as dg  # noqa: E402
from dualgraph.backend.numba.lowerings import recurrent as lowering  # noqa: E402

NTOKENS, EMSIZE, NHID, BATCH = 50, 16, 32, 4


class LM(dg.nn.Module):
    def __init__(self, cell: str) -> None:
        super().__init__()
        self.encoder = dg.nn.Embedding(NTOKENS, EMSIZE)
        kind = dg.nn.LSTM if cell == "lstm" else dg.nn.GRU
        self.rnn = kind(EMSIZE, NHID, num_layers=2, bidirectional=True)
        self.decoder = dg.nn.Linear(2 * NHID, NTOKENS)

    def forward(self, data):
        out, _ = self.rnn(self.encoder(data))
        return self.decoder(out).view(-1, NTOKENS)


def make_step(cell: str, loops: str):
    """A compiled training step and its arguments; ``loops`` picks the lowering."""
    dg.manual_seed(0)
    model = LM(cell)
    opt = dg.optim.SGD(model.parameters(), lr=0.1)

    def step(data, targets):
        opt.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(data), targets)
        loss.backward()
        dg.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        return loss

    lowering.CALL_C = loops == "c"
    return dg.compile(step, tiered=False), model


def batch(steps: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, NTOKENS, (steps + 1, BATCH))
    return dg.tensor(tokens[:-1]), dg.tensor(tokens[1:].reshape(-1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("compile", "run"))
    ap.add_argument("--cell", choices=("lstm", "gru"), default="lstm")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--loops", choices=("c", "kernel"), default="c")
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    data, targets = batch(a.steps)
    if a.what == "compile":
        f, _ = make_step(a.cell, a.loops)
        t0 = time.process_time()
        f(data, targets)
        cpu = time.process_time() - t0
        print(f"{a.cell} T={a.steps} loops={a.loops}: cold compile {cpu:.1f} s CPU "
              f"(traces {f.stats.traces}), load {os.getloadavg()[0]:.1f}")
        return
    steps = {}
    for loops in ("kernel", "c"):
        f, _ = make_step(a.cell, loops)
        f(data, targets)  # compile (or load)
        steps[loops] = f
    times: dict = {k: [] for k in steps}
    for r in range(a.rounds):
        for k in (("kernel", "c") if r % 2 else ("c", "kernel")):
            t0 = time.thread_time()
            for _ in range(10):
                steps[k](data, targets)
            times[k].append((time.thread_time() - t0) / 10)
    ratios = sorted(c / k for c, k in zip(times["c"], times["kernel"]))
    q = statistics.quantiles(ratios, n=4)
    print(f"{a.cell} T={a.steps}: kernel loops {statistics.median(times['kernel']) * 1e3:.3f} "
          f"ms, C loops {statistics.median(times['c']) * 1e3:.3f} ms per step (CPU, median of "
          f"{a.rounds} rounds); C / kernel {statistics.median(ratios):.3f} (IQR "
          f"{q[0]:.3f}-{q[2]:.3f}); load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
