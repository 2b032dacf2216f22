"""Eager overhead: dualgraph define-by-run vs hand-written NumPy forward+backward.

Workloads (each beside a hand-written NumPy version of exactly the same step):
  scalar  z = x*y + y**2; z.backward()
  tiny    TinyNet 2->3->1, batch 10, MSE, SGD: one training step
  mlp     MLP 784->256->10, batch 64, cross-entropy, SGD: one training step
  fwdbwd  forward and backward of a two-layer ReLU MLP at batch 16, 16-32-4 and 784-256-10
          (``fwdbwd16``, ``fwdbwd784``), gradients reset between steps
  affine  ``(x * 2 + 1).sum()`` on 100 elements with grad, and its backward
  cnn, transformer  one Adam step of the model workloads (``dualgraph.workloads.model_step``
          against ``peers``' PyTorch module of the same program and parameters)
PyTorch eager columns are added when torch is installed. Each workload has one builder for
dualgraph and PyTorch (the same program through the API they share); the programs' data
come from ``dualgraph.workloads`` and ``peers``.

    python benchmarks/eager_overhead.py -o eager.json     # pyperf options work
    python benchmarks/eager_overhead.py --fast --table     # quick run + ratio table
    python benchmarks/eager_overhead.py --interleaved      # one process, alternating rounds
    python benchmarks/eager_overhead.py --interleaved --ops   # the transformer's ops, one by one
    python benchmarks/eager_overhead.py --before ../old --rounds 12     # two checkouts

``--before DIR`` compares two checkouts ab-style (``ab.py``'s method): per workload, one
worker process each for DIR's dualgraph, this checkout's and PyTorch, pinned to one CPU
and alternated round by round; each row is the median per-round ratio with its
interquartile range, wall and CPU time.

``--interleaved`` is the ratio tables' method (see ``interleaved.py``): every
implementation of a workload in one process pinned to one CPU, alternated round by round,
each ratio the median of per-round ratios with its interquartile range.
"""

from __future__ import annotations

import functools
import os
import sys

# One BLAS thread: the targets are single-thread figures and pyperf runs workers in parallel
# with nothing else, so threads would only add noise.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pyperf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ab  # noqa: E402
import interleaved  # noqa: E402
import peers  # noqa: E402

import dualgraph as dg  # noqa: E402
from dualgraph.workloads import MLPS, WORKLOADS, mlp_data  # noqa: E402

LR = 0.01


def _library(impl: str):
    """dualgraph or torch (one thread): the builders below use only the API they share."""
    if impl == "dualgraph":
        return dg
    import torch

    torch.set_num_threads(1)
    return torch


# One builder per workload for both libraries, so the two run exactly the same program.
def scalar_step(impl: str):
    lib = _library(impl)
    f = WORKLOADS["scalar"].build(False)[0]
    x = lib.tensor(2.0, requires_grad=True)
    y = lib.tensor(3.0, requires_grad=True)

    def step():
        x.grad = None
        y.grad = None
        z = f(x, y)
        z.backward()
        return x.grad, y.grad

    return step


def train_step(impl: str, name: str):
    """One SGD step of the MLP workload ``name`` of dualgraph.workloads."""
    lib = _library(impl)
    sizes, batch, loss_name = MLPS[name]
    nn = lib.nn
    net = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2]))
    for p, a in zip(net.parameters(), peers.init_params(sizes)):  # the same start everywhere
        p.data = lib.tensor(a)
    loss_fn = nn.MSELoss() if loss_name == "mse" else nn.CrossEntropyLoss()
    opt = lib.optim.SGD(net.parameters(), lr=LR)
    X, T = (lib.tensor(a) for a in mlp_data(sizes, batch, loss_name))

    def step():
        opt.zero_grad()
        loss = loss_fn(net(X), T)
        loss.backward()
        opt.step()
        return loss

    return step


