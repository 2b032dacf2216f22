"""Normalisation layers: running statistics eager == compiled (module and whole step),
PyTorch's edge cases and errors. Values against PyTorch are in tests/goldens."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn
from dualgraph.nn import functional as F


def _net(momentum):
    dg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6, momentum=momentum), nn.ReLU(),
                         nn.Linear(6, 1))


def _train(compiled: bool, momentum):
    m = _net(momentum)
    opt = dg.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    f = dg.compile(step) if compiled else step
    rng = np.random.default_rng(0)
    losses = [float(f(dg.tensor(rng.standard_normal((8, 4)).astype(np.float32))))
              for _ in range(4)]
    return m, f, losses


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
def test_whole_step_running_stats_equal_eager(momentum):
    m0, _, eager = _train(False, momentum)
    m1, f, compiled = _train(True, momentum)
    assert f.stats.traces == 1 and f.stats.cache_hits == 3
    dg.testing.assert_close(eager, compiled, rtol=1e-5, atol=0, equal_nan=True, check_dtype=False)
    s0, s1 = m0.state_dict(), m1.state_dict()
    assert list(s0) == list(s1)
    for k in s0:
        dg.testing.assert_close(s0[k].numpy(), s1[k].numpy(), rtol=1e-5, atol=1e-7, equal_nan=True,
                                check_dtype=False)
    assert int(m1[1].num_batches_tracked.item()) == 4


def test_compiled_module_train_then_eval():
    eager, comp = _net(0.1), _net(0.1)
    f = dg.compile(comp)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = dg.tensor(rng.standard_normal((5, 4)).astype(np.float32))
        dg.testing.assert_close(f(x).numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6,
                                equal_nan=True, check_dtype=False)
    dg.testing.assert_close(comp[1].running_var.numpy(), eager[1].running_var.numpy(), rtol=1e-6,
                            atol=0, equal_nan=True, check_dtype=False)
    eager.eval()
    comp.eval()  # the training flag is guarded: eval retraces
    x = dg.tensor(rng.standard_normal((2, 4)).astype(np.float32))
    dg.testing.assert_close(f(x).numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                            check_dtype=False)
    assert f.stats.traces == 2
    assert int(comp[1].num_batches_tracked.item()) == 3


def test_running_var_uses_unbiased_variance():
    x = dg.tensor([[1.0, 2.0], [3.0, 6.0], [5.0, 7.0]])
    bn = nn.BatchNorm1d(2, momentum=1.0)
    bn(x)
    dg.testing.assert_close(bn.running_var.numpy(), np.var(x.numpy(), 0, ddof=1), rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(bn.running_mean.numpy(), x.numpy().mean(0), rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)


def test_batch_norm_without_running_stats_and_shapes():
    bn = nn.BatchNorm2d(3, affine=False, track_running_stats=False)
    assert bn.running_mean is None and list(bn.state_dict()) == []
    x = dg.randn(2, 3, 4, 5)
    y = bn.eval()(x)  # no running statistics: batch statistics even in eval
    means = y.numpy().mean((0, 2, 3))
    dg.testing.assert_close(means, np.zeros_like(means), rtol=1e-7, atol=1e-5, equal_nan=True,
                            check_dtype=False)
    assert nn.BatchNorm1d(3)(dg.randn(4, 3, 7)).shape == (4, 3, 7)
    assert repr(nn.BatchNorm2d(3, momentum=None)) == (
        "BatchNorm2d(3, eps=1e-05, momentum=None, affine=True, bias=True, "
        "track_running_stats=True)")


def test_norm_errors_match_pytorch():
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.BatchNorm1d(3)(dg.ones(3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(dg.ones(1, 3))
    with pytest.raises(RuntimeError, match="must be defined in evaluation mode"):
        F.batch_norm(dg.ones(2, 3), None, None)
    with pytest.raises(RuntimeError, match="should contain 3 elements not 2"):
        F.batch_norm(dg.ones(2, 3), dg.zeros(2), dg.ones(2))
    with pytest.raises(RuntimeError, match=r"normalized_shape=\[4\]"):
        F.layer_norm(dg.ones(4, 3), (4,))
    with pytest.raises(RuntimeError, match="weight to be of same shape"):
        F.layer_norm(dg.ones(4, 3), (3,), dg.ones(4))
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(dg.ones(2, 4, 3), 3)
    with pytest.raises(ValueError, match="must be divisible"):
        nn.GroupNorm(3, 4)


def test_layer_norm_module_and_node_name():
    ln = nn.LayerNorm((2, 3), bias=False)
    assert ln.bias is None and ln.weight.shape == (2, 3)
    assert repr(ln) == "LayerNorm((2, 3), eps=1e-05, elementwise_affine=True, bias=False)"
    x = dg.randn(4, 2, 3, requires_grad=True)
    y = ln(x)
    assert y.grad_fn.name() == "NativeLayerNormBackward0"
    stds = y.detach().numpy().reshape(4, 6).std(1)
    dg.testing.assert_close(stds, np.ones_like(stds), rtol=1e-3, atol=0, equal_nan=True,
                            check_dtype=False)
    assert nn.LayerNorm(3, elementwise_affine=False).weight is None


def test_layer_norm_double_backward():
    x = dg.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    w = dg.tensor(np.linspace(0.5, 1.5, 4), requires_grad=True)

    def grad_of(x, w):
        x = x if x.requires_grad else x.detach().requires_grad_(True)
        (g,) = dg.grad((F.layer_norm(x, (4,), w) ** 3).sum(), [x], create_graph=True)
        return g

    assert dg.testing.gradcheck(grad_of, x, w)


def test_instance_norm_modules_and_running_stats():
    x = dg.tensor(np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32))
    m = nn.InstanceNorm1d(3, track_running_stats=True)
    y = m(x)
    means = y.numpy().mean(2)
    dg.testing.assert_close(means, np.zeros_like(means), rtol=1e-7, atol=1e-6, equal_nan=True,
                            check_dtype=False)
    per = x.numpy()
    dg.testing.assert_close(m.running_mean.numpy(), 0.1 * per.mean(2).mean(0), rtol=1e-5, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(m.running_var.numpy(), 0.9 + 0.1 * per.var(2, ddof=1).mean(0),
                            rtol=1e-5, atol=0, equal_nan=True, check_dtype=False)
    assert nn.InstanceNorm2d(3)(dg.randn(3, 4, 4)).shape == (3, 4, 4)  # unbatched
    g = nn.GroupNorm(2, 4)
    assert [n for n, _ in g.named_parameters()] == ["weight", "bias"]
    assert g(dg.randn(2, 4, 3)).shape == (2, 4, 3)


def test_sync_batch_norm_converts_and_computes_batch_norm():
    dg.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Sequential(nn.BatchNorm2d(4), nn.ReLU()),
                      nn.BatchNorm1d(2))
    ref = nn.BatchNorm2d(4)
    ref.load_state_dict(m[1][0].state_dict())
    m.eval()
    weight, mean = m[1][0].weight, m[1][0].running_mean
    out = nn.SyncBatchNorm.convert_sync_batchnorm(m)
    assert out is m and type(m[1][0]) is nn.SyncBatchNorm and type(m[2]) is nn.SyncBatchNorm
    assert m[1][0].weight is weight and m[1][0].running_mean is mean  # shared, not copied
    assert not m[1][0].training and isinstance(m[1][1], nn.ReLU)
    assert list(m.state_dict()) == ["0.weight", "0.bias", "1.0.weight", "1.0.bias",
                                    "1.0.running_mean", "1.0.running_var",
                                    "1.0.num_batches_tracked", "2.weight", "2.bias",
                                    "2.running_mean", "2.running_var", "2.num_batches_tracked"]
    x = dg.tensor(np.random.default_rng(1).standard_normal((2, 4, 3, 3)).astype(np.float32))
    sync = m[1][0].train()
    dg.testing.assert_close(sync(x).numpy(), ref(x).numpy(), rtol=1e-6, atol=1e-6,
                            check_dtype=False)
    dg.testing.assert_close(sync.running_var.numpy(), ref.running_var.numpy(), rtol=1e-6, atol=0,
                            check_dtype=False)
    assert nn.SyncBatchNorm(4, process_group="group").process_group == "group"
    with pytest.raises(ValueError, match="expected at least 2D input"):
        nn.SyncBatchNorm(3)(dg.ones(3))
    assert repr(nn.SyncBatchNorm(3)).startswith("SyncBatchNorm(3, eps=1e-05")
