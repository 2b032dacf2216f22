"""Same program, same answer, probed as an outside tester would: plain objects passed as
arguments (attributes rebound, set to None, deleted, added, nested; dataclasses and
namespaces), and state a program changes between or inside calls (modules, buffers,
optimizers, closures, defaults, the random state, grad modes, argument layouts).

Each case is a function of ``wrap`` (the identity or ``dg.compile``) returning what its
calls gave; the compiled run must give what the eager run gave.
"""

from __future__ import annotations

import dataclasses
import types
import warnings

import pytest

import dualgraph as dg

from .test_probe_fidelity import _compile, _identity, _plain, _same

nn = dg.nn
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


class _Obj:
    pass


def _scaled(x, o):
    w = getattr(o, "w", None)
    return x * 2 if w is None else x * w


def _object_change(change):
    """``f(x, o)`` reading ``o.w`` (None or absent: doubled); ``change(o)`` between calls."""

    def run(wrap):
        f = wrap(_scaled)
        o = _Obj()
        o.w = dg.full((2,), 3.0)
        x = dg.ones(2)
        out = [f(x, o)]
        change(o)
        out.append(f(x, o))
        out.append(f(x, o))
        return out

    return run


CASES["argument_object_attribute_set_to_none"] = _object_change(lambda o: setattr(o, "w", None))
CASES["argument_object_attribute_new_tensor"] = _object_change(
    lambda o: setattr(o, "w", dg.full((2,), 5.0)))
CASES["argument_object_attribute_to_number"] = _object_change(lambda o: setattr(o, "w", 4.0))
CASES["argument_object_attribute_deleted"] = _object_change(lambda o: delattr(o, "w"))


@case
def argument_object_attribute_added(wrap):
    f = wrap(_scaled)
    o = _Obj()
    x = dg.ones(2)
    out = [f(x, o)]
    o.w = dg.full((2,), 7.0)
    out.append(f(x, o))
    return out


@case
def argument_object_nested(wrap):
    f = wrap(lambda x, o: x * o.inner.scale + o.inner.shift)
    o = _Obj()
    o.inner = _Obj()
    o.inner.scale, o.inner.shift = 2.0, dg.ones(2)
    x = dg.arange(2.0)
    out = [f(x, o)]
    o.inner.scale = 3.0
    out.append(f(x, o))
    o.inner.shift = dg.full((2,), 10.0)
    out.append(f(x, o))
    o.inner = _Obj()
    o.inner.scale, o.inner.shift = -1.0, dg.zeros(2)
    out.append(f(x, o))
    return out


@dataclasses.dataclass
class _Config:
    scale: float = 2.0
    bias: object = None


@case
def argument_dataclass(wrap):
    f = wrap(lambda x, c: x * c.scale if c.bias is None else x * c.scale + c.bias)
    c = _Config()
    x = dg.arange(3.0)
    out = [f(x, c)]
    c.scale = 0.5
    out.append(f(x, c))
    c.bias = dg.ones(3)
    out.append(f(x, c))
    c.bias = None
    out.append(f(x, c))
    return out


@case
def argument_namespace(wrap):
    f = wrap(lambda x, ns: x * ns.k if ns.on else x)
    ns = types.SimpleNamespace(k=3.0, on=True)
    x = dg.arange(2.0)
    out = [f(x, ns)]
    ns.on = False
    out.append(f(x, ns))
    ns.on, ns.k = True, -2.0
    out.append(f(x, ns))
    return out


def _quiet(f):
    """``f`` with the compiled path's run-eagerly warning silenced (the answer is what the
    case compares)."""

    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return f(*args)

    return call


@case
def argument_attribute_set_to_none_inside(wrap):
    def g(x, o):
        y = x * o.w
        o.w = None
        return y

    f = _quiet(wrap(g))
    o = _Obj()
    x = dg.ones(2)
    out = []
    for k in range(3):
        o.w = dg.full((2,), float(k + 1))
        out += [f(x, o), o.w]
    return out


