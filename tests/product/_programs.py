"""Programs for the product tests, kept in their own file so their ``file:line`` locations
are stable: each line that a test looks for carries a ``# tag: NAME`` comment."""

from __future__ import annotations

import inspect

import numpy as np

import dualgraph as dg

N = 64


def every_fate(x: dg.Tensor, y: dg.Tensor) -> dg.Tensor:
    """A program where each pass has something to do to some node."""
    a = dg.exp(x * y)  # tag: first
    b = dg.exp(x * y)  # tag: duplicate
    dead = dg.tanh(x) * 3.0  # tag: dead  # noqa: F841 - DCE must remove it
    k = dg.tensor(np.ones(N, np.float32)) * 2.0  # tag: folded
    h = a + b * 1.0 + k  # tag: simplified
    # h feeds two reductions, so fusion must store it once: a blocked neighbour.
    return (h * dg.sigmoid(x)).sum() + dg.tanh(h).sum()  # tag: shared


def every_fate_vector(x: dg.Tensor, y: dg.Tensor) -> dg.Tensor:
    """`every_fate` without the final sums: a vector output keeps a forward kernel that
    saves residuals and a backward kernel (a scalar loss is one kernel)."""
    h = dg.exp(x * y) * 2.0 + dg.tensor(np.ones(N, np.float32))
    return h * dg.sigmoid(x) + dg.tanh(h)


def data_dependent(x: dg.Tensor) -> dg.Tensor:
    """Python control flow on a traced value: cannot be traced."""
    if x.sum() > 0:  # tag: branch
        return (x * 2.0).sum()
    return (x * 3.0).sum()


def inputs(seed: int = 0) -> tuple[dg.Tensor, dg.Tensor]:
    rng = np.random.default_rng(seed)
    x = dg.tensor(rng.uniform(-1, 1, N).astype(np.float32), requires_grad=True)
    y = dg.tensor(rng.uniform(0, 1, N).astype(np.float32), requires_grad=True)
    return x, y


def line_of(fn, tag: str) -> str:
    """``basename:line`` of the line of ``fn`` tagged ``tag``."""
    lines, start = inspect.getsourcelines(fn)
    for k, text in enumerate(lines):
        if f"# tag: {tag}" in text:
            return f"_programs.py:{start + k}"
    raise LookupError(tag)
