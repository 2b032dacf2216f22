"""Number attributes a compiled step changes (a neural ODE function's ``self.nfe += 1``, a
trainer's ``self.iters += 1``, ``self.t = self.t * 2 + 0.25``) are written back after
every call, computed from the attributes as the call began, as eager mode leaves them;
where the step multiplies a tensor by one it is a runtime input, and where Python
branches on one the entry is guarded on that branch. Plain values appended to a list
from outside are appended by every call; lengths of containers from outside are
guarded. Each case runs eagerly and compiled
(`test_probe_round4`'s harness) and must give the same results; the compiled function of
a case serves all its calls, and its trace count is checked too."""

from __future__ import annotations

import warnings

import pytest

import dualgraph as dg

from .test_probe_fidelity import _same
from .test_probe_round4 import _outcome, _plain

nn = dg.nn
CASES: dict = {}
TRACES: dict = {}


def case(traces: int):
    def register(fn):
        CASES[fn.__name__] = fn
        TRACES[fn.__name__] = traces
        return fn
    return register


class _ODEFunc(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.nfe = 0
        self.t = 0.5
        self.last = dg.zeros(2)

    def forward(self, y):
        self.nfe += 1
        self.t = self.t * 2 + 0.25
        self.last = (y * self.nfe).detach()  # a tensor attribute written beside them
        return self.lin(y).sum() * self.nfe + self.t


@case(traces=1)
def counters_on_a_module_that_runs(wrap):
    dg.manual_seed(0)
    m = _ODEFunc()
    f = wrap(m)
    out = [f(dg.full((2,), float(k))) for k in range(4)]
    return out + [m.nfe, type(m.nfe).__name__, m.t, m.last]


@case(traces=1)
def counters_in_a_training_step(wrap):
    """Two evaluations per step, an optimizer between: the counter and the parameters
    move together, and a value set from the counter (``seen``) follows it."""
    dg.manual_seed(0)
    m = _ODEFunc()
    opt = dg.optim.SGD(m.parameters(), lr=0.1)

    class Log:
        pass

    log = Log()
    log.seen = -1

    def step(x):
        opt.zero_grad()
        loss = m(x) + m(x * 2)
        loss.backward()
        opt.step()
        log.seen = m.nfe * 10
        return loss

    f = wrap(step)
    out = [f(dg.full((2,), float(k))) for k in range(3)]
    return out + [m.nfe, m.t, log.seen, m.lin.weight * 1]


@case(traces=2)
def a_counter_that_decides_a_branch(wrap):
    """``if step_count % every == 0``: guarded on the branch, not on the count, so two
    entries serve every call."""
    class Warmup:
        def __init__(self) -> None:
            self.step_count = 0
            self.every = 3

    sched = Warmup()
    w = dg.tensor([1.0, -1.0])

    def step(x):
        sched.step_count += 1
        if sched.step_count % sched.every == 0:
            return x * w * 10
        return x * w

    f = wrap(step)
    return [f(dg.full((2,), float(k))) for k in range(7)] + [sched.step_count]


@case(traces=1)
def an_object_passed_in_counts_and_resets(wrap):
    """An argument object's counter, and a number set to a constant each call."""
    class Trainer:
        pass

    tr = Trainer()
    tr.iters, tr.running = 5, 1.5

    def step(tr, x):
        tr.iters += 1
        tr.running = 0.0
        return (x * 2).sum()

    f = wrap(step)
    return [f(tr, dg.ones(2)) for _ in range(3)] + [tr.iters, tr.running]


class _Counted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, y):
        self.calls += 1
        if y.shape[0] != 2:
            raise ValueError("a batch of two")
        return y * 2


@case(traces=1)
def a_counter_before_an_error(wrap):
    """Eagerly the count moves before the error: that signature runs eagerly."""
    m = _Counted()
    f = wrap(m)
    out = [_outcome(f, dg.ones(n)) for n in (2, 3, 2, 3, 2)]
    return out + [m.calls]


