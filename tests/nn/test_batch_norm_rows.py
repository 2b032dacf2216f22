"""Training-mode batch norm normalises each channel as a row of the channel-first input
(`layer_norm` and its backward ops): the values, gradients and running statistics of the
composition it replaces, eagerly and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.testing import assert_close

from .._support.compiled import graph_ops


def _reference(x: np.ndarray, w, b, eps: float = 1e-5) -> tuple:
    """The batch statistics' normalisation and the unbiased variance, in float64."""
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    x = x.astype(np.float64)
    mean = x.mean(axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w.reshape(bshape) + b.reshape(bshape)
    n = x.size // x.shape[1]
    return y, mean.reshape(-1), var.reshape(-1) * n / (n - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_batch_norm_rows_equal_the_formula_eager_and_compiled(dtype):
    """One compiled step covers 2-D with an affine, 3-D and 4-D without, all with running
    statistics, against eager and a float64 reference (gradients: eager)."""
    rng = np.random.default_rng(3)
    x2 = (rng.standard_normal((9, 4)) * 2.0 + 5.0).astype(dtype)
    x3 = rng.standard_normal((3, 5, 7)).astype(dtype)
    x4 = (rng.standard_normal((2, 3, 4, 5)) - 1.0).astype(dtype)
    w = rng.standard_normal(4).astype(dtype)
    b = rng.standard_normal(4).astype(dtype)
    seeds = [rng.uniform(0.5, 1.5, a.shape).astype(dtype) for a in (x2, x3, x4)]

    def step(x2, x3, x4, w, b, stats):
        ys = (F.batch_norm(x2, stats[0], stats[1], w, b, True, 0.1),
              F.batch_norm(x3, stats[2], stats[3], training=True),
              F.batch_norm(x4, None, None, training=True))
        loss = sum((y * dg.tensor(s)).sum() for y, s in zip(ys, seeds))
        loss.backward()
        return ys

    def stats():
        return [dg.zeros(c, dtype=dtype) if i % 2 == 0 else dg.ones(c, dtype=dtype)
                for i, c in enumerate((4, 4, 5, 5))]

    compiled = dg.compile(step, tiered=False)
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-9)
    ea, ca = ([dg.tensor(a, requires_grad=True) for a in (x2, x3, x4, w, b)] for _ in range(2))
    es, cs = stats(), stats()
    ey, cy = step(*ea, es), compiled(*ca, cs)
    for e, k in zip(ea, ca):
        assert_close(k.grad.numpy(), e.grad.numpy(), **tol)
    for e, k in zip(es, cs):
        assert_close(k.numpy(), e.numpy(), **tol)
    for (x, pw, pb), e, k, at in zip(((x2, w, b), (x3, None, None), (x4, None, None)), ey,
                                     cy, (0, 2, None)):
        want, mean, var = _reference(x, pw, pb)
        assert_close(e.numpy(), want.astype(dtype), **tol)
        assert_close(k.numpy(), want.astype(dtype), **tol)
        if at is not None:
            assert_close(es[at].numpy(), (0.1 * mean).astype(dtype), **tol)
            assert_close(es[at + 1].numpy(), (0.9 + 0.1 * var).astype(dtype), **tol)
    assert compiled.stats.traces == 1
    (entry,) = compiled.entries()
    ops = set(graph_ops(entry.optimized))
    if not entry.joint:
        ops |= set(graph_ops(entry.backward_graph))
    assert "layer_norm_backward" in ops
