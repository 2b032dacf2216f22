"""An op's array form of its VJP (``OpDef.vjp_arrays``: layer norm's, addmm's,
transpose's, mul's, sum's, mean's, relu's) runs in an eager backward that records nothing,
and gives the bits of the op-by-op VJP; a recorded backward (``create_graph``) and mixed
dtypes use the op-by-op form."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops import OPS
from dualgraph.ops import norm as N

from .._support.profiling import python_calls, vjp_runs

F = dg.nn.functional


@pytest.fixture
def vjp_calls():
    """Counts the op-by-op VJP's runs."""
    with vjp_runs(N.LAYER_NORM) as runs:
        yield runs


def _grads(shape, norm, with_w, with_b, dtype, x_grad=True, w_dtype=None, array_form=True):
    rng = np.random.default_rng(hash((shape, norm)) % 2 ** 32)
    x = dg.tensor(rng.standard_normal(shape).astype(dtype) * 3 + 1, requires_grad=x_grad)
    wd = w_dtype or dtype
    w = dg.tensor(rng.standard_normal(norm).astype(wd), requires_grad=True) if with_w else None
    b = dg.tensor(rng.standard_normal(norm).astype(dtype), requires_grad=True) if with_b else None
    g = dg.tensor(rng.standard_normal(shape).astype(dtype))
    saved = N.LAYER_NORM.vjp_arrays
    if not array_form:
        object.__setattr__(N.LAYER_NORM, "vjp_arrays", None)
    try:
        F.layer_norm(x, norm, w, b).backward(g)
    finally:
        object.__setattr__(N.LAYER_NORM, "vjp_arrays", saved)
    return [None if t is None or t.grad is None else t.grad.numpy() for t in (x, w, b)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,norm", [((4, 6, 8), (8,)), ((3, 5, 4), (5, 4)), ((7, 3), (3,)),
                                        ((4, 16, 64), (64,)), ((40, 8, 12), (8, 12))])
@pytest.mark.parametrize("with_w,with_b,x_grad", [(True, True, True), (False, False, True),
                                                  (True, False, True), (False, True, True),
                                                  (True, True, False)])
def test_array_form_gives_the_op_forms_bits(vjp_calls, dtype, shape, norm, with_w, with_b,
                                            x_grad):
    fast = _grads(shape, norm, with_w, with_b, dtype, x_grad)
    assert vjp_calls == []  # the array form ran
    slow = _grads(shape, norm, with_w, with_b, dtype, x_grad, array_form=False)
    assert len(vjp_calls) == 1
    for a, b in zip(fast, slow):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_mixed_dtypes_use_the_op_form(vjp_calls):
    fast = _grads((4, 8), (8,), True, True, np.float32, w_dtype=np.float64)
    assert len(vjp_calls) == 1
    assert fast[0].dtype == np.float32 and fast[1].dtype == np.float64


def test_create_graph_records_the_op_form(vjp_calls):
    x = dg.tensor(np.random.default_rng(3).standard_normal((5, 6)), requires_grad=True)
    w = dg.tensor(np.linspace(0.5, 1.5, 6), requires_grad=True)
    (gx,) = dg.autograd.grad(F.layer_norm(x, (6,), w).pow(2).sum(), [x], create_graph=True)
    assert len(vjp_calls) == 1 and gx.grad_fn is not None
    gx.sum().backward()  # the second-order gradient goes through the recorded ops
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()


