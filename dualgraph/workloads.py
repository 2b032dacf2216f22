"""The built-in workloads of ``dualgraph compare`` and of the benchmark suite.

Each workload builds a function and its arguments: a loss whose gradients flow to the
arguments that require grad and to module parameters. ``quick`` shrinks the sizes. The
benchmarks (``benchmarks/*.py``) take their dualgraph programs (`WORKLOADS`, `train_step`)
and, for the hand-written NumPy, Numba and peer versions, the same data (`mlp_data`,
`chain_data`) from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import nn
from .eager.internal import array_of, set_array
from .eager.tensor import manual_seed, tensor
from .ops import elementwise as E


@dataclass
class Workload:
    name: str
    description: str
    build: Callable[[bool], tuple[Callable, tuple]]
    # In the default `dualgraph compare --quick` run: the model workloads are opt-in there
    # (--workload cnn), since their cold compile would dominate the quick start.
    quick: bool = True
    # The parameters a sweep may vary (name -> default) and the builder that takes them
    # as keywords (`with_params`).
    params: dict[str, Any] = field(default_factory=dict)
    make: Callable[..., tuple[Callable, tuple]] | None = None

    def with_params(self, **params: Any) -> tuple[Callable, tuple]:
        """The function and arguments at one parameter point (the others at their
        defaults); an undeclared name or a value of the wrong kind raises ValueError."""
        values = {**self.params, **check_params(self, params)}
        return self.make(**values)


DTYPES = ("float32", "float64")


def check_params(w: Workload, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` converted to the types of ``w``'s declared defaults (``"1e3"`` -> 1000
    for an integer parameter); raises ValueError naming the valid parameters."""
    out = {}
    for name, value in params.items():
        if name not in w.params:
            valid = ", ".join(w.params) or "none"
            raise ValueError(f"workload {w.name!r} has no parameter {name!r}; "
                             f"its parameters: {valid}")
        out[name] = _convert(w.name, name, w.params[name], value)
    return out


def _convert(workload: str, name: str, default: Any, value: Any) -> Any:
    where = f"workload {workload!r} parameter {name!r}"
    if name == "dtype":
        if str(value) not in DTYPES:
            raise ValueError(f"{where}: {value!r} is not one of {', '.join(DTYPES)}")
        return str(value)
    if isinstance(default, int):
        try:
            f = float(value)
        except (TypeError, ValueError):
            f = float("nan")
        if f != f or f != int(f) or f < 1:
            raise ValueError(f"{where}: expected a positive integer, got {value!r}")
        return int(f)
    return type(default)(value)


def _scalar(quick: bool) -> tuple:
    def scalar(x, y):
        return x * y + y ** 2

    return scalar, (tensor(2.0, requires_grad=True), tensor(3.0, requires_grad=True))


def _mlp(sizes: tuple, batch: int, loss: str) -> tuple:
    net, fn = mlp_model(sizes, loss)
    x, t = (tensor(a) for a in mlp_data(sizes, batch, loss))

    def step_loss(x, t):
        return fn(net(x), t)

    step_loss.__name__ = f"mlp_{sizes[0]}_{sizes[1]}_{sizes[2]}_loss"
    return step_loss, (x, t)


def mlp_model(sizes: tuple, loss: str) -> tuple[nn.Module, nn.Module]:
    """The network ``sizes[0] -> sizes[1] -> ReLU -> sizes[2]`` (seeded) and its loss,
    ``"mse"`` or ``"ce"`` (cross-entropy)."""
    manual_seed(0)
    net = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2]))
    return net, nn.MSELoss() if loss == "mse" else nn.CrossEntropyLoss()


