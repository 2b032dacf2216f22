"""layer_norm's backward ops, ``layer_norm_backward`` (the input's gradient) and
``layer_norm_weight_grad`` (the weight's): first and second derivatives against float64
finite differences and PyTorch, their shape rules, and a compiled layer_norm gradient that
runs them equal to eager; their kernel IR against the NumPy kernels."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.errors import ShapeError
from dualgraph.modes import bind
from dualgraph.nn import functional as F
from dualgraph.ops.norm import LAYER_NORM_BACKWARD, LAYER_NORM_WEIGHT_GRAD
from dualgraph.testing import assert_close, gradcheck

from .._support.compiled import graph_ops


def _data(shape: tuple, ndim: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape), rng.standard_normal(shape) * 2.0 + 0.5,
            rng.standard_normal(shape[len(shape) - ndim:]))


@pytest.mark.parametrize(("shape", "ndim"), [((3, 5), 1), ((2, 2, 3), 2), ((4,), 1)])
def test_first_derivatives_match_finite_differences(shape, ndim):
    g, x, w = _data(shape, ndim)
    attrs = {"ndim": ndim, "eps": 1e-5}
    assert gradcheck(lambda g, x, w: bind(LAYER_NORM_BACKWARD, g, x, w, **attrs), g, x, w)
    assert gradcheck(lambda g, x: bind(LAYER_NORM_BACKWARD, g, x, 1.0, **attrs), g, x)
    assert gradcheck(lambda g, x: bind(LAYER_NORM_WEIGHT_GRAD, g, x, **attrs), g, x)


@pytest.mark.parametrize("affine", [True, False])
def test_gradgradcheck_through_layer_norm(affine):
    """The first gradients (built with create_graph, so through the backward ops) checked
    against finite differences of themselves."""
    g, x, w = _data((3, 2, 4), 2, seed=1)
    b = w[::-1].copy()

    def first_grads(x, w, b):
        # Leaves of their own where finite differences pass plain tensors.
        x, w, b = (t if t.requires_grad else t.detach().requires_grad_(True) for t in (x, w, b))
        y = F.layer_norm(x, (2, 4), w if affine else None, b if affine else None)
        ins = [x, w, b] if affine else [x]
        return sum((d * d).sum() for d in dg.autograd.grad((y * dg.tensor(g)).sum(), ins,
                                                            create_graph=True))

    assert gradcheck(first_grads, x, w, b)


def test_gradients_match_pytorch_to_second_order():
    torch = pytest.importorskip("torch")
    g, x, w = _data((3, 6), 1, seed=2)
    b = np.linspace(-0.5, 0.5, 6)

    def grads(lib, fn):
        xs, ws, bs = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        y = fn(xs, (6,), ws, bs, 1e-5)
        gx, gw = lib.autograd.grad((y * lib.tensor(g)).sum(), [xs, ws], create_graph=True)
        ((gx * gx).sum() + (gw * gw * lib.tensor(w)).sum()).backward()
        assert bs.grad is None or not bs.grad.numpy().any()  # gx and gw do not depend on b
        return [t.detach().numpy() for t in (gx, gw, xs.grad, ws.grad)]

    got = grads(dg, F.layer_norm)
    want = grads(torch, torch.nn.functional.layer_norm)
    for a, e in zip(got, want):
        assert_close(a, e, rtol=1e-9, atol=1e-10)


def test_shape_rules_name_the_shapes():
    g, x, w = (dg.tensor(a) for a in _data((3, 5), 1))
    with pytest.raises(ShapeError, match=r"gradient of shape \(3, 4\)"):
        bind(LAYER_NORM_BACKWARD, g[:, :4], x, w, ndim=1, eps=1e-5)
    with pytest.raises(ShapeError, match=r"weight of shape \(4,\)"):
        bind(LAYER_NORM_BACKWARD, g, x, w[:4], ndim=1, eps=1e-5)
    with pytest.raises(ShapeError, match=r"gradient of shape \(5,\)"):
        bind(LAYER_NORM_WEIGHT_GRAD, g[0], x, ndim=1, eps=1e-5)
    with pytest.raises(TypeError, match="floating-point"):
        bind(LAYER_NORM_BACKWARD, g, dg.tensor(np.ones((3, 5), np.int64)), w, ndim=1,
             eps=1e-5)
    out = bind(LAYER_NORM_BACKWARD, g.astype(np.float32), x, w.astype(np.float32), ndim=1,
               eps=1e-5)
    assert out.dtype == np.float64 and out.shape == (3, 5)


def test_compiled_gradient_runs_the_backward_ops_and_equals_eager():
    """One compiled step checks float32 rows of every length class (shorter than the 16
    lanes, a multiple, with a remainder) with and without a weight."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 37)) * 3.0 + 20.0).astype(np.float32)
    w = rng.standard_normal(37).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    xs = (rng.standard_normal((6, 7)).astype(np.float32),
          rng.standard_normal((4, 2, 32)).astype(np.float32))
    c = rng.uniform(0.5, 1.5, (2, 3, 37)).astype(np.float32)

    def loss(x, w, b, x7, x64):
        return ((F.layer_norm(x, (37,), w, b) * dg.tensor(c)).sum()
                + (F.layer_norm(x7, (7,)) ** 2).sum()
                + (F.layer_norm(x64, (2, 32), w[:32].repeat(2).reshape(2, 32)) ** 3).sum())

    compiled = dg.compile(loss, tiered=False)
    for step in range(2):
        args = [a + np.float32(step) for a in (x, w, b, *xs)]
        ce, cc = ([dg.tensor(a, requires_grad=True) for a in args] for _ in range(2))
        loss(*ce).backward()
        compiled(*cc).backward()
        for e, k in zip(ce, cc):
            assert_close(k.grad.numpy(), e.grad.numpy(), rtol=2e-4, atol=2e-4)
    assert compiled.stats.traces == 1
    (entry,) = compiled.entries()
    ops = set(graph_ops(entry.optimized))
    if not entry.joint:
        ops |= set(graph_ops(entry.backward_graph))
    assert {"layer_norm_backward", "layer_norm_weight_grad"} <= ops
    assert "mean" not in ops


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "ndim"), [((3, 5), 1), ((4, 37), 1), ((2, 3, 8), 2),
                                             ((2, 128), 1)])
def test_lowerings_mean_the_ops(shape, ndim, dtype):
    """The kernel IR run by the IR's executor against the NumPy kernels (no Numba), on rows
    shorter than the 16 lanes, with a remainder, and multiples of them; a mean far from zero
    against the spread."""
    from dualgraph.ops import OPS

    from ..backend.kir_exec import run
    from ..backend.test_row_kernels import _lowered

    g, x, w = (a.astype(dtype) for a in _data(shape, ndim, seed=3))
    x = x + dtype(50.0)
    attrs = {"ndim": ndim, "eps": 1e-5}
    tol = 2e-3 if dtype == np.float32 else 1e-9
    for op, arrays in (("layer_norm_backward", [g, x, w]), ("layer_norm_weight_grad", [g, x])):
        _, block = _lowered(op, arrays, attrs)
        got = run(block, {f"a{k}": a for k, a in enumerate(arrays)})["r"]
        want = OPS[op].impl(*arrays, **attrs)
        assert_close(got.reshape(want.shape), want, rtol=tol, atol=tol, check_dtype=False)
