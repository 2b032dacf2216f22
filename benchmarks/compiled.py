"""Compiled dualgraph against eager, hand-written NumPy and Numba, and peers when installed.

Workloads (issue 4's table):
  W1      scalar  z = x*y + y**2, forward + backward
  W2tiny  TinyNet 2->3->1 train step (MSE, SGD), batch 10, whole step compiled
  W2mlp   MLP 784->256->10 train step (cross-entropy, SGD), batch 64, whole step compiled
  W3      1M float32 sum(tanh(.5x+1)*sigmoid(x)+.1x^2), value and gradient
  W4cnn   LeNet-5 style CNN train step (cross-entropy, Adam), batch 64 of 1x28x28
  W5tr    pre-norm transformer encoder block train step (next-token cross-entropy, Adam),
          batch 16 x seq 64 x width 128, vocab 256
and the compile-time rows (fresh processes): cold compile of the MLP step, and the first
result with a warm disk cache, import included.

    python benchmarks/compiled.py --fast --table -o compiled.json
    python benchmarks/compiled.py --compile-times          # the fresh-process rows only

PyTorch and JAX columns appear when they are installed; otherwise they are skipped. The
dualgraph programs and every implementation's data come from ``dualgraph.workloads``.
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # the targets are single-thread figures
# Blocking compiles: the compile rows measure the compile itself, and a call must not be
# timed while a background worker competes for the cores (pyperf's workers inherit it).
os.environ.setdefault("DUALGRAPH_TIERED", "0")

import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pyperf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import models_numpy  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

import dualgraph as dg  # noqa: E402
from dualgraph.workloads import (  # noqa: E402
    MLPS,
    TRANSFORMER_SIZES,
    WORKLOADS,
    chain_data,
    mlp_data,
    model_step,
    train_step,
)

LR = 0.01


def _have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


# ------------------------------------------------------------------------------- W1
def w1_dualgraph(compiled: bool):
    def run():
        f, (x, y) = WORKLOADS["scalar"].build(False)
        if compiled:
            f = dg.compile(f)

        def step():
            x.grad = None
            y.grad = None
            f(x, y).backward()

        return step
    return run


def w1_numpy():
    x = np.array(2.0, np.float32)
    y = np.array(3.0, np.float32)

    def step():
        z = x * y + y ** 2
        g = np.ones_like(z)
        return z, g * y, g * x + g * (y * 2.0)

    return step


def w1_torch():
    import torch

    x = torch.tensor(2.0, requires_grad=True)
    y = torch.tensor(3.0, requires_grad=True)

    def step():
        x.grad = None
        y.grad = None
        (x * y + y ** 2).backward()

    return step


def w1_jax():
    import jax
    import jax.numpy as jnp

    f = jax.jit(jax.value_and_grad(lambda x, y: x * y + y ** 2, argnums=(0, 1)))
    x, y = jnp.float32(2.0), jnp.float32(3.0)

    def step():
        v, g = f(x, y)
        g[0].block_until_ready()

    return step


# ------------------------------------------------------------------ W2 (tiny and MLP)
# The benchmark's W2 names -> dualgraph.workloads.MLPS keys.
_MLP = {"tiny": "tinynet", "mlp": "mlp"}


def _data(kind: str):
    sizes, batch, loss = MLPS[_MLP[kind]]
    return (*mlp_data(sizes, batch, loss), sizes)


def _init(sizes):
    rng = np.random.default_rng(0)
    b1, b2 = 1 / np.sqrt(sizes[0]), 1 / np.sqrt(sizes[1])
    return [rng.uniform(-b1, b1, (sizes[1], sizes[0])).astype(np.float32),
            rng.uniform(-b1, b1, sizes[1]).astype(np.float32),
            rng.uniform(-b2, b2, (sizes[2], sizes[1])).astype(np.float32),
            rng.uniform(-b2, b2, sizes[2]).astype(np.float32)]


def w2_dualgraph(kind: str, compiled: bool):
    def run():
        step, (x, t) = train_step(_MLP[kind], lr=LR)
        f = dg.compile(step) if compiled else step
        return lambda: f(x, t)
    return run


def w2_numpy(kind: str):
    def run():
        X, T, sizes = _data(kind)
        W1, c1, W2, c2 = params = _init(sizes)
        n = X.shape[0]
        onehot = np.eye(sizes[2], dtype=np.float32)[T] if kind == "mlp" else None

        def step():
            h = X @ W1.T + c1
            a = np.maximum(h, 0)
            out = a @ W2.T + c2
            if kind == "tiny":
                d = out - T
                gout = d * (2.0 / d.size)
            else:
                e = np.exp(out - out.max(axis=1, keepdims=True))
                gout = (e / e.sum(axis=1, keepdims=True) - onehot) / n
            gh = (gout @ W2) * (h > 0)
            grads = (gh.T @ X, gh.sum(axis=0), gout.T @ a, gout.sum(axis=0))
            for p, g in zip(params, grads):
                p -= LR * g

        return step
    return run


def w2_numba_hand(kind: str):
    """A hand-written njit TinyNet step: the fastest anyone could write by hand."""
    import numba

    @numba.njit(cache=True)
    def tiny_step(X, Y, W1, c1, W2, c2, lr):
        n = X.shape[0]
        h = np.empty((n, 3), np.float32)
        out = np.empty((n, 1), np.float32)
        for i in range(n):
            for j in range(3):
                h[i, j] = c1[j] + X[i, 0] * W1[j, 0] + X[i, 1] * W1[j, 1]
            s = c2[0]
            for j in range(3):
                s += max(h[i, j], np.float32(0)) * W2[0, j]
            out[i, 0] = s
        gW1 = np.zeros_like(W1)
        gc1 = np.zeros_like(c1)
        gW2 = np.zeros_like(W2)
        gc2 = np.zeros_like(c2)
        for i in range(n):
            go = (out[i, 0] - Y[i, 0]) * np.float32(2.0 / n)
            gc2[0] += go
            for j in range(3):
                a = max(h[i, j], np.float32(0))
                gW2[0, j] += go * a
                if h[i, j] > 0:
                    gh = go * W2[0, j]
                    gc1[j] += gh
                    gW1[j, 0] += gh * X[i, 0]
                    gW1[j, 1] += gh * X[i, 1]
        W1 -= lr * gW1
        c1 -= lr * gc1
        W2 -= lr * gW2
        c2 -= lr * gc2

    def run():
        X, Y, sizes = _data(kind)
        W1, c1, W2, c2 = _init(sizes)
        lr = np.float32(LR)
        return lambda: tiny_step(X, Y, W1, c1, W2, c2, lr)
    return run


def w2_torch(kind: str):
    def run():
        import torch

        torch.set_num_threads(1)
        X, T, sizes = _data(kind)
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.ReLU(),
                                  torch.nn.Linear(sizes[1], sizes[2]))
        opt = torch.optim.SGD(net.parameters(), lr=LR)
        loss_fn = torch.nn.MSELoss() if kind == "tiny" else torch.nn.CrossEntropyLoss()
        x, t = torch.from_numpy(X), torch.from_numpy(T)

        def step():
            opt.zero_grad()
            loss_fn(net(x), t).backward()
            opt.step()

        return step
    return run


def w2_jax(kind: str):
    def run():
        import jax
        import jax.numpy as jnp

        X, T, sizes = _data(kind)
        params = [jnp.asarray(p) for p in _init(sizes)]

        def loss(params, x, t):
            W1, c1, W2, c2 = params
            out = jnp.maximum(x @ W1.T + c1, 0) @ W2.T + c2
            if kind == "tiny":
                return ((out - t) ** 2).mean()
            return -jnp.mean(jax.nn.log_softmax(out)[jnp.arange(x.shape[0]), t])

        @jax.jit
        def step(params, x, t):
            g = jax.grad(loss)(params, x, t)
            return [p - LR * gp for p, gp in zip(params, g)]

        state = {"p": params}
        x, t = jnp.asarray(X), jnp.asarray(T)

        def go():
            state["p"] = step(state["p"], x, t)
            state["p"][0].block_until_ready()

        return go
    return run


# ------------------------------------------------------------------------------- W3
def _w3_data():
    return chain_data(1_000_000)


def w3_dualgraph(compiled: bool):
    def run():
        f, (x,) = WORKLOADS["chain"].build(False)
        if compiled:
            f = dg.compile(f)

        def step():
            x.grad = None
            f(x).backward()

        return step
    return run


def w3_numpy():
    x = _w3_data()

    def step():
        t = np.tanh(x * np.float32(0.5) + np.float32(1))
        s = np.float32(0.5) + np.float32(0.5) * np.tanh(np.float32(0.5) * x)
        y = (t * s + np.float32(0.1) * x * x).sum()
        g = (1 - t * t) * np.float32(0.5) * s + t * s * (1 - s) + np.float32(0.2) * x
        return y, g

    return step


def w3_jax():
    import jax
    import jax.numpy as jnp

    f = jax.jit(jax.value_and_grad(
        lambda x: jnp.sum(jnp.tanh(.5 * x + 1) * jax.nn.sigmoid(x) + .1 * x ** 2)))
    x = jnp.asarray(_w3_data())

    def step():
        v, g = f(x)
        g.block_until_ready()

    return step


def w3_torch():
    import torch

    torch.set_num_threads(1)
    x = torch.from_numpy(_w3_data()).requires_grad_()

    def step():
        x.grad = None
        (torch.tanh(.5 * x + 1) * torch.sigmoid(x) + .1 * x ** 2).sum().backward()

    return step


# --------------------------------------------------------------- W4 (cnn), W5 (transformer)
MODEL_LR = 1e-3
_MODELS = {"cnn": "W4cnn", "transformer": "W5tr"}


def _model_numpy_args(name: str):
    """The hand-written step's loss function, fixed leading arguments and data."""
    _, (x, t), net = model_step(name, MODEL_LR)
    params = {k: v.numpy().copy() for k, v in net.named_parameters()}
    if name == "cnn":
        return models_numpy.cnn_loss_and_grads, params, (), (x.numpy(), t.numpy())
    heads = TRANSFORMER_SIZES[name]["heads"]
    return models_numpy.transformer_loss_and_grads, params, (heads,), (x.numpy(), t.numpy())


