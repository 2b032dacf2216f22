"""Eager tensors (API.md A1, A2): creation, inspection, repr, operators, indexing, reductions.

Every behaviour here is PyTorch's; where torch is installed the same cases are also checked
against it directly.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

# ------------------------------------------------------------------------------ creation


@pytest.mark.parametrize(
    ("data", "dtype", "shape"),
    [
        (1.5, np.float32, ()),
        (2, np.int64, ()),
        (True, np.bool_, ()),
        ([1.0, 2.0], np.float32, (2,)),
        ([1, 2.5], np.float32, (2,)),  # one float makes the whole list float32
        ([[1, 2], [3, 4]], np.int64, (2, 2)),
        ([True, False], np.bool_, (2,)),
        (np.array([1.0, 2.0]), np.float64, (2,)),  # NumPy arrays keep their dtype
        (np.array([1, 2], dtype=np.int32), np.int32, (2,)),
        (np.zeros((2, 3), dtype=np.float16), np.float16, (2, 3)),
    ],
)
def test_tensor_dtype_rules(data, dtype, shape) -> None:
    t = dg.tensor(data)
    assert t.dtype == np.dtype(dtype)
    assert t.shape == shape
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (dg.float32, np.float32),
        (dg.float64, np.float64),
        (dg.int64, np.int64),
        (dg.bool, np.bool_),
        (np.float64, np.float64),
        (np.int32, np.int32),
        (np.dtype("float32"), np.float32),
    ],
)
def test_tensor_dtype_argument(dtype, expected) -> None:
    t = dg.tensor([1, 0, 2], dtype=dtype)
    assert t.dtype == np.dtype(expected)
    np.testing.assert_array_equal(t.numpy(), np.array([1, 0, 2]).astype(expected))


@pytest.mark.parametrize("data", [0.1, [0.3, -1.2]], ids=["scalar", "list"])
def test_float64_dtype_keeps_python_float_precision(data) -> None:
    t = dg.tensor(data, dtype=dg.float64)
    assert t.dtype == np.float64
    np.testing.assert_array_equal(t.numpy(), np.array(data, dtype=np.float64))


def test_tensor_copies_its_data() -> None:
    a = np.array([1.0, 2.0])
    t = dg.tensor(a)
    a[0] = 100.0
    assert t.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "make",
    [
        lambda: dg.tensor(1, requires_grad=True),
        lambda: dg.tensor([True, False], requires_grad=True),
        lambda: dg.zeros(2, dtype=dg.int64, requires_grad=True),
        lambda: dg.arange(3, requires_grad=True),
        lambda: dg.tensor([1, 2]).requires_grad_(),
    ],
)
def test_requires_grad_on_non_floating_tensor_is_type_error(make) -> None:
    with pytest.raises(TypeError):
        make()


def test_zeros_ones_full() -> None:
    z = dg.zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == np.float32
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3)))
    assert dg.zeros((2, 3)).shape == (2, 3)
    o = dg.ones(4, dtype=dg.float64)
    assert o.dtype == np.float64
    np.testing.assert_array_equal(o.numpy(), np.ones(4))
    f = dg.full((2, 2), 1.5)
    assert f.dtype == np.float32 and f.tolist() == [[1.5, 1.5], [1.5, 1.5]]
    # PyTorch infers full's dtype from the fill value.
    assert dg.full((2,), 7).dtype == np.int64
    assert dg.full((2,), True).dtype == np.bool_
    assert dg.full((3,), 2, dtype=dg.float64).dtype == np.float64


def test_creation_functions_accept_requires_grad() -> None:
    for t in (
        dg.zeros(2, requires_grad=True),
        dg.ones(2, requires_grad=True),
        dg.full((2,), 3.0, requires_grad=True),
        dg.arange(3, dtype=dg.float32, requires_grad=True),
        dg.randn(2, requires_grad=True),
        dg.rand(2, requires_grad=True),
        dg.tensor([1.0], requires_grad=True),
        dg.from_numpy(np.ones(2), requires_grad=True),
    ):
        assert t.requires_grad and t.is_leaf and t.grad_fn is None and t.grad is None


def test_arange() -> None:
    a = dg.arange(5)
    assert a.dtype == np.int64 and a.tolist() == [0, 1, 2, 3, 4]
    assert dg.arange(2, 10, 3).tolist() == [2, 5, 8]
    b = dg.arange(1, 3, 0.5)
    assert b.dtype == np.float32 and b.tolist() == [1.0, 1.5, 2.0, 2.5]
    c = dg.arange(4, dtype=dg.float64)
    assert c.dtype == np.float64 and c.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_randn_rand_and_manual_seed() -> None:
    dg.manual_seed(1234)
    a, b = dg.randn(3, 4), dg.rand(5)
    dg.manual_seed(1234)
    np.testing.assert_array_equal(dg.randn(3, 4).numpy(), a.numpy())
    np.testing.assert_array_equal(dg.rand(5).numpy(), b.numpy())
    assert a.shape == (3, 4) and a.dtype == np.float32
    assert dg.randn(2, dtype=dg.float64).dtype == np.float64
    # Different seeds (or no reseed) give different samples.
    dg.manual_seed(1235)
    assert not np.array_equal(dg.randn(3, 4).numpy(), a.numpy())
    u = dg.rand(10_000).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.02
    n = dg.randn(10_000).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1.0) < 0.05


def test_from_numpy_shares_memory() -> None:
    arr = np.arange(3.0)
    t = dg.from_numpy(arr)
    assert t.dtype == np.float64
    arr[0] = 9.0
    assert t.tolist() == [9.0, 1.0, 2.0]
    assert np.shares_memory(t.numpy(), arr)
    with pytest.raises(TypeError):
        dg.from_numpy([1.0, 2.0])


# ---------------------------------------------------------------------------- inspection


def test_inspection() -> None:
    t = dg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and isinstance(t.shape, tuple)
    assert t.dtype == np.float32
    assert t.ndim == 2
    assert len(t) == 2
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert isinstance(t.numpy(), np.ndarray)
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [4, 5, 6]])
    with pytest.raises(TypeError):
        len(dg.tensor(1.0))


def test_item() -> None:
    assert dg.tensor(3).item() == 3 and type(dg.tensor(3).item()) is int
    assert dg.tensor(2.5).item() == 2.5 and type(dg.tensor(2.5).item()) is float
    assert dg.tensor([[7.0]]).item() == 7.0  # one element, any number of dims
    assert dg.tensor(1.0, requires_grad=True).item() == 1.0
    with pytest.raises(ValueError):
        dg.tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError):
        dg.zeros(0).item()


def test_numpy_of_tensor_requiring_grad_is_a_copy() -> None:
    t = dg.tensor([1.0, 2.0], requires_grad=True)
    a = t.numpy()
    np.testing.assert_array_equal(a, [1.0, 2.0])
    a[0] = 100.0
    assert t.tolist() == [1.0, 2.0]
    # The result of an op works too.
    np.testing.assert_array_equal((t * 2).numpy(), [2.0, 4.0])


# ---------------------------------------------------------------------------------- repr

REPR_CASES = [
    (lambda m: m.tensor([2.0, 3.0], requires_grad=True), "tensor([2., 3.], requires_grad=True)"),
    (lambda m: m.tensor(4.0, requires_grad=True) * m.tensor(5.0),
     "tensor(20., grad_fn=<MulBackward0>)"),
    (lambda m: m.tensor([2.0, 3.0], dtype=m.float64), "tensor([2., 3.], dtype={m}.float64)"),
    (lambda m: m.tensor(2.5, dtype=m.float64, requires_grad=True),
     "tensor(2.5000, dtype={m}.float64, requires_grad=True)"),
    (lambda m: m.tensor([1, 2, 3]), "tensor([1, 2, 3])"),
    (lambda m: m.tensor(3), "tensor(3)"),
    (lambda m: m.tensor(np.array([1, 2], dtype=np.int32)), "tensor([1, 2], dtype={m}.int32)"),
    (lambda m: m.tensor([True, False]), "tensor([ True, False])"),
    (lambda m: m.tensor(True), "tensor(True)"),
    (lambda m: m.tensor([0.5, 1.25]), "tensor([0.5000, 1.2500])"),
    (lambda m: m.tensor(0.1), "tensor(0.1000)"),
    (lambda m: m.tensor(-2.0), "tensor(-2.)"),
    (lambda m: m.tensor([-1.0, 2.0]), "tensor([-1.,  2.])"),
    (lambda m: m.tensor([[1.5, 2.0], [3.0, 4.0]]),
     "tensor([[1.5000, 2.0000],\n        [3.0000, 4.0000]])"),
    (lambda m: m.tensor([[-1.5, 2.0], [3.25, -4.0]]),
     "tensor([[-1.5000,  2.0000],\n        [ 3.2500, -4.0000]])"),
    (lambda m: m.tensor([1e-5, 1.0]), "tensor([1.0000e-05, 1.0000e+00])"),
    (lambda m: m.tensor([123456.0]), "tensor([123456.])"),
    (lambda m: m.tensor([1234.5678]), "tensor([1234.5677])"),
    (lambda m: m.arange(6).reshape(2, 3), "tensor([[0, 1, 2],\n        [3, 4, 5]])"),
    (lambda m: m.zeros(2, 0), "tensor([], size=(2, 0))"),
    pytest.param(lambda m: m.tensor([1e5, 1.0]), "tensor([1.0000e+05, 1.0000e+00])",
                 id="ratio-sci-int"),
    pytest.param(lambda m: m.tensor([0.5, 1000.5]), "tensor([5.0000e-01, 1.0005e+03])",
                 id="ratio-sci-float"),
    pytest.param(lambda m: m.tensor([10000.5]), "tensor([10000.5000])", id="large-fixed"),
    pytest.param(lambda m: m.tensor([float("nan"), 1.0, float("inf")]),
                 "tensor([nan, 1., inf])", id="nonfinite-width"),
    pytest.param(lambda m: m.zeros(0), "tensor([])", id="empty-1d"),
]


@pytest.mark.parametrize(("make", "expected"), REPR_CASES)
def test_repr_like_pytorch(make, expected) -> None:
    assert repr(make(dg)) == expected.format(m="dg")


@pytest.mark.parametrize(("make", "expected"), REPR_CASES)
def test_repr_matches_torch(make, expected) -> None:
    torch = pytest.importorskip("torch")
    assert repr(make(torch)) == expected.format(m="torch")  # the table itself is right
    assert repr(make(dg)).replace("dg.", "torch.") == repr(make(torch))


# ----------------------------------------------------------------------------- operators


@pytest.mark.parametrize(
    ("fn", "ref"),
    [
        (lambda a: a + 2, lambda a: a + 2),
        (lambda a: 2 + a, lambda a: 2 + a),
        (lambda a: a - 0.5, lambda a: a - 0.5),
        (lambda a: 3 - a, lambda a: 3 - a),
        (lambda a: a * 3.0, lambda a: a * 3.0),
        (lambda a: 3.0 * a, lambda a: 3.0 * a),
        (lambda a: a / 4, lambda a: a / 4),
        (lambda a: 2 / a, lambda a: 2 / a),
        (lambda a: a**2, lambda a: a**2),
        (lambda a: 2**a, lambda a: 2**a),
        (lambda a: -a, lambda a: -a),
        (lambda a: a + np.array([1.0, 2.0, 3.0], np.float32),
         lambda a: a + np.array([1.0, 2.0, 3.0], np.float32)),
        (lambda a: np.array([1.0, 2.0, 3.0], np.float32) - a,
         lambda a: np.array([1.0, 2.0, 3.0], np.float32) - a),
        (lambda a: np.array([2.0, 2.0, 2.0], np.float32) * a,
         lambda a: np.array([2.0, 2.0, 2.0], np.float32) * a),
        (lambda a: np.array([1.0, 2.0, 4.0], np.float32) / a,
         lambda a: np.array([1.0, 2.0, 4.0], np.float32) / a),
        (lambda a: np.array([2.0, 3.0, 0.5], np.float32) ** a,
         lambda a: np.array([2.0, 3.0, 0.5], np.float32) ** a),
    ],
)
def test_operators_with_numbers_and_arrays(fn, ref) -> None:
    x = np.array([1.0, 2.0, 4.0], np.float32)
    out = fn(dg.tensor(x, requires_grad=True))
    assert isinstance(out, dg.Tensor)  # also when a NumPy array is on the left
    assert out.dtype == np.float32  # Python scalars do not widen float32
    assert out.requires_grad and out.grad_fn is not None
    dg.testing.assert_close(out.numpy(), ref(x), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_reflected_operators_differentiate() -> None:
    a = dg.tensor([1.0, 2.0], dtype=dg.float64, requires_grad=True)
    (2 - a).sum().backward()
    dg.testing.assert_close(a.grad.numpy(), [-1.0, -1.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    a.grad = None
    (2 / a).sum().backward()
    dg.testing.assert_close(a.grad.numpy(), [-2.0, -0.5], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    a.grad = None
    (np.array([3.0, 5.0]) * a).sum().backward()
    dg.testing.assert_close(a.grad.numpy(), [3.0, 5.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    a.grad = None
    (np.array([2.0, 3.0]) ** a).sum().backward()
    dg.testing.assert_close(a.grad.numpy(), [2.0 * np.log(2.0), 9.0 * np.log(3.0)], rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("base", [2, 2.0])
def test_python_number_to_tensor_power_differentiates(base) -> None:
    a = dg.tensor([1.0, 2.0], dtype=dg.float64, requires_grad=True)
    (base**a).sum().backward()
    dg.testing.assert_close(a.grad.numpy(), 2.0 ** np.array([1.0, 2.0]) * np.log(2.0), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)


def test_matmul_with_arrays() -> None:
    m = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    a = dg.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    dg.testing.assert_close((m @ a).numpy(), m @ np.ones((3, 2)), rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close((a @ m).numpy(), np.ones((3, 2)) @ m, rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(dg.matmul(dg.tensor(m), a).numpy(), m @ np.ones((3, 2)), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)


@pytest.mark.parametrize(
    "fn",
    [lambda i: i.exp(), lambda i: i.sqrt(), lambda i: i / 2, lambda i: i * 2.5],
    ids=["exp", "sqrt", "div", "mul-float"],
)
def test_int_tensor_in_float_op_gives_float32(fn) -> None:
    assert fn(dg.tensor([1, 2])).dtype == np.float32


def test_int_ops_stay_int() -> None:
    i = dg.tensor([1, 2])
    assert (i + 1).dtype == np.int64 and (i * 3).tolist() == [3, 6]
    assert (i**2).dtype == np.int64 and (i**2).tolist() == [1, 4]


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a < 2.0,
        lambda a: a <= 2.0,
        lambda a: a > 2.0,
        lambda a: a >= 2.0,
        lambda a: a == 2.0,
        lambda a: a != 2.0,
        lambda a: 2.0 < a,
        lambda a: a > np.array([0.0, 5.0, 1.0], np.float32),
        lambda a: np.array([0.0, 5.0, 1.0], np.float32) < a,
        lambda a: a == a * 1,
    ],
)
def test_comparisons_give_bool_tensors_without_grad(fn) -> None:
    x = np.array([1.0, 2.0, 3.0], np.float32)
    a = dg.tensor(x, requires_grad=True)
    out = fn(a)
    assert isinstance(out, dg.Tensor)
    assert out.dtype == np.bool_
    assert not out.requires_grad and out.grad_fn is None
    np.testing.assert_array_equal(out.numpy(), fn(x))


def test_broadcast_shape_error_names_both_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        dg.ones(2, 3) + dg.ones(3, 2)
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(2, 3\)"):
        dg.ones(2, 3) @ dg.ones(2, 3)


# ------------------------------------------------------------------------------ indexing

INDICES = [
    1,
    -1,
    (0, 2),
    (-1, -2),
    slice(1, 3),
    slice(None, None, 2),
    (slice(None), 1),
    (0, slice(1, None)),
    (slice(1, None), slice(None, -1)),
    None,
    (None, 0),
    Ellipsis,
    (Ellipsis, -1),
    (1, Ellipsis, 0),
    (Ellipsis, None),
    (slice(None), None, slice(0, 2)),
]


@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_basic_indexing_forward_and_gradient_scatter(idx) -> None:
    x = np.arange(12.0).reshape(3, 4)
    t = dg.tensor(x, requires_grad=True)
    out = t[idx]
    expected = x[idx]
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    # Distinct weights check that each gradient lands at its element's position.
    w = np.arange(1.0, expected.size + 1).reshape(expected.shape)
    (out * w).sum().backward()
    g = np.zeros_like(x)
    g[idx] = w
    np.testing.assert_array_equal(t.grad.numpy(), g)
    assert t.grad.shape == t.shape


def test_index_out_of_range_raises() -> None:
    with pytest.raises(IndexError, match="out of bounds"):
        dg.zeros(3)[3]


def test_reshape_and_transpose_forward_and_gradient() -> None:
    x = np.arange(6.0).reshape(2, 3)
    w = np.arange(1.0, 7.0)
    for fn, ref in [
        (lambda t: t.reshape(3, 2), lambda a: a.reshape(3, 2)),
        (lambda t: t.reshape(-1), lambda a: a.reshape(-1)),
        (lambda t: t.T, lambda a: a.T),
        (lambda t: t.transpose(1, 0), lambda a: a.transpose(1, 0)),
        (lambda t: dg.reshape(t, (6, 1)), lambda a: a.reshape(6, 1)),
    ]:
        t = dg.tensor(x, requires_grad=True)
        out = fn(t)
        np.testing.assert_array_equal(out.numpy(), ref(x))
        (out * w.reshape(out.shape)).sum().backward()
        # The gradient is the weights carried back through the inverse reshuffle.
        g = np.zeros(6)
        g[ref(np.arange(6).reshape(2, 3)).reshape(-1)] = w
        np.testing.assert_array_equal(t.grad.numpy(), g.reshape(2, 3))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 2\)"):
        dg.tensor(x).reshape(4, 2)


# ---------------------------------------------------------------- concatenate and stack


def test_concatenate_and_stack_forward_and_gradient() -> None:
    a = dg.tensor([1.0, 2.0], dtype=dg.float64, requires_grad=True)
    b = dg.tensor([[3.0, 4.0]], dtype=dg.float64, requires_grad=True)
    c = dg.concatenate([a[None], b], axis=0)
    np.testing.assert_array_equal(c.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    (c * np.array([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(b.grad.numpy(), [[3.0, 4.0]])

    a.grad = None
    s = dg.stack([a, a * 2], axis=1)
    np.testing.assert_array_equal(s.numpy(), [[1.0, 2.0], [2.0, 4.0]])
    (s * np.array([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0 + 2 * 2.0, 3.0 + 2 * 4.0])


def test_concatenate_stack_defaults_and_aliases() -> None:
    a, b = dg.tensor([1.0, 2.0]), dg.tensor([3.0])
    assert dg.concatenate([a, b]).tolist() == [1.0, 2.0, 3.0]
    assert dg.cat([a, b]).tolist() == [1.0, 2.0, 3.0]
    assert dg.stack([a, a]).shape == (2, 2)
    assert dg.stack([a, a], dim=1).tolist() == [[1.0, 1.0], [2.0, 2.0]]
    assert dg.concatenate([dg.ones(2, 1), dg.zeros(2, 2)], dim=1).shape == (2, 3)


def test_concatenate_shape_error() -> None:
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        dg.concatenate([dg.ones(2, 3), dg.ones(3, 2)])


# ---------------------------------------------------------------- reductions and dim=

X = np.array([[1.0, 5.0, 3.0], [7.0, 2.0, 4.0]])


@pytest.mark.parametrize("name", ["sum", "mean", "max"])
@pytest.mark.parametrize(
    "kw",
    [{}, {"dim": 0}, {"dim": 1}, {"dim": -1}, {"dim": (0, 1)}, {"dim": 1, "keepdims": True}],
    ids=repr,
)
def test_reductions_accept_dim_alias(name, kw) -> None:
    t = dg.tensor(X)
    axis = kw.get("dim")
    ref = getattr(np, name if name != "max" else "amax")(
        X, axis=axis, keepdims=kw.get("keepdims", False)
    )
    for out in (getattr(t, name)(**kw), getattr(dg, name)(t, **kw)):
        if isinstance(out, tuple):  # max(dim) for one int dim: (values, indices), PyTorch's
            out = out.values
        dg.testing.assert_close(out.numpy(), ref, rtol=1e-7, atol=0, equal_nan=True,
                                check_dtype=False)
    # dim= and axis= mean the same thing.
    if axis is not None:
        akw = {"axis": axis, "keepdims": kw.get("keepdims", False)}
        out = getattr(t, name)(**akw)
        if isinstance(out, tuple):  # axis= is dim=, so max(axis=int) is (values, indices)
            out = out.values
        dg.testing.assert_close(out.numpy(), ref, rtol=1e-7, atol=0, equal_nan=True,
                                check_dtype=False)


def test_reduction_rejects_both_axis_and_dim() -> None:
    with pytest.raises(TypeError):
        dg.tensor(X).sum(axis=0, dim=0)


def test_max_gradient_flows_to_the_max_element() -> None:
    t = dg.tensor(X, requires_grad=True)
    t.max().backward()
    expected = np.zeros_like(X)
    expected[1, 0] = 1.0
    np.testing.assert_array_equal(t.grad.numpy(), expected)
    t.grad = None
    t.max(dim=1).values.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [[0, 1, 0], [1, 0, 0]])


def _np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_and_log_softmax_dim_alias(axis) -> None:
    t = dg.tensor(X)
    ref = _np_softmax(X, axis)
    for out in (dg.softmax(t, dim=axis), t.softmax(dim=axis), dg.softmax(t, axis)):
        dg.testing.assert_close(out.numpy(), ref, rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)
    for out in (dg.log_softmax(t, dim=axis), t.log_softmax(dim=axis), dg.log_softmax(t, axis)):
        dg.testing.assert_close(out.numpy(), np.log(ref), rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)


# ------------------------------------------------------------------------------- torch


def test_operators_and_reductions_match_torch() -> None:
    torch = pytest.importorskip("torch")
    x = np.array([[0.5, -1.5, 2.0], [3.0, 0.25, -0.75]])
    progs = [
        lambda m, t: (t * 2 + 1) / (t**2 + 1),
        lambda m, t: (t.exp() - t.tanh()).sum(dim=1),
        lambda m, t: t.softmax(dim=0) * t.log_softmax(dim=1),
        lambda m, t: (t.sigmoid() + t.relu()).mean(dim=0),
        lambda m, t: t[1:, None, ::2].abs() @ t[:, :2],
        lambda m, t: m.stack([t.sin(), t.cos()], dim=1).sum(),
        lambda m, t: t.amax(dim=1, keepdim=True) * t,
    ]
    for prog in progs:
        td = dg.tensor(x, requires_grad=True)
        tt = torch.tensor(x, requires_grad=True)
        od, ot = prog(dg, td), prog(torch, tt)
        dg.testing.assert_close(od.numpy(), ot.detach().numpy(), rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)
        w = np.linspace(0.5, 1.5, od.numpy().size).reshape(od.shape)
        (od * w).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        dg.testing.assert_close(td.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-14,
                                equal_nan=True, check_dtype=False)


def test_int_and_float_tensors_promote_like_pytorch():
    # PyTorch's category rule: an integer tensor never widens a float tensor (NumPy would
    # give float64 for int64 * float32). Eager, traced and compiled agree.
    i = dg.tensor([1, 2])
    f32 = dg.ones(2)
    f64 = dg.ones(2, dtype=dg.float64)
    cases = {
        "mul": (lambda a, b: a * b, dg.float32),
        "add": (lambda a, b: b + a, dg.float32),
        "div": (lambda a, b: a / b, dg.float32),
        "pow": (lambda a, b: a ** b, dg.float32),
        "maximum": (lambda a, b: dg.maximum(a, b), dg.float32),
        "where": (lambda a, b: dg.where(a > 1, a, b), dg.float32),
        "cat": (lambda a, b: dg.cat([a, b]), dg.float32),
        "stack": (lambda a, b: dg.stack([a, b]), dg.float32),
    }
    for name, (fn, dtype) in cases.items():
        out = fn(i, f32)
        assert out.dtype == dtype, name
        assert dg.trace(fn, i, f32).outputs[0].dtype == dtype, name
        # The same values as casting the integers first.
        np.testing.assert_array_equal(out.numpy(), fn(i.astype(dg.float32), f32).numpy())
    assert (i * f64).dtype == dg.float64
    assert (i + i).dtype == dg.int64
    assert (dg.tensor([True, False]) * f32).dtype == dg.float32


def test_int_float_promotion_matches_torch():
    torch = pytest.importorskip("torch")
    for a, b in [([1, 2], [0.5, 1.5]), ([True, False], [0.5, 1.5])]:
        ours = dg.tensor(a) * dg.tensor(b)
        theirs = torch.tensor(a) * torch.tensor(b)
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        dg.testing.assert_close(ours.numpy(), theirs.numpy(), rtol=1e-7, atol=0, equal_nan=True,
                                check_dtype=False)
