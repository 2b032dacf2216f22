"""Pooling, padding, resampling and ``Tensor.unfold``: PyTorch's edge cases.

Ties, nans, unbatched and empty-batch inputs, non-contiguous inputs, errors (types and
PyTorch's messages), double backward, module reprs, and the same edge cases compiled. The
expected values were checked against torch 2.13 (the goldens in tests/goldens record the
general cases).
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn
from dualgraph.nn import functional as F
from dualgraph.testing import assert_close, gradcheck

from .._support.compiled import B3


def t(values, dtype=np.float64, rg: bool = False) -> dg.Tensor:
    return dg.tensor(np.asarray(values, dtype=dtype), requires_grad=rg)


# ----------------------------------------------------------------------- max pooling


def test_max_pool_ties_take_the_first_position():
    x = t([[[[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]]]], rg=True)
    v, i = F.max_pool2d(x, 2, stride=1, return_indices=True)
    assert i.tolist() == [[[[1, 1]]]]  # torch: both windows pick position 1
    assert i.dtype == np.int64
    v.sum().backward()
    assert x.grad.tolist() == [[[[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]]]


def test_max_pool_the_last_nan_wins():
    x = t([[[[np.nan, 1.0], [3.0, np.nan]]]])
    v, i = F.max_pool2d(x, 2, return_indices=True)
    assert np.isnan(v.item()) and i.item() == 3  # torch: index 3


def test_max_pool_integers_and_all_lowest_window():
    k = t([[[1, 2, 3], [4, 5, 6], [7, 8, 9]]], np.int64)
    v, i = F.max_pool2d(k, 2, 1, return_indices=True)
    assert v.dtype == np.int64 and v.tolist() == [[[5, 6], [8, 9]]]
    assert i.tolist() == [[[4, 5], [7, 8]]]
    low = np.iinfo(np.int64).min
    v, i = F.max_pool2d(t([[[low, low], [low, low]]], np.int64), 2, return_indices=True)
    assert v.item() == low and i.item() == 0


def test_overlapping_windows_add_gradients_in_float32_in_order():
    """Windows that overlap can share their max: the gradients add at that position in
    the gradient's dtype, in window order (as PyTorch's CPU kernel and the compiled scatter
    do), not in float64: 1e8 + 1 - 1e8 is 0 in float32."""
    from dualgraph.modes import bind
    from dualgraph.ops import OPS

    idx = np.zeros((1, 1, 1, 3), np.int64)  # three windows, one max position
    g = dg.tensor(np.array([[[[1e8, 1.0, -1e8]]]], np.float32))
    out = bind(OPS["pool_scatter"], g, dg.tensor(idx), size=(1, 2), source="max_pool2d")
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.numpy(), np.array([[[[0.0, 0.0]]]], np.float32))


def test_max_pool_padding_dilation_ceil_mode_shapes():
    x = dg.randn(1, 2, 5, 5)
    assert F.max_pool2d(x, 3, padding=1, ceil_mode=True, stride=2).shape == (1, 2, 3, 3)
    assert F.max_pool2d(x, 2, 1, dilation=2).shape == (1, 2, 3, 3)
    assert F.max_pool2d(x, (2, 1), ()).shape == (1, 2, 2, 5)  # empty stride: the kernel
    assert F.max_pool2d(dg.zeros(0, 2, 4, 4), 2).shape == (0, 2, 2, 2)


def test_max_pool_of_a_non_contiguous_input():
    a = np.arange(30.0).reshape(5, 6)
    x = dg.tensor(a).T[None]  # a transposed view: (1, 6, 5)
    expected = a.T.reshape(3, 2, 5)[:, :, :4].reshape(3, 2, 2, 2).max(axis=(1, 3))
    assert F.max_pool2d(x, 2).numpy()[0].tolist() == expected.tolist()


@pytest.mark.parametrize(("call", "kind", "message"), [
    (lambda x: F.max_pool2d(x, 2, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and "
     "dilation=1"),
    (lambda x: F.max_pool2d(x[0, 0], 2), RuntimeError,
     "non-empty 3D or 4D (batch mode) tensor expected for input"),
    (lambda x: F.max_pool2d(x, 2, stride=0), RuntimeError, "stride should not be zero"),
    (lambda x: F.max_pool2d(x, 2, dilation=0), RuntimeError,
     "dilation should be greater than zero"),
    (lambda x: F.max_pool2d(x[:, :, :1, :1], 2), RuntimeError,
     "Given input size: (2x1x1). Calculated output size: (2x0x0). Output size is too small"),
    (lambda x: F.avg_pool2d(x, 2, divisor_override=0), RuntimeError, "divisor must be not zero"),
    (lambda x: F.adaptive_avg_pool2d(x[0, 0], 3), RuntimeError,
     "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [5, 5]"),
    (lambda x: F.adaptive_avg_pool2d(x, (3, 3, 3)), RuntimeError, "output_size must be 2"),
    (lambda x: F.adaptive_avg_pool2d(x[:, :, :0], 3), RuntimeError,
     "Expected input to have non-zero size for non-batch dimensions"),
])
def test_pooling_errors_follow_pytorch(call, kind, message):
    with pytest.raises(kind) as info:
        call(dg.randn(1, 2, 5, 5))
    assert message in str(info.value)


# ----------------------------------------------------------------------- avg pooling


def test_avg_pool_divisors():
    x = dg.ones(1, 1, 3, 3, dtype=dg.float64)
    # Padding counts by default, except beyond the padding (ceil_mode's extra window).
    assert_close(F.avg_pool2d(x, 2, padding=1).numpy()[0, 0],
                 np.array([[0.25, 0.5], [0.5, 1.0]]))
    assert_close(F.avg_pool2d(x, 2, padding=1, count_include_pad=False).numpy(),
                 np.ones((1, 1, 2, 2)))
    assert_close(F.avg_pool2d(x, 2, ceil_mode=True).numpy()[0, 0],
                 np.array([[1.0, 1.0], [1.0, 1.0]]))
    assert_close(F.avg_pool2d(x, 3, divisor_override=2).numpy(), np.full((1, 1, 1, 1), 4.5))


def test_adaptive_windows_overlap_like_pytorch():
    x = dg.tensor(np.arange(5.0).reshape(1, 1, 5))
    # Windows [0,2), [1,4), [3,5) (floor/ceil of i*5/3): PyTorch's rule, overlapping.
    assert F.adaptive_avg_pool1d(x, 3).tolist() == [[[0.5, 2.0, 3.5]]]
    v, i = F.adaptive_max_pool1d(x, 3, return_indices=True)
    assert v.tolist() == [[[1.0, 3.0, 4.0]]] and i.tolist() == [[[1, 3, 4]]]
    assert F.adaptive_avg_pool2d(dg.ones(1, 2, 5, 5), (0, 3)).shape == (1, 2, 0, 3)


def test_avg_pool_keeps_a_nan_in_its_windows():
    x = dg.tensor(np.array([[[np.nan, 1.0, 1.0], [3.0, np.inf, 0.0], [1.0, 1.0, 2.0]]]))
    out = F.avg_pool2d(x, 2, ceil_mode=True).numpy()[0]
    assert np.isnan(out[0, 0]) and out[0, 1] == 0.5 and out[1].tolist() == [1.0, 2.0]
    up = F.interpolate(x[None], scale_factor=2, mode="bilinear").numpy()[0, 0]
    assert np.isfinite(up[5:, :2]).all()  # far from the nan and the inf


def test_avg_pool_rejects_integers():
    with pytest.raises(RuntimeError, match="floating point"):
        F.avg_pool2d(dg.tensor(np.ones((1, 2, 2), np.int64)), 2)


# ----------------------------------------------------------------------------- pad


def test_pad_constant_any_rank_and_crop():
    x = dg.tensor(np.arange(6.0).reshape(2, 3))
    assert F.pad(x, (1, -1)).tolist() == [[0.0, 0.0, 1.0], [0.0, 3.0, 4.0]]
    assert F.pad(x, (0, 0, 1, 0), value=9.0).tolist()[0] == [9.0, 9.0, 9.0]
    assert F.pad(dg.tensor(3.0), ()).item() == 3.0
    assert F.pad(dg.tensor([[1, 2]]), (1, 2), value=2.7).tolist() == [[2, 1, 2, 2, 2]]
    assert F.pad(x, (-3, 0)).shape == (2, 0)


def test_pad_circular_crops_before_it_wraps():
    x = dg.tensor(np.arange(5.0).reshape(1, 1, 5))
    assert F.pad(x, (-1, 2), mode="circular").tolist() == [[[1.0, 2.0, 3.0, 4.0, 1.0, 2.0]]]
    assert F.pad(x, (4, -1), mode="reflect").tolist() == [[[4.0, 3.0, 2.0, 1.0, 0.0, 1.0, 2.0,
                                                            3.0]]]
    assert F.pad(x, (-1, 2), mode="replicate").tolist() == [[[1.0, 2.0, 3.0, 4.0, 4.0, 4.0]]]


@pytest.mark.parametrize(("call", "kind", "message"), [
    (lambda x: F.pad(x, (1, 2, 3)), RuntimeError, "Padding length must be divisible by 2"),
    (lambda x: F.pad(x, (1,) * 8), RuntimeError,
     "Padding length should be less than or equal to two times the input dimension"),
    (lambda x: F.pad(x, (-3, -3)), RuntimeError, "resulted in a negative output size"),
    (lambda x: F.pad(x, (5, 0), mode="reflect"), RuntimeError,
     "Padding size should be less than the corresponding input dimension"),
    (lambda x: F.pad(x, (6, 0), mode="circular"), RuntimeError,
     "Padding value causes wrapping around more than once."),
    (lambda x: F.pad(x[0, 0], (1, 1), mode="reflect"), NotImplementedError,
     "Padding size 2 is not supported for 1D input tensor."),
    (lambda x: F.pad(x, (1, 1), mode="foo"), NotImplementedError, "Unrecognised padding mode foo"),
    (lambda x: F.pad(x, (1, 1), mode="reflect", value=1.0), RuntimeError,
     "doesn't take in value argument"),
])
def test_pad_errors_follow_pytorch(call, kind, message):
    with pytest.raises(kind) as info:
        call(dg.randn(1, 2, 5))
    assert message in str(info.value)


# -------------------------------------------------------------------------- unfold


def test_unfold_shapes_and_overlapping_gradient():
    x = dg.tensor(np.arange(7.0), requires_grad=True)
    w = x.unfold(0, 3, 2)
    assert w.tolist() == [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]]
    assert w.grad_fn.name() == "UnfoldBackward0"
    w.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 2.0, 1.0, 2.0, 1.0, 1.0]
    assert dg.randn(2, 3, 7).unfold(-1, 0, 1).shape == (2, 3, 8, 0)
    assert dg.tensor(5.0).unfold(0, 1, 1).shape == (1,)


@pytest.mark.parametrize(("call", "kind", "message"), [
    (lambda x: x.unfold(2, 8, 1), RuntimeError,
     "maximum size for tensor at dimension 2 is 7 but size is 8"),
    (lambda x: x.unfold(2, 3, 0), RuntimeError, "step is 0 but must be > 0"),
    (lambda x: x.unfold(3, 3, 1), IndexError, "out of range"),
])
def test_unfold_errors_follow_pytorch(call, kind, message):
    with pytest.raises(kind, match=message):
        call(dg.randn(2, 3, 7))


# --------------------------------------------------------------------- interpolate


def test_interpolate_nearest_uses_float32_source_positions():
    x = dg.tensor(np.arange(3.0).reshape(1, 1, 3))
    assert F.interpolate(x, scale_factor=2.5).tolist() == [[[0.0, 0.0, 0.0, 1.0, 1.0, 2.0,
                                                             2.0]]]
    out = F.interpolate(x, size=7, mode="linear").numpy().ravel()
    assert_close(out, np.array([0.0, 1 / 7, 4 / 7, 1.0, 10 / 7, 13 / 7, 2.0]), rtol=1e-6,
                 atol=1e-12)


@pytest.mark.parametrize(("call", "kind", "message"), [
    (lambda x: F.interpolate(x), ValueError, "either size or scale_factor should be defined"),
    (lambda x: F.interpolate(x, size=3, scale_factor=2), ValueError, "only one of size"),
    (lambda x: F.interpolate(x, size=3, align_corners=True), ValueError,
     "align_corners option can only be set with the interpolating modes"),
    (lambda x: F.interpolate(x[0], size=3, mode="bilinear"), NotImplementedError,
     "Got 3D input, but bilinear mode needs 4D input"),
    (lambda x: F.interpolate(x, size=(3, 4, 5)), ValueError,
     "Input and output must have the same number of spatial dimensions"),
    (lambda x: F.interpolate(x, size=3, mode="linear"), NotImplementedError,
     "Got 4D input, but linear mode needs 3D input"),
])
def test_interpolate_errors_follow_pytorch(call, kind, message):
    with pytest.raises(kind) as info:
        call(dg.randn(1, 2, 5, 5))
    assert message in str(info.value)


# ------------------------------------------------------------------------- modules


def test_module_reprs_match_pytorch():
    assert repr(nn.MaxPool2d(2)) == ("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, "
                                     "ceil_mode=False)")
    assert repr(nn.AvgPool2d(3, 1, 1)) == "AvgPool2d(kernel_size=3, stride=1, padding=1)"
    assert repr(nn.AvgPool1d(2)) == "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    assert repr(nn.AdaptiveAvgPool2d((3, None))) == "AdaptiveAvgPool2d(output_size=(3, None))"
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(nn.Unflatten(1, (2, 3))) == "Unflatten(dim=1, unflattened_size=(2, 3))"
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.Upsample(size=(3, 4), mode="bilinear")) == ("Upsample(size=(3, 4), "
                                                               "mode='bilinear')")


def test_flatten_unflatten_errors():
    x = dg.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        nn.Flatten(2, 1)(x)
    with pytest.raises(RuntimeError, match=r"Provided sizes \[3, 2\] don't multiply up"):
        nn.Unflatten(1, (3, 2))(x)
    assert nn.Flatten(0, -1)(x).shape == (24,)


# ----------------------------------------------------------------- double backward


@pytest.mark.parametrize("fn", [
    lambda x: F.max_pool2d(x, 2, 1),
    lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
    lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"),
    lambda x: F.pad(x, (1, -1), value=0.5),
    lambda x: x.unfold(-1, 2, 1),
    lambda x: F.interpolate(x, scale_factor=2),
], ids=["max", "avg", "adaptive_avg", "reflect", "constant", "unfold", "nearest"])
def test_double_backward(fn):
    def first(x):
        x = x if x.requires_grad else x.detach().requires_grad_(True)
        (g,) = dg.grad((fn(x) ** 3).sum(), [x], create_graph=True)
        return g

    x = (np.random.default_rng(3).permutation(40) * 0.25 - 5.0).reshape(1, 2, 4, 5)
    assert gradcheck(first, x)


# -------------------------------------------------------------------------- compiled


def test_compiled_edge_cases_equal_eager():
    def f(x, k):
        v, i = F.max_pool2d(x, 2, 1, return_indices=True)
        return (v, i, F.max_pool2d(k, 2, 1), F.avg_pool2d(x, 2, ceil_mode=True),
                F.pad(x, (-2, -1)), F.pad(k, (1, 1), value=3),
                F.interpolate(x, scale_factor=2, mode="bilinear"))

    x = np.array([[[[np.nan, 1.0, 1.0], [3.0, np.nan, 0.0], [1.0, 1.0, 2.0]]]])
    k = np.array([[[1, 5, 5], [5, 0, 2]]], np.int64)
    compiled = dg.compile(f)
    eager = f(dg.tensor(x), dg.tensor(k))
    out = compiled(dg.tensor(x), dg.tensor(k))
    for a, e in zip(out, eager):
        assert_close(a.numpy(), e.numpy(), **B3[e.dtype], equal_nan=True)
    assert out[1].tolist() == [[[[4, 4], [4, 4]]]]  # the nan (position 4) wins every window
    assert compiled.stats.kernels == 1


def test_fractional_max_pool2d_gradient_errors_and_module():
    rng = np.random.default_rng(4)
    x = rng.permutation(2 * 2 * 7 * 6).reshape(2, 2, 7, 6) * 0.1  # distinct: no ties
    u = dg.tensor(rng.random((2, 2, 2)))
    assert gradcheck(lambda t: F.fractional_max_pool2d(t, (2, 3), output_size=(3, 2),
                                                       _random_samples=u), x)
    out, idx = F.fractional_max_pool2d(dg.tensor(x), 2, output_ratio=(0.5, 0.5),
                                       return_indices=True, _random_samples=u)
    assert out.shape == idx.shape == (2, 2, 3, 3) and idx.dtype == dg.int64
    assert_close(out.numpy(), np.take_along_axis(x.reshape(2, 2, -1), idx.numpy().reshape(
        2, 2, -1), -1).reshape(out.shape))
    with pytest.raises(RuntimeError, match="too large"):
        F.fractional_max_pool2d(dg.tensor(x), 3, output_size=(6, 6))
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(dg.tensor(x), 2)
    with pytest.raises(RuntimeError, match="_random_samples of shape"):
        F.fractional_max_pool2d(dg.tensor(x), 2, output_size=3, _random_samples=u[:1])
    with pytest.raises(dg.TraceError, match="run this part eagerly"):
        dg.trace(lambda t: F.fractional_max_pool2d(t, 2, output_size=3), dg.tensor(x))
    pool = nn.FractionalMaxPool2d(2, output_size=3)
    assert pool(dg.tensor(x)).shape == (2, 2, 3, 3)