def wm_dualgraph(name: str, compiled: bool):
    def run():
        step, (x, t), _ = model_step(name, MODEL_LR)
        f = dg.compile(step, tiered=False) if compiled else step
        return lambda: f(x, t).item()
    return run


def wm_numpy(name: str):
    def run():
        fn, params, fixed, data = _model_numpy_args(name)
        step = models_numpy.train_step(fn, params, MODEL_LR, *fixed)
        return lambda: step(*data)
    return run


def _torch_model(name: str):
    """The torch twin of a model workload, with dualgraph's initial parameters."""
    import torch

    _, (x, t), net = model_step(name, MODEL_LR)
    tnn, F = torch.nn, torch.nn.functional
    if name == "cnn":
        model = tnn.Sequential(
            tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2),
            tnn.Conv2d(6, 16, 5), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
            tnn.Linear(400, 120), tnn.ReLU(), tnn.Linear(120, 84), tnn.ReLU(),
            tnn.Linear(84, 10))
    else:
        s = TRANSFORMER_SIZES[name]

        class Block(tnn.Module):
            def __init__(self, vocab, seq, width, heads):
                super().__init__()
                self.heads = heads
                self.embed = tnn.Embedding(vocab, width)
                self.pos = tnn.Parameter(torch.zeros(seq, width))
                self.ln1, self.ln2, self.ln_f = (tnn.LayerNorm(width) for _ in range(3))
                self.qkv = tnn.Linear(width, 3 * width)
                self.proj = tnn.Linear(width, width)
                self.fc1 = tnn.Linear(width, 4 * width)
                self.fc2 = tnn.Linear(4 * width, width)
                self.head = tnn.Linear(width, vocab)

            def forward(self, tokens):
                b, n = tokens.shape
                w = self.pos.shape[1]
                h, d = self.heads, w // self.heads
                x = self.embed(tokens) + self.pos
                q, k, v = self.qkv(self.ln1(x)).split(w, dim=-1)
                q, k, v = (z.reshape(b, n, h, d).transpose(1, 2) for z in (q, k, v))
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.proj(a.transpose(1, 2).reshape(b, n, w))
                x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
                return self.head(self.ln_f(x))

        model = Block(s["vocab"], s["seq"], s["width"], s["heads"])
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(torch.from_numpy(dict(net.named_parameters())[k].numpy()))
    return model, torch.from_numpy(x.numpy()), torch.from_numpy(t.numpy())