def test_layer_norm_gradients_float64():
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((3, 4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    assert dg.testing.gradcheck(lambda x, w, b: F.layer_norm(x, (6,), w, b), x, w, b)
    assert dg.testing.gradcheck(lambda x: F.layer_norm(x, (4, 6)), x)


def _op_by_op(fn):
    """``fn()`` with every op's array form switched off."""
    saved = {name: op.vjp_arrays for name, op in OPS.items()}
    for op in OPS.values():
        object.__setattr__(op, "vjp_arrays", None)
    try:
        return fn()
    finally:
        for name, op in OPS.items():
            object.__setattr__(op, "vjp_arrays", saved[name])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead", [(5,), (2, 3)])
@pytest.mark.parametrize("x_grad", [True, False])
def test_linear_and_transpose_array_forms_give_the_op_forms_bits(dtype, lead, x_grad):
    rng = np.random.default_rng(len(lead))
    xa = rng.standard_normal(lead + (7,)).astype(dtype)
    wa, ba = rng.standard_normal((4, 7)).astype(dtype), rng.standard_normal(4).astype(dtype)
    va, ga = rng.standard_normal((7, 4)).astype(dtype), rng.standard_normal(lead + (4,))

    def grads():
        x = dg.tensor(xa, requires_grad=x_grad)
        w, b, v = (dg.tensor(a, requires_grad=True) for a in (wa, ba, va))
        y = F.relu(F.linear(x, w, b)) + dg.matmul(x, v) + F.linear(x, v.transpose(0, 1))
        y.backward(dg.tensor(ga.astype(dtype)))
        return [t.grad.numpy() for t in (x, w, b, v) if t.grad is not None]

    fast, slow = grads(), _op_by_op(grads)
    assert len(fast) == len(slow) == (4 if x_grad else 3)
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype and a.flags.c_contiguous == b.flags.c_contiguous
        assert a.tobytes() == b.tobytes()
    assert fast[-1].shape == (7, 4) and fast[-1].flags.c_contiguous  # W.grad C-ordered


def test_addmm_mixed_dtypes_use_the_op_form():
    x = dg.tensor(np.ones((3, 5), np.float32), requires_grad=True)
    w = dg.tensor(np.ones((2, 5), np.float64), requires_grad=True)
    F.linear(x, w).sum().backward()
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float64
    np.testing.assert_array_equal(w.grad.numpy(), np.full((2, 5), 3.0))


def test_linear_gradients_float64():
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((2, 3, 5)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    assert dg.testing.gradcheck(F.linear, x, w, b)


@pytest.mark.parametrize("case", range(6))
def test_mul_and_sum_array_forms_give_the_op_forms_bits(case):
    rng = np.random.default_rng(case)
    a32 = rng.standard_normal((3, 4)).astype(np.float32)
    b32 = rng.standard_normal((4,)).astype(np.float32)
    b64 = rng.standard_normal((3, 1))

    def grads():
        x = dg.tensor(a32, requires_grad=True)
        y = dg.tensor(b32, requires_grad=case % 2 == 0)
        z = dg.tensor(b64, requires_grad=True)
        out = [lambda: (x * y).sum(),                        # broadcast: y's grad summed
               lambda: (x * 2 + 1).sum(),                    # a literal operand
               lambda: (x * z).sum(axis=1).sum(),            # float32 * float64
               lambda: (x * x).sum(axis=0, keepdims=True).sum(),
               lambda: (x.sum(axis=(0, 1)) * 3.0),
               lambda: (x * y).sum(axis=1).mul(x.sum(axis=1)).sum()][case]()
        out.backward()
        return [t.grad.numpy() for t in (x, y, z) if t.grad is not None]

    fast, slow = grads(), _op_by_op(grads)
    assert len(fast) == len(slow) > 0
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dim,keepdim", [((6, 5), None, False), ((6, 5), 1, False),
                                               ((6, 5), 0, True), ((2, 3, 4), (0, 2), False),
                                               ((), None, False), ((3, 0), 1, False)])
def test_mean_array_form_gives_the_op_forms_bits(dtype, shape, dim, keepdim):
    rng = np.random.default_rng(len(shape))
    xa = rng.standard_normal(shape).astype(dtype) * 3
    mean_op = OPS["mean"]
    def grad():
        x = dg.tensor(xa, requires_grad=True)
        m = x.mean() if dim is None else x.mean(dim=dim, keepdim=keepdim)
        (m * dg.tensor(rng.standard_normal(m.shape).astype(dtype) + 2)).sum().backward()
        return x.grad.numpy()

    with vjp_runs(mean_op) as calls:
        rng = np.random.default_rng(1)
        fast = grad()
        assert calls == []  # the array form ran, not `mul` and `broadcast_to` as ops
        rng = np.random.default_rng(1)
        slow = _op_by_op(grad)
        assert len(calls) == 1
    assert fast.shape == slow.shape == shape
    assert fast.dtype == slow.dtype and fast.tobytes() == slow.tobytes()


def test_mse_loss_backward_through_mean_makes_no_mul_op():
    x = dg.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    t = dg.tensor(np.zeros((3, 4), np.float32))
    loss = dg.nn.functional.mse_loss(x, t)
    names = [name for _, name in python_calls(loss.backward)]
    assert "_mean_vjp" not in names and "broadcast_to" not in names, names
    dg.testing.assert_close(x.grad.numpy(), 2 * x.numpy() / 12,
                            rtol=1e-6, atol=0.0, check_dtype=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_layer_norm_backward_reads_the_forwards_xhat_and_rstd(dtype):
    # The node keeps the forward's normalised input and per-row rstd (float32 and float64: float16's
    # mean accumulates wider than the backward's sums), and the backward from them has
    # the bits of the one that computes them again.
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((3, 5, 8)).astype(dtype) * 3 + 1
    gs = rng.standard_normal((3, 5, 8)).astype(dtype)
    w = dg.tensor(rng.standard_normal(8).astype(dtype), requires_grad=True)
    grads = []
    for keep in (True, False):
        x = dg.tensor(xs, requires_grad=True)
        y = F.layer_norm(x, (8,), w)
        kept = y.grad_fn._kept
        if dtype == np.float16:
            assert kept is None
        else:
            assert kept is not None and [a.shape for a in kept] == [(3, 5, 8), (3, 5, 1)]
        if not keep:
            y.grad_fn._kept = None
        w.grad = None
        y.backward(dg.tensor(gs))
        assert y.grad_fn._kept is None  # released with the saved values
        grads.append([x.grad.numpy().tobytes(), w.grad.numpy().tobytes()])
    assert grads[0] == grads[1]