@case
def argument_attribute_counter_inside(wrap):
    def g(x, o):
        o.calls += 1
        return x * o.calls

    f = _quiet(wrap(g))
    o = _Obj()
    o.calls = 0
    x = dg.ones(2)
    out = [f(x, o) for _ in range(3)]
    return out + [o.calls]


@case
def argument_attribute_deleted_inside(wrap):
    def g(x, o):
        if hasattr(o, "w"):
            y = x * o.w
            del o.w
            return y
        return x

    f = _quiet(wrap(g))
    o = _Obj()
    x = dg.ones(2)
    out = []
    for k in range(3):
        if k != 1:
            o.w = dg.full((2,), float(k + 2))
        out += [f(x, o), hasattr(o, "w")]
    return out


@case
def argument_attribute_rebound_to_outside_tensor_inside(wrap):
    a, b = dg.full((2,), 2.0), dg.full((2,), 3.0)

    def g(x, o):
        y = x * o.w
        o.w = b if o.w is a else a
        return y

    f = _quiet(wrap(g))
    o = _Obj()
    o.w = a
    x = dg.ones(2)
    return [f(x, o) for _ in range(4)]


# ------------------------------------------------------------------ modules and optimizers
def _lin(seed=0):
    dg.manual_seed(seed)
    return nn.Linear(3, 2)


@case
def register_buffer_replaced(wrap):
    m = _lin()
    m.register_buffer("shift", dg.ones(2))
    f = wrap(lambda x: m(x) + m.shift)
    x = dg.ones(1, 3)
    out = [f(x)]
    m.register_buffer("shift", dg.full((2,), 4.0))
    out.append(f(x))
    m.shift.mul_(2)
    out.append(f(x))
    return out


@case
def module_number_attribute_set_to_none(wrap):
    m = _lin()
    m.scale = 2.0
    f = wrap(lambda x: m(x) if m.scale is None else m(x) * m.scale)
    x = dg.ones(1, 3)
    out = [f(x)]
    m.scale = None
    out.append(f(x))
    m.scale = 3.0
    out.append(f(x))
    return out


@case
def eval_called_inside(wrap):
    dg.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))

    def g(x):
        m.eval()
        y = m(x)
        m.train()
        return y

    f = wrap(g)
    x = dg.ones(2, 3)
    out = [f(x), m.training]
    m.eval()
    out += [f(x), m.training]
    return out


@case
def requires_grad_toggled_on_parameter_with_backward(wrap):
    m = _lin()

    def step(x):
        m.zero_grad()
        m(x).sum().backward()
        return m.weight.grad, m.bias.grad

    f = wrap(step)
    x = dg.ones(2, 3)
    out = [f(x)]
    m.bias.requires_grad_(False)
    out.append(f(x))
    m.bias.requires_grad_(True)
    out.append(f(x))
    return out


@case
def lr_changed_inside(wrap):
    m = _lin()
    opt = dg.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
        opt.param_groups[0]["lr"] *= 0.5
        return m.weight

    f = _quiet(wrap(step))
    x = dg.ones(2, 3)
    out = [f(x).detach().clone() for _ in range(3)]
    return out + [opt.param_groups[0]["lr"]]


# ------------------------------------------------------------------ closures and defaults
@case
def captured_list_appended(wrap):
    scales = [2.0]
    f = wrap(lambda x: x * sum(scales))
    x = dg.ones(2)
    out = [f(x)]
    scales.append(3.0)
    out.append(f(x))
    return out


@case
def closure_cell_rebound_to_none(wrap):
    w = dg.full((2,), 3.0)

    def g(x):
        return x if w is None else x * w

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x)]
    w = None  # noqa: F841 - read by g through its cell
    out.append(f(x))
    return out


