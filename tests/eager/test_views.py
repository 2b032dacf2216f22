"""Views and in-place ops in eager mode, PyTorch's model.

A view shares its base's storage and version counter; an in-place op through a view
rebases the base's history (``CopySlices``); a view made before a write to its base (or a
sibling) re-derives its history from the base's current one. Expected values are
PyTorch's (worked out by hand; tests/goldens holds the recorded ones).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

LEAF_VIEW = "a view of a leaf Variable that requires grad is being used in an in-place"


def leaf(values, dtype=np.float32):
    return dg.tensor(np.asarray(values, dtype), requires_grad=True)


def grad_of(x):
    return x.grad.numpy()


# ------------------------------------------------------------------ CopySlices
def test_mul_through_slice_rebases_base_history():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    y[0:2].mul_(10)
    assert_close(y.numpy(), np.array([10.0, 20.0, 3.0], np.float32))
    assert y.grad_fn.name() == "CopySlices"
    y.sum().backward()
    assert_close(grad_of(x), np.array([10.0, 10.0, 1.0], np.float32))


def test_copy_into_view_gives_source_a_gradient():
    x, w = leaf([1.0, 2.0, 3.0]), leaf([5.0, 7.0])
    y = x * 1
    y[0:2].copy_(w)
    (y * dg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert_close(grad_of(x), np.array([0.0, 0.0, 3.0], np.float32))
    assert_close(grad_of(w), np.array([1.0, 2.0], np.float32))


def test_setitem_is_a_copy_into_the_view():
    x, w = leaf([1.0, 2.0, 3.0, 4.0]), leaf([5.0, 7.0])
    y = x * 2
    y[1:3] = w * 3
    y[0] = 0.5
    assert_close(y.numpy(), np.array([0.5, 15.0, 21.0, 8.0], np.float32))
    y.sum().backward()
    assert_close(grad_of(x), np.array([0.0, 0.0, 0.0, 2.0], np.float32))
    assert_close(grad_of(w), np.array([3.0, 3.0], np.float32))


def test_write_through_transposed_view():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x * 1
    y.T[0].mul_(5)  # column 0 of y
    assert_close(y.numpy(), np.array([[5.0, 2.0], [15.0, 4.0]], np.float32))
    (y * y).sum().backward()
    assert_close(grad_of(x), np.array([[50.0, 4.0], [150.0, 8.0]], np.float32))


def test_view_of_view_and_reshape():
    x = leaf(np.arange(6.0))
    y = x * 1
    v = y.reshape(2, 3)[1]  # a view of a view: y[3:6]
    v[1:].add_(v[:2] * 2)  # reads and writes overlap in y
    assert_close(y.numpy(), np.array([0, 1, 2, 3, 10, 13], np.float32))
    y.sum().backward()
    # y4 = x4 + 2 x3, y5 = x5 + 2 x4  ->  d/dx3 = 1 + 2, d/dx4 = 1 + 2, d/dx5 = 1
    assert_close(grad_of(x), np.array([1, 1, 1, 3, 3, 1], np.float32))


def test_overlapping_writes_through_sibling_views():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    y = x * 1
    a, b = y[0:3], y[1:4]
    a.mul_(2)       # y = [2, 4, 6, 4]
    b.add_(b * 1)   # b sees a's write: y = [2, 8, 12, 8]
    assert_close(y.numpy(), np.array([2.0, 8.0, 12.0, 8.0], np.float32))
    assert_close(a.numpy(), np.array([2.0, 8.0, 12.0], np.float32))
    (a * dg.tensor([1.0, 10.0, 100.0])).sum().backward()  # a is stale: regenerated
    assert_close(grad_of(x), np.array([2.0, 40.0, 400.0, 0.0], np.float32))


def test_0d_view_from_an_int_index_aliases_its_base():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    e = y[1]
    e.mul_(4)
    assert_close(y.numpy(), np.array([1.0, 8.0, 3.0], np.float32))
    y.sum().backward()
    assert_close(grad_of(x), np.array([1.0, 4.0, 1.0], np.float32))


# ----------------------------------------------------- views see later writes
def test_view_made_before_base_write_sees_it():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    v = y[0:2]
    y.mul_(2)
    (v * 3).sum().backward()
    assert_close(grad_of(x), np.array([6.0, 6.0, 0.0], np.float32))


def test_read_base_after_write_through_view_and_vice_versa():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    v = y[1:]
    v.mul_(3)            # through the view ...
    z = y * 1            # ... the base reads it
    y.add_(1)            # through the base ...
    w = v * 1            # ... the view reads it
    (z.sum() + w.sum()).backward()
    assert_close(grad_of(x), np.array([1.0, 6.0, 6.0], np.float32))


def test_view_gains_requires_grad_when_base_is_written_with_history():
    w = leaf([2.0, 3.0])
    y = dg.zeros(3)
    v = y[1:]
    y[0:2].copy_(w)
    assert v.requires_grad and v.grad_fn is not None
    v.sum().backward()
    assert_close(grad_of(w), np.array([0.0, 1.0], np.float32))


def test_view_shares_version_counter():
    y = leaf([1.0, 2.0]) * 1
    v = y[0:1]
    s = v * v  # saves v
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        s.sum().backward()


# ------------------------------------------------------------------ leaves
@pytest.mark.parametrize("write", [
    lambda a: a[0:1].mul_(2),
    lambda a: a.reshape(3, 1).T.__iadd__(1),
    lambda a: a[0].copy_(dg.tensor(1.0)),
    lambda a: a.__setitem__(slice(0, 2), 0.0),
], ids=["mul_slice", "iadd_transpose", "copy_int", "setitem"])
def test_inplace_on_view_of_leaf_raises(write):
    a = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=LEAF_VIEW):
        write(a)
    assert_close(a.numpy(), np.array([1.0, 2.0, 3.0], np.float32))


def test_iadd_on_leaf_transpose_raises():
    a = leaf([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(RuntimeError, match=LEAF_VIEW):
        t = a.T
        t += 1


def test_view_of_leaf_can_be_written_under_no_grad():
    a = leaf([1.0, 2.0, 3.0])
    with dg.no_grad():
        a[0:2].mul_(2)
    assert_close(a.numpy(), np.array([2.0, 4.0, 3.0], np.float32))
    assert a.grad_fn is None


def test_view_made_under_no_grad_written_with_grad_raises():
    y = leaf([1.0, 2.0]) * 1
    with dg.no_grad():
        v = y[0:1]
    with pytest.raises(RuntimeError, match="no_grad"):
        v.mul_(2)


# --------------------------------------------------------- copy_ of a constant
def test_copy_constant_into_nonleaf_cuts_old_history():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.copy_(dg.tensor([5.0, 6.0]))
    assert y.requires_grad
    (y * 1).sum().backward()
    assert_close(grad_of(x), np.array([0.0, 0.0], np.float32))


def test_fill_keeps_nan_out_of_the_value():
    x = leaf([1.0, np.inf])
    y = x * 1
    y.fill_(2.0)  # not computed as y * 0 + 2, which is nan where y is inf
    assert_close(y.numpy(), np.array([2.0, 2.0], np.float32))
    y.sum().backward()
    assert_close(grad_of(x), np.array([0.0, 0.0], np.float32))


# ------------------------------------------------------------ what is saved
def test_div_by_literal_then_iadd_backwards():
    x = leaf([1.0, 2.0])
    y = x / 2.0
    y += 1
    y.sum().backward()
    assert_close(grad_of(x), np.array([0.5, 0.5], np.float32))


def test_pow_then_iadd_backwards():
    x = leaf([1.0, 2.0])
    y = x ** 2
    y += 1
    y.sum().backward()
    assert_close(grad_of(x), np.array([2.0, 4.0], np.float32))


def test_div_and_pow_gradients_to_tensor_operands():
    x, y = leaf([1.0, 2.0], np.float64), leaf([3.0, 0.5], np.float64)
    assert dg.testing.gradcheck(lambda a, b: a / b + a ** b, x, y)


def test_exp_then_iadd_still_raises():
    x = leaf([1.0, 2.0])
    y = x.exp()
    y += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# -------------------------------------------------------------- max with NaN
def test_max_routes_gradient_to_nan_without_warning():
    x = leaf([1.0, np.nan, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.max().backward()
    assert_close(grad_of(x), np.array([0.0, 1.0, 0.0], np.float32))


def test_max_ties_still_split():
    x = leaf([3.0, 1.0, 3.0])
    x.max().backward()
    assert_close(grad_of(x), np.array([0.5, 0.0, 0.5], np.float32))


# ------------------------------------------------------------ 0-d tensors
def test_zero_dim_grad_is_an_ndarray():
    x = leaf(2.0)
    (x * x).backward()
    (x * x).backward()  # accumulated: 0-d + 0-d is a NumPy scalar unless made an array
    assert type(x.grad._data) is np.ndarray
    x.grad.zero_()
    x.grad.add_(1)
    g = x.grad
    g += 1
    assert x.grad.item() == 2.0


def test_write_through_expanded_view_raises():
    x = dg.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="single memory location"):
        x.expand(3, 2).mul_(2)


def test_mul_by_literal_saves_nothing():
    x = leaf([1.0, 2.0])
    y = x * 1
    z = y * 3.0  # PyTorch's MulBackward0 keeps y only when the other factor needs grad
    y.add_(1)
    z.sum().backward()
    assert_close(grad_of(x), np.array([3.0, 3.0], np.float32))


def test_linear_keeps_weight_unsaved_when_input_needs_no_grad():
    dg.manual_seed(0)
    lin = dg.nn.Linear(3, 2)
    x = dg.ones(4, 3)  # data: no gradient wanted, so AddmmBackward0 saves x, not the weight
    loss = lin(x).sum()
    with dg.no_grad():
        lin.weight.mul_(2)
    loss.backward()
    assert_close(lin.weight.grad.numpy(), np.full((2, 3), 4.0, np.float32))


def test_a_cast_to_an_integer_dtype_cuts_the_tape_in_every_mode():
    """x.to(int64) does not require grad (PyTorch), so nothing flows back through it."""
    x = dg.tensor([1.5, 2.5], requires_grad=True)
    k = x.to(dg.int64)
    assert not k.requires_grad and k.grad_fn is None
    y = (x * 2 + k).sum()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]

    def f(x):
        return (x * 2 + x.astype(dg.int64)).sum()

    x2 = dg.tensor([1.5, 2.5], requires_grad=True)
    dg.compile(f)(x2).backward()
    assert x2.grad.tolist() == [2.0, 2.0]
