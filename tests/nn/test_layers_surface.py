"""The loss and layer modules over the functional forms of test_functional_surface.py:
constructors, reprs and errors as torch's, random layers' statistics, lazy
initialisation, and one compiled training step that runs many of them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

nn, F = dg.nn, dg.nn.functional


def test_loss_modules_call_their_functional_forms() -> None:
    dg.manual_seed(0)
    x, y, z = dg.randn(4, 3), dg.randn(4, 3), dg.randn(4, 3)
    t = dg.tensor([1.0, -1.0, 1.0, -1.0])
    cls = dg.tensor([0, 2, 1, 2])
    pairs = [
        (nn.MarginRankingLoss(0.2)(x[:, 0], y[:, 0], t),
         F.margin_ranking_loss(x[:, 0], y[:, 0], t, 0.2)),
        (nn.HingeEmbeddingLoss(reduction="sum")(x, dg.ones(4, 3)),
         F.hinge_embedding_loss(x, dg.ones(4, 3), reduction="sum")),
        (nn.CosineEmbeddingLoss(0.1)(x, y, t), F.cosine_embedding_loss(x, y, t, 0.1)),
        (nn.MultiMarginLoss(p=2)(x, cls), F.multi_margin_loss(x, cls, p=2)),
        (nn.MultiLabelSoftMarginLoss()(x, (y > 0).float()),
         F.multilabel_soft_margin_loss(x, (y > 0).float())),
        (nn.PoissonNLLLoss(full=True)(x, y.abs() * 3),
         F.poisson_nll_loss(x, y.abs() * 3, full=True)),
        (nn.GaussianNLLLoss()(x, y, z.abs()), F.gaussian_nll_loss(x, y, z.abs())),
        (nn.TripletMarginLoss(swap=True)(x, y, z), F.triplet_margin_loss(x, y, z, swap=True)),
        (nn.TripletMarginWithDistanceLoss(margin=0.5)(x, y, z),
         F.triplet_margin_with_distance_loss(x, y, z, margin=0.5)),
    ]
    for got, want in pairs:
        assert_close(got, want)
    assert nn.NLLLoss2d()(F.log_softmax(dg.randn(2, 3, 2, 2), 1), dg.zeros(2, 2, 2).long()) \
        .shape == ()


def test_loss_errors_are_torchs() -> None:
    x = dg.randn(3, 4)
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, x, -dg.ones(3, 4))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, x, dg.ones(2))
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        nn.TripletMarginLoss(margin=0.0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_loss(x, x, x[0])
    with pytest.raises(RuntimeError, match="All input tensors should have same dimension"):
        F.margin_ranking_loss(x, x, dg.ones(3))
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.hinge_embedding_loss(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(F.log_softmax(dg.randn(5, 2, 3), 2), dg.ones(2, 2).long(), [5, 5], [2, 2],
                   blank=3)


def test_ctc_loss_accepts_concatenated_targets_and_unbatched_input() -> None:
    dg.manual_seed(1)
    lp = F.log_softmax(dg.randn(6, 2, 4), 2)
    padded = dg.tensor([[1, 2, 3], [2, 2, 0]])
    flat = dg.tensor([1, 2, 3, 2, 2])
    a = F.ctc_loss(lp, padded, [6, 5], [3, 2], reduction="none")
    b = F.ctc_loss(lp, flat, dg.tensor([6, 5]), dg.tensor([3, 2]), reduction="none")
    assert_close(a, b)
    single = F.ctc_loss(lp[:, 1], dg.tensor([2, 2]), 5, 2, reduction="none")
    assert single.shape == () and math.isclose(single.item(), a[1].item(), rel_tol=1e-6)
    # An impossible alignment (too short) is inf, or 0 with zero_infinity.
    assert F.ctc_loss(lp, padded, [2, 2], [3, 2], reduction="none")[0].item() == math.inf
    assert F.ctc_loss(lp, padded, [2, 2], [3, 2], zero_infinity=True,
                      reduction="none")[0].item() == 0.0


def test_layer_modules_shapes_and_reprs() -> None:
    dg.manual_seed(0)
    bil = nn.Bilinear(3, 4, 5)
    assert bil.weight.shape == (5, 3, 4) and bil.bias.shape == (5,)
    assert bil(dg.randn(2, 3), dg.randn(2, 4)).shape == (2, 5)
    assert repr(bil) == "Bilinear(in1_features=3, in2_features=4, out_features=5, bias=True)"
    bound = 1 / math.sqrt(3)
    assert np.abs(bil.weight.numpy()).max() <= bound
    rms = nn.RMSNorm(4)
    assert rms.weight.shape == (4,) and repr(rms) == "RMSNorm((4,), eps=None, " \
        "elementwise_affine=True)"
    assert nn.RMSNorm([2, 4], elementwise_affine=False).weight is None
    assert repr(nn.LocalResponseNorm(2)) == "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)"
    assert repr(nn.ChannelShuffle(2)) == "ChannelShuffle(groups=2)"
    assert nn.AdaptiveAvgPool3d(1)(dg.randn(2, 3, 4, 4, 4)).shape == (2, 3, 1, 1, 1)
    out, idx = nn.AdaptiveMaxPool3d((1, 2, 2), return_indices=True)(dg.randn(3, 2, 4, 4))
    assert out.shape == idx.shape == (3, 1, 2, 2)
    assert nn.LPPool2d(2, 2)(dg.rand(1, 2, 4, 4)).shape == (1, 2, 2, 2)
    assert nn.LPPool1d(1, 2)(dg.rand(2, 4)).shape == (2, 2)
    assert nn.UpsamplingNearest2d(scale_factor=2)(dg.ones(1, 1, 2, 2)).shape == (1, 1, 4, 4)
    assert nn.InstanceNorm3d(2)(dg.randn(1, 2, 2, 3, 3)).shape == (1, 2, 2, 3, 3)
    with pytest.raises(ValueError, match="expected input to be 3D or 4D"):
        nn.Softmax2d()(dg.ones(2, 2))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(dg.ones(1, 5, 2), 2)
    with pytest.raises(ValueError, match="Expected 3D or higher"):
        F.local_response_norm(dg.ones(2, 3), 2)


def test_lazy_linear_takes_its_input_size_on_the_first_call() -> None:
    dg.manual_seed(0)
    lazy = nn.LazyLinear(3)
    held = list(lazy.parameters())
    opt = dg.optim.SGD(lazy.parameters(), lr=0.1)
    y = lazy(dg.randn(2, 5))
    assert type(lazy) is nn.Linear and lazy.in_features == 5 and y.shape == (2, 3)
    assert lazy.weight is held[0] and lazy.weight.shape == (3, 5)
    assert np.abs(lazy.weight.numpy()).max() <= 1 / math.sqrt(5)
    y.sum().backward()
    before = lazy.weight.numpy().copy()
    opt.step()  # the optimizer built before the first call updates the filled parameters
    assert not np.array_equal(before, lazy.weight.numpy())


def test_random_layers() -> None:
    dg.manual_seed(3)
    x = -dg.ones(200, 50)
    slopes = -F.rrelu(x, 0.1, 0.3, training=True).numpy()
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3 and abs(slopes.mean() - 0.2) < 0.01
    assert_close(F.rrelu(x, 0.1, 0.3), x * 0.2)
    assert_close(nn.RReLU(0.1, 0.3).eval()(x), x * 0.2)
    # Alpha dropout keeps zero-mean unit-variance input near zero mean and unit variance.
    z = dg.randn(400, 400)
    out = F.alpha_dropout(z, 0.3, training=True).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    assert F.alpha_dropout(z, 0.3) is z  # off unless training, as torch's default
    feat = F.feature_alpha_dropout(dg.randn(8, 16, 5), 0.5, training=True).numpy()
    dropped = np.isclose(feat, feat[..., :1]).all(-1)  # a dropped channel is one value
    assert dropped.any() and not dropped.all()
    assert isinstance(nn.AlphaDropout(0.2).eval()(z), dg.Tensor)
    # Gumbel-softmax: soft samples sum to 1; hard ones are one-hot with the soft gradient.
    logits = dg.randn(6, 5, requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    assert_close(soft.sum(-1), dg.ones(6))
    hard = F.gumbel_softmax(logits, hard=True)
    assert set(np.unique(hard.detach().numpy())) == {0.0, 1.0}
    assert_close(hard.sum(-1), dg.ones(6))
    (hard * dg.arange(5.0)).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0
    dg.manual_seed(7)
    a = F.gumbel_softmax(logits.detach())
    dg.manual_seed(7)
    assert_close(a, F.gumbel_softmax(logits.detach()))


def test_in_place_activations_write_their_input() -> None:
    x = dg.tensor([-1.0, 0.5, 2.0])
    assert F.relu_(x) is x and x.tolist() == [0.0, 0.5, 2.0]
    y = dg.tensor([-1.0, 2.0])
    F.leaky_relu_(y, 0.5)
    assert y.tolist() == [-0.5, 2.0]
    z = dg.tensor([-3.0, 0.5])
    F.hardtanh_(z)
    assert z.tolist() == [-1.0, 0.5]


def _check_compiled_step(everything: bool) -> None:
    dg.manual_seed(0)
    bil, rms = nn.Bilinear(4, 3, 5), nn.RMSNorm(5)
    params = list(bil.parameters()) + list(rms.parameters())
    a, b = dg.randn(6, 4), dg.randn(6, 3)
    img, grid = dg.randn(2, 2, 4, 4), dg.rand(2, 3, 3, 2) * 1.6 - 0.8
    t = dg.tensor([1.0, -1.0, 1.0, 1.0, -1.0, 1.0])
    cls = dg.tensor([0, 4, 2, 1, 3, 0])
    ramp = dg.arange(30.0).reshape(1, 6, 5)

    def step(a, b, img, grid, t, cls):
        h = rms(bil(a, b))
        loss = (F.multi_margin_loss(h, cls) + F.margin_ranking_loss(h[:, 0], h[:, 1], t)
                + F.gaussian_nll_loss(h, h * 0.5, h.abs() + 0.1))
        if everything:
            loss = (loss + F.cosine_embedding_loss(h[:, :2], h[:, 2:4], t)
                    + F.triplet_margin_loss(h[:2], h[2:4], h[4:])
                    + F.local_response_norm(h.reshape(2, 3, 5), 2).sum() * 0.01
                    + F.grid_sample(img, grid, align_corners=False).sum() * 0.01
                    + F.pdist(h).mean() * 0.1
                    + (F.channel_shuffle(h.reshape(1, 6, 5), 3) * ramp).sum() * 0.001)
        loss.backward()
        return loss

    def run(fn):
        dg.manual_seed(0)
        for p in params:
            p.grad = None
        loss = fn(a, b, img, grid, t, cls)
        return loss, [p.grad.numpy().copy() for p in params]

    want, grads = run(step)
    compiled = dg.compile(step, tiered=False)
    got, cgrads = run(compiled)
    assert compiled.stats.traces == 1 and compiled.stats.kernels >= 1
    assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(cgrads, grads):
        assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_new_layers_and_losses_in_a_compiled_training_step() -> None:
    _check_compiled_step(everything=False)


# A cold Numba compile of this step took about three minutes on the loaded machine.
@pytest.mark.slow
def test_every_new_layer_and_loss_in_one_compiled_training_step() -> None:
    _check_compiled_step(everything=True)


def test_with_indices_spellings_and_adaptive_max_pool3d_indices() -> None:
    dg.manual_seed(0)
    x = dg.randn(2, 2, 6, 6)
    for got, want in [(F.max_pool2d_with_indices(x, 2), F.max_pool2d(x, 2, return_indices=True)),
                      (F.adaptive_max_pool2d_with_indices(x, 4),
                       F.adaptive_max_pool2d(x, 4, return_indices=True)),
                      (F.max_pool1d_with_indices(x[0], 3),
                       F.max_pool1d(x[0], 3, return_indices=True))]:
        assert_close(got[0], want[0])
        assert got[1].tolist() == want[1].tolist()
    vol = dg.randn(2, 2, 5, 3, 4)
    out, idx = F.adaptive_max_pool3d_with_indices(vol, (3, 2, 3))
    a = vol.numpy()
    d, h, w = a.shape[2:]

    def windows(n, k):
        return [(i * n // k, -(-(i + 1) * n // k)) for i in range(k)]

    for i, (d0, d1) in enumerate(windows(d, 3)):
        for j, (h0, h1) in enumerate(windows(h, 2)):
            for k, (w0, w1) in enumerate(windows(w, 3)):
                box = a[:, :, d0:d1, h0:h1, w0:w1].reshape(2, 2, -1)
                arg = box.argmax(-1)
                dd, hh, ww = np.unravel_index(arg, (d1 - d0, h1 - h0, w1 - w0))
                flat = ((dd + d0) * h + hh + h0) * w + ww + w0
                assert (idx.numpy()[:, :, i, j, k] == flat).all()
                assert_close(out.numpy()[:, :, i, j, k], box.max(-1))


def test_buffer_assigned_as_an_attribute_is_registered() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mask = nn.Buffer(dg.ones(3))
            self.scratch = nn.Buffer(dg.zeros(2), persistent=False)

    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["mask", "scratch"]
    assert list(net.state_dict()) == ["mask"] and not net.mask.requires_grad
    assert list(net.parameters()) == []