def mlp_data(sizes: tuple, batch: int, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (float32) and targets of an MLP workload: float32 for ``"mse"``, class
    indices for ``"ce"``; seeded, so every implementation gets the same arrays."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    if loss == "mse":
        return x, rng.standard_normal((batch, sizes[2])).astype(np.float32)
    return x, rng.integers(0, sizes[2], batch)


def elementwise_chain(x: Any) -> Any:
    """The ``chain`` workload: an elementwise chain summed to a scalar."""
    return (E.tanh(x * 0.5 + 1) * E.sigmoid(x) + 0.1 * x ** 2).sum()


def _chain(quick: bool) -> tuple:
    x = tensor(chain_data(100_000 if quick else 1_000_000), requires_grad=True)
    return elementwise_chain, (x,)


def chain_data(n: int) -> np.ndarray:
    """The ``chain`` workload's input: ``n`` standard normal float32 values (seeded)."""
    return np.random.default_rng(0).standard_normal(n).astype(np.float32)


# ------------------------------------------------------------------ cnn and transformer
# name -> sizes of the model workloads: the full size and the --quick one.
CNN_SIZES: dict[str, dict[str, int]] = {
    "cnn": {"batch": 64, "image": 28},
    "cnn-quick": {"batch": 8, "image": 28},
}
TRANSFORMER_SIZES: dict[str, dict[str, int]] = {
    "transformer": {"batch": 16, "seq": 64, "width": 128, "heads": 4, "vocab": 256},
    "transformer-quick": {"batch": 4, "seq": 16, "width": 32, "heads": 2, "vocab": 64},
    # Four blocks: what compiling a deeper model costs over one block (identical blocks
    # compile once, see `dualgraph.backend.partition`).
    "transformer-4": {"batch": 16, "seq": 64, "width": 128, "heads": 4, "vocab": 256,
                      "blocks": 4},
    "transformer-4-quick": {"batch": 4, "seq": 16, "width": 32, "heads": 2, "vocab": 64,
                            "blocks": 4},
}


def cnn_model() -> nn.Module:
    """LeNet-5 style (seeded): conv(1->6, 5x5, pad 2) -> ReLU -> max-pool 2 -> conv(6->16,
    5x5) -> ReLU -> max-pool 2 -> flatten -> 400 -> 120 -> 84 -> 10."""
    manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10),
    )


