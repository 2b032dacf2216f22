"""Same program, same answer, for state that eager mode reads on every call: a leaf's
gradient hooks, anomaly mode, the autocast region, a random generator object the function
draws from, ``p.data = ...`` and a global rebound inside, and what a step leaves on the
tensors it writes (history, leafness, versions). Each case runs eagerly and compiled
(`test_probe_fidelity`'s harness) and must give the same results."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg

from .test_probe_fidelity import _compile, _identity, _plain, _same

nn = dg.nn
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _meta(t: dg.Tensor) -> tuple:
    return (t.requires_grad, t.is_leaf, t.grad_fn is None, t._version[0], str(t.dtype))


def _sgd_step(wrap, lin: nn.Linear, opt: dg.optim.Optimizer):
    def step(x):
        opt.zero_grad()
        loss = (lin(x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    return wrap(step)


@case
def leaf_gradient_hook_added_and_removed(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    f = _sgd_step(wrap, lin, dg.optim.SGD(lin.parameters(), lr=0.1))
    x = dg.ones(3, 2)
    out = [f(x)]
    h = lin.weight.register_hook(lambda g: g * 2)
    out += [f(x), lin.weight.grad.clone(), f(x)]
    h.remove()
    return out + [f(x), lin.weight.grad.clone(), lin.weight]


@case
def leaf_gradient_hook_present_when_traced(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    lin.bias.register_hook(lambda g: g.clamp(-0.5, 0.5))
    f = _sgd_step(wrap, lin, dg.optim.Adam(lin.parameters(), lr=0.1))
    x = dg.ones(3, 2)
    return [f(x), f(x), lin.bias.grad.clone(), lin.bias, lin.weight]


@case
def optimizer_step_in_post_accumulate_hook(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)

    def update(p: dg.Tensor) -> None:
        with dg.no_grad():
            p.add_(p.grad, alpha=-0.1)
        p.grad = None

    for p in lin.parameters():
        p.register_post_accumulate_grad_hook(update)

    def step(x):
        loss = (lin(x) ** 2).sum()
        loss.backward()
        return loss

    f = wrap(step)
    x = dg.ones(3, 2)
    return [f(x), f(x), f(x), lin.weight, lin.bias, lin.weight.grad is None]


@case
def anomaly_mode_turned_on(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    f = _sgd_step(wrap, lin, dg.optim.SGD(lin.parameters(), lr=0.1))
    out = [f(dg.ones(3, 2))]
    with dg.autograd.detect_anomaly():
        try:
            f(dg.full((3, 2), float("nan")))
        except RuntimeError as e:
            out.append(str(e).split(" (forward")[0])
    return out + [f(dg.ones(3, 2))]


@case
def autocast_region_entered_and_left(wrap):
    w = dg.full((3, 1), 1.0 + 2.0 ** -9)
    f = wrap(lambda x: (x @ w).softmax(0))
    x = dg.ones(2, 3)
    out = [f(x)]
    with dg.autocast("cpu"):
        out.append(f(x))
        with dg.autocast("cpu", enabled=False):
            out.append(f(x))
    return out + [f(x)]


@case
def history_and_versions_after_a_step(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    opt = dg.optim.AdamW(lin.parameters(), lr=0.1)
    f = _sgd_step(wrap, lin, opt)
    out = []
    for _ in range(2):
        loss = f(dg.ones(3, 2))
        out += [_meta(loss), _meta(lin.weight), _meta(lin.weight.grad)]
        out += [_meta(v) for v in opt.state[lin.weight].values() if isinstance(v, dg.Tensor)]
    return out


@case
def numpy_generator_drawn_inside(wrap):
    rng = np.random.default_rng(0)
    f = wrap(lambda x: x + dg.from_numpy(rng.standard_normal(3).astype(np.float32)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # asserted below
        return [f(dg.zeros(3)) for _ in range(3)]


@case
def parameter_data_swapped_inside(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)

    def g(x):
        lin.weight.data = lin.weight.data * 2
        return lin(x)

    f = wrap(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runs eagerly, saying so
        return [f(dg.ones(2)), f(dg.ones(2)), lin.weight, lin.weight._version[0]]


STATE = None


@case
def global_rebound_inside(wrap):
    global STATE
    STATE = dg.ones(2)

    def g(x):
        global STATE
        STATE = STATE * 2 + x
        return STATE.sum()

    f = wrap(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runs eagerly, saying so
        out = [f(dg.ones(2)), f(dg.ones(2))]
    return out + [STATE, type(STATE).__name__]


CASE_NAMES = sorted(CASES)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_compiled_gives_the_eager_answer(name: str) -> None:
    eager = _plain(CASES[name](_identity))
    compiled = _plain(CASES[name](_compile))
    _same(eager, compiled)


def test_hook_changes_retrace_only_when_they_change_the_leaves_hooks() -> None:
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    f = _sgd_step(dg.compile, lin, dg.optim.SGD(lin.parameters(), lr=0.1))
    x = dg.ones(3, 2)
    f(x)
    other = dg.ones(2, requires_grad=True)
    other.register_hook(lambda g: g).remove()  # another tensor's hooks: no retrace
    f(x)
    assert f.stats.traces == 1
    lin.weight.register_hook(lambda g: g)
    f(x)
    assert f.stats.traces == 2
    assert "gradient hook" in f.stats.retrace_reasons[-1]


def test_a_generator_drawn_while_traced_runs_eagerly_naming_it() -> None:
    rng = np.random.default_rng(0)
    f = dg.compile(lambda x: x + float(rng.random()))
    with pytest.warns(RuntimeWarning, match="Generator 'rng'.*runs eagerly"):
        a = f(dg.zeros(2))
    assert a.tolist() != f(dg.zeros(2)).tolist()  # a new draw per call, as eagerly
