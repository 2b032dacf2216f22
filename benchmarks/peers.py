"""The peers' versions of the benchmark workloads, each built only when its library imports.

Implementations (``IMPLS``): hand-written NumPy, a hand-written Numba step
(``numba_hand.py``), PyTorch eager, ``torch.compile``, ``jax.jit`` and PyTensor compiled with
its Numba backend (``mode="NUMBA"``). Workloads:

  scalar        z = x*y + y**2, value and gradients (0-d float32)
  mlp(sizes, batch, loss)
                one SGD training step of sizes[0] -> sizes[1] -> ReLU -> sizes[2], loss
                "mse" (TinyNet) or "ce" (cross-entropy against class indices)
  chain(n)      sum(tanh(.5x+1)*sigmoid(x)+.1x^2) of n float32 values, value and gradient
  cnn           one Adam step of a LeNet-5 style CNN, batch 64 of 1x28x28, cross-entropy
  transformer   one Adam step of a pre-norm transformer encoder block with a next-token
                head (batch 16 x seq 64 x width 128, 4 heads, vocab 256), cross-entropy

``build(impl, workload, **params)`` returns a zero-argument ``step``: one call runs one step
and returns what a training loop would read (the loss, or the value and gradients), still
in the library's own type; ``readback(result)`` turns it into Python floats and NumPy arrays
(``.item()``, ``float()``, ``np.asarray``), as a loop that logs or checks the loss does, and
``sync(result)`` only waits for it (JAX dispatches asynchronously). Data and initial
parameters come from ``dualgraph.workloads``, so every implementation computes the same step.
Building a step compiles nothing: the first call does (except PyTensor, whose
``pytensor.function`` compiles). The model steps (``cnn``, ``transformer``) have NumPy
(``models_numpy.py``, timed by ``compiled.py``), PyTorch, ``torch.compile`` and ``jax.jit``
versions, each written here from the model's description, starting from dualgraph's
initial parameters.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np

from dualgraph.workloads import TRANSFORMER_SIZES, chain_data, mlp_data, model_step

LR = 0.01
IMPLS = ("numpy", "numba-hand", "torch", "torch.compile", "jax", "pytensor")
# impl -> the module it needs.
MODULE = {"numpy": "numpy", "numba-hand": "numba", "torch": "torch", "torch.compile": "torch",
          "jax": "jax", "pytensor": "pytensor"}


def installed(impl: str) -> bool:
    """Whether ``impl``'s library can be found (without importing it)."""
    return importlib.util.find_spec(MODULE[impl]) is not None


def torch_compile_runs() -> bool:
    """torch.compile needs a C++ toolchain: whether a one-op function compiles here."""
    try:
        import torch

        torch.compile(lambda a: a * 2)(torch.ones(2))
        return True
    except Exception:  # noqa: BLE001 - any failure means the column cannot run here
        return False


def available() -> list[str]:
    """The implementations that can run here."""
    impls = [i for i in IMPLS if installed(i)]
    if "torch.compile" in impls and not torch_compile_runs():
        impls.remove("torch.compile")
    return impls


def one_thread() -> None:
    """Pin PyTorch (and the BLAS pools) to one thread, as every single-core row is."""
    from single_thread import limit

    limit()


# ------------------------------------------------------------------------- reading back
def _read(x):
    if isinstance(x, (float, int, np.floating)):
        return float(x)
    if hasattr(x, "detach"):  # torch
        return x.item() if x.ndim == 0 else x.detach().numpy()
    if getattr(x, "ndim", None) == 0 or getattr(x, "shape", None) == ():
        return float(x)
    if hasattr(x, "numpy") and not hasattr(x, "block_until_ready"):  # dualgraph
        return x.numpy()
    return np.asarray(x)


def readback(result):
    """The step's result as Python floats / NumPy arrays (what a training loop reads)."""
    if isinstance(result, (tuple, list)):
        return [_read(r) for r in result]
    return _read(result)


