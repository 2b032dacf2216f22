"""Batch norm through its primitives (``batch_norm``, ``batch_norm_backward``,
``batch_norm_param_grads``, ``batch_norm_stats``): values, gradients and running
statistics eagerly and compiled, in training and evaluation mode, against a float64
reference and (where installed) PyTorch."""

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


def _modules(dtype) -> list:
    """A 2-D input's affine BatchNorm1d, a 3-D input's without affine and with the
    cumulative average (momentum None), a 4-D input's BatchNorm2d, and one in eval mode."""
    dg.manual_seed(0)
    mods = [dg.nn.BatchNorm1d(4), dg.nn.BatchNorm1d(5, affine=False, momentum=None),
            dg.nn.BatchNorm2d(3), dg.nn.BatchNorm2d(3)]
    rng = np.random.default_rng(1)
    with dg.no_grad():
        for m in mods:
            if m.weight is not None:
                m.weight.copy_(dg.tensor(rng.uniform(0.5, 1.5, m.weight.shape)))
                m.bias.copy_(dg.tensor(rng.standard_normal(m.bias.shape)))
        mods[3].running_mean.copy_(dg.tensor(rng.standard_normal(3)))
        mods[3].running_var.copy_(dg.tensor(rng.uniform(0.5, 2.0, 3)))
    mods[3].eval()
    return [m.to(dtype) for m in mods]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_modules_eager_equal_compiled_and_the_formula(dtype):
    """One compiled step (one trace, called twice so the cumulative average moves) serves
    every check: outputs, the inputs' and parameters' gradients, running statistics and
    the batch count, in training and evaluation mode, for 2-D, 3-D and 4-D inputs."""
    rng = np.random.default_rng(3)
    xs = [(rng.standard_normal((9, 4)) * 2.0 + 5.0).astype(dtype),
          rng.standard_normal((3, 5, 7)).astype(dtype),
          (rng.standard_normal((2, 3, 4, 5)) - 1.0).astype(dtype),
          rng.standard_normal((2, 3, 2, 2)).astype(dtype)]
    seeds = [rng.uniform(0.5, 1.5, x.shape).astype(dtype) for x in xs]

    def step(mods, *xs):
        ys = [m(x) for m, x in zip(mods, xs)]
        loss = sum((y * dg.tensor(s)).sum() for y, s in zip(ys, seeds))
        loss.backward()
        return ys

    compiled = dg.compile(step, tiered=False)
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-9)
    em, cm = _modules(dtype), _modules(dtype)
    for _ in range(2):
        ea, ca = ([dg.tensor(x, requires_grad=True) for x in xs] for _ in range(2))
        ey, cy = step(em, *ea), compiled(cm, *ca)
        for e, k in zip(ea + ey, ca + cy):
            assert_close((k.grad if k.is_leaf else k).numpy(),
                         (e.grad if e.is_leaf else e).numpy(), **tol)
        for e, k in zip(em, cm):
            for ev, kv in zip(e.state_dict().values(), k.state_dict().values()):
                assert_close(kv.numpy(), ev.numpy(), **tol)
            for ep, kp in zip(e.parameters(), k.parameters()):
                assert_close(kp.grad.numpy(), ep.grad.numpy(), **tol)
                ep.grad = kp.grad = None
        for m, x, y in zip(em[:3], xs, ey):
            want, _, _ = _reference(x, None if m.weight is None else m.weight.numpy(),
                                    None if m.bias is None else m.bias.numpy())
            assert_close(y.numpy(), want.astype(dtype), **tol)
    # The same batch twice: its statistics are their cumulative average; with momentum
    # 0.1 the mean is 0.1 m, then 0.9 * 0.1 m + 0.1 m.
    _, mean, var = _reference(xs[1], None, None)
    assert_close(em[1].running_mean.numpy(), mean.astype(dtype), **tol)
    assert_close(em[1].running_var.numpy(), var.astype(dtype), **tol)
    assert int(em[1].num_batches_tracked.numpy()) == 2
    _, mean, var = _reference(xs[0], None, None)
    assert_close(em[0].running_mean.numpy(), (0.19 * mean).astype(dtype), **tol)
    assert compiled.stats.traces == 1
    (entry,) = compiled.entries()
    ops = set(graph_ops(entry.optimized))
    if not entry.joint:
        ops |= set(graph_ops(entry.backward_graph))
    assert {"batch_norm", "batch_norm_backward", "batch_norm_param_grads",
            "batch_norm_stats"} <= ops
    assert "layer_norm" not in ops


def test_batch_norm_matches_torch():
    """Training forward, gradients and running statistics as PyTorch's (eager; compiled
    equals eager above)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5, 2)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    trm, trv = torch.zeros(3), torch.ones(3)
    torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, True, 0.3).backward(torch.tensor(g))
    dx, dw, db = (dg.tensor(a, requires_grad=True) for a in (x, w, b))
    drm, drv = dg.zeros(3), dg.ones(3)
    F.batch_norm(dx, drm, drv, dw, db, True, 0.3).backward(dg.tensor(g))
    for d, t in ((dx.grad, tx.grad), (dw.grad, tw.grad), (db.grad, tb.grad), (drm, trm),
                 (drv, trv)):
        assert_close(d.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_batch_norm_second_derivatives():
    """The primitives' VJPs are written in dualgraph ops: second derivatives against
    finite differences, with and without the affine."""
    rng = np.random.default_rng(7)
    x = dg.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    w = dg.tensor(rng.uniform(0.5, 1.5, 2), requires_grad=True)
    b = dg.tensor(rng.standard_normal(2), requires_grad=True)
    assert dg.autograd.gradgradcheck(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True), (x, w, b))
    assert dg.autograd.gradgradcheck(lambda x: F.batch_norm(x, None, None, training=True),
                                     (x,))


def test_other_dtypes_keep_the_composition():
    """float16 (eager only: the Numba backend has no float16), and parameters of another
    dtype than the input's (compiled too), normalise through layer_norm, for which there
    is no routine; float16's running statistics by the reductions."""
    rng = np.random.default_rng(2)
    x16 = dg.tensor(rng.standard_normal((4, 3, 2)).astype(np.float16))
    rm, rv = dg.zeros(3, dtype=np.float16), dg.ones(3, dtype=np.float16)
    y = F.batch_norm(x16, rm, rv, training=True)
    want, mean, _ = _reference(x16.numpy(), None, None)
    assert_close(y.numpy(), want.astype(np.float16), rtol=1e-2, atol=1e-2)
    assert_close(rm.numpy(), (0.1 * mean).astype(np.float16), rtol=1e-2, atol=1e-3)

    x64, w32 = dg.tensor(rng.standard_normal((4, 3, 2))), dg.tensor(np.ones(3, np.float32))
    compiled = dg.compile(lambda x, w: F.batch_norm(x, None, None, w, None, True),
                          tiered=False)
    want, _, _ = _reference(x64.numpy(), None, None)
    assert_close(compiled(x64, w32).numpy(), want, rtol=1e-9, atol=1e-9)
    (entry,) = compiled.entries()
    assert "batch_norm" not in set(graph_ops(entry.optimized))