def fwdbwd_step(impl: str, sizes: tuple):
    """Forward and backward of a two-layer ReLU MLP at batch 16, no optimizer."""
    lib = _library(impl)
    params = [lib.tensor(a, requires_grad=True) for a in peers.init_params(sizes)]
    xt = lib.tensor(np.random.default_rng(1).standard_normal((16, sizes[0])).astype(np.float32))
    F = lib.nn.functional

    def step():
        for p in params:
            p.grad = None
        a = F.relu(F.linear(xt, params[0], params[1]))
        loss = F.linear(a, params[2], params[3]).sum()
        loss.backward()
        return loss

    return step


def affine_step(impl: str):
    lib = _library(impl)
    x = lib.tensor(np.linspace(-1, 1, 100, dtype=np.float32), requires_grad=True)

    def step():
        x.grad = None
        y = (x * 2 + 1).sum()
        y.backward()
        return y

    return step


def model_eager(impl: str, name: str):
    """One eager Adam step of the model workload ``name`` (``cnn`` or ``transformer``)."""
    if impl == "dualgraph":
        step, (x, t), _ = dg.workloads.model_step(name, peers.MODEL_LR)
        return lambda: step(x, t)
    return peers._model_torch(name, False)


# ------------------------------------------------------------- hand-written NumPy steps
def scalar_numpy():
    x = np.array(2.0, np.float32)
    y = np.array(3.0, np.float32)

    def step():
        xy = x * y
        yy = y ** 2
        z = xy + yy
        g = np.ones_like(z)
        gx = g * y
        gy = g * x + g * (y * 2.0)
        return z, gx, gy

    return step


def train_numpy(name: str):
    sizes, batch, loss_name = MLPS[name]
    W1, c1, W2, c2 = peers.init_params(sizes)
    X, T = mlp_data(sizes, batch, loss_name)
    n = X.shape[0]
    onehot = np.eye(sizes[2], dtype=np.float32)[T] if loss_name == "ce" else None

    def step():
        h = X @ W1.T + c1
        a = np.maximum(h, 0)
        out = a @ W2.T + c2
        if loss_name == "mse":
            d = out - T
            loss = (d * d).mean()
            gout = d * (2.0 / d.size)
        else:
            m = out.max(axis=1, keepdims=True)
            e = np.exp(out - m)
            s = e.sum(axis=1, keepdims=True)
            loss = -((out - m - np.log(s)) * onehot).sum() / n
            gout = (e / s - onehot) / n
        gW2 = gout.T @ a
        gc2 = gout.sum(axis=0)
        ga = gout @ W2
        gh = ga * (h > 0)
        gW1 = gh.T @ X
        gc1 = gh.sum(axis=0)
        for p, g in ((W1, gW1), (c1, gc1), (W2, gW2), (c2, gc2)):
            p -= LR * g
        return loss

    return step


