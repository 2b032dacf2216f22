"""matmul's array-form VJP (batched and 2-D products, a transposed right operand, batch
broadcasting) gives the bits of the op-by-op VJP, which still runs for 1-D operands, mixed
dtypes and a recorded backward."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops import linalg as L

from .._support.profiling import vjp_runs

CASES = [((2, 3, 5, 4), (2, 3, 4, 6), False), ((5, 4), (4, 6), False),
         ((5, 4), (6, 4), True), ((2, 3, 5, 4), (4, 6), False), ((3, 5, 4), (1, 4, 6), False),
         ((2, 3, 6, 4), (2, 3, 6, 4), True)]


@pytest.fixture
def op_vjp_calls():
    with vjp_runs(L.MATMUL) as runs:
        yield runs


def _grads(sa, sb, transposed, dtype, needs=(True, True), array_form=True):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a = dg.tensor(rng.standard_normal(sa).astype(dtype), requires_grad=needs[0])
    b = dg.tensor(rng.standard_normal(sb).astype(dtype), requires_grad=needs[1])
    saved = L.MATMUL.vjp_arrays
    if not array_form:
        object.__setattr__(L.MATMUL, "vjp_arrays", None)
    try:
        rhs = b.transpose(-2, -1) if transposed else b
        out = dg.matmul(a, rhs)
        g = dg.tensor(rng.standard_normal(out.shape).astype(dtype))
        (out * 1.0).backward(g)
    finally:
        object.__setattr__(L.MATMUL, "vjp_arrays", saved)
    return [t.grad.numpy() if t.grad is not None else None for t in (a, b)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb,transposed", CASES)
@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_array_form_gives_the_op_forms_bits(op_vjp_calls, dtype, sa, sb, transposed, needs):
    fast = _grads(sa, sb, transposed, dtype, needs)
    assert op_vjp_calls == []  # the array form ran
    slow = _grads(sa, sb, transposed, dtype, needs, array_form=False)
    for f, s in zip(fast, slow):
        assert (f is None) == (s is None)
        if f is not None:
            assert f.dtype == s.dtype and f.shape == s.shape
            assert f.tobytes() == s.tobytes()


def test_one_d_and_mixed_dtypes_and_create_graph_run_the_op_form(op_vjp_calls):
    a = dg.tensor(np.arange(4.0, dtype=np.float32), requires_grad=True)
    b = dg.tensor(np.ones((4, 3), np.float32), requires_grad=True)
    dg.matmul(a, b).sum().backward()
    assert len(op_vjp_calls) == 1
    c = dg.tensor(np.ones((3, 4), np.float64), requires_grad=True)
    dg.matmul(c, b).sum().backward()
    assert len(op_vjp_calls) == 2
    x = dg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    (gx,) = dg.autograd.grad(dg.matmul(x, b.detach()[:3]).sum(), x, create_graph=True)
    assert len(op_vjp_calls) == 3
    dg.testing.assert_close(gx, np.full((2, 3), 3.0, np.float32))