def sync(result):
    """Wait for the result without reading it (JAX's dispatch is asynchronous)."""
    for r in result if isinstance(result, (tuple, list)) else (result,):
        if hasattr(r, "block_until_ready"):
            r.block_until_ready()
    return result


# ------------------------------------------------------------------------------ data
def init_params(sizes: tuple) -> list[np.ndarray]:
    """W1, c1, W2, c2: PyTorch's default Linear initialisation, seeded, float32."""
    rng = np.random.default_rng(0)
    b1, b2 = 1 / np.sqrt(sizes[0]), 1 / np.sqrt(sizes[1])
    return [rng.uniform(-b1, b1, (sizes[1], sizes[0])).astype(np.float32),
            rng.uniform(-b1, b1, sizes[1]).astype(np.float32),
            rng.uniform(-b2, b2, (sizes[2], sizes[1])).astype(np.float32),
            rng.uniform(-b2, b2, sizes[2]).astype(np.float32)]


def _xy():
    return np.array(2.0, np.float32), np.array(3.0, np.float32)


# ---------------------------------------------------------------------------- scalar
def scalar_numpy():
    x, y = _xy()

    def step():
        z = x * y + y ** 2
        g = np.ones_like(z)
        return z, g * y, g * x + g * (y * 2.0)

    return step


def scalar_numba():
    from numba_hand import scalar_step

    x, y = _xy()
    return lambda: scalar_step(x, y)


def _scalar_torch(compiled: bool):
    import torch

    one_thread()
    x = torch.tensor(2.0, requires_grad=True)
    y = torch.tensor(3.0, requires_grad=True)

    def f(x, y):
        return x * y + y ** 2

    f = torch.compile(f) if compiled else f

    def step():
        x.grad = None
        y.grad = None
        z = f(x, y)
        z.backward()
        return z, x.grad, y.grad

    return step


def scalar_jax():
    import jax
    import jax.numpy as jnp

    f = jax.jit(jax.value_and_grad(lambda x, y: x * y + y ** 2, argnums=(0, 1)))
    x, y = jnp.float32(2.0), jnp.float32(3.0)

    def step():
        v, (gx, gy) = f(x, y)
        return v, gx, gy

    return step


def scalar_pytensor():
    import pytensor
    import pytensor.tensor as pt

    x, y = pt.fscalar("x"), pt.fscalar("y")
    z = x * y + y ** 2
    fn = pytensor.function([x, y], [z, *pytensor.grad(z, [x, y])], mode="NUMBA")
    fn.trust_input = True  # the arguments below have the declared types
    a, b = _xy()
    return lambda: fn(a, b)


# ------------------------------------------------------------------------------- MLP
def mlp_numpy(sizes: tuple, batch: int, loss: str):
    X, T = mlp_data(sizes, batch, loss)
    W1, c1, W2, c2 = params = init_params(sizes)
    n = X.shape[0]
    onehot = np.eye(sizes[2], dtype=np.float32)[T] if loss == "ce" else None

    def step():
        h = X @ W1.T + c1
        a = np.maximum(h, 0)
        out = a @ W2.T + c2
        if loss == "mse":
            d = out - T
            value = (d * d).mean()
            gout = d * np.float32(2.0 / d.size)
        else:
            m = out.max(axis=1, keepdims=True)
            e = np.exp(out - m)
            s = e.sum(axis=1, keepdims=True)
            value = -((out - m - np.log(s)) * onehot).sum() / n
            gout = (e / s - onehot) / np.float32(n)
        gh = (gout @ W2) * (h > 0)
        grads = (gh.T @ X, gh.sum(axis=0), gout.T @ a, gout.sum(axis=0))
        for p, g in zip(params, grads):
            p -= np.float32(LR) * g
        return value

    return step


