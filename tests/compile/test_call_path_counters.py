"""The generated call path's own bookkeeping: one counter per call, the grad-mode branch
chosen with the key, and an optimizer's change counters read as attributes."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.compile.guards import Value, attribute_path


def test_calls_served_by_the_call_path_count_as_calls_hits_and_tier1_calls() -> None:
    f = dg.compile(lambda x: x * 2.0 + 1.0, tiered=False)
    x = dg.tensor(np.arange(3.0, dtype=np.float32))
    for _ in range(5):
        f(x)
    s = f.stats
    assert (s.calls, s.traces, s.cache_hits, s.tier1_calls) == (5, 1, 4, 5)
    assert s.fast_calls == 4  # all but the first, which traced and set the path
    assert "calls=5" in str(s) and "cache_hits=4" in str(s)


def test_the_call_path_of_a_grad_mode_entry_records_no_tape_in_no_grad() -> None:
    f = dg.compile(lambda x, y: (x * y + y ** 2), tiered=False)
    x = dg.tensor(np.float32(2.0), requires_grad=True)
    y = dg.tensor(np.float32(3.0), requires_grad=True)
    for _ in range(3):
        z = f(x, y)
    assert z.grad_fn is not None
    source = f.call_source(x, y).split("def run")[0]
    assert "GRAD.value:" not in source  # the key checked the mode: its branch is known
    with dg.no_grad():
        for _ in range(3):
            w = f(x, y)
            assert w.grad_fn is None and not w.requires_grad
    z = f(x, y)
    z.backward()
    assert (x.grad.item(), y.grad.item()) == (3.0, 8.0)


def test_verify_runs_the_entry_in_no_grad_without_a_tape() -> None:
    f = dg.compile(lambda x: (x * x).sum(), tiered=False, verify=True)
    x = dg.tensor(np.arange(4.0, dtype=np.float32), requires_grad=True)
    for _ in range(5):  # verify checks calls 1, 2 and 4 against eager, under no_grad
        loss = f(x)
    loss.backward()
    dg.testing.assert_close(x.grad, dg.tensor(2.0 * np.arange(4.0, dtype=np.float32)))


def test_an_optimizer_counter_guard_is_read_as_attributes() -> None:
    net = dg.nn.Linear(2, 1)
    opt = dg.optim.SGD(net.parameters(), lr=0.1)

    @dg.compile(tiered=False)
    def train(x):
        opt.zero_grad()
        loss = net(x).sum()
        loss.backward()
        opt.step()
        return loss

    x = dg.ones(4, 2)
    for _ in range(3):
        train(x)
    source = train.call_source(x)
    assert "._ver." in source and "GET" not in source.split("vn = ")[0], source
    before = net.weight.detach().numpy().copy()
    opt.param_groups[0]["lr"] = 0.5  # a hyperparameter write: served, with the new value
    train(x)
    assert train.stats.traces == 1
    g = np.ones((1, 2), np.float32) * 4.0
    dg.testing.assert_close(net.weight.detach(), dg.tensor(before - 0.5 * g))
    opt.add_param_group({"params": [dg.nn.Parameter(dg.zeros(1))]})  # structure: retrace
    train(x)
    assert train.stats.traces == 2


def test_attribute_path_takes_exactly_a_partial_attrgetter_of_one_object() -> None:
    import functools
    import operator

    class Box:
        pass

    b = Box()
    assert attribute_path(functools.partial(operator.attrgetter("a.b"), b)) == (b, "a.b")
    assert attribute_path(functools.partial(operator.attrgetter("a", "b"), b)) is None
    assert attribute_path(functools.partial(operator.attrgetter("a.class"), b)) is None
    assert attribute_path(functools.partial(operator.itemgetter(0), b)) is None
    assert attribute_path(lambda: b.a) is None
    b.a = Box()
    b.a.b = 7
    e, v = Value(functools.partial(operator.attrgetter("a.b"), b), 7, str).emit(_Gen())
    assert e == "OBJ.a.b" and v == 7


class _Gen:
    def const(self, value, hint="k"):
        return hint.upper()
