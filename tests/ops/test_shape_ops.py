"""PyTorch's shape ops (dualgraph/ops/shape.py, ops/linalg.py): views, copies, edge cases and
errors. Values here were checked against torch 2.13; the goldens compare the same ops
with PyTorch directly."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import gradcheck

X = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 10.0

# ------------------------------------------------------------------ views are views
# (dualgraph view, NumPy view of the same elements): writing through the first must
# change exactly the elements the second names, and the base's gradient must see it.
VIEWS = {
    "flatten": (lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
    "flatten_all": (lambda t: dg.flatten(t), lambda a: a.reshape(-1)),
    "unflatten": (lambda t: t.unflatten(2, (2, 2)), lambda a: a.reshape(2, 3, 2, 2)),
    "movedim": (lambda t: t.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    "moveaxis_tuple": (lambda t: dg.moveaxis(t, (0, 2), (1, 0)),
                       lambda a: np.moveaxis(a, (0, 2), (1, 0))),
    "swapaxes": (lambda t: t.swapaxes(0, 2), lambda a: np.swapaxes(a, 0, 2)),
    "swapdims": (lambda t: dg.swapdims(t, -1, 1), lambda a: np.swapaxes(a, -1, 1)),
    "split": (lambda t: t.split(3, 2)[1], lambda a: a[:, :, 3:]),
    "split_sizes": (lambda t: dg.split(t, [1, 2], 1)[1], lambda a: a[:, 1:]),
    "chunk": (lambda t: t.chunk(2, 1)[0], lambda a: a[:, :2]),
    "tensor_split": (lambda t: t.tensor_split(3, 2)[0], lambda a: a[:, :, :2]),
    "unbind": (lambda t: t.unbind(2)[1], lambda a: a[:, :, 1]),
    "narrow": (lambda t: t.narrow(2, 1, 2), lambda a: a[:, :, 1:3]),
    "diagonal": (lambda t: t.diagonal(0, 1, 2), lambda a: np.diagonal(a, 0, 1, 2)),
    "diagonal_offset": (lambda t: dg.diagonal(t, -1, 2, 1), lambda a: np.diagonal(a, -1, 2, 1)),
    "diagonal_of_transpose": (lambda t: t.transpose(0, 2).diagonal(1),
                              lambda a: np.diagonal(a.transpose(2, 1, 0), 1)),
    "view_as": (lambda t: t.view_as(dg.zeros(6, 4)), lambda a: a.reshape(6, 4)),
    "squeeze_tuple": (lambda t: t[:, :1, None].squeeze((1, 2)), lambda a: a[:, 0]),
    "atleast_3d": (lambda t: dg.atleast_3d(t[0, 0]), lambda a: a[0, 0].reshape(1, 4, 1)),
}


def _written(view_np) -> np.ndarray:
    """A mask of the base elements ``view_np`` covers."""
    idx = np.arange(X.size).reshape(X.shape)
    mask = np.zeros(X.size, bool)
    mask[np.asarray(view_np(idx)).ravel()] = True
    return mask.reshape(X.shape)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_write_through_view_reaches_base_and_gradient(name):
    view, view_np = VIEWS[name]
    x = dg.tensor(X, requires_grad=True)
    y = x * 1.0
    view(y).mul_(3.0)
    w = np.linspace(1.0, 2.0, X.size).reshape(X.shape)
    (y * dg.tensor(w)).sum().backward()
    mask = _written(view_np)
    dg.testing.assert_close(y.numpy(), np.where(mask, 3 * X, X), rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(x.grad.numpy(), np.where(mask, 3 * w, w), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)


def test_writes_through_views_compiled():
    names = sorted(VIEWS)

    def f(x):
        outs = []
        for name in names:
            y = x * 1.0
            VIEWS[name][0](y).mul_(3.0)
            outs.append(y)
        return tuple(outs)

    # All views in one function, forward only: one Numba compile for the lot.
    outs = dg.compile(f)(dg.tensor(X))
    for name, out in zip(names, outs):
        expected = np.where(_written(VIEWS[name][1]), 3 * X, X)
        dg.testing.assert_close(out.numpy(), expected, rtol=1e-7, atol=0, equal_nan=True,
                                check_dtype=False, msg=name)


COPIES = {
    "flip": lambda t: t.flip(0),
    "roll": lambda t: t.roll(1, 2),
    "repeat": lambda t: t.repeat(1, 1, 1),
    "tile": lambda t: t.tile((1,)),
    "tril": lambda t: t.tril(),
    "rot90_k0": lambda t: t.rot90(0),
    "diag_2d": lambda t: t[0].diag(),
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copies_do_not_alias_their_input(name):
    # As in PyTorch: these return new tensors, so a write to them leaves the input alone.
    y = dg.tensor(X.copy())
    out = COPIES[name](y)
    out.mul_(0.0)
    np.testing.assert_array_equal(y.numpy(), X)


# ------------------------------------------------------------------------ semantics


def test_flatten_defaults_and_0d():
    x = dg.tensor(X)
    assert x.flatten().shape == (24,)
    assert x.flatten(0, 1).shape == (6, 4)
    assert x.flatten(-2).shape == (2, 12)
    assert x.flatten(1, 1) is x
    assert dg.tensor(2.5).flatten().shape == (1,)


def test_split_chunk_tensor_split_sizes():
    x = dg.tensor(np.arange(7.0))
    assert [t.shape for t in x.split(3)] == [(3,), (3,), (1,)]
    assert [t.shape for t in x.chunk(3)] == [(3,), (3,), (1,)]
    assert [t.shape for t in dg.arange(6).chunk(4)] == [(2,), (2,), (2,)]  # fewer chunks
    assert [t.shape for t in x.tensor_split(3)] == [(3,), (2,), (2,)]
    assert [t.shape for t in x.tensor_split([1, 5])] == [(1,), (4,), (2,)]
    assert [t.shape for t in x.tensor_split([5, 2])] == [(5,), (0,), (2,)]
    empty = dg.zeros(0, 2)
    assert [t.shape for t in empty.split(2)] == [(0, 2)]
    assert [t.shape for t in x.split([0, 7])] == [(0,), (7,)]


def test_unbind_and_narrow():
    x = dg.tensor(X)
    parts = x.unbind(-1)
    assert len(parts) == 4 and parts[1].shape == (2, 3)
    np.testing.assert_array_equal(parts[1].numpy(), X[..., 1])
    np.testing.assert_array_equal(dg.narrow(x, 1, -2, 2).numpy(), X[:, 1:])


def test_repeat_tile_repeat_interleave_match_numpy():
    k = dg.tensor([[1, 2], [3, 4]])
    assert k.repeat(2, 3).dtype == np.int64
    np.testing.assert_array_equal(k.repeat(2, 1, 3).numpy(), np.tile(k.numpy(), (2, 1, 3)))
    np.testing.assert_array_equal(k.tile((2,)).numpy(), np.tile(k.numpy(), 2))
    np.testing.assert_array_equal(k.repeat_interleave(2).numpy(), np.repeat(k.numpy(), 2))
    np.testing.assert_array_equal(dg.repeat_interleave(k, dg.tensor([2, 0]), dim=0).numpy(),
                                  np.repeat(k.numpy(), [2, 0], axis=0))
    assert k.repeat(0, 1).shape == (0, 2)


def test_repeat_interleave_tensor_repeats_is_eager_only():
    # The output's length depends on the repeats' values: dg.compile runs the signature
    # eagerly with a warning (strict=True refuses).
    def fn(x, r):
        return x.repeat_interleave(r, dim=0)

    x, r = dg.tensor(X), dg.tensor([1, 2])
    with pytest.raises(dg.TraceError):
        dg.compile(fn, strict=True)(x, r)
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        out = dg.compile(fn)(x, r)
    dg.testing.assert_close(out, fn(x, r))


def test_roll_flip_rot90_match_numpy():
    x = dg.tensor(X)
    np.testing.assert_array_equal(x.roll(5).numpy(), np.roll(X, 5))
    np.testing.assert_array_equal(x.roll((1, -5), (0, 2)).numpy(), np.roll(X, (1, -5), (0, 2)))
    np.testing.assert_array_equal(x.flip(-1, 0).numpy(), np.flip(X, (-1, 0)))
    np.testing.assert_array_equal(dg.flipud(x).numpy(), np.flipud(X))
    for k in range(-3, 6):
        np.testing.assert_array_equal(x.rot90(k, (2, 0)).numpy(), np.rot90(X, k, (2, 0)))
    assert dg.zeros(0, 3).flip(0).shape == (0, 3)


def test_tril_triu_keep_dtype_and_batch():
    b = dg.tensor(np.ones((2, 3, 3), bool))
    assert b.tril().dtype == np.bool_
    np.testing.assert_array_equal(b.triu(1).numpy(), np.triu(np.ones((3, 3), bool), 1)[None]
                                  .repeat(2, 0))
    k = dg.tensor([[1, 2, 3], [4, 5, 6]])
    assert k.tril(-1).dtype == np.int64
    np.testing.assert_array_equal(k.tril(-1).numpy(), np.tril(k.numpy(), -1))
    assert dg.zeros(0, 0).tril().shape == (0, 0)


def test_tril_inplace():
    x = dg.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
    y = x * 1.0
    assert y.tril_(1) is y
    np.testing.assert_array_equal(y.numpy(), np.tril(np.arange(9.0).reshape(3, 3), 1))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.tril(np.ones((3, 3)), 1))
    with pytest.raises(RuntimeError, match="leaf"):
        x.triu_()


def test_diag_diagonal_diag_embed_trace():
    m = dg.tensor(np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(m.diag(1).numpy(), np.diag(m.numpy(), 1))
    np.testing.assert_array_equal(dg.diag(dg.tensor([1, 2]), -1).numpy(), np.diag([1, 2], -1))
    assert m.diagonal(5).shape == (0,)
    assert m.trace().item() == np.trace(m.numpy()) and m.trace().dtype == np.int64
    e = dg.diag_embed(dg.tensor(X[0]), 1, 0, 2)
    assert e.shape == (5, 3, 5)
    np.testing.assert_array_equal(e.diagonal(1, 0, 2).numpy(), X[0])
    assert dg.zeros(0, 3).diagonal().shape == (0,)


def test_diagonal_double_backward():
    assert gradcheck(lambda x: (x.diagonal(0, 0, 1) ** 2).sum() * x.diag_embed(), X[0, :, :3])
    x = dg.tensor(X[0], requires_grad=True)
    (g,) = dg.grad((x.diagonal(1) ** 3).sum(), [x], create_graph=True)
    (gg,) = dg.grad(g.sum(), [x])
    expected = np.zeros_like(X[0])
    i = np.arange(3)
    expected[i, i + 1] = 6 * X[0][i, i + 1]
    dg.testing.assert_close(gg.numpy(), expected, rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)


def test_meshgrid_indexing():
    a, b, c = dg.tensor([1.0, 2.0]), dg.tensor([3.0, 4.0, 5.0]), dg.tensor(7.0)
    for indexing in ("ij", "xy"):
        got = dg.meshgrid(a, b, c, indexing=indexing)
        want = np.meshgrid(a.numpy(), b.numpy(), [7.0], indexing=indexing)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    with pytest.raises(ValueError, match="indexing"):
        dg.meshgrid(a, b, indexing="yx")


def test_stacks_match_numpy():
    a, b = np.arange(3.0), np.arange(3.0, 6.0)
    ta, tb = dg.tensor(a), dg.tensor(b)
    for fn, ref in [(dg.hstack, np.hstack), (dg.vstack, np.vstack), (dg.dstack, np.dstack),
                    (dg.column_stack, np.column_stack), (dg.row_stack, np.vstack)]:
        np.testing.assert_array_equal(fn([ta, tb]).numpy(), ref([a, b]))
    assert dg.atleast_2d(ta).shape == (1, 3)
    assert [t.shape for t in dg.atleast_1d(dg.tensor(1.0), ta)] == [(1,), (3,)]


def test_expand_as_type_as_reshape_as():
    x, k = dg.tensor(X), dg.tensor([1, 2, 3, 4])
    assert k.expand_as(x).shape == X.shape
    assert k.type_as(x).dtype == np.float64
    assert x.type_as(k).dtype == np.int64
    assert x.reshape_as(dg.zeros(4, 6)).shape == (4, 6)
    with pytest.raises(RuntimeError):
        k.expand_as(x).mul_(2)  # several elements share one memory location


def test_products_and_differences_match_numpy():
    a, b = np.array([1.0, -2.0, 0.5]), np.array([3.0, 0.25, -1.0])
    dg.testing.assert_close(dg.cross(dg.tensor(a), dg.tensor(b)).numpy(), np.cross(a, b), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(dg.outer(dg.tensor(a), dg.tensor(b)).numpy(), np.outer(a, b), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(dg.ger(dg.tensor(a), dg.tensor(b)).numpy(), np.outer(a, b), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(dg.kron(dg.tensor(a), dg.tensor(X[0])).numpy(), np.kron(a, X[0]),
                            rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(dg.tensor(X).diff(2, 1).numpy(), np.diff(X, 2, 1), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    np.testing.assert_array_equal(dg.diff(dg.tensor([True, False, False])).numpy(),
                                  [True, False])


def test_reshape_and_view_take_the_shape_by_keyword_as_torch_names_it():
    x = dg.tensor(X)
    for got in (x.reshape(shape=(6, 4)), dg.reshape(x, shape=[6, -1]), x.view(size=(6, 4))):
        np.testing.assert_array_equal(got.numpy(), X.reshape(6, 4))
    graph = dg.trace(lambda t: t.reshape(shape=(2, 12)) + t.view(size=(2, -1)), x)
    assert [v.shape for v in graph.outputs] == [(2, 12)]
    with pytest.raises(TypeError, match="multiple values for argument 'shape'"):
        x.reshape((6, 4), shape=(6, 4))
    with pytest.raises(TypeError, match="not both"):
        x.view(6, 4, size=(6, 4))


def test_view_dtype_reinterprets_bits():
    x = dg.tensor(np.array([[1.0, -2.5], [0.0, 7.0]], np.float32))
    np.testing.assert_array_equal(x.view(dg.int32).numpy(), x.numpy().view(np.int32))
    np.testing.assert_array_equal(x.view(np.int16).numpy(), x.numpy().view(np.int16))
    assert x.view(np.float64).shape == (2, 1)
    assert x.view(dtype=dg.float32) is x
    r = dg.tensor(X, requires_grad=True).view(dg.int64)
    assert not r.requires_grad and r.grad_fn is None
    with pytest.raises(RuntimeError, match="stride"):
        x.T.view(np.int16)
    with pytest.raises(RuntimeError, match="divisible"):
        dg.zeros(2, 3).view(dg.float64)
    with pytest.raises(RuntimeError, match="dim"):
        dg.tensor(1.0).view(np.int16)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("fn", "error", "match"), [
    (lambda x: x.flatten(0, 3), IndexError, "out of range"),
    (lambda x: x.flatten(2, 1), RuntimeError, "start_dim cannot come after end_dim"),
    (lambda x: x.unflatten(1, (2, 2)), RuntimeError, "multiply up"),
    (lambda x: x.movedim(3, 0), IndexError, "out of range"),
    (lambda x: x.movedim((0, 0), (1, 2)), RuntimeError, "repeated dim"),
    (lambda x: x.split([1, 1], 1), RuntimeError, "sum exactly to 3"),
    (lambda x: x.split(1, 3), IndexError, "out of range"),
    (lambda x: x.chunk(0), RuntimeError, "greater than 0"),
    (lambda x: x.narrow(2, 3, 2), RuntimeError, "exceeds dimension size"),
    (lambda x: x.unbind(-4), IndexError, "out of range"),
    (lambda x: x.repeat(2, 2), RuntimeError, "can not be smaller"),
    (lambda x: x.roll((1, 2), 0), RuntimeError, "align"),
    (lambda x: x.diagonal(0, 1, -2), RuntimeError, "cannot be identical"),
    (lambda x: x[0, 0].tril(), RuntimeError, "at least 2 dimensions"),
    (lambda x: x.diag(), RuntimeError, "1D or 2D"),
    (lambda x: x.rot90(1, (0, 0)), RuntimeError, "different"),
    (lambda x: dg.cross(x[:, :2], x[:, :2]), RuntimeError, "no dimension of size 3"),
    (lambda x: dg.cross(x[0, :, 0], x[:, :, 0]), RuntimeError, "number of dimensions"),
])
def test_errors_are_pytorchs(fn, error, match):
    with pytest.raises(error, match=match):
        fn(dg.tensor(X))
