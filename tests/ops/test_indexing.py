"""Advanced indexing and the gather/scatter family: PyTorch's edge cases.

Expected shapes, values and errors below were read off torch 2.13 (where PyTorch differs
from NumPy, the torch result is the one asserted).
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F

I = dg.tensor([0, 1])  # noqa: E741


def _x(*shape: int, rg: bool = False) -> dg.Tensor:
    n = int(np.prod(shape))
    return dg.tensor(np.arange(n, dtype=np.float32).reshape(shape), requires_grad=rg)


# ----------------------------------------------------------------------- read shapes


@pytest.mark.parametrize(("index", "shape"), [
    ((0, slice(None), I), (3, 2, 5)),  # ints select first (NumPy would give (2, 3, 5))
    ((slice(None), 0, slice(None), I), (2, 4, 2)),
    ((I, slice(None), I), (2, 3, 5)),  # separated: the indexed block goes first
    ((slice(None), I, I), (2, 2, 5)),
    ((slice(None), I, slice(None), I), (2, 2, 4)),
    ((Ellipsis, I), (2, 3, 4, 2)),
    ((None, I), (1, 2, 3, 4, 5)),
    ((slice(None), None, I), (2, 1, 2, 4, 5)),
    ((slice(None), I, None), (2, 2, 1, 4, 5)),
    ((slice(None), I, None, I), (2, 2, 1, 5)),
    ((I, 0), (2, 4, 5)),
    ((slice(None), 1, I, 2), (2, 2)),
    ((slice(None), dg.tensor([True, False, True])), (2, 2, 4, 5)),
    ((0, dg.tensor([True, False, True]), slice(None), 1), (2, 4)),
    ([0, 1], (2, 3, 4, 5)),
    (([0, 1], [1, 2]), (2, 4, 5)),
    ([[0, 1]], (2, 3, 4, 5)),  # a list holding a list is read as a tuple (PyTorch)
    ((np.array([[0], [1]]), np.array([1, 2])), (2, 2, 4, 5)),
    (dg.tensor(1), (3, 4, 5)),
    (dg.tensor(True), (1, 2, 3, 4, 5)),
    (dg.tensor(False), (0, 2, 3, 4, 5)),
    ([], (0, 3, 4, 5)),
    (np.int64(1), (3, 4, 5)),
    (dg.tensor([-1], dtype=dg.int32), (1, 3, 4, 5)),
])
def test_result_shapes_follow_pytorch(index, shape):
    x = _x(2, 3, 4, 5)
    assert x[index].shape == shape


def test_values_and_repeated_gradient():
    x = _x(3, 4, rg=True)
    y = x[[2, -3, 2], 1:]
    np.testing.assert_array_equal(y.numpy(), x.numpy()[[2, 0, 2], 1:])
    y.backward(dg.ones(3, 3))
    expected = np.zeros((3, 4), np.float32)
    expected[0, 1:] = 1
    expected[2, 1:] = 2  # repeated rows accumulate
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_result_does_not_alias_the_input():
    x = _x(3, 2)
    y = x[np.array(1)]  # a 0-d index array: NumPy alone would return a view
    x.zero_()
    assert y.numpy().tolist() == [2.0, 3.0]


@pytest.mark.parametrize(("index", "err", "text"), [
    (dg.tensor([2]), IndexError, "index 2 is out of bounds for dimension 0 with size 2"),
    (dg.tensor([-3]), IndexError, "index -3 is out of bounds"),
    ((slice(None), [3]), IndexError, "for dimension 1 with size 3"),
    (dg.tensor([0.0]), IndexError, "must be long, int, byte or bool"),
    (dg.tensor([True]), IndexError, "The shape of the mask [1] at index 0 does not match"),
    ((I, dg.tensor([0, 1, 2])), IndexError, "could not be broadcast together"),
    ((0, 0, I), IndexError, "too many indices"),
])
def test_index_errors(index, err, text):
    with pytest.raises(err, match=text.replace("[", r"\[").replace("]", r"\]")):
        _x(2, 3)[index]


# --------------------------------------------------------------------------- writes


def test_write_last_repeat_wins_and_gradients():
    x = dg.arange(5.0).requires_grad_()
    y = x * 1
    v = dg.tensor([10.0, 20.0, 30.0], requires_grad=True)
    y[dg.tensor([1, 1, 3])] = v
    assert y.tolist() == [0.0, 20.0, 2.0, 30.0, 4.0]
    assert y.grad_fn.name() == "IndexPutBackward0"
    y.backward(dg.arange(5.0) + 1)
    assert x.grad.tolist() == [1.0, 0.0, 3.0, 0.0, 5.0]  # nothing through overwritten ones
    assert v.grad.tolist() == [2.0, 2.0, 4.0]  # gathered, as PyTorch's accumulate=False


def test_write_is_in_place_and_checked():
    x = dg.zeros(3, 2)
    version = x._version[0]
    x[[0, 2]] = dg.tensor([1.0, 2.0])
    assert x._version[0] > version
    assert x.tolist() == [[1.0, 2.0], [0.0, 0.0], [1.0, 2.0]]
    x[x > 1.5] = -1.0  # a mask, eager: index_put at its nonzero positions
    assert x.tolist() == [[1.0, -1.0], [0.0, 0.0], [1.0, -1.0]]
    leaf = dg.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf[dg.tensor([0])] = 1.0
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        dg.zeros(2, 3, requires_grad=True)[0][[1]] = 1.0
    with dg.no_grad():
        leaf[dg.tensor([0])] = 1.0
    assert leaf.tolist() == [1.0, 0.0, 0.0] and leaf.is_leaf


def test_write_through_a_view_reaches_the_base():
    w = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = dg.ones(2, 3) * w
    z[0][dg.tensor([0, 2])] = 5.0
    assert z.grad_fn.name() == "CopySlices"
    assert z.tolist() == [[5.0, 2.0, 5.0], [1.0, 2.0, 3.0]]
    (z * dg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    assert w.grad.tolist() == [4.0, 7.0, 6.0]  # nothing from the overwritten elements


def test_write_value_shapes_and_dtypes():
    x = dg.zeros(3, 4)
    x[dg.tensor([0, 1])] = dg.ones(1, 1, 4)  # leading 1s may exceed the target
    assert x.numpy()[:2].sum() == 8
    with pytest.raises(RuntimeError, match=r"value tensor of shape \[3, 4\] cannot be "
                                           r"broadcast to indexing result of shape \[2, 4\]"):
        x[dg.tensor([0, 1])] = dg.ones(3, 4)
    k = dg.zeros(3, dtype=dg.int64)
    k[dg.tensor([0])] = 2.7  # cast to the destination dtype, as PyTorch
    assert k.tolist() == [2, 0, 0]
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_((dg.tensor([0]),), dg.tensor(1.0, dtype=dg.float64))


def test_index_put_accumulate():
    x = dg.zeros(3)
    x.index_put_((dg.tensor([0, 0, 2]),), dg.tensor(1.0), accumulate=True)
    assert x.tolist() == [2.0, 0.0, 1.0]
    y = dg.index_put(dg.zeros(2, 2), (dg.tensor([1]), dg.tensor([0])), dg.tensor(3.0))
    assert y.tolist() == [[0.0, 0.0], [3.0, 0.0]]


# ------------------------------------------------------------- gather and scatter family


def test_gather_family():
    a = _x(3, 4)
    assert a.gather(1, dg.tensor([[0, 0], [1, 0]])).tolist() == [[0.0, 0.0], [5.0, 4.0]]
    assert dg.take_along_dim(a, dg.tensor([[1], [2], [0]]), 1).tolist() == [[1.0], [6.0], [8.0]]
    assert dg.take_along_dim(a, dg.tensor([5, 0])).tolist() == [5.0, 0.0]
    assert dg.index_select(a, 0, dg.tensor(1)).shape == (1, 4)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1"):
        a.gather(1, dg.tensor([[5]]))
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.gather(2, dg.tensor([[0]]))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        a.gather(1, dg.tensor([0]))
    with pytest.raises(IndexError, match="index out of range in self"):
        a.index_select(0, dg.tensor([3]))


def test_gather_and_scatter_take_a_0d_index_against_a_1d_tensor():
    # Learn the Basics builds one-hot targets as zeros(10).scatter_(0, tensor(y), value=1).
    assert dg.zeros(5).scatter_(0, dg.tensor(3), value=1).tolist() == [0.0, 0.0, 0.0, 1.0, 0.0]
    assert dg.zeros(3).scatter(0, dg.tensor(1), dg.tensor(7.0)).tolist() == [0.0, 7.0, 0.0]
    assert dg.zeros(3).scatter_add(0, dg.tensor([2]), dg.tensor(4.0)).tolist() == [0.0, 0.0, 4.0]
    x = dg.arange(5.0, requires_grad=True)
    y = dg.gather(x, 0, dg.tensor(2))
    assert y.shape == () and y.item() == 2.0
    y.backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert dg.gather(dg.tensor(4.0), 0, dg.tensor([0])).tolist() == [4.0]
    # Either side 0-d counts as 1-d of one element; the result keeps the 0-d shape.
    assert dg.gather(dg.tensor(4.0), -1, dg.tensor(0)).shape == ()
    s = dg.tensor(1.0).scatter(0, dg.tensor([0]), dg.tensor([7.0]))
    assert s.shape == () and s.item() == 7.0
    assert dg.zeros(3).scatter_add(0, dg.tensor(2), dg.tensor([5.0, 6.0])).tolist() == \
        [0.0, 0.0, 5.0]
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        dg.zeros(2, 5).scatter_(0, dg.tensor(3), value=1)


def test_scatter_family():
    i = dg.tensor([0, 0, 2])
    s = dg.tensor([1.0, 2.0, 3.0])
    assert dg.zeros(3).scatter_add(0, i, s).tolist() == [3.0, 0.0, 3.0]
    assert dg.zeros(3).scatter(0, dg.tensor([2]), 7.0).tolist() == [0.0, 0.0, 7.0]
    assert dg.zeros(3).scatter_reduce(0, i, s, "mean").tolist() == [1.0, 0.0, 1.5]
    assert dg.ones(3).scatter_reduce(0, i, s, "mean", include_self=False).tolist() == \
        [1.5, 1.0, 3.0]
    assert dg.ones(3).scatter_reduce(0, i, s, "sum", include_self=False).tolist() == \
        [3.0, 1.0, 3.0]
    assert dg.ones(3).scatter_reduce(0, i, s, "amax").tolist() == [2.0, 1.0, 3.0]
    assert dg.ones(3).scatter_reduce(0, i, s, "amin", include_self=False).tolist() == \
        [1.0, 1.0, 3.0]
    assert dg.full((3,), 2.0).scatter_reduce(0, i, s, "prod").tolist() == [4.0, 2.0, 6.0]
    with pytest.raises(RuntimeError, match="reduce argument"):
        dg.ones(3).scatter_reduce(0, i, s, "max")
    x = dg.zeros(3)
    x.scatter_add_(0, i, s).index_add_(0, dg.tensor([1]), dg.tensor([5.0]), alpha=2)
    assert x.tolist() == [3.0, 10.0, 3.0]
    assert x.index_fill_(0, dg.tensor([0]), -1.0).tolist() == [-1.0, 10.0, 3.0]
    assert x.index_copy(0, dg.tensor([2]), dg.tensor([9.0])).tolist() == [-1.0, 10.0, 9.0]
    assert x.masked_fill(x > 0, 0.0).tolist() == [-1.0, 0.0, 0.0]
    x.masked_fill_(dg.tensor([True, False, False]), 4.0)
    assert x.tolist() == [4.0, 10.0, 3.0]
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(dg.tensor([1, 0, 0]), 3.0)


# ------------------------------------------------------------- data-dependent shapes


def test_nonzero_family_eager():
    m = _x(3, 4) > 8
    assert dg.nonzero(m).tolist() == [[2, 1], [2, 2], [2, 3]]
    assert [t.tolist() for t in dg.where(m)] == [[2, 2, 2], [1, 2, 3]]
    assert dg.argwhere(m).dtype == np.int64
    assert dg.masked_select(_x(3, 4), m).tolist() == [9.0, 10.0, 11.0]


@pytest.mark.parametrize("fn", [
    lambda x: dg.nonzero(x > 0),
    lambda x: dg.where(x > 0),
    lambda x: dg.masked_select(x, x > 0),
    lambda x: x[x > 0],
    lambda x: F.one_hot((x > 0).long()),
])
def test_data_dependent_shapes_raise_trace_error(fn):
    with pytest.raises(dg.TraceError, match=r"test_indexing.py:\d+.*depends on the data"):
        dg.trace(fn, dg.ones(3))


def test_masked_scalar_write_traces_as_where():
    def f(x):
        y = x * 1.0
        y[x > 0] = 0.0
        return y

    g = dg.trace(f, dg.ones(3))
    assert "where" in [n.op for n in g.nodes]


# ------------------------------------------------------------ one_hot and embedding


def test_one_hot():
    assert F.one_hot(dg.tensor([0, 2])).tolist() == [[1, 0, 0], [0, 0, 1]]
    assert F.one_hot(dg.tensor([0, 2]), 4).dtype == np.int64
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(dg.tensor([3]), 2)


def test_embedding_padding_idx_gets_no_gradient():
    dg.manual_seed(0)
    e = dg.nn.Embedding(5, 3, padding_idx=0)
    assert e.weight.numpy()[0].tolist() == [0.0, 0.0, 0.0]
    assert e.weight.dtype == np.float32 and repr(e) == "Embedding(5, 3, padding_idx=0)"
    out = e(dg.tensor([[0, 1], [1, 0]]))
    assert out.shape == (2, 2, 3)
    out.sum().backward()
    assert e.weight.grad.numpy().sum(1).tolist() == [0.0, 6.0, 0.0, 0.0, 0.0]
    dg.manual_seed(0)
    assert np.array_equal(dg.nn.Embedding(5, 3, padding_idx=0).weight.numpy(),
                          e.weight.numpy())
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding(dg.tensor([5]), e.weight)


def test_big_embedding_init_is_standard_normal():
    w = dg.nn.Embedding(1000, 100).weight.numpy()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1.0) < 0.02


# ------------------------------------------------------------------------ compiled


def test_compiled_traced_index_checks_bounds():
    f = dg.compile(lambda x, k: x[k] * 2.0)
    x = _x(3, 2)
    assert f(x, dg.tensor([2, -1])).tolist() == [[8.0, 10.0], [8.0, 10.0]]
    with pytest.raises(IndexError, match="out of bounds"):
        f(x, dg.tensor([0, 3]))


def test_scatter_reduce_extremes_split_ties_as_pytorch():
    # PyTorch's rule, recorded from torch 2.13: the gradient of amax/amin is shared evenly
    # by every element equal to the result, the target's own value included, and with
    # include_self=False the own value still counts in the share (its part is dropped).
    x = dg.tensor([1.0, 2.0, 0.0], dtype=dg.float64, requires_grad=True)
    s = dg.tensor([2.0, 2.0, -1.0, 5.0], dtype=dg.float64, requires_grad=True)
    i = dg.tensor([1, 1, 0, 2])
    x.scatter_reduce(0, i, s, "amax").sum().backward()
    assert x.grad.tolist() == [1.0, 1 / 3, 0.0]
    assert s.grad.tolist() == [1 / 3, 1 / 3, 0.0, 1.0]
    x.grad = s.grad = None
    x.scatter_reduce(0, i, s, "amax", include_self=False).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    assert s.grad.tolist() == [1 / 3, 1 / 3, 1.0, 1.0]