@case
def default_argument_list_mutated(wrap):
    def g(x, cfg=[2.0]):  # noqa: B006 - the mutable default is the point
        return x * cfg[0]

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x)]
    g.__defaults__[0][0] = 5.0
    out.append(f(x))
    return out


@case
def default_argument_object_mutated(wrap):
    d = _Obj()
    d.k = 2.0

    def g(x, o=d):
        return x * o.k

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x)]
    d.k = 6.0
    out.append(f(x))
    return out


# ------------------------------------------------------------------ random state
@case
def manual_seed_inside(wrap):
    def g(x):
        dg.manual_seed(3)
        return x + dg.rand(3)

    f = _quiet(wrap(g))
    x = dg.zeros(3)
    a, b = f(x), f(x)
    after = dg.rand(2)  # the generator as the last call left it
    return [a, b, after]


# ------------------------------------------------------------------ arguments
@case
def in_place_on_overlapping_views(wrap):
    def g(a, b):
        a.add_(1.0)
        return b * 2

    f = wrap(g)
    out = []
    for _ in range(2):
        base = dg.arange(4.0)
        out.append(f(base[0:3], base[1:4]))
        out.append(base)
    return out


@case
def input_aliases_a_parameter(wrap):
    m = _lin()

    def g(x, w):
        with dg.no_grad():
            w.mul_(2.0)
        return m(x)

    f = wrap(g)
    x = dg.ones(1, 3)
    return [f(x, m.weight), f(x, m.weight), m.weight]


@case
def zero_d_one_d_non_contiguous(wrap):
    f = wrap(lambda x: (x * 2).sum(0) if x.ndim else x * 2)
    out = [f(dg.tensor(3.0)), f(dg.tensor([3.0])), f(dg.arange(6.0).reshape(2, 3)),
           f(dg.arange(6.0).reshape(3, 2).t()), f(dg.arange(6.0, dtype=dg.float64))]
    return out


@case
def argument_grad_none_then_set(wrap):
    f = wrap(lambda x: x * 2 if x.grad is None else x * x.grad)
    out = [f(dg.ones(2))]
    y = dg.ones(2)
    y.grad = dg.full((2,), 3.0)
    out.append(f(y))
    y.grad.mul_(2)
    out.append(f(y))
    out.append(f(dg.ones(2)))
    return out


@case
def set_grad_enabled_false_around_the_call(wrap):
    w = dg.ones(2, requires_grad=True)
    f = wrap(lambda x: (x * w).sum())
    x = dg.arange(2.0)
    with dg.set_grad_enabled(False):
        a = f(x)
    b = f(x)
    b.backward()
    return [a, b, w.grad]


@case
def inference_mode_around_the_call(wrap):
    w = dg.ones(2, requires_grad=True)
    f = wrap(lambda x: x * w)
    x = dg.arange(2.0)
    with dg.inference_mode():
        a = f(x)
    b = f(x)
    return [a, a.requires_grad, b, b.requires_grad]


CASE_NAMES = sorted(CASES)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_compiled_gives_the_eager_answer(name):
    eager = _plain(CASES[name](_identity))
    compiled = _plain(CASES[name](_compile))
    _same(eager, compiled)


def test_an_attribute_set_inside_to_a_value_not_computed_runs_eagerly_naming_it():
    def g(x, o):
        y = x * o.w
        o.w = None
        return y

    o = _Obj()
    o.w = dg.ones(2)
    with pytest.warns(RuntimeWarning, match=r"_Obj\.w was set to a value the function does "
                                            r"not compute.*runs eagerly"):
        dg.compile(g)(dg.ones(2), o)
    assert o.w is None


def test_a_generator_argument_is_refused_naming_the_way_out():
    f = dg.compile(lambda x, gen: x + dg.rand(3, generator=gen))
    with pytest.raises(dg.TraceError, match=r"generator= inside a compiled function.*"
                                            r"dg\.manual_seed"):
        f(dg.zeros(3), dg.Generator().manual_seed(1))