# ------------------------------------------------- the transformer step's ops, one by one
def _op_data(shape: tuple, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def op_step(impl: str, op: str):
    """Forward and backward of one op group of the ``transformer`` workload's step at its
    shapes (``op`` a key of `OPS`), the gradients reset between calls: where the step's
    time goes op by op, dualgraph against PyTorch on the same program."""
    lib = _library(impl)
    F = lib.nn.functional
    s = dg.workloads.TRANSFORMER_SIZES["transformer"]
    b, t, w, h, v = s["batch"], s["seq"], s["width"], s["heads"], s["vocab"]
    rows = b * t
    leaves: list = []

    def leaf(a):
        x = lib.tensor(a, requires_grad=True)
        leaves.append(x)
        return x

    if op == "attention":  # split into heads, causal scaled dot-product attention
        x = leaf(_op_data((b, t, 3 * w)))

        def fwd():
            q, k, val = (z.reshape(b, t, h, w // h).transpose(1, 2)
                         for z in x.split(w, dim=-1))
            return F.scaled_dot_product_attention(q, k, val, is_causal=True).sum()
    elif op == "gelu":
        x = leaf(_op_data((rows, 4 * w)))

        def fwd():
            return F.gelu(x).sum()
    elif op == "layer_norm":
        x, g, be = leaf(_op_data((b, t, w))), leaf(_op_data((w,), 1)), leaf(_op_data((w,), 2))

        def fwd():
            return F.layer_norm(x, (w,), g, be).sum()
    elif op == "linear":  # fc1: (rows, w) -> (rows, 4w)
        x, wt, bias = (leaf(_op_data((b, t, w))), leaf(_op_data((4 * w, w), 1)),
                       leaf(_op_data((4 * w,), 2)))

        def fwd():
            return F.linear(x, wt, bias).sum()
    elif op == "cross_entropy":
        x = leaf(_op_data((rows, v)))
        target = lib.tensor(np.random.default_rng(3).integers(0, v, rows))

        def fwd():
            return F.cross_entropy(x, target)
    elif op == "embedding":  # token embedding plus the position embedding
        table, pos = leaf(_op_data((v, w))), leaf(_op_data((t, w), 1))
        ids = lib.tensor(np.random.default_rng(4).integers(0, v, (b, t)))

        def fwd():
            return (F.embedding(ids, table) + pos).sum()
    else:
        raise ValueError(f"unknown op group {op!r}")

    def step():
        for p in leaves:
            p.grad = None
        loss = fwd()
        loss.backward()
        return loss

    return step


OPS = ("attention", "gelu", "layer_norm", "linear", "cross_entropy", "embedding")


def op_workloads() -> dict:
    """``op:<name>`` -> {impl: factory}: the transformer step's op groups (`op_step`)."""
    import torch  # noqa: F401 - the point is the comparison

    return {f"op:{op}": {i: functools.partial(op_step, i, op) for i in ("dualgraph", "torch")}
            for op in OPS}


def workloads() -> dict:
    """name -> {impl: zero-argument factory returning the step callable}."""
    try:
        import torch  # noqa: F401

        libs = ("dualgraph", "torch")
    except ImportError:
        libs = ("dualgraph",)
    P = functools.partial
    table = {"scalar": {"numpy": scalar_numpy, **{i: P(scalar_step, i) for i in libs}}}
    for wl, name in (("tiny", "tinynet"), ("mlp", "mlp")):
        table[wl] = {"numpy": P(train_numpy, name), **{i: P(train_step, i, name) for i in libs}}
    for wl, sizes in (("fwdbwd16", (16, 32, 4)), ("fwdbwd784", (784, 256, 10))):
        table[wl] = {i: P(fwdbwd_step, i, sizes) for i in libs}
    table["affine"] = {i: P(affine_step, i) for i in libs}
    for name in ("cnn", "transformer"):
        table[name] = {i: P(model_eager, i, name) for i in libs}
    return table


def _bench_loop(step):
    def run(loops):
        t0 = pyperf.perf_counter()
        for _ in range(loops):
            step()
        return pyperf.perf_counter() - t0

    return run


def print_table(suite) -> None:
    """Median per workload and implementation, and each one's ratio to hand NumPy."""
    med = {b.get_name(): b.median() for b in suite.get_benchmarks()}
    print(f"\n{'workload':10s} {'impl':10s} {'median':>12s} {'x numpy':>9s}")
    for wl in workloads():
        base = med.get(f"{wl}/numpy")
        for impl in ("numpy", "dualgraph", "torch"):
            t = med.get(f"{wl}/{impl}")
            if t is None:
                continue
            ratio = f"{t / base:8.2f}x" if base else ""
            print(f"{wl:10s} {impl:10s} {t * 1e6:10.1f}us {ratio}")


def _worker_args(cmd: list, args) -> None:
    """pyperf's workers are new processes: without the filter they would number the
    benchmarks differently from the parent and run the wrong ones."""
    for w in args.workload or ():
        cmd.extend(["--workload", w])


def run_interleaved(args) -> None:
    """Every implementation of a workload in this process, alternated round by round."""
    interleaved.single_thread.limit()
    results = {}
    meta = interleaved.machine()
    for wl, impls in (op_workloads() if args.ops else workloads()).items():
        if args.workload and wl not in args.workload:
            continue
        print(f"{wl}: {', '.join(impls)}", flush=True)
        results[wl] = interleaved.measure(impls, args.rounds, args.block, peers.readback)
    meta["load_after"] = interleaved.machine().get("load")
    print(f"\n{meta}; {args.rounds} rounds; median per-round ratio (interquartile range)\n")
    for clock in ("wall", "cpu"):
        print(f"\n{clock} time\n")
        print(interleaved.table(results, [("dualgraph", "torch"), ("dualgraph", "numpy")],
                                clock=clock))
    if args.json:
        interleaved.save(args.json, results, meta)


# ``ab.py``'s worker, building one of this file's eager steps.
_AB_WORKER = ab.WORKER_HEAD + """
import eager_overhead
factory = eager_overhead.workloads()[wl][impl]
""" + ab.WORKER_LOOP


def run_before_after(args) -> None:
    """This checkout's eager steps against ``args.before``'s and PyTorch's, ab-style."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cpu = None if args.cpu < 0 else args.cpu
    load0 = os.getloadavg()[0]
    print(f"{'workload':10s} {'after/before':>22s} {'after/torch':>22s} {'before/torch':>22s}"
          f"   (wall: median, IQR; then CPU median)")
    for wl in workloads():
        if args.workload and wl not in args.workload:
            continue
        workers = {"before": ab.Worker(args.before, wl, "dualgraph", cpu, _AB_WORKER),
                   "after": ab.Worker(here, wl, "dualgraph", cpu, _AB_WORKER),
                   "torch": ab.Worker(here, wl, "torch", cpu, _AB_WORKER)}
        try:
            times = {k: np.array(v) for k, v in
                     ab.measure(workers, args.rounds, args.block).items()}
        finally:
            for w in workers.values():
                w.close()
        cells = []
        for a, b in (("after", "before"), ("after", "torch"), ("before", "torch")):
            r = times[a] / times[b]
            q1, med, q3 = np.percentile(r[:, 0], [25, 50, 75])
            cells.append(f"{med:.3f} ({q1:.2f}-{q3:.2f}) {np.median(r[:, 1]):.3f}")
        print(f"{wl:10s} " + "  ".join(f"{c:>22s}" for c in cells), flush=True)
    print(f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}; {args.rounds} rounds; "
          f"pinned to CPU {cpu}")


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_worker_args)
    runner.argparser.add_argument("--table", action="store_true",
                                  help="print the ratio table at the end")
    runner.argparser.add_argument("--workload", action="append",
                                  help="only these workloads (scalar, tiny, mlp, fwdbwd16, "
                                  "fwdbwd784, affine, cnn, transformer)")
    runner.argparser.add_argument("--interleaved", action="store_true",
                                  help="one process, implementations alternated by round")
    runner.argparser.add_argument("--rounds", type=int, default=21)
    runner.argparser.add_argument("--block", type=float, default=0.05,
                                  help="--interleaved: seconds per block of calls")
    runner.argparser.add_argument("--json", help="--interleaved: per-round times here")
    runner.argparser.add_argument("--before", help="checkout directory of the old code: "
                                  "its eager steps against this one's, ab-style")
    runner.argparser.add_argument("--cpu", type=int, default=0,
                                  help="--before: the CPU every worker is pinned to "
                                  "(-1: not pinned)")
    runner.argparser.add_argument("--ops", action="store_true",
                                  help="--interleaved: the transformer step's op groups "
                                  "(forward and backward each) instead of the workloads")
    args = runner.parse_args()
    if args.before:
        run_before_after(args)
        return
    if args.interleaved:
        run_interleaved(args)
        return
    suite = []
    for wl, impls in workloads().items():
        if args.workload and wl not in args.workload:
            continue
        for impl, factory in impls.items():
            step = factory()
            step()  # warm up outside the timings
            b = runner.bench_time_func(f"{wl}/{impl}", _bench_loop(step))
            if b is not None:
                suite.append(b)
    if args.table and suite:
        print_table(pyperf.BenchmarkSuite(suite))


if __name__ == "__main__":
    main()
