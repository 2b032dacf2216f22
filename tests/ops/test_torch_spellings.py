"""PyTorch's top-level spellings of nn.functional (enum reductions, ``train=``), the
scatter-into-a-copy family's errors, in-place shape methods, dtype names dualgraph cannot
hold, linalg compositions and the nn.utils helpers. Forward, gradient and compiled checks
of the compositions are case rows (tests/ops/cases.py); PyTorch's values are goldens."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.errors import TraceError
from dualgraph.nn import functional as F
from dualgraph.testing import assert_close, gradcheck


def test_top_level_losses_take_the_reduction_enum():
    a, b = dg.tensor([0.5, -1.0, 2.0]), dg.tensor([1.0, 1.0, -1.0])
    y = dg.tensor([1.0, -1.0, 1.0])
    none = dg.margin_ranking_loss(a, b, y)  # PyTorch's default here is 0, 'none'
    assert none.shape == (3,)
    assert_close(dg.margin_ranking_loss(a, b, y, 0.0, 2), none.sum())
    assert_close(dg.hinge_embedding_loss(a, y, 1.0, 1), F.hinge_embedding_loss(a, y))
    assert_close(dg.cosine_embedding_loss(a[None], b[None], y[:1], 0.0, 1),
                 F.cosine_embedding_loss(a[None], b[None], y[:1]))
    assert_close(dg.triplet_margin_loss(a[None], b[None], y[None], reduction=2),
                 F.triplet_margin_loss(a[None], b[None], y[None], reduction="sum"))
    assert_close(dg.poisson_nll_loss(a, b.abs(), True, False, 1e-8, 1),
                 F.poisson_nll_loss(a, b.abs()))
    with pytest.raises(TypeError, match="'reduction' must be 0, 1 or 2"):
        dg.hinge_embedding_loss(a, y, 1.0, "mean")
    with pytest.raises(TypeError, match="'reduction' must be 0, 1 or 2, not 3"):
        dg.kl_div(a, b, 3)


def test_top_level_norms_dropouts_and_padding():
    x = dg.tensor(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float32))
    assert_close(dg.instance_norm(x[None], None, None, None, None, True, 0.1, 1e-5, False),
                 F.instance_norm(x[None]))
    assert_close(dg.rms_norm(x, (3,)), F.rms_norm(x, (3,)))
    for fn in (dg.alpha_dropout, dg.feature_alpha_dropout):
        assert fn(x, 0.5, False) is x or dg.equal(fn(x, 0.5, False), x)
    y = x.clone()
    assert dg.dropout_(y, 1.0, True) is y and not y.any()
    assert_close(dg.constant_pad_nd(x, [0, 0, 1, 0]), F.pad(x, (0, 0, 1, 0)))
    z = dg.zeros(3)
    assert dg.arccos_(z) is z and dg.negative_(z) is z
    assert_close(z, dg.full((3,), -math.pi / 2))


def test_convolution_dispatches_on_the_weight_rank():
    rng = np.random.default_rng(0)
    x, wt = dg.tensor(rng.standard_normal((1, 2, 3, 4))), dg.tensor(rng.standard_normal(
        (2, 3, 2, 2)))
    assert_close(dg.convolution(x, wt, None, [2, 1], [1, 0], [1, 1], True, [1, 0], 1),
                 F.conv_transpose2d(x, wt, None, (2, 1), (1, 0), (1, 0)))
    with pytest.raises(RuntimeError, match="3-D, 4-D or 5-D weight"):
        dg.convolution(x, dg.ones(3, 3), None, [1], [0], [1], False, [0], 1)


def test_fill_makes_a_new_tensor():
    x = dg.zeros(2, 3)
    y = dg.fill(x, 2)
    assert y is not x and y.dtype == x.dtype and y.tolist() == [[2.0] * 3] * 2
    with pytest.raises(RuntimeError, match="0-dimension value tensor"):
        dg.fill(x, dg.ones(2))


def test_scatter_family_errors_name_the_shapes():
    x = dg.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"src size = \[3, 3\], slice size = \[3, 2\]"):
        dg.slice_scatter(x, dg.ones(3, 3), 1, 0, 4, 2)
    with pytest.raises(IndexError, match="out of range"):
        dg.select_scatter(x, dg.ones(4), 0, 3)
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        dg.diagonal_scatter(x, dg.ones(3), 0, 1, 1)
    with pytest.raises(RuntimeError, match="reach outside"):
        dg.as_strided_scatter(x, dg.ones(2, 2), (2, 2), (6, 4), 2)
    with pytest.raises(RuntimeError, match="one of prod, mean, amax or amin"):
        x.index_reduce(0, dg.tensor([0]), dg.ones(1, 4), "sum")
    # The in-place form writes into the tensor.
    y = dg.ones(3, 2)
    assert y.index_reduce_(0, dg.tensor([2, 2]), dg.full((2, 2), 3.0), "prod") is y
    assert y.tolist() == [[1.0, 1.0], [1.0, 1.0], [9.0, 9.0]]


def test_inplace_shape_methods():
    x = dg.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    assert x.t_() is x and x.shape == (3, 2)
    assert x.transpose_(0, 1).shape == (2, 3) and x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert x.swapdims_(0, 1).shape == (3, 2) and x.swapaxes_(1, 0).shape == (2, 3)
    leaf = dg.ones(2, 3, requires_grad=True)
    h = leaf * 2.0
    h.transpose_(0, 1)
    (h * dg.tensor([[1.0, 2.0]])).sum().backward()  # the gradient follows the new layout
    assert leaf.grad.tolist() == [[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.t_()

    @dg.compile(tiered=False)
    def step(t):
        t.t_()
        return t

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = step(dg.ones(2, 3))
        except TraceError as e:  # a compiled function cannot change a shape in place
            assert "t_() changes a tensor's shape in place" in str(e)
        else:
            assert out.shape == (3, 2)  # run eagerly, as squeeze_ is


def test_dtype_names_dualgraph_cannot_hold():
    assert dg.cfloat is dg.complex64 and dg.cdouble is dg.complex128 and dg.chalf is dg.complex32
    for make in (lambda: dg.zeros(2, dtype=dg.chalf), lambda: dg.ones(2).chalf(),
                 lambda: dg.ones(2).to(dg.complex32)):
        with pytest.raises(TypeError, match="dg.complex32 is not supported: NumPy has no "
                                            "complex half"):
            make()
    with pytest.raises(TypeError, match="NumPy has no bfloat16"):
        dg.ones(2).bfloat16()


def test_settings_flags():
    dg.set_deterministic_debug_mode("warn")
    try:
        assert dg.get_deterministic_debug_mode() == 1
        assert dg.is_deterministic_algorithms_warn_only_enabled()
        dg.set_deterministic_debug_mode(2)
        assert dg.get_deterministic_debug_mode() == 2
        with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
            dg.set_deterministic_debug_mode("loud")
    finally:
        dg.set_deterministic_debug_mode(0)
    assert not dg.are_deterministic_algorithms_enabled()
    before = dg.is_warn_always_enabled()
    dg.set_warn_always(True)
    assert dg.is_warn_always_enabled()
    dg.set_warn_always(before)
    dg.set_anomaly_enabled(True)
    try:
        assert dg.is_anomaly_enabled() and dg.is_anomaly_check_nan_enabled()
    finally:
        dg.set_anomaly_enabled(False)
    assert not dg.is_anomaly_enabled()


_M = np.random.default_rng(3).standard_normal((2, 3, 3)) * 0.3 + 2.0 * np.eye(3)


@pytest.mark.parametrize("p", [None, -2, "fro", "nuc", 1, math.inf])
def test_linalg_cond_gradient(p):
    gradcheck(lambda m: dg.linalg.cond(m, p), dg.tensor(_M))


def test_linalg_cond_and_tensorinv_values():
    m = dg.tensor(_M)
    s = np.linalg.svd(_M, compute_uv=False)
    assert_close(dg.linalg.cond(m), dg.tensor(s[:, 0] / s[:, -1]))
    assert_close(dg.linalg.cond(m, 1), dg.tensor(np.asarray(np.linalg.cond(_M, 1))))
    a = np.random.default_rng(4).standard_normal((4, 6, 8, 3))
    inv = dg.linalg.tensorinv(dg.tensor(a, requires_grad=True), 2)
    assert inv.shape == (8, 3, 4, 6)
    eye = dg.eye(24, dtype=dg.float64).reshape(8, 3, 8, 3)
    assert_close(dg.tensordot(inv, dg.tensor(a), 2), eye, atol=1e-10, rtol=0)
    gradcheck(lambda t: dg.linalg.tensorinv(t, 1), dg.tensor(_M[0]))
    with pytest.raises(RuntimeError, match="prod"):
        dg.linalg.tensorinv(dg.ones(2, 3), 1)
    with pytest.raises(RuntimeError, match="square"):
        dg.linalg.cond(dg.ones(2, 3), 1)


def test_nn_utils_helpers():
    lin = dg.nn.Linear(3, 2)
    lin(dg.ones(4, 3)).sum().backward()
    grads = [p.grad.clone() for p in lin.parameters()]
    total = dg.nn.utils.get_total_norm([p.grad for p in lin.parameters()])
    dg.nn.utils.clip_grads_with_norm_(lin.parameters(), 0.5, total)
    assert_close(dg.nn.utils.get_total_norm([p.grad for p in lin.parameters()]),
                 dg.tensor(0.5), rtol=1e-5, atol=0)
    for p, g in zip(lin.parameters(), grads):
        p.grad = g
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        assert_close(dg.nn.utils.clip_grad_norm(lin.parameters(), 0.5), total)
    layer = dg.nn.utils.skip_init(dg.nn.Linear, 2, 3, bias=False)
    assert layer.weight.shape == (3, 2) and layer.bias is None


def test_edge_cases_of_existing_ops_follow_pytorch():
    """Arguments and shapes torch's OpInfo samples use (tools/opinfo_check.py)."""
    a = np.random.default_rng(5).standard_normal((1, 2, 3))
    b = np.random.default_rng(6).standard_normal((2, 1, 3))
    # cosine_similarity over a dim one input broadcasts along
    ab, bb = np.broadcast_arrays(a, b)
    want = (ab * bb).sum(-2) / np.sqrt((ab * ab).sum(-2) * (bb * bb).sum(-2))
    assert_close(F.cosine_similarity(dg.tensor(a), dg.tensor(b), dim=-2), dg.tensor(want))
    x = dg.tensor([-1.26, 2.0])
    assert x.to("cpu", dg.float64, False, True).dtype == dg.float64
    y = x.to(x.dtype, False, True)
    assert y is not x and dg.equal(y, x)
    assert x.long(memory_format=dg.contiguous_format).dtype == dg.int64
    assert x.double(memory_format=dg.preserve_format).dtype == dg.float64
    assert_close(x.round(decimals=1), dg.tensor([-1.3, 2.0]))
    assert_close(dg.round(x, decimals=1), dg.tensor([-1.3, 2.0]))
    assert_close(F.prelu(x, dg.tensor(0.5)), dg.tensor([-0.63, 2.0]))
    assert F.prelu(dg.tensor(-2.0), dg.tensor([0.5])).shape == ()
    assert F.softmin(x, 0, dtype=dg.float64).dtype == dg.float64
    u, s, vh = dg.linalg.svd(dg.zeros(0, 3, 5))
    assert (u.shape, s.shape, vh.shape) == ((0, 3, 3), (0, 3), (0, 5, 5))
    assert dg.linalg.cholesky_ex(dg.zeros(0, 0)).L.shape == (0, 0)
    assert dg.combinations(dg.ones(1), 2).shape == (0, 2)
    assert dg.combinations(dg.ones(3), 0).shape == (0,)
    r = dg.arange(10.0)
    assert [t.shape for t in dg.tensor_split(r, dg.tensor([2, 5]))] == [(2,), (3,), (5,)]
    assert len(dg.tensor_split(r, dg.tensor(3))) == 3
    assert dg.diff(r, 0, 0, dg.ones(1)) is r
