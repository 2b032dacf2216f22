"""The modules' change counter (`nn.changes`): every write a compiled call's module guards
read moves it, so the generated call path checks those guards only when it moved. Each
kind of write is counted (one test each), a compiled call sees every one of them as eager
mode does, and a call whose modules did not change reads none of their tables."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn.changes import CHANGES

from .._support.profiling import python_calls

nn = dg.nn


def _moves(change) -> bool:
    before = CHANGES.v
    change()
    return CHANGES.v != before


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))


def _param(*shape: int) -> nn.Parameter:
    return nn.Parameter(dg.ones(*shape))


# Each kind of write a module guard reads, on a fresh model: the counter moves.
WRITES = {
    "parameter assigned": lambda n: setattr(n[0], "weight", _param(3, 2)),
    "parameter set to None": lambda n: setattr(n[0], "bias", None),
    "parameter registered": lambda n: n[0].register_parameter("extra", _param(1)),
    "parameter deleted": lambda n: delattr(n[0], "bias"),
    "parameter table written": lambda n: n[0]._parameters.__setitem__("weight", _param(3, 2)),
    "parameter table popped": lambda n: n[0]._parameters.pop("bias"),
    "buffer registered": lambda n: n[0].register_buffer("mask", dg.ones(3)),
    "buffer assigned": lambda n: (n[0].register_buffer("mask", dg.ones(3)),
                                  setattr(n[0], "mask", dg.zeros(3)))[-1],
    "buffer as attribute": lambda n: setattr(n[0], "mask", nn.Buffer(dg.ones(3))),
    "submodule assigned": lambda n: setattr(n, "extra", nn.Tanh()),
    "submodule deleted": lambda n: delattr(n, "1"),
    "container item set": lambda n: n.__setitem__(1, nn.Tanh()),
    "container item deleted": lambda n: n.__delitem__(1),
    "container appended": lambda n: n.append(nn.Tanh()),
    "container inserted": lambda n: n.insert(0, nn.Tanh()),
    "submodule table cleared": lambda n: n[1]._modules.clear(),
    "plain attribute": lambda n: setattr(n[1], "inplace", True),
    "plain attribute deleted": lambda n: (setattr(n[1], "scale", 2.0), delattr(n[1], "scale")),
    "train": lambda n: n.train(),
    "eval": lambda n: n.eval(),
    "training flag": lambda n: setattr(n[0], "training", False),
    "forward hook": lambda n: n[0].register_forward_hook(lambda m, a, o: o),
    "forward pre-hook": lambda n: n[0].register_forward_pre_hook(lambda m, a: a),
    "backward hook": lambda n: n[0].register_full_backward_hook(lambda m, gi, go: gi),
    "hook removed": lambda n: n[0].register_forward_hook(lambda m, a, o: o).remove(),
}


@pytest.mark.parametrize("kind", list(WRITES))
def test_every_kind_of_write_moves_the_counter(kind: str) -> None:
    net = _net()
    assert _moves(lambda: WRITES[kind](net)), kind


def test_module_dict_and_list_writes_move_the_counter() -> None:
    d = nn.ModuleDict({"a": nn.ReLU()})
    lst = nn.ModuleList([nn.ReLU()])
    for change in (lambda: d.__setitem__("b", nn.Tanh()), lambda: d.pop("a"),
                   lambda: d.update({"c": nn.ReLU()}), lambda: d.clear(),
                   lambda: lst.append(nn.Tanh()), lambda: lst.__setitem__(0, nn.Tanh()),
                   lambda: lst.extend([nn.ReLU()]), lambda: lst.__delitem__(0)):
        assert _moves(change)


def test_reading_a_module_does_not_move_the_counter() -> None:
    net = _net()
    x = dg.ones(4, 2)
    assert not _moves(lambda: (net(x), net[0].weight, list(net.parameters()),
                               net.state_dict(), net.training, repr(net)))


class Net(nn.Module):
    """A layer, a swappable activation, a buffer and a branch on ``training``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 3)
        self.act = nn.ReLU()
        self.register_buffer("shift", dg.tensor([0.5, -0.5, 1.0]))

    def forward(self, x):
        out = self.act(self.fc(x)) + self.shift
        return out * 2.0 if self.training else out


def _new_param(p: nn.Parameter, scale: float) -> nn.Parameter:
    return nn.Parameter(dg.tensor(p.numpy() * scale))


def test_a_compiled_call_sees_every_kind_of_write_between_calls() -> None:
    dg.manual_seed(0)
    net = Net()
    f = dg.compile(lambda x: net(x), tiered=False, max_retraces=32)
    x = dg.tensor(np.array([[0.5, -1.0], [2.0, 0.25]], np.float32))
    handle = []
    steps = {
        "none": lambda: None,
        "parameter": lambda: setattr(net.fc, "weight", _new_param(net.fc.weight, -1.0)),
        "parameter table": lambda: net.fc._parameters.__setitem__(
            "bias", _new_param(net.fc.bias, 3.0)),
        "buffer": lambda: setattr(net, "shift", dg.tensor([1.0, 2.0, 3.0])),
        "eval": net.eval,
        "train": net.train,
        "submodule": lambda: setattr(net, "act", nn.Tanh()),
        "hook": lambda: handle.append(net.fc.register_forward_hook(lambda m, a, o: o * 3.0)),
        "hook removed": lambda: handle.pop().remove(),
        "pre-hook": lambda: handle.append(net.register_forward_pre_hook(
            lambda m, a: (a[0] * -1.0,))),
        "pre-hook removed": lambda: handle.pop().remove(),
        "load_state_dict": lambda: net.load_state_dict(
            {k: v * 0.5 for k, v in net.state_dict().items()}),
        "load_state_dict assign": lambda: net.load_state_dict(
            {k: v * 2.0 for k, v in net.state_dict().items()}, assign=True),
        "data swap": lambda: setattr(net.fc.weight, "data", net.fc.weight.detach() + 1.0),
        "frozen": lambda: net.fc.weight.requires_grad_(False),
        "another module changed": lambda: setattr(nn.Linear(1, 1), "weight", _param(1, 1)),
    }
    for kind, change in steps.items():
        change()
        # Inference kernels: one Numba compile per trace, where a train-mode call has two.
        with dg.no_grad():
            for _ in range(2):
                dg.testing.assert_close(f(x), net(x), msg=kind)
    # Back to `train()` reuses the first entry; the hook's removal too.
    assert f.stats.traces <= 9, f.stats.retrace_reasons


def _calls(fn) -> list:
    """The C functions ``fn()`` calls, by qualified name."""
    return [name for file, name in python_calls(fn, c_calls=True) if not file]


def test_a_call_whose_modules_did_not_change_reads_none_of_their_tables() -> None:
    dg.manual_seed(0)
    net = _net()
    opt = dg.optim.SGD(net.parameters(), lr=0.1)

    @dg.compile(tiered=False)
    def step(x, t):
        opt.zero_grad()
        loss = ((net(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    x, t = dg.ones(4, 2), dg.zeros(4, 1)
    step(x, t)
    step(x, t)
    tables = {"dict.get", "OrderedDict.get", "OrderedDict.items"}
    assert not tables & set(_calls(lambda: step(x, t)))
    net.train()  # the same flag again: the counter moved, the guards still hold
    assert tables & set(_calls(lambda: step(x, t)))
    assert not tables & set(_calls(lambda: step(x, t)))
    assert step.stats.traces == 1
