"""`dg.nn` (API.md A4): modules, parameters, state dicts, layers and losses, PyTorch's way."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn
from dualgraph.nn import functional as F


def _tiny_net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))


def _params(module: nn.Module) -> dict:
    return {k: p.numpy().copy() for k, p in module.named_parameters()}


# ------------------------------------------------------------------------------- Module


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(dg.ones(2))
        self.body = nn.Sequential(nn.Linear(2, 4), nn.Tanh())
        self.head = nn.Linear(4, 1, bias=False)
        self.buffer = dg.zeros(3)  # a plain tensor is not a parameter
        self.note = "hello"

    def forward(self, x):
        return self.head(self.body(x * self.scale))


def test_parameters_registered_by_attribute() -> None:
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "head.weight"]
    params = list(net.parameters())
    assert len(params) == 4
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in params)
    assert params[0] is net.scale and params[3] is net.head.weight
    assert net.head.bias is None
    assert net.note == "hello" and net.buffer.shape == (3,)


def test_parameter_is_a_leaf_tensor_requiring_grad() -> None:
    p = nn.Parameter(dg.tensor([1.0, 2.0]))
    assert isinstance(p, dg.Tensor)
    assert p.requires_grad and p.is_leaf and p.grad is None
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert not nn.Parameter(dg.tensor([1.0]), requires_grad=False).requires_grad


def test_reassigning_and_deleting_attributes() -> None:
    net = Net()
    net.head = nn.Linear(4, 2)
    assert [n for n, _ in net.named_parameters()][-2:] == ["head.weight", "head.bias"]
    with pytest.raises(TypeError, match="as parameter 'scale'"):
        net.scale = dg.ones(2)  # as PyTorch: a parameter's name takes a Parameter or None
    del net.scale
    net.scale = dg.ones(2)  # once deleted, a plain tensor may take the name
    assert "scale" not in dict(net.named_parameters())
    del net.head
    assert [n for n, _ in net.named_parameters()] == ["body.0.weight", "body.0.bias"]


def test_shared_parameter_listed_once() -> None:
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]


def test_sequential_names_indexing_and_forward() -> None:
    net = _tiny_net()
    assert [n for n, _ in net.named_parameters()] == [
        "0.weight", "0.bias", "2.weight", "2.bias",
    ]
    assert len(net) == 3 and isinstance(net[1], nn.ReLU) and net[-1] is net[2]
    x = dg.tensor(np.array([[1.0, -2.0], [0.5, 0.25]], np.float32))
    h = np.maximum(x.numpy() @ net[0].weight.numpy().T + net[0].bias.numpy(), 0)
    ref = h @ net[2].weight.numpy().T + net[2].bias.numpy()
    dg.testing.assert_close(net(x).numpy(), ref, rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    with pytest.raises(TypeError):
        nn.Sequential(nn.ReLU(), "not a module")


def test_module_call_runs_forward() -> None:
    net = Net()
    x = dg.ones(3, 2)
    out = net(x)
    assert out.shape == (3, 1)
    np.testing.assert_array_equal(out.numpy(), net.forward(x).numpy())


def test_zero_grad() -> None:
    net = _tiny_net()
    net(dg.ones(4, 2)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    for p in net.parameters():
        assert p.grad is not None and not p.grad.numpy().any()
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_train_and_eval_reach_submodules() -> None:
    net = Net()
    assert net.training and net.body.training and net.body[0].training
    assert net.eval() is net
    assert not any(m.training for m in (net, net.body, net.body[0], net.body[1], net.head))
    net.train()
    assert all(m.training for m in (net, net.body, net.body[0], net.body[1], net.head))
    net.train(False)
    assert not net.head.training


# --------------------------------------------------------------------------- state dict


def test_state_dict_names_and_values() -> None:
    net = _tiny_net()
    sd = net.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for k, p in net.named_parameters():
        assert isinstance(sd[k], dg.Tensor) and not sd[k].requires_grad
        np.testing.assert_array_equal(sd[k].numpy(), p.numpy())


def test_load_state_dict_copies_values_into_the_same_parameters() -> None:
    dg.manual_seed(0)
    src, dst = _tiny_net(), _tiny_net()
    ids = [id(p) for p in dst.parameters()]
    missing, unexpected = dst.load_state_dict(src.state_dict())
    assert list(missing) == [] and list(unexpected) == []
    assert [id(p) for p in dst.parameters()] == ids  # copied in place, not replaced
    for (k, a), b in zip(src.named_parameters(), dst.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
        assert b.requires_grad and b.is_leaf
    # NumPy arrays are accepted as values too.
    dst.load_state_dict({k: np.zeros(v.shape, np.float32) for k, v in src.state_dict().items()})
    assert not any(p.numpy().any() for p in dst.parameters())


def _bad_state_dicts(net: nn.Module) -> list:
    good = {k: np.full(v.shape, 7.0, np.float32) for k, v in net.state_dict().items()}
    missing = dict(good)
    del missing["2.bias"]
    unexpected = dict(good, **{"3.weight": np.zeros((1, 1), np.float32)})
    wrong_shape = dict(good, **{"0.weight": np.zeros((2, 3), np.float32)})
    return [("2.bias", missing), ("3.weight", unexpected), ("0.weight", wrong_shape)]


@pytest.mark.parametrize("case", [0, 1, 2], ids=["missing", "unexpected", "wrong-shape"])
def test_failed_load_state_dict_names_key_and_changes_nothing(case) -> None:
    net = _tiny_net()
    key, sd = _bad_state_dicts(net)[case]
    before = _params(net)
    with pytest.raises(RuntimeError, match=key.replace(".", r"\.")):
        net.load_state_dict(sd)
    after = _params(net)
    assert list(after) == list(before)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)


# ------------------------------------------------------------------------------- Linear


def test_linear_shapes_and_default_init_bounds() -> None:
    dg.manual_seed(0)
    lin = nn.Linear(100, 50)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert w.shape == (50, 100) and b.shape == (50,)
    assert w.dtype == np.float32 and b.dtype == np.float32
    bound = 1 / math.sqrt(100)
    # PyTorch: kaiming_uniform(a=sqrt(5)) on the weight and U(-1/sqrt(in), 1/sqrt(in)) on
    # the bias, i.e. both uniform in +-1/sqrt(in_features).
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.95 * bound
    assert abs(w.mean()) < 0.01
    assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    assert repr(lin) == "Linear(in_features=100, out_features=50, bias=True)"


def test_linear_init_reproducible_with_manual_seed() -> None:
    dg.manual_seed(42)
    a = _params(_tiny_net())
    dg.manual_seed(42)
    b = _params(_tiny_net())
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    c = _params(_tiny_net())
    assert not np.array_equal(a["0.weight"], c["0.weight"])


def test_linear_forward_backward_and_node_names() -> None:
    lin = nn.Linear(3, 2)
    xv = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], np.float32)
    out = lin(dg.tensor(xv))
    assert out.grad_fn.name() == "AddmmBackward0"
    w, b = lin.weight.numpy(), lin.bias.numpy()
    dg.testing.assert_close(out.numpy(), xv @ w.T + b, rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    out.sum().backward()
    dg.testing.assert_close(lin.weight.grad.numpy(), np.ones((2, 2)) @ xv, rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(lin.bias.grad.numpy(), [2.0, 2.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    # 1-D input and no bias work too.
    dg.testing.assert_close(lin(dg.tensor(xv[0])).numpy(), xv[0] @ w.T + b, rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    nob = nn.Linear(3, 2, bias=False)
    assert [n for n, _ in nob.named_parameters()] == ["weight"]
    dg.testing.assert_close(nob(dg.tensor(xv)).numpy(), xv @ nob.weight.numpy().T, rtol=1e-6,
                            atol=0, equal_nan=True, check_dtype=False)


def test_linear_shape_error() -> None:
    with pytest.raises(ValueError, match=r"\(2, 4\)"):
        nn.Linear(3, 2)(dg.ones(2, 4))


@pytest.mark.parametrize(
    ("module", "fn", "ref"),
    [
        (nn.ReLU(), F.relu, lambda x: np.maximum(x, 0)),
        (nn.Sigmoid(), F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        (nn.Tanh(), F.tanh, np.tanh),
    ],
    ids=["relu", "sigmoid", "tanh"],
)
def test_activations(module, fn, ref) -> None:
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    dg.testing.assert_close(module(dg.tensor(x)).numpy(), ref(x), rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(fn(dg.tensor(x)).numpy(), ref(x), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)


def test_functional_softmax_log_softmax() -> None:
    x = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    e = np.exp(x - x.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    dg.testing.assert_close(F.softmax(dg.tensor(x), dim=1).numpy(), sm, rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(F.log_softmax(dg.tensor(x), dim=1).numpy(), np.log(sm), rtol=1e-12,
                            atol=0, equal_nan=True, check_dtype=False)


# -------------------------------------------------------------------------------- losses

RNG = np.random.default_rng(0)
PRED = RNG.standard_normal((4, 3))
TARGET = RNG.standard_normal((4, 3))
LOGITS = RNG.standard_normal((5, 4)) * 3
CLASSES = np.array([0, 3, 1, 1, 2])
BIN = (RNG.random((4, 3)) > 0.5).astype(np.float64)


def _reduce(v: np.ndarray, reduction: str) -> np.ndarray:
    return v.mean() if reduction == "mean" else v.sum()


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(1, keepdims=True))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_loss(reduction) -> None:
    x = dg.tensor(PRED, requires_grad=True)
    for loss in (nn.MSELoss(reduction=reduction)(x, dg.tensor(TARGET)),
                 F.mse_loss(x, dg.tensor(TARGET), reduction=reduction)):
        assert loss.shape == ()
        assert loss.item() == pytest.approx(_reduce((PRED - TARGET) ** 2, reduction), rel=1e-12)
    x.grad = None
    loss.backward()
    n = PRED.size if reduction == "mean" else 1
    dg.testing.assert_close(x.grad.numpy(), 2 * (PRED - TARGET) / n, rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_loss(reduction) -> None:
    x = dg.tensor(LOGITS, requires_grad=True)
    picked = -_log_softmax(LOGITS)[np.arange(5), CLASSES]
    for loss in (nn.CrossEntropyLoss(reduction=reduction)(x, dg.tensor(CLASSES)),
                 F.cross_entropy(x, dg.tensor(CLASSES), reduction=reduction)):
        assert loss.item() == pytest.approx(_reduce(picked, reduction), rel=1e-12)
    x.grad = None
    loss.backward()
    onehot = np.eye(4)[CLASSES]
    n = 5 if reduction == "mean" else 1
    dg.testing.assert_close(x.grad.numpy(), (np.exp(_log_softmax(LOGITS)) - onehot) / n, rtol=1e-10,
                            atol=1e-14, equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_bce_with_logits_loss(reduction) -> None:
    x = dg.tensor(PRED, requires_grad=True)
    sig = 1 / (1 + np.exp(-PRED))
    ref = -(BIN * np.log(sig) + (1 - BIN) * np.log(1 - sig))
    for loss in (nn.BCEWithLogitsLoss(reduction=reduction)(x, dg.tensor(BIN)),
                 F.binary_cross_entropy_with_logits(x, dg.tensor(BIN), reduction=reduction)):
        assert loss.item() == pytest.approx(_reduce(ref, reduction), rel=1e-12)
    x.grad = None
    loss.backward()
    n = PRED.size if reduction == "mean" else 1
    dg.testing.assert_close(x.grad.numpy(), (sig - BIN) / n, rtol=1e-10, atol=0, equal_nan=True,
                            check_dtype=False)


def test_losses_reject_unknown_reduction() -> None:
    with pytest.raises(ValueError):
        nn.MSELoss(reduction="avg")


def test_loss_shape_errors() -> None:
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 4\)"):
        F.mse_loss(dg.ones(4, 3), dg.ones(3, 4))
    with pytest.raises(ValueError):
        F.cross_entropy(dg.ones(4, 3), dg.tensor([0, 1]))


def test_cross_entropy_and_log_softmax_stay_finite_for_large_logits() -> None:
    logits = np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4]], np.float32)
    x = dg.tensor(logits, requires_grad=True)
    ls = F.log_softmax(x, dim=1)
    assert np.isfinite(ls.numpy()).all()
    ln2 = np.log(2)
    dg.testing.assert_close(ls.numpy(), [[0.0, -1e4, -2e4], [-1e4 - ln2, -ln2, -ln2]], rtol=1e-6,
                            atol=0, equal_nan=True, check_dtype=False)
    loss = F.cross_entropy(x, dg.tensor([0, 2]))
    assert loss.item() == pytest.approx(np.log(2) / 2, rel=1e-5)
    loss.backward()
    assert np.isfinite(x.grad.numpy()).all()
    dg.testing.assert_close(x.grad.numpy(), [[0, 0, 0], [0, 0.25, -0.25]], rtol=1e-7, atol=1e-6,
                            equal_nan=True, check_dtype=False)
    # The wrong class with a huge margin: a large but finite loss.
    loss = F.cross_entropy(dg.tensor(logits), dg.tensor([2, 0]))
    assert loss.item() == pytest.approx((2e4 + 1e4 + np.log(2)) / 2, rel=1e-6)


def test_bce_with_logits_stable_for_large_logits() -> None:
    z = dg.tensor([1e4, -1e4, 1e4, -1e4], requires_grad=True)
    y = dg.tensor([1.0, 0.0, 0.0, 1.0])
    loss = F.binary_cross_entropy_with_logits(z, y, reduction="sum")
    assert loss.item() == pytest.approx(2e4, rel=1e-6)  # 0 + 0 + 1e4 + 1e4
    loss.backward()
    dg.testing.assert_close(z.grad.numpy(), [0.0, 0.0, 1.0, -1.0], rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)


# ---------------------------------------------------------------------------------- torch


def _copy_to_torch(torch, dg_module, torch_module) -> None:
    with torch.no_grad():
        for (kd, pd), (kt, pt) in zip(dg_module.named_parameters(),
                                      torch_module.named_parameters()):
            assert kd == kt
            pt.copy_(torch.from_numpy(pd.numpy().copy()))


def _structure(fn, name):
    if fn is None:
        return None
    return (name(fn), tuple(_structure(f, name) for f, _ in fn.next_functions))


def test_sequential_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    tnet = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4),
                               torch.nn.ReLU(), torch.nn.Linear(4, 2))
    _copy_to_torch(torch, net, tnet)
    x = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    od, ot = net(dg.tensor(x)), tnet(torch.from_numpy(x))
    dg.testing.assert_close(od.numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                            check_dtype=False)
    assert _structure(od.grad_fn, lambda f: f.name()) == _structure(
        ot.grad_fn, lambda f: type(f).__name__)
    od.sum().backward()
    ot.sum().backward()
    for (k, pd), pt in zip(net.named_parameters(), tnet.parameters()):
        dg.testing.assert_close(pd.grad.numpy(), pt.grad.numpy(), rtol=1e-5, atol=1e-6,
                                equal_nan=True, check_dtype=False, msg=k)
    assert list(net.state_dict()) == list(tnet.state_dict())


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_losses_match_torch(reduction) -> None:
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    cases = [
        (F.mse_loss, tf.mse_loss, PRED, TARGET),
        (F.cross_entropy, tf.cross_entropy, LOGITS, CLASSES),
        (F.binary_cross_entropy_with_logits, tf.binary_cross_entropy_with_logits, PRED, BIN),
        (F.cross_entropy, tf.cross_entropy, np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4]]),
         np.array([2, 1])),
        (F.binary_cross_entropy_with_logits, tf.binary_cross_entropy_with_logits,
         np.array([1e4, -1e4, 30.0, -30.0]), np.array([0.0, 1.0, 1.0, 0.0])),
    ]
    for fd, ft, x, y in cases:
        xd, xt = dg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ld = fd(xd, dg.tensor(y), reduction=reduction)
        lt = ft(xt, torch.tensor(y), reduction=reduction)
        assert ld.item() == pytest.approx(lt.item(), rel=1e-12)
        ld.backward()
        lt.backward()
        dg.testing.assert_close(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-15,
                                equal_nan=True, check_dtype=False)


def test_linear_init_distribution_matches_torch_bounds() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tl = torch.nn.Linear(64, 8)
    dl = nn.Linear(64, 8)
    for td, dd in ((tl.weight, dl.weight), (tl.bias, dl.bias)):
        assert tuple(td.shape) == dd.shape
        bound = 1 / math.sqrt(64)
        assert td.detach().abs().max().item() <= bound and np.abs(dd.numpy()).max() <= bound
