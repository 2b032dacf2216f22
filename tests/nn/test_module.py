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
        dg.testing.assert_close(a, b, rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)
    for name in ("total", "scratch"):
        dg.testing.assert_close(getattr(m0, name).numpy(), getattr(m1, name).numpy(), rtol=1e-6,
                                atol=0, equal_nan=True, check_dtype=False)
    dg.testing.assert_close(m0.lin.weight.grad.numpy(), m1.lin.weight.grad.numpy(), rtol=1e-5,
                            atol=0, equal_nan=True, check_dtype=False)


def test_compiled_module_sees_buffer_changes_and_rebinding():
    m, f, _ = _run(True, steps=1)
    x = dg.ones(1, 3)
    with dg.no_grad():
        m.total.fill_(2.0)
    dg.testing.assert_close(f(x).numpy(), m.lin(x).detach().numpy() * m.total.numpy(), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)
    m.total = dg.full((2,), 7.0)  # a new object: the trace's identity guard retraces
    traces = f.stats.traces
    out = f(x)
    assert f.stats.traces == traces + 1
    dg.testing.assert_close(out.numpy(), m.lin(x).detach().numpy() * m.total.numpy(), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)


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
    dg.testing.assert_close(nn.Sequential(nn.ReLU(), nn.Identity(7, k=2))(x).numpy(), [0.0, 2.0],
                            rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)


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


def test_module_to_casts_float_parameters_and_buffers_in_place():
    """PyTorch's ``model.to(dtype)`` / ``.double()`` / ``.float()``: floating-point
    parameters, their gradients and buffers change dtype; each parameter stays the same
    object (an optimizer holding it keeps working); integer buffers are left alone."""
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 1))
    params = list(net.parameters())
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    x = dg.randn(5, 3)
    net(x).sum().backward()
    counts = {n: b.dtype for n, b in net.named_buffers() if b.dtype.kind != "f"}
    assert net.to(dg.float64) is net and net.double() is net and net.cpu() is net
    assert [p is q for p, q in zip(net.parameters(), params)] == [True] * len(params)
    assert all(p.dtype == dg.float64 and p.grad.dtype == dg.float64 for p in params)
    assert all(b.dtype == (counts.get(n) or dg.float64) for n, b in net.named_buffers())
    before = params[0].numpy().copy()
    opt.step()
    assert params[0].dtype == dg.float64 and not np.array_equal(params[0].numpy(), before)
    out = net(x.double())
    assert out.dtype == dg.float64
    net.float()
    assert all(p.dtype == dg.float32 for p in params)
    assert net.to("cpu", dtype=dg.float16).half() is net and params[0].dtype == dg.float16
    with pytest.raises(RuntimeError, match="CPU only"):
        net.to("cuda")
    with pytest.raises(TypeError, match="floating-point"):
        net.to(dg.int64)


def test_compiled_module_follows_a_dtype_change():
    """A compiled function over a module retraces when ``model.double()`` changes its
    parameters' dtype, and its results are the float64 eager ones."""
    dg.manual_seed(1)
    net = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 2))
    f = dg.compile(lambda x: net(x), tiered=False)
    x = dg.randn(6, 3)
    assert f(x).dtype == dg.float32
    net.double()
    y = f(x.double())
    assert y.dtype == dg.float64 and f.stats.traces == 2
    dg.testing.assert_close(y.numpy(), net(x.double()).numpy(), rtol=1e-12, atol=1e-15,
                            equal_nan=True, check_dtype=False)


def test_tensor_to_accepts_dtypes_devices_and_tensors():
    x = dg.tensor([1.0, 2.0])
    assert x.to("cpu") is x and x.to(dg.float32) is x
    assert x.to(dg.float64).dtype == dg.float64
    assert x.to(dg.tensor([1], dtype=dg.int64)).dtype == dg.int64
    assert x.to("cpu", dg.float64).dtype == dg.float64
    assert x.to(np.float64).dtype == dg.float64 and x.to(np.dtype("float16")).dtype == dg.float16
    assert x.to(device="cpu", dtype="float16").dtype == dg.float16
    c = x.to("cpu", copy=True)
    assert c is not x and np.array_equal(c.numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="CPU only"):
        x.to("cuda:0")
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.to(dtyp=dg.float64)
