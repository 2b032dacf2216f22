"""Optimizer state and parameter groups: ``state_dict``/``load_state_dict`` in PyTorch's
format, ``add_param_group``, ``zero_grad``, and a compiled training step noticing every
change of state or groups made between calls (never running with what it traced)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn

from .._support.compiled import B3

optim = dg.optim


def _setup():
    rng = np.random.default_rng(1)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    with dg.no_grad():
        for p in net.parameters():
            p.copy_(dg.tensor(rng.normal(size=p.shape).astype(np.float32)))
    x = dg.tensor(rng.normal(size=(5, 3)).astype(np.float32))
    y = dg.tensor(rng.normal(size=(5, 2)).astype(np.float32))
    return net, x, y


def drive(compiled: bool, build, changes: dict, steps: int = 7):
    """Losses and parameters per step; ``changes[k](opt, params)`` runs after step ``k``."""
    net, x, y = _setup()
    params = list(net.parameters())
    opt = build(params)

    def step(x, y):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = dg.compile(step) if compiled else step
    out = []
    for k in range(steps):
        loss = run(x, y).item()
        out.append((loss, [p.numpy().copy() for p in params]))
        if k in changes:
            changes[k](opt, params)
    return out, run


def _zeros_like_state(opt, params):
    opt.state[params[0]]["exp_avg"] = dg.zeros_like(params[0])


def _load_fresh(opt, params):
    fresh = optim.Adam(params, lr=0.05)
    opt.load_state_dict(fresh.state_dict())


def _plain_state_dict(opt, params):
    d = {}
    opt.state[params[0]] = d
    opt._plain = d  # changed again after the next step


def _then_fill_plain(opt, params):
    opt._plain["momentum_buffer"] = dg.ones_like(params[0])


def _plain_params(opt, params):
    lst = list(params)
    opt.param_groups[0]["params"] = lst
    opt._lst = lst


CHANGES = {
    "adam_state_clear": (lambda ps: optim.Adam(ps, lr=0.05),
                         {2: lambda o, ps: o.state.clear()}),
    "sgd_state_del_and_reassign": (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        {1: lambda o, ps: o.state.__delitem__(ps[0]),
         3: lambda o, ps: o.state.__setitem__(ps[2], {})}),
    "adam_state_entry_reassigned": (lambda ps: optim.Adam(ps, lr=0.05), {2: _zeros_like_state}),
    "sgd_params_replaced": (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        {1: lambda o, ps: o.param_groups[0].__setitem__("params", ps[:2]),
         3: lambda o, ps: o.param_groups[0]["params"].append(ps[3])}),
    "adam_add_param_group": (
        lambda ps: optim.Adam(ps[:2], lr=0.05),
        {1: lambda o, ps: o.add_param_group({"params": ps[2:], "lr": 0.01})}),
    "adamw_load_state_dict": (lambda ps: optim.AdamW(ps, lr=0.05), {2: _load_fresh}),
    "sgd_plain_state_dict_changed_later": (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        {1: _plain_state_dict, 3: _then_fill_plain}),
    "sgd_plain_params_list_changed_later": (
        lambda ps: optim.SGD(ps, lr=0.1),
        {1: _plain_params, 3: lambda o, ps: o._lst.pop()}),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_compiled_step_notices_state_and_group_changes(case) -> None:
    build, changes = CHANGES[case]
    want, _ = drive(False, build, changes)
    got, run = drive(True, build, changes)
    for k, ((loss, ps), (eloss, eps)) in enumerate(zip(got, want)):
        dg.testing.assert_close(loss, eloss, rtol=1e-5, atol=0, equal_nan=True, check_dtype=False,
                                msg=f"step {k}")
        for i, (p, q) in enumerate(zip(ps, eps)):
            dg.testing.assert_close(p, q, equal_nan=True,
                                    msg=f"step {k}, parameter {i}", **B3[q.dtype])
    assert run.stats.traces >= 2
    assert any("state or parameter groups changed" in r for r in run.stats.retrace_reasons)


def test_unchanged_optimizer_does_not_retrace() -> None:
    _, run = drive(True, lambda ps: optim.Adam(ps, lr=0.05), {})
    assert run.stats.traces == 1


def test_changing_state_inside_the_compiled_step_runs_eagerly() -> None:
    def build(ps):
        return optim.Adam(ps, lr=0.05)

    net, x, y = _setup()
    opt = build(list(net.parameters()))

    def step(x, y):
        opt.zero_grad()
        ((net(x) - y) ** 2).mean().backward()
        opt.step()
        opt.state.clear()  # a Python side effect: a compiled call would not repeat it

    with pytest.warns(RuntimeWarning, match="optimizer's state"):
        dg.compile(step)(x, y)
    assert len(opt.state) == 0


# ----------------------------------------------------------------------- eager API
def _trained(opt_cls, steps=3, **kw):
    net, x, y = _setup()
    opt = opt_cls(net.parameters(), **kw)
    for _ in range(steps):
        opt.zero_grad()
        ((net(x) - y) ** 2).mean().backward()
        opt.step()
    return net, x, y, opt


@pytest.mark.parametrize("opt_cls", [optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop,
                                     optim.Adagrad, optim.Adadelta, optim.Adamax, optim.NAdam])
def test_state_dict_round_trip_continues_the_same_trajectory(opt_cls) -> None:
    kw = {"lr": 0.05, "momentum": 0.9} if opt_cls in (optim.SGD, optim.RMSprop) else {"lr": 0.05}
    net, x, y, opt = _trained(opt_cls, **kw)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1, 2, 3]]
    assert sorted(sd["state"]) == [0, 1, 2, 3]
    saved = copy.deepcopy(sd)
    clone = _setup()[0]
    clone.load_state_dict(net.state_dict())
    opt2 = opt_cls(clone.parameters(), lr=1.0)  # hyperparameters come from the state dict
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == 0.05
    for o, n in ((opt, net), (opt2, clone)):
        for _ in range(2):
            o.zero_grad()
            ((n(x) - y) ** 2).mean().backward()
            o.step()
    for p, q in zip(net.parameters(), clone.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    # Loading copies: the saved dict's tensors are not the optimizer's.
    k0 = next(iter(saved["state"][0]))
    assert saved["state"][0][k0] is not opt2.state[clone[0].weight][k0]


def test_state_dict_tensors_are_the_optimizers_own() -> None:
    _, _, _, opt = _trained(optim.Adam, lr=0.1)
    sd = opt.state_dict()
    p = opt.param_groups[0]["params"][0]
    assert sd["state"][0]["exp_avg"] is opt.state[p]["exp_avg"]
    assert sd["state"][0]["step"].dtype == np.float32 and sd["state"][0]["step"].item() == 3


def test_load_state_dict_refuses_other_shapes_of_groups() -> None:
    _, _, _, opt = _trained(optim.SGD, lr=0.1, momentum=0.9)
    a = nn.Parameter(dg.ones(2))
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.SGD([a], lr=0.1).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="number of parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [nn.Parameter(dg.ones(1))]}],
              lr=0.1).load_state_dict(opt.state_dict())


def test_load_state_dict_casts_state_to_the_parameters_dtype() -> None:
    p = nn.Parameter(dg.tensor(np.ones(2, np.float64)))
    opt = optim.Adam([p])
    p.grad = dg.tensor(np.ones(2))
    opt.step()
    q = nn.Parameter(dg.tensor(np.ones(2, np.float32)))
    opt2 = optim.Adam([q])
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[q]["exp_avg"].dtype == np.float32
    assert opt2.state[q]["step"].dtype == np.float32


def test_add_param_group_fills_defaults_and_refuses_duplicates() -> None:
    a, b = nn.Parameter(dg.ones(2)), nn.Parameter(dg.ones(3))
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.5})
    g = opt.param_groups[1]
    assert g["lr"] == 0.5 and g["momentum"] == 0.9 and g["nesterov"] is False
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="ordered collections"):
        opt.add_param_group({"params": {nn.Parameter(dg.ones(1))}})
    b.grad = dg.ones(3)
    opt.step()
    assert b.tolist() == [0.5, 0.5, 0.5]


def test_zero_grad_set_to_none_false_keeps_zero_tensors() -> None:
    a = nn.Parameter(dg.ones(2))
    opt = optim.SGD([a], lr=0.1)
    (a * 3).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and a.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert a.grad is None


def test_state_dict_matches_torch_after_loading_torchs() -> None:
    """A PyTorch optimizer's state dict (tensors converted) loads, and both continue the
    same way."""
    torch = pytest.importorskip("torch")
    w0 = np.random.default_rng(3).standard_normal((3, 2))
    tp = torch.nn.Parameter(torch.tensor(w0))
    topt = torch.optim.AdamW([tp], lr=0.1)
    for k in range(3):
        tp.grad = torch.full((3, 2), 0.1 * (k + 1), dtype=torch.float64)
        topt.step()
    tsd = topt.state_dict()
    sd = {"state": {i: {n: dg.tensor(v.numpy()) for n, v in s.items()}
                    for i, s in tsd["state"].items()},
          "param_groups": tsd["param_groups"]}
    p = nn.Parameter(dg.tensor(tp.detach().numpy().copy()))
    opt = optim.AdamW([p])
    opt.load_state_dict(sd)
    for _ in range(2):
        tp.grad = torch.full((3, 2), -0.2, dtype=torch.float64)
        topt.step()
        p.grad = dg.tensor(np.full((3, 2), -0.2))
        opt.step()
    dg.testing.assert_close(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
