"""Module infrastructure: buffers (eager, state_dict, compiled read and write-back),
containers, traversal helpers."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn


class Counter(nn.Module):
    """A buffer updated in forward, in place and by assignment."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("total", dg.zeros(2))
        self.register_buffer("scratch", dg.zeros(2), persistent=False)

    def forward(self, x):
        y = self.lin(x)
        with dg.no_grad():
            self.total.add_(y.sum(0))
            self.scratch = self.scratch * 0.5 + y.mean(0)  # rebinding, as users write it
        return y * self.total


def test_buffers_are_listed_and_persistent_ones_saved():
    m = nn.Sequential(Counter())
    assert [n for n, _ in m.named_buffers()] == ["0.total", "0.scratch"]
    assert len(list(m.buffers())) == 2
    # PyTorch's order: a module's own tensors before its children's.
    assert list(m.state_dict()) == ["0.total", "0.lin.weight", "0.lin.bias"]
    assert m.get_buffer("0.total") is m[0].total
    assert "total" not in dict(m.named_parameters())


def test_load_state_dict_copies_buffers_in_place():
    a, b = Counter(), Counter()
    with dg.no_grad():
        a.total.fill_(3.0)
    before = b.total
    b.load_state_dict(a.state_dict())
    assert b.total is before and b.total.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="Missing key"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "total"})


def test_register_buffer_errors_match_pytorch():
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", None)
    with pytest.raises(TypeError, match="buffer 'b'"):
        m.register_buffer("b", 3)
    m.x = 5
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("x", None)
    m.register_buffer("c", dg.zeros(1))
    with pytest.raises(TypeError, match="as buffer 'c'"):
        m.c = 3
    m.c = None
    assert m.c is None and list(m.buffers()) == []
    del m.c
    assert not hasattr(m, "c")


def _run(compiled: bool, steps: int = 3):
    dg.manual_seed(0)
    m = Counter()
    f = dg.compile(m) if compiled else m
    rng = np.random.default_rng(1)
    outs = []
    for _ in range(steps):
        x = dg.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        y = f(x)
        y.sum().backward()
        outs.append(y.numpy())
    return m, f, outs


def test_compiled_module_reads_and_writes_back_buffers():
    m0, _, eager = _run(False)
    m1, f, compiled = _run(True)
    assert f.stats.traces == 1 and f.stats.cache_hits == 2
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    for name in ("total", "scratch"):
        np.testing.assert_allclose(getattr(m0, name).numpy(), getattr(m1, name).numpy(),
                                   rtol=1e-6)
    np.testing.assert_allclose(m0.lin.weight.grad.numpy(), m1.lin.weight.grad.numpy(),
                               rtol=1e-5)


def test_compiled_module_sees_buffer_changes_and_rebinding():
    m, f, _ = _run(True, steps=1)
    x = dg.ones(1, 3)
    with dg.no_grad():
        m.total.fill_(2.0)
    np.testing.assert_allclose(f(x).numpy(), m.lin(x).detach().numpy() * m.total.numpy())
    m.total = dg.full((2,), 7.0)  # a new object: the trace's identity guard retraces
    traces = f.stats.traces
    out = f(x)
    assert f.stats.traces == traces + 1
    np.testing.assert_allclose(out.numpy(), m.lin(x).detach().numpy() * m.total.numpy())


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    layers.append(nn.Tanh())
    layers += [nn.Sigmoid()]
    assert len(layers) == 4 and isinstance(layers[-1], nn.Sigmoid)
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    assert len(list(layers.parameters())) == 2
    del layers[0]
    assert [type(m).__name__ for m in layers] == ["ReLU", "Tanh", "Sigmoid"]
    assert list(layers._modules) == ["0", "1", "2"]
    with pytest.raises(IndexError):
        layers[5]
    d = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.ReLU()})
    d["c"] = nn.Identity()
    assert list(d) == ["a", "b", "c"] and "a" in d and len(d) == 3
    assert [k for k, _ in d.named_parameters()] == ["a.weight", "a.bias"]
    assert isinstance(d.pop("b"), nn.ReLU) and list(d.keys()) == ["a", "c"]
    assert repr(nn.ModuleDict({"a": nn.ReLU()})) == "ModuleDict(\n  (a): ReLU()\n)"


def test_sequential_slicing_and_growth():
    s = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    tail = s[1:]
    assert isinstance(tail, nn.Sequential) and list(tail._modules) == ["1", "2"]
    assert isinstance(s[-1], nn.Sigmoid)
    s.append(nn.Identity())
    assert len(s) == 4 and isinstance(s[3], nn.Identity)
    s.insert(0, nn.ReLU6())
    assert isinstance(s[0], nn.ReLU6) and list(s._modules) == ["0", "1", "2", "3", "4"]
    named = nn.Sequential(OrderedDict([("first", nn.ReLU()), ("second", nn.Tanh())]))
    assert list(named._modules) == ["first", "second"] and isinstance(named.second, nn.Tanh)
    x = dg.tensor([-1.0, 2.0])
    np.testing.assert_allclose(nn.Sequential(nn.ReLU(), nn.Identity(7, k=2))(x).numpy(),
                               [0.0, 2.0])


def test_apply_requires_grad_children_and_submodules():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 1), nn.ReLU()))
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "Linear", "ReLU", "Sequential", "Sequential"]
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    assert [n for n, _ in net.named_children()] == ["0", "1"]
    assert isinstance(net.get_submodule("1.0"), nn.Linear)
    assert net.get_parameter("1.0.bias") is net[1][0].bias
    with pytest.raises(AttributeError):
        net.get_submodule("1.5")
    net.add_module("extra", nn.Tanh())
    assert isinstance(net.extra, nn.Tanh)
    with pytest.raises(KeyError):
        net.add_module("a.b", nn.Tanh())
