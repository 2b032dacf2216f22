"""`dg.optim` (API.md A4): SGD and Adam follow PyTorch's update rules step for step, and
small models actually train."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn

STEPS = 5
P0 = np.array([[0.5, -1.0, 2.0], [0.0, 3.0, -0.25]])
GRADS = [np.random.default_rng(s).standard_normal(P0.shape) for s in range(STEPS)]


# ------------------------------------------------------------- hand-written references


def ref_sgd(p, grads, lr, momentum=0.0, weight_decay=0.0):
    """torch.optim.SGD (dampening=0, nesterov=False), one array per step."""
    p, buf, out = p.copy(), None, []
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + g
            g = buf
        p = p - lr * g
        out.append(p.copy())
    return out


def ref_adam(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """torch.optim.Adam (amsgrad=False), one (param, exp_avg, exp_avg_sq) per step."""
    b1, b2 = betas
    p, m, v, out = p.copy(), np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(grads, start=1):
        g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        step_size = lr / (1 - b1**t)
        denom = np.sqrt(v) / np.sqrt(1 - b2**t) + eps
        p = p - step_size * m / denom
        out.append((p.copy(), m.copy(), v.copy()))
    return out


def _run(opt_cls, dtype, **kw):
    """Drive an optimizer with the fixed gradient sequence; parameters after each step."""
    p = nn.Parameter(dg.tensor(P0.astype(dtype)))
    opt = opt_cls([p], **kw)
    out = []
    for g in GRADS:
        opt.zero_grad()
        p.grad = dg.tensor(g.astype(dtype))
        opt.step()
        out.append(p.numpy().copy())
        assert p.is_leaf and p.requires_grad and p.grad_fn is None and p.dtype == dtype
    return out, opt, p


SGD_CONFIGS = [
    {"lr": 0.1},
    {"lr": 0.1, "momentum": 0.9},
    {"lr": 0.05, "weight_decay": 0.01},
    {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.1},
]
ADAM_CONFIGS = [
    {"lr": 1e-3},
    {"lr": 0.1},
    {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6},
    {"lr": 0.01, "weight_decay": 0.1},
]


# ---------------------------------------------------------------------------------- SGD


@pytest.mark.parametrize("kw", SGD_CONFIGS, ids=repr)
def test_sgd_matches_reference(kw) -> None:
    ref = ref_sgd(P0, GRADS, **kw)
    got, opt, p = _run(dg.optim.SGD, np.float64, **kw)
    for step, (a, b) in enumerate(zip(got, ref)):
        dg.testing.assert_close(a, b, rtol=1e-12, atol=1e-15, equal_nan=True, check_dtype=False,
                                msg=f"step {step}")
    got32, _, _ = _run(dg.optim.SGD, np.float32, **kw)
    dg.testing.assert_close(got32[-1], ref[-1], rtol=1e-5, atol=1e-6, equal_nan=True,
                            check_dtype=False)


def test_sgd_momentum_buffer_state() -> None:
    _, opt, p = _run(dg.optim.SGD, np.float64, lr=0.1, momentum=0.9)
    buf = np.asarray(opt.state[p]["momentum_buffer"])
    expected = GRADS[0]
    for g in GRADS[1:]:
        expected = 0.9 * expected + g
    dg.testing.assert_close(buf, expected, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)


# --------------------------------------------------------------------------------- Adam


@pytest.mark.parametrize("kw", ADAM_CONFIGS, ids=repr)
def test_adam_matches_reference(kw) -> None:
    ref = ref_adam(P0, GRADS, **kw)
    got, opt, p = _run(dg.optim.Adam, np.float64, **kw)
    for step, (a, (b, _, _)) in enumerate(zip(got, ref)):
        dg.testing.assert_close(a, b, rtol=1e-12, atol=1e-15, equal_nan=True, check_dtype=False,
                                msg=f"step {step}")
    state = opt.state[p]
    assert float(np.asarray(state["step"])) == STEPS
    dg.testing.assert_close(np.asarray(state["exp_avg"]), ref[-1][1], rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(np.asarray(state["exp_avg_sq"]), ref[-1][2], rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
    # float32 stays as close to the exact rule as torch's float32 Adam (~1e-7 here): the
    # bias corrections must not be computed as 1 - 0.999 ** t in float32.
    got32, _, _ = _run(dg.optim.Adam, np.float32, **kw)
    dg.testing.assert_close(got32[-1], ref[-1][0], rtol=1e-6, atol=5e-7, equal_nan=True,
                            check_dtype=False)


def test_adam_float32_bias_correction_with_beta2_close_to_one() -> None:
    kw = {"lr": 0.1, "betas": (0.9, 0.9999)}
    ref = ref_adam(P0, GRADS, **kw)[-1][0]
    got32, _, _ = _run(dg.optim.Adam, np.float32, **kw)
    dg.testing.assert_close(got32[-1], ref, rtol=1e-6, atol=5e-7, equal_nan=True, check_dtype=False)


def test_adam_defaults() -> None:
    p = nn.Parameter(dg.ones(2))
    opt = dg.optim.Adam([p])
    assert opt.defaults["lr"] == 1e-3
    assert tuple(opt.defaults["betas"]) == (0.9, 0.999) and opt.defaults["eps"] == 1e-8
    p.grad = dg.tensor([1.0, -4.0])
    opt.step()
    # The first Adam step moves every coordinate by lr against its gradient's sign.
    dg.testing.assert_close(p.numpy(), [1 - 1e-3, 1 + 1e-3], rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)


# ----------------------------------------------------------------------- common behaviour


@pytest.mark.parametrize("opt_cls", [dg.optim.SGD, dg.optim.Adam])
def test_empty_params_is_value_error(opt_cls) -> None:
    with pytest.raises(ValueError):
        opt_cls([], lr=0.1)
    with pytest.raises(ValueError):
        opt_cls(iter([]), lr=0.1)


def test_invalid_arguments() -> None:
    p = nn.Parameter(dg.ones(2))
    with pytest.raises(ValueError):
        dg.optim.SGD([p], lr=-0.1)
    with pytest.raises(ValueError):
        dg.optim.SGD([p], lr=0.1, momentum=-1.0)
    with pytest.raises(ValueError):
        dg.optim.Adam([p], betas=(1.0, 0.999))
    with pytest.raises(TypeError):
        dg.optim.SGD(p, lr=0.1)  # a tensor, not an iterable of tensors
    with pytest.raises(ValueError):
        dg.optim.SGD([p * 2], lr=0.1)  # a non-leaf


@pytest.mark.parametrize("opt_cls", [dg.optim.SGD, dg.optim.Adam])
def test_zero_grad_and_params_without_grad_are_skipped(opt_cls) -> None:
    a, b = nn.Parameter(dg.ones(2)), nn.Parameter(dg.ones(2))
    opt = opt_cls([a, b], lr=0.1)
    (a * 3).sum().backward()
    assert b.grad is None
    opt.step()
    assert b.tolist() == [1.0, 1.0]  # no gradient: untouched
    assert a.tolist() != [1.0, 1.0]
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_param_groups_have_their_own_lr() -> None:
    a, b = nn.Parameter(dg.ones(1)), nn.Parameter(dg.ones(1))
    opt = dg.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    a.grad, b.grad = dg.ones(1), dg.ones(1)
    opt.step()
    assert a.item() == pytest.approx(0.9) and b.item() == pytest.approx(0.5)


# ---------------------------------------------------------------------------- training


def test_tiny_net_loss_decreases() -> None:
    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    x = dg.randn(32, 2)
    y = (x[:, 0:1] - 2 * x[:, 1:2]) * 0.5 + 0.3
    losses = []
    for _ in range(100):
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], (losses[0], losses[-1])
    assert np.mean(losses[-10:]) < np.mean(losses[:10])


def test_logistic_regression_trains() -> None:
    dg.manual_seed(1)
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((200, 2)).astype(np.float32)
    yv = (xv @ np.array([2.0, -1.0]) + 0.5 > 0).astype(np.float32)[:, None]
    x, y = dg.tensor(xv), dg.tensor(yv)
    model = nn.Linear(2, 1)
    opt = dg.optim.Adam(model.parameters(), lr=0.1)
    loss_fn = nn.BCEWithLogitsLoss()
    first = None
    for _ in range(100):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < 0.3 * first
    with dg.no_grad():
        pred = (model(x) > 0).numpy()
    assert (pred == (yv > 0.5)).mean() >= 0.97
    w = model.weight.numpy()[0]
    assert w[0] > 0 > w[1]  # the learned direction has the true signs


# --------------------------------------------------------------------------------- torch


@pytest.mark.parametrize(
    ("name", "kw"),
    [("SGD", c) for c in SGD_CONFIGS] + [("Adam", c) for c in ADAM_CONFIGS],
    ids=lambda v: v if isinstance(v, str) else repr(v),
)
def test_optimizer_trajectory_matches_torch(name, kw) -> None:
    torch = pytest.importorskip("torch")
    got, _, _ = _run(getattr(dg.optim, name), np.float64, **kw)
    p = torch.nn.Parameter(torch.tensor(P0))
    opt = getattr(torch.optim, name)([p], **kw)
    for step, g in enumerate(GRADS):
        opt.zero_grad()
        p.grad = torch.tensor(g)
        opt.step()
        dg.testing.assert_close(got[step], p.detach().numpy(), rtol=1e-12, atol=1e-15,
                                equal_nan=True, check_dtype=False, msg=f"step {step}")


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_float32_trajectory_matches_torch(name) -> None:
    torch = pytest.importorskip("torch")
    kw = {"lr": 0.1, "momentum": 0.9} if name == "SGD" else {"lr": 0.1, "betas": (0.9, 0.9999)}
    got, _, _ = _run(getattr(dg.optim, name), np.float32, **kw)
    p = torch.nn.Parameter(torch.tensor(P0, dtype=torch.float32))
    opt = getattr(torch.optim, name)([p], **kw)
    for step, g in enumerate(GRADS):
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        dg.testing.assert_close(got[step], p.detach().numpy(), rtol=1e-6, atol=5e-7, equal_nan=True,
                                check_dtype=False, msg=f"step {step}")


@pytest.mark.parametrize(
    ("name", "kw"),
    [("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}), ("Adam", {"lr": 0.05})],
)
def test_training_steps_match_torch(name, kw) -> None:
    torch = pytest.importorskip("torch")
    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    tnet = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        for pd, pt in zip(net.parameters(), tnet.parameters()):
            pt.copy_(torch.from_numpy(pd.numpy().copy()))
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((16, 2)).astype(np.float32)
    yv = rng.standard_normal((16, 1)).astype(np.float32)
    opt = getattr(dg.optim, name)(net.parameters(), **kw)
    topt = getattr(torch.optim, name)(tnet.parameters(), **kw)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = nn.MSELoss()(net(dg.tensor(xv)), dg.tensor(yv))
        loss.backward()
        opt.step()
        topt.zero_grad()
        tloss = torch.nn.MSELoss()(tnet(torch.from_numpy(xv)), torch.from_numpy(yv))
        tloss.backward()
        topt.step()
        assert loss.item() == pytest.approx(tloss.item(), rel=1e-5)
    for (k, pd), pt in zip(net.named_parameters(), tnet.parameters()):
        dg.testing.assert_close(pd.numpy(), pt.detach().numpy(), rtol=1e-5, atol=1e-6,
                                equal_nan=True, check_dtype=False, msg=k)


def test_lbfgs_needs_a_closure_one_group_and_eager_mode() -> None:
    w = dg.nn.Parameter(dg.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="per-parameter options"):
        dg.optim.LBFGS([{"params": [w]}, {"params": [dg.nn.Parameter(dg.ones(1))]}])
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        dg.optim.LBFGS([w], line_search_fn="armijo")
    opt = dg.optim.LBFGS([w])
    with pytest.raises(RuntimeError, match="requires a closure"):
        opt.step()

    def closure():
        opt.zero_grad()
        loss = ((w - 3.0) ** 2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 5.0  # the loss before the step, as torch returns
    dg.testing.assert_close(w.numpy(), np.array([3.0, 3.0], dtype=np.float32), rtol=0, atol=1e-5)

    @dg.compile
    def step():
        return opt.step(closure)

    # Inside a compiled function its step cannot be traced: that signature runs eagerly.
    with pytest.warns(RuntimeWarning, match="LBFGS.step"):
        step()
    dg.testing.assert_close(w.numpy(), np.array([3.0, 3.0], dtype=np.float32), rtol=0, atol=1e-5)
