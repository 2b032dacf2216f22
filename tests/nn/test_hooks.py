"""Module hooks: forward pre-hooks, forward hooks, full backward (pre-)hooks, handles;
eager, and forward hooks traced inside `dg.compile`."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close


def _lin(seed=0):
    dg.manual_seed(seed)
    return dg.nn.Linear(3, 2)


def _x():
    return dg.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3) / 10, requires_grad=True)


def test_forward_pre_hook_replaces_args_and_handle_removes_it():
    lin = _lin()
    x = _x()
    base = lin(x).numpy()
    h = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    assert_close(lin(x).numpy(), lin.forward(x * 2).numpy())
    h.remove()
    assert_close(lin(x).numpy(), base)
    # A single (non-tuple) return value is wrapped, as in PyTorch.
    with lin.register_forward_pre_hook(lambda m, args: args[0] * 0):
        assert_close(lin(x).numpy(), np.broadcast_to(lin.bias.numpy(), (4, 2)))
    assert_close(lin(x).numpy(), base)


def test_forward_hook_replaces_output_with_kwargs_and_order():
    lin = _lin()
    x = _x()
    calls = []
    lin.register_forward_hook(lambda m, a, o: calls.append("second") or o + 1)
    lin.register_forward_hook(lambda m, a, o: calls.append("first"), prepend=True)

    def kw(m, args, kwargs, out):
        calls.append(("kw", sorted(kwargs)))
        return out * 10

    lin.register_forward_hook(kw, with_kwargs=True)
    y = lin(x)
    assert calls == ["first", "second", ("kw", [])]
    assert_close(y.numpy(), (lin.forward(x).numpy() + 1) * 10)


def test_forward_pre_hook_with_kwargs():
    class Scale(dg.nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 3.0}),
                                with_kwargs=True)
    assert_close(m(dg.ones(2), factor=2.0).numpy(), np.full(2, 3.0, np.float32))
    m2 = Scale()
    m2.register_forward_pre_hook(lambda mod, args, kwargs: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match="new_args, new_kwargs"):
        m2(dg.ones(2))


def test_always_call_hook_runs_when_forward_raises():
    class Boom(dg.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    seen = []
    m = Boom()
    m.register_forward_hook(lambda mod, a, o: seen.append(o), always_call=True)
    m.register_forward_hook(lambda mod, a, o: seen.append("never"))
    with pytest.raises(ValueError, match="boom"):
        m(dg.ones(2))
    assert seen == [None]


def test_full_backward_hook_sees_and_replaces_gradients():
    lin = _lin()
    x = _x()
    got = {}

    def hook(m, grad_input, grad_output):
        got["in"], got["out"] = grad_input, grad_output
        return (grad_input[0] * 0.5,)

    h = lin.register_full_backward_hook(hook)
    w = dg.tensor(np.array([[1.0, -2.0]] * 4, np.float32))
    (lin(x) * w).sum().backward()
    assert_close(got["out"][0].numpy(), w.numpy())
    expected_gin = w.numpy() @ lin.weight.numpy()
    assert_close(got["in"][0].numpy(), expected_gin)
    assert_close(x.grad.numpy(), 0.5 * expected_gin)
    # Parameter gradients are untouched by the hook (it sees module inputs only).
    assert_close(lin.weight.grad.numpy(), w.numpy().T @ x.numpy())
    h.remove()
    x.grad = None
    (lin(x) * w).sum().backward()
    assert_close(x.grad.numpy(), expected_gin)


def test_full_backward_pre_hook_replaces_output_gradient():
    lin = _lin()
    x = _x()
    order = []
    lin.register_full_backward_pre_hook(lambda m, go: order.append("pre") or (go[0] * 3,))
    lin.register_full_backward_hook(lambda m, gi, go: order.append(("hook", go[0].numpy()[0])))
    lin(x).sum().backward()
    assert order[0] == "pre" and order[1][0] == "hook"
    assert_close(order[1][1], np.full(2, 3.0, np.float32))  # the hook sees the new one
    assert_close(x.grad.numpy(), 3 * np.ones((4, 2), np.float32) @ lin.weight.numpy())


def test_backward_hook_when_input_needs_no_grad():
    lin = _lin()
    got = []
    lin.register_full_backward_hook(lambda m, gi, go: got.append((gi, go)))
    lin(dg.ones(2, 3)).sum().backward()
    ((gi, go),) = got
    assert gi == (None,) and go[0].shape == (2, 2)


def test_backward_hook_gradients_match_torch():
    torch = pytest.importorskip("torch")
    lin = _lin(3)
    tl = torch.nn.Linear(3, 2)
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(lin.weight.numpy()))
        tl.bias.copy_(torch.tensor(lin.bias.numpy()))
    ours, theirs = [], []
    lin.register_full_backward_hook(lambda m, gi, go: ours.append((gi[0].numpy(),
                                                                   go[0].numpy())))
    tl.register_full_backward_hook(lambda m, gi, go: theirs.append((gi[0].numpy(),
                                                                    go[0].numpy())))
    x = _x()
    tx = torch.tensor(x.numpy(), requires_grad=True)
    (lin(x).tanh() * 2).sum().backward()
    (tl(tx).tanh() * 2).sum().backward()
    for a, b in zip(ours[0], theirs[0]):
        assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert_close(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_tensor_register_hook_replaces_gradient():
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    h = y.register_hook(lambda g: g * 10)
    y.sum().backward()
    assert_close(x.grad.numpy(), np.full(2, 30.0, np.float32))
    h.remove()


def test_forward_hooks_are_traced_inside_compile():
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 1))
    seen = []
    model[0].register_forward_pre_hook(lambda m, a: (a[0] * 0.5,))
    model[1].register_forward_hook(lambda m, a, o: seen.append(tuple(o.shape)) or o * 2)
    opt = dg.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    x = dg.tensor(np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32))
    compiled = dg.compile(step)
    # Reference: the same model and hooks, eagerly, from the same weights.
    ref = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 1))
    ref.load_state_dict(model.state_dict())
    ref[0].register_forward_pre_hook(lambda m, a: (a[0] * 0.5,))
    ref[1].register_forward_hook(lambda m, a, o: o * 2)
    ropt = dg.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        lc = compiled(x)
        ropt.zero_grad()
        le = ref(x).pow(2).mean()
        le.backward()
        ropt.step()
        assert_close(lc.numpy(), le.numpy(), rtol=1e-5, atol=1e-6)
    assert compiled.stats.traces == 1
    assert seen == [(5, 4)] * 3  # the hook's append is made again by every compiled call


def test_backward_hook_inside_compile_runs_when_the_backward_is_traced():
    lin = _lin()
    got = []
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,) if not got.append(1)
                                    else None)

    def f(x):
        return lin(x).sum()

    x = _x()
    eager = f(x)
    eager.backward()
    ge = x.grad.numpy().copy()
    x.grad = None
    compiled = dg.compile(f)
    for _ in range(2):
        x.grad = None
        compiled(x).backward()
        assert_close(x.grad.numpy(), ge)
    assert compiled.stats.traces == 1
    assert len(got) == 2  # once eagerly, once while tracing the compiled backward
