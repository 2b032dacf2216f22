"""A value made a leaf inside a compiled function (``x.clone().requires_grad_()``) and
differentiated with ``dg.autograd.grad(..., create_graph=True)``: the physics-informed
training step, compiled, gives eager's losses and parameters with one trace."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close


def _net(dtype: np.dtype) -> dg.nn.Module:
    dg.manual_seed(3)
    return dg.nn.Sequential(dg.nn.Linear(1, 6), dg.nn.Tanh(), dg.nn.Linear(6, 1)).to(dtype)


def _pinn_step(net: dg.nn.Module, opt: dg.optim.Optimizer):
    def step(x, f):
        opt.zero_grad()
        t = x.clone().requires_grad_(True)
        u = net(t)
        du = dg.autograd.grad(u.sum(), t, create_graph=True)[0]
        loss = ((du - f) ** 2).mean() + (u ** 2).mean()
        loss.backward()
        opt.step()
        return loss, du.detach(), t.grad
    return step


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pinn_step_compiled_equals_eager(dtype) -> None:
    rng = np.random.default_rng(0)
    xs = [dg.tensor(rng.standard_normal((8, 1)).astype(dtype)) for _ in range(3)]
    fs = [dg.tensor(np.cos(x.numpy())) for x in xs]
    runs = []
    for compiled in (False, True):
        net = _net(dtype)
        opt = dg.optim.Adam(net.parameters(), lr=0.05)
        step = _pinn_step(net, opt)
        f = dg.compile(step) if compiled else step
        outs = [f(x, y) for x, y in zip(xs, fs)]
        runs.append((outs, [p.detach().numpy().copy() for p in net.parameters()], f))
    (eager, p_eager, _), (comp, p_comp, f) = runs
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    for e, c in zip(eager, comp):
        for a, b in zip(e, c):
            assert_close(b, a, **tol)
    for a, b in zip(p_eager, p_comp):
        assert_close(dg.tensor(b), dg.tensor(a), **tol)
    assert f.stats.traces == 1


def test_grad_of_traced_value_matches_finite_differences() -> None:
    """du/dt of u = sin(t) * t inside a compiled function is cos(t) * t + sin(t)."""
    def g(x):
        t = (x * 1.0).requires_grad_()
        u = dg.sin(t) * t
        (du,) = dg.autograd.grad(u.sum(), [t])
        return du

    x = dg.tensor(np.linspace(-2, 2, 7))
    want = np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy())
    assert_close(dg.compile(g)(x), dg.tensor(want), rtol=1e-12, atol=1e-12)
    assert_close(g(x), dg.tensor(want), rtol=1e-12, atol=1e-12)


def test_traced_grad_errors() -> None:
    def unused(x):
        t = x.clone().requires_grad_()
        s = (x * 2).clone().requires_grad_()
        return dg.autograd.grad((t * t).sum(), [t, s])[0]

    with pytest.raises(RuntimeError, match="allow_unused=True"):
        dg.compile(unused)(dg.ones(3))

    def no_grad_input(x):
        return dg.autograd.grad((x * x).sum(), x)[0]

    with pytest.raises(RuntimeError, match="does not require grad"):
        dg.compile(no_grad_input)(dg.ones(3))

    def argument_flag(x):
        x.requires_grad_()
        return x * 2

    # Eagerly this changes the caller's tensor, which a graph cannot: the signature runs
    # eagerly (strict=True refuses, naming the copy that compiles).
    with pytest.raises(dg.EagerOnlyError, match=r"clone\(\)\.requires_grad_"):
        dg.compile(argument_flag, strict=True)(dg.ones(3))
    x = dg.ones(3)
    with pytest.warns(RuntimeWarning, match=r"clone\(\)\.requires_grad_"):
        y = dg.compile(argument_flag)(x)
    assert x.requires_grad and y.requires_grad
    dg.testing.assert_close(y, dg.full((3,), 2.0))


def test_two_steps_in_one_call_equal_eager() -> None:
    """The second step's forward reads parameters the first step's optimizer wrote under
    no_grad: they stay leaves, so its backward reaches them, as eagerly."""
    rng = np.random.default_rng(4)
    x = dg.tensor(rng.standard_normal((6, 1)))
    runs = []
    for compiled in (False, True):
        net = _net(np.float64)
        opt = dg.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

        def two(x, net=net, opt=opt):
            losses = []
            for _ in range(2):
                opt.zero_grad()
                loss = (net(x) ** 2).mean()
                loss.backward()
                opt.step()
                losses.append(loss)
            return losses[0], losses[1]

        f = dg.compile(two) if compiled else two
        out = [v.item() for _ in range(2) for v in f(x)]
        runs.append((out, [p.detach().numpy().copy() for p in net.parameters()]))
    assert_close(runs[1][0], runs[0][0], rtol=1e-12, atol=0.0)
    for a, b in zip(runs[0][1], runs[1][1]):
        assert_close(b, a, rtol=1e-12, atol=0.0)