@case(traces=1)
def plain_values_appended_to_a_list_from_outside(wrap):
    """``logs["steps"].append(step.k)`` and a constant: every compiled call appends its
    own values, after its kernels, as eager mode does."""
    class Step:
        pass

    step = Step()
    step.k = 0
    logs = {"steps": [], "tags": []}

    def f(x):
        step.k += 1
        logs["steps"].append(step.k)
        logs["tags"].append(("seen", 1.5))
        return x * step.k

    g = wrap(f)
    return [g(dg.ones(2)) for _ in range(3)] + [logs, step.k]


@case(traces=1)
def plain_values_appended_to_a_short_list_an_attribute_holds(wrap):
    """A short list of numbers an attribute holds that the code only appends to is
    guarded by identity alone: one trace appends on every call."""
    class Log:
        def __init__(self) -> None:
            self.seen: list = []

    log = Log()

    def f(x):
        log.seen.append(7)
        return x + 1

    g = wrap(f)
    return [g(dg.ones(2)) for _ in range(3)] + [log.seen]


@case(traces=2)
def lengths_read_from_outside(wrap):
    """``len(opt.state)``, ``len(buf)`` of a list of tensors: guarded, so a change between
    calls retraces instead of running with the length the trace read."""
    w = nn.Parameter(dg.tensor([1.0, 2.0]))
    opt = dg.optim.SGD([w], lr=0.1, momentum=0.9)
    buf = [dg.ones(2) for _ in range(20)]

    def f(x):
        return x * len(opt.state) + len(buf)

    g = wrap(f)
    out = [g(dg.ones(2)), g(dg.ones(2))]
    (w * 2).sum().backward()
    opt.step()
    buf.append(dg.ones(2))
    return out + [g(dg.ones(2)), g(dg.ones(2))]


_CALLS = 0  # a global counter (``global _CALLS; _CALLS += 1``)
_HIST: list = []


@case(traces=1)
def counters_in_lists_dicts_and_globals(wrap):
    """``count[0] += 1``, ``counts["steps"] += 1``, ``counts[0] += 2``, ``global n; n +=
    1``, ``nonlocal k; k += 1`` and an append of the count, beside a tensor attribute
    computed from them: each call writes what eager mode leaves, after the call's kernels,
    with one trace."""
    global _CALLS
    _CALLS = 0
    count, counts, history, k = [0, 5], {"steps": 0, 0: 1.5}, [], 0

    class Box:
        pass

    box = Box()
    box.last = dg.zeros(2)

    def step(x):
        global _CALLS
        nonlocal k
        _CALLS += 1
        k += 1
        count[0] += 1
        counts["steps"] += 1
        counts[0] += 2
        history.append(_CALLS * 10 + count[0])
        box.last = (x * count[0] + counts[0] + k).detach()
        return x * count[1]

    f = wrap(step)
    out = [f(dg.full((2,), float(j))) for j in range(4)]
    return out + [list(count), dict(counts), _CALLS, k, list(history), box.last]


@case(traces=2)
def a_list_counter_that_decides_a_branch(wrap):
    """``if count[0] % 3 == 0``: guarded on the branch's outcome, not on the count."""
    count = [0]

    def step(x):
        count[0] += 1
        if count[0] % 3 == 0:
            return x * 10
        return x

    f = wrap(step)
    return [f(dg.ones(2)) for _ in range(7)] + [count[0]]


@case(traces=3)
def what_the_code_reads_stays_guarded(wrap):
    """A dict item the code reads but does not write (``cfg["scale"]``) and a list it
    reads and appends to (``seen[-1]``) are guarded by value; the counters beside them
    are not."""
    cfg = {"calls": 0, "scale": 2.0}
    seen = [1]

    def step(x):
        cfg["calls"] += 1
        out = x * cfg["scale"] + seen[-1]
        seen.append(7)
        return out

    f = wrap(step)
    out = [f(dg.ones(2)) for _ in range(2)]
    cfg["scale"] = 3.0
    return out + [f(dg.ones(2)), dict(cfg), list(seen)]