def mlp_numba(sizes: tuple, batch: int, loss: str):
    from numba_hand import ce_step, mse_step

    X, T = mlp_data(sizes, batch, loss)
    params = init_params(sizes)
    kernel = mse_step if loss == "mse" else ce_step
    lr = np.float32(LR)
    return lambda: kernel(X, T, *params, lr)


def _torch_mlp(sizes: tuple, loss: str):
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.ReLU(),
                              torch.nn.Linear(sizes[1], sizes[2]))
    with torch.no_grad():
        for p, v in zip(net.parameters(), init_params(sizes)):
            p.copy_(torch.from_numpy(v))
    return net, torch.nn.MSELoss() if loss == "mse" else torch.nn.CrossEntropyLoss()


def _mlp_torch(sizes: tuple, batch: int, loss: str, compiled: bool):
    import torch

    one_thread()
    net, loss_fn = _torch_mlp(sizes, loss)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    X, T = (torch.from_numpy(a) for a in mlp_data(sizes, batch, loss))

    def train(x, t):
        opt.zero_grad()
        value = loss_fn(net(x), t)
        value.backward()
        opt.step()
        return value

    f = torch.compile(train) if compiled else train
    return lambda: f(X, T)


def mlp_jax(sizes: tuple, batch: int, loss: str):
    import jax
    import jax.numpy as jnp

    X, T = (jnp.asarray(a) for a in mlp_data(sizes, batch, loss))

    def loss_fn(params, x, t):
        W1, c1, W2, c2 = params
        out = jnp.maximum(x @ W1.T + c1, 0) @ W2.T + c2
        if loss == "mse":
            return ((out - t) ** 2).mean()
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(out), t[:, None], axis=1))

    @jax.jit
    def train(params, x, t):
        value, g = jax.value_and_grad(loss_fn)(params, x, t)
        return value, [p - LR * gp for p, gp in zip(params, g)]

    state = {"p": [jnp.asarray(p) for p in init_params(sizes)]}

    def step():
        value, state["p"] = train(state["p"], X, T)
        return value

    return step


def mlp_pytensor(sizes: tuple, batch: int, loss: str):
    import pytensor
    import pytensor.tensor as pt

    data = mlp_data(sizes, batch, loss)
    params = [pytensor.shared(p) for p in init_params(sizes)]
    W1, c1, W2, c2 = params
    x = pt.matrix("x", dtype="float32")
    out = pt.dot(pt.maximum(pt.dot(x, W1.T) + c1, 0), W2.T) + c2
    if loss == "mse":
        t = pt.matrix("t", dtype="float32")
        value = pt.mean((out - t) ** 2)
    else:
        t = pt.vector("t", dtype=str(data[1].dtype))
        value = -pt.mean(pt.special.log_softmax(out, axis=1)[pt.arange(t.shape[0]), t])
    lr = np.float32(LR)
    updates = [(p, p - lr * g) for p, g in zip(params, pytensor.grad(value, params))]
    fn = pytensor.function([x, t], value, updates=updates, mode="NUMBA")
    fn.trust_input = True
    return lambda: fn(*data)


# ----------------------------------------------------------------------------- chain
def chain_numpy(n: int):
    x = chain_data(n)

    def step():
        t = np.tanh(x * np.float32(0.5) + np.float32(1))
        s = np.float32(0.5) + np.float32(0.5) * np.tanh(np.float32(0.5) * x)
        y = (t * s + np.float32(0.1) * x * x).sum()
        g = (1 - t * t) * np.float32(0.5) * s + t * s * (1 - s) + np.float32(0.2) * x
        return y, g

    return step


def chain_numba(n: int):
    from numba_hand import chain_step

    x = chain_data(n)
    g = np.empty_like(x)
    return lambda: (chain_step(x, g), g)


