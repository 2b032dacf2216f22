"""A compiled training step reads the optimizer's hyperparameters and checks the guards on
them only when the optimizer's change counter moved: every kind of write between calls
(a group's item set directly, ``update``, a scheduler, a fresh list of groups,
``add_param_group``, ``load_state_dict``, state changes) is seen, and the compiled step
stays equal to the eager one, step for step."""

from __future__ import annotations

import numpy as np

import dualgraph as dg

from .._support.profiling import python_calls

S = dg.optim.lr_scheduler


def _net(seed: int = 0) -> dg.nn.Module:
    rng = np.random.default_rng(seed)
    net = dg.nn.Linear(3, 2)
    with dg.no_grad():
        for p in net.parameters():
            p.copy_(dg.tensor(rng.normal(size=p.shape).astype(np.float32)))
    return net


class Twin:
    """The same model, optimizer and data run eagerly and compiled, changed alike."""

    def __init__(self, mode: str) -> None:
        self.net = _net()
        self.extra = dg.nn.Parameter(dg.ones(2))
        self.opt = dg.optim.SGD(self.net.parameters(), lr=0.1, momentum=0.9,
                                weight_decay=0.01)
        self.sched = S.StepLR(self.opt, step_size=1, gamma=0.5)
        rng = np.random.default_rng(1)
        self.x = dg.tensor(rng.normal(size=(4, 3)).astype(np.float32))
        self.y = dg.tensor(rng.normal(size=(4, 2)).astype(np.float32))
        net, opt, extra = self.net, self.opt, self.extra

        def step(x, y):
            opt.zero_grad()
            loss = (((net(x) * extra) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        self.run = step if mode == "eager" else dg.compile(step, tiered=False, max_retraces=32)

    def __call__(self) -> tuple:
        loss = self.run(self.x, self.y).item()
        return loss, [p.numpy().copy() for p in (*self.net.parameters(), self.extra)]


def _writes():
    """``(name, change)`` pairs, applied to both twins between steps, in order."""
    def direct(t):
        t.opt.param_groups[0]["lr"] = 0.05

    def update(t):
        t.opt.param_groups[0].update(lr=0.02)

    def ior(t):
        t.opt.param_groups[0] |= {"lr": 0.03}

    def setdefault(t):
        t.opt.param_groups[0].setdefault("lr", 1.0)  # present: no write

    def scheduler(t):
        t.sched.step()

    def branch(t):
        t.opt.param_groups[0]["momentum"] = 0.0  # the update's Python branch: retrace

    def branch_back(t):
        t.opt.param_groups[0]["momentum"] = 0.5

    def fresh_groups(t):
        t.opt.param_groups = [{**g, "lr": 0.07} for g in t.opt.param_groups]

    def fresh_group_item(t):
        t.opt.param_groups[0] = {**t.opt.param_groups[0], "lr": 0.04}

    def state_entry(t):
        p = next(iter(t.net.parameters()))
        t.opt.state[p]["momentum_buffer"] = dg.zeros(p.shape)

    def add_group(t):
        t.opt.add_param_group({"params": [t.extra], "lr": 0.2})

    def second_group_lr(t):
        t.opt.param_groups[1]["lr"] = 0.01

    def load(t):
        sd = t.opt.state_dict()
        sd["param_groups"][0]["lr"] = 0.06
        t.opt.load_state_dict(sd)

    return [(f.__name__, f) for f in (direct, update, ior, setdefault, scheduler, branch,
                                      branch_back, fresh_groups, fresh_group_item,
                                      state_entry, add_group, second_group_lr, load,
                                      scheduler)]


def _close(got: tuple, want: tuple, msg: str) -> None:
    dg.testing.assert_close(got[0], want[0], rtol=1e-5, atol=0, check_dtype=False, msg=msg)
    for p, q in zip(got[1], want[1]):
        dg.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=msg)


def test_every_kind_of_write_is_seen_as_eager_sees_it() -> None:
    eager, compiled = Twin("eager"), Twin("compiled")
    _close(compiled(), eager(), "first step")
    _close(compiled(), eager(), "second step")
    for name, change in _writes():
        change(eager)
        change(compiled)
        # Twice: the first call after a write reads again, the second reuses what it read.
        _close(compiled(), eager(), f"after {name}")
        _close(compiled(), eager(), f"after {name}, next step")
    st = compiled.run.stats
    reasons = " | ".join(st.retrace_reasons)
    # Values that only feed the update (lr, dampening) reuse the trace; a branch, new
    # groups and state changes retrace.
    assert st.traces <= 12, reasons
    assert st.tier1_calls == st.calls, st  # every call ran compiled


def _optimizer_frames(run) -> int:
    """Python frames run in the optimizer's code during ``run()``."""
    return sum("/optim/" in file for file, _ in python_calls(run))


def test_hyperparameters_are_read_again_only_after_a_write() -> None:
    t = Twin("compiled")
    for _ in range(4):
        t()
    traces = t.run.stats.traces  # the first step's state path, then the later steps'
    # The optimizer's counter unchanged: the call reads no hyperparameter (at most the
    # structure counter's getter).
    assert _optimizer_frames(t) <= 1
    t.opt.param_groups[0]["lr"] = 0.5
    assert _optimizer_frames(t) > 1  # the write moved the counter: read again
    assert _optimizer_frames(t) <= 1
    assert t.run.stats.traces == traces


def test_a_value_from_two_optimizers_follows_both() -> None:
    """A number computed from two optimizers' groups is read again when either changes."""
    a, b = dg.optim.SGD([dg.nn.Parameter(dg.ones(1))], lr=0.5), \
        dg.optim.SGD([dg.nn.Parameter(dg.ones(1))], lr=2.0)

    def f(x):
        return x * (a.param_groups[0]["lr"] * b.param_groups[0]["lr"])

    cf = dg.compile(f, tiered=False)
    x = dg.tensor([1.0, 2.0])
    for lr_a, lr_b in ((0.5, 2.0), (0.5, 2.0), (0.25, 2.0), (0.25, 2.0), (0.25, 3.0),
                       (0.25, 3.0)):
        a.param_groups[0]["lr"], b.param_groups[0]["lr"] = lr_a, lr_b
        dg.testing.assert_close(cf(x), f(x), msg=f"lr {lr_a}, {lr_b}")
    assert cf.stats.traces == 1, cf.stats.retrace_reasons


def test_writes_bump_the_counter_of_values_only() -> None:
    """A hyperparameter's new value moves the value counter, not the structure counter
    (which retraces); a new key moves both."""
    opt = dg.optim.SGD([dg.nn.Parameter(dg.ones(1))], lr=0.5)
    ver, g = opt._ver, opt.param_groups[0]
    for write in (lambda: g.__setitem__("lr", 0.1), lambda: g.update(lr=0.2),
                  lambda: g.__ior__({"lr": 0.3})):
        n, v = ver.n, ver.v
        write()
        assert ver.n == n and ver.v != v
    n, v = ver.n, ver.v
    g["new_key"] = 1
    assert ver.n != n and ver.v != v
    for write in (lambda: g.pop("new_key"), lambda: g.popitem(), lambda: g.clear()):
        n = ver.n
        write()
        assert ver.n != n