@case(traces=2)
def a_list_rebound_between_calls(wrap):
    """``history = []`` between calls: the compiled call appends to the list the name holds
    now (the name is guarded by identity)."""
    box = {"history": []}

    def step(x):
        hist = box["history"]
        hist.append(1)
        return x + 1

    out = []
    f = wrap(step)
    for k in range(4):
        if k == 2:
            box["history"] = []
        out.append(f(dg.ones(2)))
    return out + [box["history"]]


def _hist_step(x):
    _HIST.append(2)
    return x + 2


@case(traces=2)
def a_global_list_rebound_between_calls(wrap):
    global _HIST
    _HIST = []
    f = wrap(_hist_step)
    out = [f(dg.ones(2)), f(dg.ones(2))]
    first = _HIST
    _HIST = []
    out += [f(dg.ones(2)), f(dg.ones(2))]
    return out + [first, _HIST]


@case(traces=1)
def a_counter_before_an_error_half_way(wrap):
    """``count[0] += 1`` and ``global`` counters, then an error: eagerly they keep their new
    values; that signature runs eagerly, the other stays compiled."""
    global _CALLS
    _CALLS = 0
    count = [0]

    def step(x):
        global _CALLS
        _CALLS += 1
        count[0] += 1
        if x.shape[0] != 2:
            raise ValueError("a batch of two")
        return x * 2

    f = wrap(step)
    out = [_outcome(f, dg.ones(n)) for n in (2, 3, 2, 3, 2)]
    return out + [count[0], _CALLS]


@case(traces=[0, 2])
def item_reads_and_float_arguments(wrap):
    """A number read with ``.item()`` added to a list counter runs eagerly (the list is
    left as eager mode leaves it); a float argument added to one is keyed by value."""
    total, acc = [0.0], [0.0]

    def read(x):
        loss = (x * 2).sum()
        total[0] += loss.item()
        return loss

    def scaled(x, lr):
        acc[0] += lr
        return x * lr

    f, g = wrap(read), wrap(scaled)
    out = [f(dg.full((2,), float(k))) for k in range(3)]
    out += [g(dg.ones(2), lr) for lr in (0.5, 0.5, 0.25)]
    return out + [total[0], acc[0]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_gives_the_eager_answer_with_one_trace_per_branch(name):
    made: list = []

    def compiled(fn):
        made.append(dg.compile(fn))
        return made[-1]

    with warnings.catch_warnings():
        # The signature that raised runs eagerly and says so once.
        warnings.simplefilter("ignore", RuntimeWarning)
        eager = _plain(CASES[name](lambda fn: fn))
        got = _plain(CASES[name](compiled))
    _same(eager, got)
    want = TRACES[name]
    assert [f.stats.traces for f in made] == (want if isinstance(want, list) else [want])


def test_a_counter_is_not_guarded_by_value_and_other_attributes_still_are():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.calls, cfg.scale = 0, 2.0

    def step(x):
        cfg.calls += 1
        return x * cfg.scale

    f = dg.compile(step)
    for _ in range(3):
        f(dg.ones(2))
    assert (cfg.calls, f.stats.traces) == (3, 1)
    cfg.scale = 3.0
    assert f(dg.ones(2)).tolist() == [3.0, 3.0]
    assert (cfg.calls, f.stats.traces) == (4, 2)
    assert "cfg.scale" in f.stats.retrace_reasons[-1]
    # Another kind of value there: retraced (a float), or eager mode's own error (None).
    cfg.calls = 2.5
    f(dg.ones(2))
    assert (cfg.calls, f.stats.traces) == (3.5, 3)
    cfg.calls = None
    with pytest.raises(TypeError, match="NoneType"):
        f(dg.ones(2))