def wm_torch(name: str, compiled: bool = False):
    def run():
        import torch

        torch.set_num_threads(1)
        model, x, t = _torch_model(name)
        opt = torch.optim.Adam(model.parameters(), lr=MODEL_LR)

        def loss_step(x, t):
            opt.zero_grad()
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                     t.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        f = torch.compile(loss_step) if compiled else loss_step
        return lambda: f(x, t).item()
    return run


def _torch_compile_runs() -> bool:
    """torch.compile needs a C++ toolchain; skip its column where it cannot build."""
    try:
        import torch

        torch.compile(lambda a: a * 2)(torch.ones(2))
        return True
    except Exception:  # noqa: BLE001 - any failure means the column cannot run here
        return False


def workloads() -> dict:
    """workload -> {implementation: factory returning a zero-argument step}."""
    table = {
        "W1": {"numpy": w1_numpy, "eager": w1_dualgraph(False),
               "compiled": w1_dualgraph(True), "torch": w1_torch, "jax": w1_jax},
        "W2tiny": {"numpy": w2_numpy("tiny"), "numba-hand": w2_numba_hand("tiny"),
                   "eager": w2_dualgraph("tiny", False), "compiled": w2_dualgraph("tiny", True),
                   "torch": w2_torch("tiny"), "jax": w2_jax("tiny")},
        "W2mlp": {"numpy": w2_numpy("mlp"), "eager": w2_dualgraph("mlp", False),
                  "compiled": w2_dualgraph("mlp", True), "torch": w2_torch("mlp"),
                  "jax": w2_jax("mlp")},
        "W3": {"numpy": w3_numpy, "eager": w3_dualgraph(False), "compiled": w3_dualgraph(True),
               "torch": w3_torch, "jax": w3_jax},
    }
    for name, wl in _MODELS.items():
        table[wl] = {"numpy": wm_numpy(name), "eager": wm_dualgraph(name, False),
                     "compiled": wm_dualgraph(name, True), "torch": wm_torch(name),
                     "torch.compile": wm_torch(name, True)}
    for peer in ("torch", "jax"):
        if not _have(peer):
            for impls in table.values():
                impls.pop(peer, None)
                impls.pop(f"{peer}.compile", None)
    if _have("torch") and not _torch_compile_runs():
        for impls in table.values():
            impls.pop("torch.compile", None)
    return table


