"""The eager fast paths give the same bits as the general kernels they shortcut: addmm's
transposed product (``nn.Linear``'s shape), nll_loss without weights or ignored targets,
and the optimizer's in-place ``p -= lr * g`` (in float32 rounded once, as PyTorch's ``add_``
with ``alpha``, where BLAS's ``axpy`` takes it)."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager.internal import array_of, sub_scaled_, version_of
from dualgraph.ops import linalg as L
from dualgraph.ops import loss as N


@pytest.mark.parametrize("m,k,n", [(64, 784, 256), (8, 784, 256), (16, 1024, 1024),
                                   (64, 256, 10), (300, 300, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_addmm_transposed_product_matches_plain(m, k, n, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    out = L._addmm_impl(b, x, w.T)  # w.T is Fortran-ordered: the nn.Linear layout
    ref = x @ w.T + b
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert out.flags.c_contiguous
    dg.testing.assert_close(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12,
                            atol=1e-4 if dtype == np.float32 else 1e-10, equal_nan=True,
                            check_dtype=False)


def test_linear_layer_result_is_c_contiguous_and_grads_match():
    dg.manual_seed(0)
    lin = dg.nn.Linear(784, 256)
    x = dg.randn(32, 784, requires_grad=True)
    y = lin(x)
    assert y.grad_fn.name() == "AddmmBackward0"
    assert array_of(y).flags.c_contiguous
    y.sum().backward()
    dg.testing.assert_close(x.grad.numpy(), np.broadcast_to(
        lin.weight.numpy().sum(0), (32, 784)),
                            rtol=1e-4, atol=1e-4, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(lin.bias.grad.numpy(), np.full(256, 32.0), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("n,c", [(64, 10), (1, 3), (7, 5), (100, 37)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_nll_fast_path_matches_general_path(n, c, dtype, reduction):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, c)).astype(dtype)
    t = rng.integers(0, c, n)
    g = np.asarray(rng.standard_normal(), dtype)
    # An int weight of 1 takes the general path (masks and weights) with the same meaning.
    fast = N._nll_impl(x, t, 1.0, reduction=reduction)
    slow = N._nll_impl(x, t, 1, reduction=reduction)
    assert fast.dtype == slow.dtype and fast.shape == slow.shape == ()
    np.testing.assert_array_equal(fast, slow)
    bf = N._nll_backward_impl(g, t, 1.0, shape=(n, c), reduction=reduction)
    bs = N._nll_backward_impl(g, t, 1, shape=(n, c), reduction=reduction)
    assert bf.dtype == bs.dtype and bf.shape == (n, c)
    np.testing.assert_array_equal(bf, bs)


def test_nll_out_of_range_and_ignored_targets_still_take_the_general_path():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(IndexError, match="out of bounds"):
        N._nll_impl(x, np.array([0, 4, 1]), 1.0)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    # class 2 ignored: mean over the two others
    got = N._nll_impl(x, np.array([2, 1, 0]), 1.0, ignore_index=2)
    assert got == -(x[1, 1] + x[2, 0]) / 2


def test_sgd_step_updates_in_place_and_bumps_the_version():
    p = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    data = array_of(p)
    (p * p).sum().backward()
    opt = dg.optim.SGD([p], lr=0.5)
    v = version_of(p)
    opt.step()
    assert array_of(p) is data
    assert version_of(p) == v + 1
    np.testing.assert_array_equal(p.detach().numpy(), np.float32([0.0, 0.0, 0.0]))
    assert p.grad_fn is None and p.requires_grad


def test_sgd_update_rounds_once_as_torch_add_with_alpha():
    torch = pytest.importorskip("torch")
    dtype = np.float32
    rng = np.random.default_rng(3)
    for n in (1, 7, 1000, 4099):  # BLAS's vector loop and its scalar tail
        start = rng.standard_normal(n).astype(dtype)
        g = rng.standard_normal(n).astype(dtype)
        p = dg.tensor(start.copy())
        with dg.no_grad():
            assert sub_scaled_(p, dg.tensor(g), 0.01)
        want = torch.from_numpy(start.copy()).add_(torch.from_numpy(g), alpha=-0.01).numpy()
        np.testing.assert_array_equal(p.numpy(), want)
    # One rounding and two differ in about one element in ten thousand: here in some.
    start = rng.standard_normal((512, 512)).astype(dtype)
    g = rng.standard_normal((512, 512)).astype(dtype)
    p = dg.tensor(start.copy())
    with dg.no_grad():
        sub_scaled_(p, dg.tensor(g), 0.01)
    once = torch.from_numpy(start.copy()).add_(torch.from_numpy(g), alpha=-0.01).numpy()
    np.testing.assert_array_equal(p.numpy(), once)
    assert (once != start - g * dtype(0.01)).any()
    # A strided gradient is not BLAS's: the update is ``p.sub_(g * lr)``'s two roundings.
    p = dg.tensor(start.copy())
    gt = dg.tensor(g).T
    assert not array_of(gt).flags.c_contiguous
    with dg.no_grad():
        assert sub_scaled_(p, gt, 0.01)
    np.testing.assert_array_equal(p.numpy(), start - g.T * dtype(0.01))
    # float64 as the compiled float64 step (no contraction): two roundings.
    s64, g64 = start.astype(np.float64), g.astype(np.float64)
    p = dg.tensor(s64.copy())
    with dg.no_grad():
        assert sub_scaled_(p, dg.tensor(g64), 0.01)
    np.testing.assert_array_equal(p.numpy(), s64 - g64 * 0.01)


def test_sub_scaled_declines_what_it_cannot_do_exactly():
    p = dg.tensor([1.0, 2.0], requires_grad=True)
    g = dg.tensor([1.0, 1.0])
    assert not sub_scaled_(p, g, 0.5)  # grad mode on: the ops must be recorded
    with dg.no_grad():
        assert not sub_scaled_(p, g, np.float64(0.5))  # a NumPy scalar may promote
        assert not sub_scaled_(p, g.astype(np.float64), 0.5)
        assert not sub_scaled_(p, dg.tensor([1.0]), 0.5)
        assert sub_scaled_(p, g, 0.5)
    np.testing.assert_array_equal(p.detach().numpy(), np.float32([0.5, 1.5]))


def _binds_during(fn) -> list[str]:
    """The ops ``fn()`` binds (eagerly run)."""
    from dualgraph import modes
    from dualgraph.eager.tensor import eager_process

    seen: list[str] = []

    def record(op, args, attrs):
        seen.append(op.name)
        return eager_process(op, args, attrs)

    modes.push_mode(record)
    try:
        fn()
    finally:
        modes.pop_mode()
    return seen


def test_sgd_on_module_parameters_takes_the_in_place_path():
    # nn.Parameter is a Tensor subclass: the fast path once refused it (type(p) is Tensor),
    # so every nn step paid a product tensor and two dispatches per parameter.
    dg.manual_seed(0)
    lin = dg.nn.Linear(5, 3)
    lin(dg.randn(4, 5)).sum().backward()
    expected = [array_of(p) - array_of(p.grad) * np.float32(0.1) for p in lin.parameters()]
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)
    assert _binds_during(opt.step) == []
    for p, want in zip(lin.parameters(), expected):
        np.testing.assert_array_equal(array_of(p), want)


_SAME_WIDTH_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(_SAME_WIDTH_INT[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("zero", [0.0, 0])
def test_where_against_zero_selects_the_same_bits_as_np_where(dtype, zero):
    from dualgraph.ops.elementwise import _where_impl

    rng = np.random.default_rng(2)
    x = rng.standard_normal((7, 33)).astype(dtype)
    x.flat[:8] = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0]
    c = rng.standard_normal((7, 33)) > 0
    c.flat[:8] = [True] * 4 + [False] * 4  # the specials both kept and dropped
    c.flat[8:16] = [False] * 4 + [True] * 4
    for got, want in ((_where_impl(c, x, zero), np.where(c, x, zero)),
                      (_where_impl(c, zero, x), np.where(c, zero, x))):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.flags.c_contiguous and got.flags.owndata
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_where_fast_path_leaves_other_selects_to_np_where():
    from dualgraph.ops.elementwise import _where_impl

    x = np.array([[1.0, -2.0], [3.0, -4.0]], np.float32)
    c = x > 0
    # -0.0 is not all-zero bits; a broadcast condition and a strided operand keep
    # np.where's own layout rules.
    for args in ((c, x, -0.0), (c[0], x, 0.0), (c, x.T, 0.0), (c, x, 1.0)):
        got, want = _where_impl(*args), np.where(*args)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_relu_gradient_is_zero_where_the_output_is_zero_even_for_nan_gradients():
    x = dg.tensor([-1.0, 0.0, 2.0, 3.0], requires_grad=True)
    y = dg.relu(x)
    y.backward(dg.tensor([np.nan, np.inf, -0.0, np.nan]))
    np.testing.assert_array_equal(_bits(x.grad.numpy()),
                                  _bits(np.float32([0.0, 0.0, -0.0, np.nan])))
    assert x.grad.grad_fn is None
