"""Small training runs under CPU autocast, written against a torch-like library ``lib``
(torch itself to record the goldens, dualgraph to check them): an MLP and a CNN whose
forward and loss run in an autocast region, trained by SGD from weights made with NumPy.

``run(lib, dtype_name, compile_fn)`` returns plain floats: the losses of each step, the
gradients of the last step, and the lower-precision logits of one forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

STEPS = 4


def _weights(seed: int, shapes: dict) -> dict:
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(s) * 0.5).astype(np.float32) for k, s in shapes.items()}


MLP = {"w1": (16, 8), "b1": (16,), "w2": (5, 16), "b2": (5,)}
CNN = {"cw": (4, 2, 3, 3), "cb": (4,), "lw": (3, 4 * 3 * 3), "lb": (3,)}


def _mlp(lib: Any, p: dict, x: Any) -> Any:
    F = lib.nn.functional
    h = F.relu(F.linear(x, p["w1"], p["b1"]))
    return F.linear(h, p["w2"], p["b2"])


def _cnn(lib: Any, p: dict, x: Any) -> Any:
    F = lib.nn.functional
    h = F.max_pool2d(F.relu(F.conv2d(x, p["cw"], p["cb"], padding=1)), 2)
    return F.linear(h.reshape(h.shape[0], -1), p["lw"], p["lb"])


def _data(seed: int, shape: tuple, classes: int) -> tuple:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.integers(0, classes, shape[0]).astype(np.int64))


def run(lib: Any, dtype_name: str, compile_fn: Callable | None = None) -> dict:
    """The runs of both models under ``lib.autocast("cpu", dtype=...)``; ``compile_fn``
    wraps each training step (None: eager)."""
    dtype = getattr(lib, dtype_name)
    F = lib.nn.functional
    out: dict = {}
    for name, model, shapes, xshape, classes in (
            ("mlp", _mlp, MLP, (6, 8), 5), ("cnn", _cnn, CNN, (3, 2, 6, 6), 3)):
        p = {k: lib.tensor(v, requires_grad=True)
             for k, v in _weights(1 if name == "mlp" else 2, shapes).items()}
        xs, ys = _data(3, xshape, classes)
        x, y = lib.tensor(xs), lib.tensor(ys)

        def step(x: Any, y: Any, model: Any = model, p: dict = p) -> Any:
            for t in p.values():
                t.grad = None
            with lib.autocast("cpu", dtype=dtype):
                logits = model(lib, p, x)
                loss = F.cross_entropy(logits, y)
            loss.backward()
            with lib.no_grad():
                for t in p.values():
                    t.sub_(0.5 * t.grad)
            return loss

        f = step if compile_fn is None else compile_fn(step)
        losses = [f(x, y).item() for _ in range(STEPS)]
        out[name] = {"losses": losses,
                     "grads": {k: t.grad.detach().numpy().ravel().tolist() for k, t in p.items()}}
        with lib.no_grad(), lib.autocast("cpu", dtype=dtype):
            logits = model(lib, p, x)
        out[name]["logits"] = logits.float().numpy().ravel().tolist()
    return out