# ------------------------------------------------------------ compile-time (fresh process)
_COLD = """
import time, sys
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import dualgraph as dg
from dualgraph.workloads import train_step
step, args = train_step("mlp")
step = dg.compile(step)
step(*args)
print(time.perf_counter() - t0, step.stats.compile_seconds)
"""


def compile_times(repeats: int = 3) -> dict:
    """Cold compile (empty cache) and warm first result (cache from a previous process),
    each in a fresh process, median of ``repeats``; seconds since interpreter start."""
    script = _COLD.format(root=ROOT)
    cold, warm = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, DUALGRAPH_CACHE_DIR=d)
            for bucket in (cold, warm):
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                     capture_output=True, text=True).stdout.split()
                total = time.perf_counter() - t0
                bucket.append((total, float(out[0]), float(out[1])))
    med = lambda xs, k: float(np.median([x[k] for x in xs]))
    return {"cold_process_s": med(cold, 0), "cold_compile_s": med(cold, 2),
            "warm_process_s": med(warm, 0), "warm_first_result_s": med(warm, 1)}


# ---------------------------------------------------------------------------- running
def _loop(step):
    def run(loops):
        t0 = pyperf.perf_counter()
        for _ in range(loops):
            step()
        return pyperf.perf_counter() - t0
    return run


def print_table(suite, extra: dict | None = None) -> None:
    med = {b.get_name(): b.median() for b in suite.get_benchmarks()}
    print(f"\n{'workload':8s} {'impl':11s} {'median':>12s} {'x numpy':>9s}")
    for wl, impls in workloads().items():
        base = med.get(f"{wl}/numpy")
        for impl in impls:
            t = med.get(f"{wl}/{impl}")
            if t is None:
                continue
            unit = f"{t * 1e6:9.1f} us" if t < 1e-3 else f"{t * 1e3:9.3f} ms"
            ratio = f"{t / base:8.2f}x" if base else ""
            print(f"{wl:8s} {impl:11s} {unit:>12s} {ratio:>9s}")
    for k, v in (extra or {}).items():
        print(f"{k:30s} {v:.2f} s")


def _worker_args(cmd: list, args) -> None:
    """pyperf's workers are new processes: without the filter they would number the
    benchmarks differently from the parent and run the wrong ones."""
    for w in args.workload or ():
        cmd.extend(["--workload", w])


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_worker_args)
    runner.argparser.add_argument("--table", action="store_true", help="print the table")
    runner.argparser.add_argument("--workload", action="append",
                                  help="W1, W2tiny, W2mlp, W3, W4cnn, W5tr")
    runner.argparser.add_argument("--compile-times", action="store_true",
                                  help="only measure the fresh-process compile rows")
    args = runner.parse_args()
    if args.compile_times:
        for k, v in compile_times().items():
            print(f"{k:24s} {v:.2f} s")
        return
    suite = []
    for wl, impls in workloads().items():
        if args.workload and wl not in args.workload:
            continue
        for impl, factory in impls.items():
            step = factory()
            step()  # compile / warm up outside the timings
            b = runner.bench_time_func(f"{wl}/{impl}", _loop(step))
            if b is not None:
                suite.append(b)
    if args.table and suite:
        extra = None if args.workload else compile_times(1) if not runner.args.worker else None
        print_table(pyperf.BenchmarkSuite(suite), extra)


if __name__ == "__main__":
    main()
