"""Same program, same answer: what a `functools.partial` binds (compiled, or named by the
function), computed values stored in a list or dict the function does not return, captured
tensors written without being read or read only for their shape (then resized or given
new data between calls), ``resize_`` inside, integer powers with negative tensor exponents,
and the state a step leaves when it changes parameters and gradients inside (EMA copies,
``.grad`` set or zeroed, an error half way through an update). Each case runs eagerly and
compiled (`test_probe_round4`'s harness) and must give the same results; cases share
their compiled functions between checks."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest

import dualgraph as dg

from .test_probe_fidelity import _same
from .test_probe_round4 import _outcome, eager_and_compiled

nn = dg.nn
F = nn.functional
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ------------------------------------------------------------------ partials
@case
def compiled_partial_with_its_keywords_changed(wrap):
    """``p.keywords`` is a dict eager mode reads on every call: a number or tensor put
    there in place is what the next call binds."""
    def g(x, w, scale, shift=0.0):
        return x * w * scale + shift

    p = functools.partial(g, w=dg.tensor([1.0, 2.0]), scale=2.0)
    f = wrap(p)
    x = dg.ones(2)
    out = [f(x), f(x)]
    p.keywords["scale"] = 5.0
    out += [f(x), f(x)]
    p.keywords["w"] = dg.tensor([3.0, 4.0, 5.0])
    out += [_outcome(f, x), _outcome(f, dg.ones(3))]
    p.keywords["shift"] = 1.0
    return out + [_outcome(f, dg.ones(3))]


_ACT = functools.partial(F.leaky_relu, negative_slope=0.1)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = functools.partial(F.leaky_relu, negative_slope=0.1)

    def forward(self, x):
        return self.act(x) + _ACT(x)


@case
def partial_helpers_with_their_keywords_changed(wrap):
    """A partial named as a global, a closure variable and a module attribute."""
    act = functools.partial(F.leaky_relu, negative_slope=0.2)
    net = _Net()
    f = wrap(lambda x: net(x) * 2 + act(x))
    x = dg.tensor([-1.0, 2.0])
    out = [f(x), f(x)]
    try:
        _ACT.keywords["negative_slope"] = 0.5
        out += [f(x)]
        act.keywords["negative_slope"] = 0.3
        out += [f(x)]
        net.act.keywords["negative_slope"] = 0.7
        out += [f(x), f(x)]
    finally:
        _ACT.keywords["negative_slope"] = 0.1
    return out + [f(x)]


# ------------------------------------------------------------------ stored values
@case
def computed_values_stored_in_a_list_and_a_dict(wrap):
    """``history.append(loss)``, ``ws[0] = ws[0] * 2``, ``state["h"] = ...``: eager mode
    leaves the values there; a trace must not leave its own."""
    history: list = []
    ws = [dg.tensor([1.0, 2.0])]
    state = {"h": dg.zeros(2), "log": []}

    def step(x):
        y = x * ws[0]
        ws[0] = ws[0] * 2
        state["h"] = state["h"] * 0.5 + y
        state["log"].append(y.sum())
        history.append(y.sum())
        return y

    f = wrap(step)
    out = [_outcome(f, dg.ones(2) * k) for k in (1, 2, 3)]
    return out + [ws, state, history]


# ------------------------------------------------------------------ captured tensors
@case
def captured_tensors_resized_between_calls(wrap):
    """Written without being read (``buf.copy_(x)``), or read only for the shape: a new
    shape or dtype between calls (``.data = ...``, ``resize_``, a buffer registered
    anew) is what the next call finds."""
    buf = dg.zeros(2)
    lin = nn.Linear(2, 3)

    class Keep(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("last", dg.zeros(2))

        def forward(self, x):
            self.last.copy_(x)
            return x * buf.shape[0] + lin.weight.shape[0]

    m = Keep()

    def step(x):
        buf.copy_(x * 2)
        return m(x), buf + 1

    f = wrap(step)
    x = dg.ones(2)
    out = [_outcome(f, x), _outcome(f, x)]
    buf.data = dg.zeros(2, 2)
    out += [_outcome(f, x), buf * 1]
    buf.data = dg.zeros(2, dtype=dg.float64)
    out += [_outcome(f, x), buf * 1]
    m.last.resize_(3)
    out += [_outcome(f, x), m.last * 1]
    m.register_buffer("last", dg.zeros(2, 2))
    lin.weight.data = dg.zeros(5, 2)
    return out + [_outcome(f, x), m.last * 1]


@case
def captured_tensor_resized_inside(wrap):
    b = dg.zeros(2)

    def step(x):
        b.resize_(x.shape[0])
        b.copy_(x)
        return b * 2

    f = wrap(step)
    return [_outcome(f, dg.ones(n)) for n in (2, 3, 3, 2)] + [b]


# ------------------------------------------------------------------ numbers
@case
def integer_powers_with_negative_tensor_exponents(wrap):
    """PyTorch's truncated ``1 / x ** -y`` (a literal negative exponent raises instead,
    `test_documented_clear_errors` in `test_probe_round4`)."""
    f = wrap(lambda a, b: (a ** b, a.pow(b), b.abs() ** -b))
    out = []
    for dt in (np.int8, np.int64):
        a = dg.tensor(np.array([2, 1, -1, -1, 0, 5, 3], dt))
        b = dg.tensor(np.array([-1, -5, -3, -4, 2, 2, -2], dt))
        out.append(_outcome(f, a, b))
    return out


def test_integer_powers_with_negative_exponents_follow_pytorch():
    a = np.array([2, 1, -1, -1, 7, -3], np.int64)
    b = np.array([-1, -5, -3, -4, -2, -1], np.int64)
    # PyTorch truncates the real power towards zero.
    expected = [math.trunc(float(x) ** float(y)) for x, y in zip(a, b)]
    assert (dg.tensor(a) ** dg.tensor(b)).tolist() == expected
    t = dg.tensor(a)
    t.pow_(dg.tensor(b))
    assert t.tolist() == expected


# ------------------------------------------------------------------ steps
@case
def parameters_and_gradients_changed_inside_a_step(wrap):
    """An EMA copy under no_grad, ``.grad`` set, scaled and zeroed in place inside, and
    ``zero_grad(set_to_none=False)`` between two backward passes."""
    w = nn.Parameter(dg.tensor([1.0, -2.0]))
    v = nn.Parameter(dg.tensor([0.5, 0.5]))
    ema = dg.zeros(2)
    opt = dg.optim.SGD([w, v], lr=0.1, momentum=0.5)

    def step(x):
        v.grad = dg.ones(2) * 0.5
        (w * v * x).sum().backward()
        first = w.grad * 1
        opt.zero_grad(set_to_none=False)
        (w * v * x * x).sum().backward()
        w.grad.mul_(0.5)
        opt.step()
        with dg.no_grad():
            ema.mul_(0.9).add_(w, alpha=0.1)
            w.copy_(ema * 0.5 + w * 0.5)
        v.grad.zero_()
        return first

    f = wrap(step)
    out = [_outcome(f, dg.ones(2) * k) for k in (1, 2, 3)]
    return out + [w, v, ema, w.grad, v.grad, opt.state[w]["momentum_buffer"]]


@case
def error_half_way_through_an_update(wrap):
    """A check that raises after some parameters are updated: eager mode keeps those."""
    w = nn.Parameter(dg.tensor([1.0, -2.0]))
    v = nn.Parameter(dg.tensor([1.0]))
    opt = dg.optim.SGD([w, v], lr=0.1)

    def step(x):
        opt.zero_grad()
        ((w * x).pow(2).sum() + v.sum()).backward()
        with dg.no_grad():
            for p in (w, v):
                p.sub_(p.grad * 0.1)
                if p.shape[0] != x.shape[0]:
                    raise ValueError("a parameter of another length")
        return w * 1

    f = wrap(step)
    return [_outcome(f, dg.ones(2)), _outcome(f, dg.ones(2)), w * 1, v * 1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_gives_the_eager_answer(name):
    _same(*eager_and_compiled(CASES[name]))


# ------------------------------------------------------------------ messages
def test_a_value_stored_in_a_list_runs_eagerly_naming_the_list():
    losses: list = []

    def step(x):
        loss = (x * 2).sum()
        losses.append(loss)
        return loss

    with pytest.warns(RuntimeWarning, match=r"stores a value it computes in the list or "
                                            r"dict 'losses'.*runs eagerly"):
        dg.compile(step)(dg.ones(2))
    assert [type(v) for v in losses] == [dg.Tensor]
    with pytest.raises(dg.EagerOnlyError, match="'losses'"):
        dg.compile(step, strict=True)(dg.ones(2))
    assert len(losses) == 1


def test_resize_inside_runs_eagerly_naming_the_line():
    b = dg.zeros(2)

    def step(x):
        b.resize_(3)
        return b + x

    with pytest.raises(dg.EagerOnlyError, match=r"test_probe_round7\.py:\d+: resize_\(\)"):
        dg.compile(step, strict=True)(dg.ones(3))
    assert b.shape == (2,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert dg.compile(step)(dg.ones(3)).shape == (3,)