def _chain_torch(n: int, compiled: bool):
    import torch

    one_thread()
    x = torch.from_numpy(chain_data(n)).requires_grad_()

    def f(x):
        return (torch.tanh(.5 * x + 1) * torch.sigmoid(x) + .1 * x ** 2).sum()

    f = torch.compile(f) if compiled else f

    def step():
        x.grad = None
        v = f(x)
        v.backward()
        return v, x.grad

    return step


def chain_jax(n: int):
    import jax
    import jax.numpy as jnp

    f = jax.jit(jax.value_and_grad(
        lambda x: jnp.sum(jnp.tanh(.5 * x + 1) * jax.nn.sigmoid(x) + .1 * x ** 2)))
    x = jnp.asarray(chain_data(n))
    return lambda: f(x)


def chain_pytensor(n: int):
    import pytensor
    import pytensor.tensor as pt

    x = pt.vector("x", dtype="float32")
    c = np.float32
    v = pt.sum(pt.tanh(c(.5) * x + c(1)) * pt.sigmoid(x) + c(.1) * x ** 2)
    fn = pytensor.function([x], [v, pytensor.grad(v, x)], mode="NUMBA")
    fn.trust_input = True
    data = chain_data(n)
    return lambda: fn(data)


# -------------------------------------------------------------------- cnn, transformer
MODEL_LR = 1e-3
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8


def model_init(name: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """The initial parameters (by PyTorch's names) and data of model workload ``name``."""
    _, (x, t), net = model_step(name, MODEL_LR)
    params = {k: v.numpy().copy() for k, v in net.named_parameters()}
    return params, x.numpy().copy(), t.numpy().copy()


def _torch_model(name: str):
    import torch

    params, x, t = model_init(name)
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
            p.copy_(torch.from_numpy(params[k]))
    return model, torch.from_numpy(x), torch.from_numpy(t)


def _model_torch(name: str, compiled: bool):
    import torch

    one_thread()
    model, x, t = _torch_model(name)
    opt = torch.optim.Adam(model.parameters(), lr=MODEL_LR, betas=ADAM_BETAS, eps=ADAM_EPS)

    def train(x, t):
        opt.zero_grad()
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    f = torch.compile(train) if compiled else train
    return lambda: f(x, t)


def _jax_cnn(p: dict, x, jax, jnp):
    conv = jax.lax.conv_general_dilated

    def pool(z):  # 2x2 max, stride 2
        return jax.lax.reduce_window(z, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                     "VALID")

    def dense(z, k):
        return z @ p[f"{k}.weight"].T + p[f"{k}.bias"]

    dims = ("NCHW", "OIHW", "NCHW")
    z = conv(x, p["0.weight"], (1, 1), ((2, 2), (2, 2)), dimension_numbers=dims)
    z = pool(jax.nn.relu(z + p["0.bias"][None, :, None, None]))
    z = conv(z, p["3.weight"], (1, 1), "VALID", dimension_numbers=dims)
    z = pool(jax.nn.relu(z + p["3.bias"][None, :, None, None]))
    z = z.reshape(z.shape[0], -1)
    z = jax.nn.relu(dense(z, 7))
    z = jax.nn.relu(dense(z, 9))
    return dense(z, 11)


def _jax_transformer(p: dict, tokens, heads: int, jax, jnp):
    def norm(z, k):
        mu = z.mean(-1, keepdims=True)
        var = ((z - mu) ** 2).mean(-1, keepdims=True)
        return (z - mu) / jnp.sqrt(var + 1e-5) * p[f"{k}.weight"] + p[f"{k}.bias"]

    def dense(z, k):
        return z @ p[f"{k}.weight"].T + p[f"{k}.bias"]

    b, n = tokens.shape
    w = p["pos"].shape[1]
    d = w // heads
    x = p["embed.weight"][tokens] + p["pos"]
    q, k, v = jnp.split(dense(norm(x, "ln1"), "qkv"), 3, axis=-1)
    q, k, v = (z.reshape(b, n, heads, d).transpose(0, 2, 1, 3) for z in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(jnp.float32(d))
    causal = jnp.tril(jnp.ones((n, n), bool))
    attn = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1) @ v
    x = x + dense(attn.transpose(0, 2, 1, 3).reshape(b, n, w), "proj")
    x = x + dense(jax.nn.gelu(dense(norm(x, "ln2"), "fc1"), approximate=False), "fc2")
    return dense(norm(x, "ln_f"), "head")


def model_jax(name: str):
    """One Adam step (PyTorch's update rule, bias-corrected moments) under ``jax.jit``."""
    import jax
    import jax.numpy as jnp

    params, x, t = model_init(name)
    if name == "cnn":
        def forward(p, x):
            return _jax_cnn(p, x, jax, jnp)
    else:
        heads = TRANSFORMER_SIZES[name]["heads"]

        def forward(p, x):
            return _jax_transformer(p, x, heads, jax, jnp)

    def loss_fn(p, x, t):
        logits = forward(p, x)
        logits = logits.reshape(-1, logits.shape[-1])
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, t.reshape(-1, 1), axis=1))

    b1, b2 = ADAM_BETAS

    @jax.jit
    def train(p, m, v, step, x, t):
        value, g = jax.value_and_grad(loss_fn)(p, x, t)
        step = step + 1
        m = jax.tree.map(lambda mi, gi: b1 * mi + (1 - b1) * gi, m, g)
        v = jax.tree.map(lambda vi, gi: b2 * vi + (1 - b2) * gi * gi, v, g)
        c1 = 1 - b1 ** step
        c2 = 1 - b2 ** step
        p = jax.tree.map(
            lambda pi, mi, vi: pi - MODEL_LR * (mi / c1) / (jnp.sqrt(vi / c2) + ADAM_EPS),
            p, m, v)
        return value, p, m, v, step

    zeros = {k: jnp.zeros_like(a) for k, a in params.items()}
    state = {"p": {k: jnp.asarray(a) for k, a in params.items()}, "m": zeros, "v": zeros,
             "step": jnp.float32(0)}
    xj, tj = jnp.asarray(x), jnp.asarray(t)

    def step():
        value, state["p"], state["m"], state["v"], state["step"] = train(
            state["p"], state["m"], state["v"], state["step"], xj, tj)
        return value

    return step


