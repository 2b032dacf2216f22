"""The library behaviour the seventh written set (``written7/``, run by
``test_written_programs.py``; its programs are listed in ``written7_programs.py``) found
missing, each on its own: an in-place activation of a tensor that requires grad keeps its
input for backward, and ``sparse_coo_tensor`` builds the dense tensor its indices and
values stand for."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F


@pytest.mark.parametrize("act", [
    lambda x, inplace: F.hardswish(x, inplace=inplace),
    lambda x, inplace: F.silu(x, inplace=inplace),
    lambda x, inplace: F.mish(x, inplace=inplace),
    lambda x, inplace: F.hardsigmoid(x, inplace=inplace),
    lambda x, inplace: F.relu6(x, inplace=inplace),
    lambda x, inplace: F.leaky_relu(x, 0.1, inplace=inplace),
    lambda x, inplace: F.selu(x, inplace=inplace),
    lambda x, inplace: F.threshold(x, 0.5, -1.0, inplace=inplace),
    lambda x, inplace: dg.nn.Hardswish(inplace=inplace)(x),
], ids=["hardswish", "silu", "mish", "hardsigmoid", "relu6", "leaky_relu", "selu", "threshold",
        "Hardswish"])
def test_inplace_activation_of_a_non_leaf_has_the_out_of_place_gradient(act) -> None:
    # MobileNetV3's classifier: Linear, then Hardswish(inplace=True) on its output.
    w = dg.tensor(np.linspace(-5.0, 5.0, 12).reshape(3, 4), requires_grad=True)
    grads = []
    for inplace in (False, True):
        w.grad = None
        h = w * 1.5
        y = act(h, inplace)
        assert (y is h) == inplace
        (y * dg.arange(12.0, dtype=dg.float64).reshape(3, 4)).sum().backward()
        grads.append(w.grad)
    dg.testing.assert_close(grads[1], grads[0])


def test_inplace_activation_of_a_leaf_that_requires_grad_raises() -> None:
    w = dg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.hardswish(w, inplace=True)


def test_sparse_coo_tensor_is_the_dense_tensor_it_stands_for() -> None:
    i = dg.tensor([[0, 1, 1], [2, 0, 0]])
    got = dg.sparse_coo_tensor(i, dg.tensor([3.0, 4.0, 5.0]), (2, 3))
    # duplicate indices are summed, as coalescing sums them
    dg.testing.assert_close(got, dg.tensor([[0.0, 0.0, 3.0], [9.0, 0.0, 0.0]]))
    assert got.dtype == dg.float32 and not got.is_sparse and got.to_dense() is got
    assert got.coalesce() is got and got.is_coalesced()
    # the size defaults to the smallest that holds the indices, then the values' dims
    hybrid = dg.sparse_coo_tensor([[0, 2]], [[1.0, 2.0], [3.0, 4.0]])
    assert hybrid.shape == (3, 2) and hybrid.dtype == dg.float32
    dg.testing.assert_close(hybrid, dg.tensor([[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]))
    assert dg.sparse_coo_tensor(i, [1, 2, 3], (2, 3), dtype=dg.float64).dtype == dg.float64
    leaf = dg.sparse_coo_tensor(i, [1.0, 2.0, 3.0], (2, 3), requires_grad=True)
    assert leaf.is_leaf and leaf.requires_grad
    x = dg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    dg.testing.assert_close(dg.spmm(got, x), got @ x)
    dg.testing.assert_close(dg.sparse.mm(got, x), got @ x)


def test_sparse_module_reaches_the_package_as_torch_sparse_torch_does() -> None:
    assert dg.sparse.torch is dg
    onehot = dg.sparse.torch.eye(4).index_select(dim=0, index=dg.tensor([2, 0]))
    dg.testing.assert_close(onehot, dg.tensor([[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))


def test_sparse_coo_tensor_gradient_reaches_the_values() -> None:
    i = dg.tensor([[0, 1, 1, 2], [2, 0, 0, 1]])
    x = dg.tensor(np.arange(6.0).reshape(3, 2))

    def f(v):
        return dg.sparse_coo_tensor(i, v, (3, 3)) @ x

    v = dg.tensor([0.5, -1.0, 2.0, 3.0], dtype=dg.float64, requires_grad=True)
    assert dg.autograd.gradcheck(f, (v,))


def test_sparse_coo_tensor_refuses_bad_indices() -> None:
    with pytest.raises(RuntimeError, match="2-D integer"):
        dg.sparse_coo_tensor(dg.tensor([0.0, 1.0]), dg.tensor([1.0, 2.0]), (2,))
    with pytest.raises(RuntimeError, match="does not match the number of indices"):
        dg.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0], (2,))
    with pytest.raises(RuntimeError, match="for dim 1, size is 3 but found index 3"):
        dg.sparse_coo_tensor([[0, 1], [0, 3]], [1.0, 2.0], (2, 3))
    with pytest.raises(RuntimeError, match="inconsistent"):
        dg.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2, 2))
    with pytest.raises(RuntimeError, match="cuda"):
        dg.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2,), device="cuda")


def test_sparse_coo_tensor_compiled_equals_eager() -> None:
    i = dg.tensor([[0, 1, 1], [2, 0, 0]])

    def f(v, x):
        return (dg.sparse_coo_tensor(i, v, (2, 3)) @ x).sum()

    v = dg.tensor([3.0, 4.0, 5.0])
    x = dg.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2))
    fc = dg.compile(f)
    dg.testing.assert_close(fc(v, x), f(v, x))
    assert fc.stats.traces == 1


def test_grad_data_scaled_in_place_in_a_compiled_step() -> None:
    # CenterLoss's ``param.grad.data *= (1. / weight)`` between backward and step.
    def make():
        w = dg.nn.Parameter(dg.ones(3))
        opt = dg.optim.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (w * x).sum()
            loss.backward()
            w.grad.data *= 2.0
            opt.step()
            return loss

        return w, step

    (w_eager, eager), (w_comp, step) = make(), make()
    f = dg.compile(step)
    for _ in range(3):
        eager(dg.arange(3.0))
        f(dg.arange(3.0))
    dg.testing.assert_close(w_comp, w_eager)
    dg.testing.assert_close(w_comp, dg.tensor([1.0, 0.4, -0.2]))
    assert f.stats.traces == 1 and f.stats.tier1_calls == 3


def test_data_assigned_another_value_in_a_compiled_step_runs_eagerly() -> None:
    w = dg.nn.Parameter(dg.ones(2))

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        w.grad.data = w.grad * 3
        return loss

    with pytest.warns(RuntimeWarning, match="swaps the tensor's data"):
        dg.compile(step)(dg.ones(2))
    dg.testing.assert_close(w.grad, dg.full((2,), 3.0))