def cnn_data(batch: int, image: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic 1 x image x image float32 images and int64 class labels in [0, 10)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 1, image, image)).astype(np.float32)
    return x, rng.integers(0, 10, batch)


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block with a next-token head: token embedding plus a
    learned position embedding, LayerNorm, causal multi-head self-attention through
    `scaled_dot_product_attention`, a GELU MLP (4x width), residuals, a final LayerNorm
    and a linear head over the vocabulary. ``blocks > 1`` stacks that many blocks (the
    first one's layers are attributes of this module, the others in ``more``)."""

    def __init__(self, vocab: int, seq: int, width: int, heads: int, blocks: int = 1) -> None:
        super().__init__()
        from .eager.creation import randn

        self.heads = heads
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(randn(seq, width) * 0.02)
        _add_block_layers(self, width)
        if blocks > 1:
            self.more = nn.ModuleList([_Block(width) for _ in range(blocks - 1)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: Any) -> Any:
        x = self.embed(tokens) + self.pos
        x = _block(self, x, self.heads)
        for block in getattr(self, "more", ()):
            x = _block(block, x, self.heads)
        return self.head(self.ln_f(x))


class _Block(nn.Module):
    """The layers of one more block of `EncoderBlock`."""

    def __init__(self, width: int) -> None:
        super().__init__()
        _add_block_layers(self, width)


def _add_block_layers(m: nn.Module, width: int) -> None:
    """The layers `_block` runs, made in a fixed order (the seeded weights depend on it)."""
    m.ln1 = nn.LayerNorm(width)
    m.qkv = nn.Linear(width, 3 * width)
    m.proj = nn.Linear(width, width)
    m.ln2 = nn.LayerNorm(width)
    m.fc1 = nn.Linear(width, 4 * width)
    m.fc2 = nn.Linear(4 * width, width)


def _block(m: Any, x: Any, heads: int) -> Any:
    """One pre-norm block (attention, then MLP, each with its residual) with the layers
    of ``m``."""
    from .nn import functional as F

    b, t, w = x.shape
    h, d = heads, w // heads
    q, k, v = m.qkv(m.ln1(x)).split(w, dim=-1)
    q, k, v = (z.reshape(b, t, h, d).transpose(1, 2) for z in (q, k, v))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + m.proj(a.transpose(1, 2).reshape(b, t, w))
    return x + m.fc2(F.gelu(m.fc1(m.ln2(x))))


def transformer_model(size: str = "transformer") -> EncoderBlock:
    """The seeded `EncoderBlock` of the workload ``size`` (a key of `TRANSFORMER_SIZES`)."""
    s = TRANSFORMER_SIZES[size]
    manual_seed(0)
    return EncoderBlock(s["vocab"], s["seq"], s["width"], s["heads"], s.get("blocks", 1))


def transformer_data(size: str = "transformer") -> tuple[np.ndarray, np.ndarray]:
    """Token ids (batch, seq) and their next tokens (batch, seq), int64, seeded."""
    s = TRANSFORMER_SIZES[size]
    rng = np.random.default_rng(0)
    ids = rng.integers(0, s["vocab"], (s["batch"], s["seq"] + 1))
    return ids[:, :-1].copy(), ids[:, 1:].copy()


def _model_loss(name: str, quick: bool) -> tuple:
    """The forward loss of a model workload (for `compare`: value and parameter
    gradients), its arguments and its module."""
    from .nn import functional as F

    size = f"{name}-quick" if quick else name
    if name == "cnn":
        net = cnn_model()
        x, t = (tensor(a) for a in cnn_data(**CNN_SIZES[size]))

        def cnn_loss(x, t):
            return F.cross_entropy(net(x), t)

        return cnn_loss, (x, t)
    net = transformer_model(size)
    x, t = (tensor(a) for a in transformer_data(size))

    def transformer_loss(tokens, targets):
        logits = net(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return transformer_loss, (x, t)


def model_step(name: str, lr: float = 1e-3, quick: bool = False) -> tuple[Callable, tuple,
                                                                          nn.Module]:
    """One Adam training step of the model workload ``name`` (``"cnn"``,
    ``"transformer"`` or ``"transformer-4"``, four blocks): ``step(x, t)`` zeroes the
    gradients, computes the cross-entropy, back-propagates, updates and returns the loss.
    Returns the step, its arguments and the module (so a hand-written reference can start
    from the same parameters)."""
    from .nn import functional as F
    from .optim import Adam

    size = f"{name}-quick" if quick else name
    if name == "cnn":
        net = cnn_model()
        data = cnn_data(**CNN_SIZES[size])
    else:
        net = transformer_model(size)
        data = transformer_data(size)
    opt = Adam(net.parameters(), lr=lr)
    x, t = (tensor(a) for a in data)

    def step(x, t):
        opt.zero_grad()
        out = net(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    step.__name__ = f"{name}_step"
    return step, (x, t), net


# name -> (layer sizes, batch, loss) of the MLP workloads.
MLPS: dict[str, tuple[tuple[int, int, int], int, str]] = {
    "tinynet": ((2, 3, 1), 10, "mse"),
    "mlp": ((784, 256, 10), 64, "ce"),
    "mlp-quick": ((784, 64, 10), 32, "ce"),
}

# ------------------------------------------------------------- parametrized builders
def _cast(dtype: str, *tensors: Any, modules: tuple = ()) -> None:
    """Float tensors (arguments and module parameters) converted to ``dtype`` in place."""
    ts = list(tensors) + [p for m in modules for p in m.parameters()]
    for t in ts:
        a = array_of(t)
        if a.dtype.kind == "f" and a.dtype != dtype:
            set_array(t, a.astype(dtype))


def _scalar_p(dtype: str) -> tuple:
    fn, args = _scalar(False)
    _cast(dtype, *args)
    return fn, args


def _chain_p(n: int, dtype: str) -> tuple:
    return elementwise_chain, (tensor(chain_data(n).astype(dtype), requires_grad=True),)


def _mlp_p(inputs: int, width: int, classes: int, batch: int, loss: str, dtype: str
           ) -> tuple:
    sizes = (inputs, width, classes)
    net, fn = mlp_model(sizes, loss)
    x, t = (tensor(a) for a in mlp_data(sizes, batch, loss))
    _cast(dtype, x, t, modules=(net,))

    def step_loss(x, t):
        return fn(net(x), t)

    step_loss.__name__ = f"mlp_{sizes[0]}_{sizes[1]}_{sizes[2]}_loss"
    return step_loss, (x, t)


def _cnn_p(batch: int, dtype: str) -> tuple:
    from .nn import functional as F

    net = cnn_model()
    x, t = (tensor(a) for a in cnn_data(batch))
    _cast(dtype, x, modules=(net,))

    def cnn_loss(x, t):
        return F.cross_entropy(net(x), t)

    return cnn_loss, (x, t)


def _transformer_p(batch: int, seq: int, width: int, heads: int, vocab: int, dtype: str
                   ) -> tuple:
    from .nn import functional as F

    if width % heads:
        raise ValueError(f"workload 'transformer': width {width} is not a multiple of "
                         f"heads {heads}")
    manual_seed(0)
    net = EncoderBlock(vocab, seq, width, heads)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (batch, seq + 1))
    x, t = tensor(ids[:, :-1].copy()), tensor(ids[:, 1:].copy())
    _cast(dtype, modules=(net,))

    def transformer_loss(tokens, targets):
        logits = net(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return transformer_loss, (x, t)


_F32 = {"dtype": "float32"}

WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("scalar", "z = x*y + y**2, value and gradients", _scalar,
             params=dict(_F32), make=_scalar_p),
    Workload("tinynet", "TinyNet 2->3->1, MSE, batch 10: loss and parameter gradients",
             lambda q: _mlp(*MLPS["tinynet"]), params={"batch": 10, **_F32},
             make=lambda batch, dtype: _mlp_p(2, 3, 1, batch, "mse", dtype)),
    Workload("mlp", "MLP 784->256->10, cross-entropy, batch 64 (quick: 784->64->10, batch 32)",
             lambda q: _mlp(*MLPS["mlp-quick" if q else "mlp"]),
             params={"batch": 64, "width": 256, **_F32},
             make=lambda batch, width, dtype: _mlp_p(784, width, 10, batch, "ce", dtype)),
    Workload("chain", "sum(tanh(.5x+1)*sigmoid(x)+.1x^2) on 1M float32 (quick: 100K)", _chain,
             params={"n": 1_000_000, **_F32}, make=_chain_p),
    Workload("cnn", "LeNet-5 style CNN, cross-entropy, batch 64 of 1x28x28 (quick: batch 8)",
             lambda q: _model_loss("cnn", q), quick=False,
             params={"batch": 64, **_F32}, make=_cnn_p),
    Workload("transformer", "pre-norm encoder block, batch 16 x seq 64 x width 128, vocab 256,"
             " next-token cross-entropy (quick: 4 x 16 x 32, vocab 64)",
             lambda q: _model_loss("transformer", q), quick=False,
             params={**TRANSFORMER_SIZES["transformer"], **_F32}, make=_transformer_p),
]}


def train_step(name: str, lr: float = 0.01) -> tuple[Callable, tuple]:
    """One SGD training step of the MLP workload ``name`` (a key of `MLPS`) and its
    arguments: ``step(x, t)`` zeroes the gradients, computes the loss, back-propagates,
    updates the parameters and returns the loss. Wrap it in `dualgraph.compile` to
    compile the whole step.

    >>> step, args = train_step("tinynet")
    >>> loss = step(*args)
    """
    from .optim import SGD

    sizes, batch, loss = MLPS[name]
    net, loss_fn = mlp_model(sizes, loss)
    opt = SGD(net.parameters(), lr=lr)
    x, t = (tensor(a) for a in mlp_data(sizes, batch, loss))

    def step(x, t):
        opt.zero_grad()
        out = loss_fn(net(x), t)
        out.backward()
        opt.step()
        return out

    return step, (x, t)


def synthetic_classification(n: int = 512, features: int = 16, classes: int = 4,
                             seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs, one per class: a data set any small MLP can learn."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, features)) * 2.5
    y = rng.integers(0, classes, n)
    x = centers[y] + rng.standard_normal((n, features))
    return x.astype(np.float32), y


def train_classifier(compiled: bool, epochs: int = 5, batch: int = 64, seed: int = 0
                     ) -> dict[str, Any]:
    """Train a 16->32->4 MLP classifier with Adam on the synthetic data, eager or with the
    whole training step compiled; returns accuracy, final loss and seconds."""
    import time

    from . import optim
    from .compile import CompiledFunction

    x_all, y_all = synthetic_classification(seed=seed)
    manual_seed(seed)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = optim.Adam(net.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    run = CompiledFunction(step, tiered=False) if compiled else step  # compare measures it
    batches = [(tensor(x_all[i:i + batch]), tensor(y_all[i:i + batch]))
               for i in range(0, len(x_all) - batch + 1, batch)]
    t0 = time.perf_counter()
    first = None
    step_seconds = []  # each step's wall time: `compare` reports their spread
    for _ in range(epochs):
        for xb, yb in batches:
            t = time.perf_counter()
            loss = run(xb, yb)
            step_seconds.append(time.perf_counter() - t)
            first = first if first is not None else time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    logits = net(tensor(x_all)).numpy()
    accuracy = float((logits.argmax(axis=1) == y_all).mean())
    return {"accuracy": accuracy, "loss": float(loss.item()), "seconds": seconds,
            "first_step_seconds": first, "steps": epochs * len(batches),
            "step_seconds": step_seconds}
