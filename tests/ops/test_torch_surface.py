"""PyTorch surface that programs use: clip, shift methods, ``out=``, ``scatter(reduce=)``,
gated and pixel layers, volumetric conv and pooling, unpooling, resampling modes,
grouped-query attention, ``pos_weight``; eager behaviour and errors (forward and gradients
are in the case table, PyTorch's values in ``surface_goldens.json``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.testing import assert_close


def test_clip_and_clamp_spellings():
    x = dg.tensor([-2.0, 0.5, 3.0])
    for y in (x.clip(-1, 1), dg.clip(x, -1, 1), dg.clamp(x, -1, 1), dg.clamp(x, max=1.0)
              .clamp(min=-1.0)):
        assert_close(y.numpy(), np.float32([-1.0, 0.5, 1.0]))
    z = x.clone()
    assert z.clip_(max=0.0) is z
    assert_close(z.numpy(), np.float32([-2.0, 0.0, 0.0]))


def test_shift_methods_and_operators():
    x = dg.tensor([1, -8, 3])
    assert x.bitwise_left_shift(2).tolist() == [4, -32, 12]
    assert x.bitwise_right_shift(1).tolist() == [0, -4, 1]
    assert dg.bitwise_left_shift(x, dg.tensor([0, 1, 2])).tolist() == [1, -16, 12]
    y = x.clone()
    y <<= 1
    assert y.tolist() == [2, -16, 6]
    y >>= 2
    assert y.tolist() == [0, -4, 1]
    assert y.bitwise_left_shift_(3) is y and y.tolist() == [0, -32, 8]


def test_out_writes_into_out_and_returns_it():
    out = dg.zeros(3)
    r = dg.add(dg.ones(3), dg.tensor([1.0, 2.0, 3.0]), out=out)
    assert r is out
    assert_close(out.numpy(), np.float32([2, 3, 4]))
    dg.exp(dg.zeros(3), out=out)
    assert_close(out.numpy(), np.ones(3, np.float32))
    # An int result into a float out is cast, as PyTorch's can_cast allows.
    dg.mul(dg.tensor([1, 2, 3]), 2, out=out)
    assert_close(out.numpy(), np.float32([2, 4, 6]))


def test_out_is_resized_with_a_warning_unless_empty():
    out = dg.zeros(5)
    with pytest.warns(UserWarning, match="was resized"):
        dg.sub(dg.ones(2), 1, out=out)
    assert out.shape == (2,)
    empty = dg.zeros(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dg.sqrt(dg.ones(2, 3), out=empty)
    assert empty.shape == (2, 3)


def test_out_is_not_differentiable_and_checks_dtype():
    x = dg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        dg.mul(x, 2, out=dg.zeros(2))
    with dg.no_grad():
        assert_close(dg.mul(x, 2, out=dg.zeros(2)).numpy(), np.float32([2, 2]))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        dg.add(dg.ones(2), 0.5, out=dg.zeros(2, dtype=dg.int64))
    with pytest.raises(TypeError, match="argument 'out' must be Tensor"):
        dg.add(dg.ones(2), 1, out=np.zeros(2))


def test_scatter_reduce_argument():
    x = dg.ones(2, 3)
    idx = dg.tensor([[0, 1, 0], [0, 1, 1]])
    src = dg.tensor([[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]])
    assert x.scatter(0, idx, src, reduce="add").tolist() == [[8.0, 1.0, 5.0], [1.0, 10.0, 8.0]]
    assert x.scatter(0, idx, src, reduce="multiply").tolist() == [[10.0, 1.0, 4.0],
                                                                   [1.0, 18.0, 7.0]]
    assert dg.scatter(x, 1, idx[:1], 5.0, reduce="multiply").tolist() == [[25.0, 5.0, 1.0],
                                                                          [1.0, 1.0, 1.0]]
    y = dg.ones(2, 3)
    assert y.scatter_(0, idx, 1.5, reduce="add") is y
    assert y.tolist() == [[4.0, 1.0, 2.5], [1.0, 4.0, 2.5]]
    with pytest.raises(RuntimeError, match="either add or multiply"):
        x.scatter(0, idx, src, reduce="mean")


def test_glu_and_pixel_shuffle_errors():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(dg.ones(2, 3))
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(dg.ones(1, 3, 2, 2), 2)
    with pytest.raises(RuntimeError, match="divisible by downscale_factor"):
        F.pixel_unshuffle(dg.ones(1, 1, 3, 2), 2)
    x = dg.tensor(np.arange(32.0, dtype=np.float32).reshape(2, 4, 2, 2))
    assert_close(dg.nn.PixelUnshuffle(2)(dg.nn.PixelShuffle(2)(x)).numpy(), x.numpy())
    assert dg.nn.GLU(1)(x).shape == (2, 2, 2, 2)


def test_bce_with_logits_weight_and_pos_weight():
    x = dg.tensor([[0.5, -1.0], [2.0, 0.1]], dtype=dg.float64)
    y = dg.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=dg.float64)
    pw = dg.tensor([3.0, 0.5], dtype=dg.float64)
    w = dg.tensor([[1.0, 2.0], [0.5, 1.0]], dtype=dg.float64)
    xn, yn = x.numpy(), y.numpy()
    ref = (1 - yn) * xn + (1 + (pw.numpy() - 1) * yn) * np.logaddexp(0, -xn)
    got = F.binary_cross_entropy_with_logits(x, y, w, reduction="none", pos_weight=pw)
    assert_close(got.numpy(), ref * w.numpy())
    loss = dg.nn.BCEWithLogitsLoss(pos_weight=pw)(x, y)
    assert_close(loss.numpy(), ref.mean())
    # Without pos_weight the value is unchanged (a pos_weight of ones agrees).
    plain = F.binary_cross_entropy_with_logits(x, y, reduction="sum")
    ones = F.binary_cross_entropy_with_logits(x, y, reduction="sum", pos_weight=dg.ones(2))
    assert_close(plain.numpy(), ones.numpy().astype(np.float64))


def test_cat_skips_one_dimensional_empty_tensors_as_torch():
    x = dg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), requires_grad=True)
    # a result grown from torch.empty(0), beside tensors of another rank, on any dim
    out = dg.cat((dg.empty(0), x * 2, dg.empty(0)))
    assert out.shape == (2, 3)
    assert dg.cat((dg.empty(0), x), dim=-1).shape == (2, 3)
    # the skipped tensors still take part in type promotion
    assert dg.cat((dg.empty(0, dtype=dg.float64), x)).dtype == dg.float64
    assert dg.cat((dg.empty(0), dg.empty(0))).shape == (0,)
    out.sum().backward()
    assert_close(x.grad.numpy(), np.full((2, 3), 2.0, np.float32))
    with pytest.raises(dg.ShapeError, match="differ outside axis"):
        dg.cat((dg.empty(0, 3), x[:, :2]))
    f = dg.compile(lambda a: dg.cat((dg.empty(0), a + 1, a)).sum(0))
    assert_close(f(x.detach()).numpy(), (2 * x.detach() + 1).sum(0).numpy())


def test_sdpa_grouped_query_attention_repeats_kv_heads():
    rng = np.random.default_rng(0)
    q = dg.tensor(rng.standard_normal((2, 4, 3, 5)))
    k = dg.tensor(rng.standard_normal((2, 2, 6, 5)))
    v = dg.tensor(rng.standard_normal((2, 2, 6, 5)))
    got = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    rep = lambda t: dg.tensor(np.repeat(t.numpy(), 2, axis=1))  # noqa: E731
    want = F.scaled_dot_product_attention(q, rep(k), rep(v))
    assert_close(got.numpy(), want.numpy())
    with pytest.raises(RuntimeError, match="must divide"):
        F.scaled_dot_product_attention(q, k[:, :1].expand(2, 3, 6, 5), v[:, :1].expand(
            2, 3, 6, 5), enable_gqa=True)


def test_interpolate_modes_and_errors():
    x = dg.tensor(np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 1, 2, 3, 4))
    up = F.interpolate(x, scale_factor=2, mode="nearest")
    assert_close(up.numpy(), x.numpy().repeat(2, 2).repeat(2, 3).repeat(2, 4))
    assert F.interpolate(x, size=(3, 5, 7), mode="trilinear").shape == (1, 1, 3, 5, 7)
    area = F.interpolate(x[:, :, 0], size=(1, 2), mode="area")
    assert_close(area.numpy(), np.float32([[[[4.5, 6.5]]]]))
    with pytest.raises(NotImplementedError, match="trilinear mode needs 5D"):
        F.interpolate(x[:, :, 0], size=(2, 2), mode="trilinear")
    with pytest.raises(NotImplementedError, match="bicubic mode needs 4D"):
        F.interpolate(x, size=(2, 2, 2), mode="bicubic")


def test_volumetric_layers_shapes_and_errors():
    dg.manual_seed(0)
    x = dg.randn(2, 3, 5, 6, 7)
    conv = dg.nn.Conv3d(3, 4, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1))
    assert conv.weight.shape == (4, 3, 3, 2, 3)
    assert conv(x).shape == (2, 4, 5, 3, 7)
    assert conv(x[0]).shape == (4, 5, 3, 7)  # unbatched
    convt = dg.nn.ConvTranspose3d(3, 2, 3, stride=2, padding=1, output_padding=1)
    assert convt.weight.shape == (3, 2, 3, 3, 3)
    assert convt(x).shape == (2, 2, 10, 12, 14)
    assert dg.nn.MaxPool3d(2)(x).shape == (2, 3, 2, 3, 3)
    assert dg.nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True)(x).shape == (2, 3, 3, 4, 4)
    with pytest.raises(RuntimeError, match="4D or 5D"):
        F.avg_pool3d(dg.ones(2, 2, 2), 2)
    pooled, idx = F.max_pool3d(x, 2, return_indices=True)
    assert pooled.shape == idx.shape == (2, 3, 2, 3, 3) and idx.dtype == dg.int64
    with pytest.raises(RuntimeError, match="expected a 5-D weight"):
        F.conv3d(x, dg.ones(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="channels"):
        F.conv3d(x, dg.ones(4, 2, 1, 1, 1))


def test_max_unpool_inverts_max_pool():
    x = dg.tensor(np.random.default_rng(1).permutation(2 * 3 * 6 * 8).astype(np.float32)
                  .reshape(2, 3, 6, 8))
    pooled, idx = dg.nn.MaxPool2d(2, return_indices=True)(x)
    back = dg.nn.MaxUnpool2d(2)(pooled, idx)
    assert back.shape == (2, 3, 6, 8)
    # Every max is back at its place, everything else is zero.
    assert_close(dg.nn.MaxPool2d(2)(back).numpy(), pooled.numpy())
    assert int((back.numpy() != 0).sum()) == pooled.numel()
    assert F.max_unpool2d(pooled, idx, 2, output_size=(7, 9)).shape == (2, 3, 7, 9)
    with pytest.raises(RuntimeError, match="shape of indices"):
        F.max_unpool2d(pooled, idx[:, :1], 2)


def test_value_dependent_shapes_run_eagerly_and_refuse_a_full_graph():
    """docs/compile.md: a compiled call that meets nonzero/masked_select runs eagerly with
    a warning (``fullgraph=True`` raises TraceError); selecting outside the compiled
    function keeps the rest compiled."""
    x = dg.tensor([1.0, -2.0, 3.0])
    for fn in (lambda t: dg.masked_select(t, t > 0), lambda t: dg.nonzero(t),
               lambda t: t[t > 0].sum()):
        with pytest.warns(RuntimeWarning, match="depends on the data"):
            got = dg.compile(fn)(x)
        dg.testing.assert_close(got, fn(x))
        with pytest.raises(dg.TraceError):
            dg.compile(fn, fullgraph=True)(x)

    @dg.compile
    def total(values):
        return (values * 2).sum()

    assert total(dg.masked_select(x, x > 0)).item() == 8.0  # selection made eagerly
    assert dg.compile(lambda t: dg.where(t > 0, t, 0.0).sum())(x).item() == 4.0


def test_layers_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
    for mode in ("zeros", "replicate", "reflect", "circular"):
        dg.manual_seed(0)
        ours = dg.nn.Conv3d(2, 4, 3, padding=1, padding_mode=mode)
        theirs = torch.nn.Conv3d(2, 4, 3, padding=1, padding_mode=mode)
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
            theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
        assert_close(ours(dg.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                     rtol=1e-5, atol=1e-5)


def _compiled_vs_eager(fn, arrays, rtol=1e-10, atol=1e-12):
    """Outputs and input gradients of ``fn`` compiled equal eager (float64), one trace."""
    def run(f):
        ts = [dg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = f(*ts)
        out.backward()
        return out.numpy(), [t.grad.numpy() for t in ts if t.requires_grad]

    compiled = dg.compile(fn)
    (e, eg), (c, cg) = run(fn), run(compiled)
    assert_close(c, e, rtol=rtol, atol=atol)
    for a, b in zip(cg, eg):
        assert_close(a, b, rtol=rtol, atol=atol)
    assert compiled.stats.traces == 1


def test_surface_compositions_compiled_equal_eager():
    rng = np.random.default_rng(5)

    def f(x, q, k, p, y):
        idx = dg.tensor([[0, 1, 0, 1]])
        parts = (F.glu(x, 1).sum(), F.pixel_unshuffle(F.pixel_shuffle(x, 2) * 2.0, 2).pow(2)
                 .sum(), F.scaled_dot_product_attention(q, k, k, enable_gqa=True).sum(),
                 F.binary_cross_entropy_with_logits(p, y, pos_weight=y[0] + 0.5),
                 F.interpolate(x, scale_factor=1.5, mode="nearest-exact").pow(2).sum(),
                 x.clip(-0.5, 0.5).sum(),
                 x[0, :2, 0].scatter(0, idx[:, :2], x[0, 2:, 0, :2], reduce="multiply").sum())
        total = parts[0]
        for t in parts[1:]:
            total = total + t
        return total

    arrays = [rng.standard_normal((2, 4, 2, 4)), rng.standard_normal((1, 4, 3, 4)),
              rng.standard_normal((1, 2, 5, 4)), rng.standard_normal((3, 4)),
              rng.uniform(0, 1, (3, 4))]
    _compiled_vs_eager(f, arrays)


@pytest.mark.slow
@pytest.mark.parametrize("fn", [
    lambda x, w: F.conv3d(x, w, stride=(2, 1, 1), padding=1, groups=2).pow(2).sum(),
    lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1,
                                    groups=2).pow(2).sum(),
    lambda x, w: F.avg_pool3d(x * w.sum(), 3, 2, 1, ceil_mode=True,
                              count_include_pad=False).pow(2).sum(),
    lambda x, w: F.max_pool3d(x * w.sum(), 2).pow(2).sum(),
    lambda x, w: F.interpolate(x * w.sum(), scale_factor=1.5, mode="trilinear").pow(2).sum(),
    lambda x, w: F.max_unpool2d(*F.max_pool2d(x[:, :, 0] * w.sum(), 2, return_indices=True),
                                2).pow(2).sum(),
], ids=["conv3d", "conv_transpose3d", "avg_pool3d", "max_pool3d", "trilinear",
        "max_unpool2d"])
def test_volumetric_compiled_equal_eager(fn):
    rng = np.random.default_rng(6)
    _compiled_vs_eager(fn, [rng.standard_normal((1, 2, 3, 4, 4)),
                            rng.standard_normal((2, 1, 2, 2, 2))])