# ------------------------------------------------------------------------------ table
_BUILDERS: dict[str, dict[str, Callable]] = {
    "scalar": {"numpy": scalar_numpy, "numba-hand": scalar_numba,
               "torch": lambda: _scalar_torch(False),
               "torch.compile": lambda: _scalar_torch(True),
               "jax": scalar_jax, "pytensor": scalar_pytensor},
    "mlp": {"numpy": mlp_numpy, "numba-hand": mlp_numba,
            "torch": lambda *a: _mlp_torch(*a, compiled=False),
            "torch.compile": lambda *a: _mlp_torch(*a, compiled=True),
            "jax": mlp_jax, "pytensor": mlp_pytensor},
    "chain": {"numpy": chain_numpy, "numba-hand": chain_numba,
              "torch": lambda n: _chain_torch(n, False),
              "torch.compile": lambda n: _chain_torch(n, True),
              "jax": chain_jax, "pytensor": chain_pytensor},
    **{name: {"torch": lambda n=name: _model_torch(n, False),
              "torch.compile": lambda n=name: _model_torch(n, True),
              "jax": lambda n=name: model_jax(n)}
       for name in ("cnn", "transformer")},
}


def build(impl: str, workload: str, *params) -> Callable[[], object]:
    """The step of ``impl`` for ``workload`` ("scalar"; "mlp" with sizes, batch, loss;
    "chain" with n; "cnn", "transformer")."""
    return _BUILDERS[workload][impl](*params)


def has(impl: str, workload: str) -> bool:
    """Whether ``impl`` has a version of ``workload``."""
    return impl in _BUILDERS[workload]
