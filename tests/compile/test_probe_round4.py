"""Same program, same answer: int arguments that change between calls (automatic dynamic
ints used as shapes, bounds, lengths, in ``isinstance``), in-place ops on views and aliases
of arguments, ``.data`` and ``detach_`` inside, outputs of every shape, modules changed
after compiling, errors, warnings and IEEE edge values. Each case runs eagerly and
compiled (`test_probe_fidelity`'s harness) and must give the same results, or the
documented clear error."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import numbers
import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.errors import TraceError

from .test_probe_fidelity import _compile, _identity, _plain, _same

nn = dg.nn
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _outcome(f, *args, **kwargs):
    """What ``f(*args)`` gives: its value, or its exception's type and message (without
    the location a compiled call adds), and the floating-point RuntimeWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = ("ok", f(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - the probe compares any error
            out = ("error", type(e).__name__, str(e).split(" (at ")[0].splitlines()[0])
    fp = sorted({str(w.message) for w in caught if "encountered" in str(w.message)})
    return out + (fp,)


def _calls(f, x, values):
    return [_outcome(f, x, v) for v in values]


# ------------------------------------------------------------------ int arguments
@case
def int_as_view_shape(wrap):
    f = wrap(lambda x, n: x.view(n, -1).sum(0))
    return _calls(f, dg.arange(12.0), (2, 3, 4, 6, 5))


@case
def int_as_slice_bound(wrap):
    f = wrap(lambda x, n: x[:n] * 2)
    return _calls(f, dg.arange(6.0), (1, 2, 3, 0, -1))


@case
def int_as_range_length(wrap):
    def g(x, n):
        for _ in range(n):
            x = x * 2
        return x

    return _calls(wrap(g), dg.ones(2), (1, 2, 3, 0))


@case
def int_compared_with_a_size(wrap):
    f = wrap(lambda x, n: x * 2 if x.shape[0] == n else x - 1)
    return _calls(f, dg.ones(3), (1, 3, 2, 3))


@case
def int_list_as_permutation_and_shape(wrap):
    f = wrap(lambda x, d: x.permute(*d) + 0)
    g = wrap(lambda x, s: x.reshape(s) * s[0])
    x = dg.arange(6.0).reshape(2, 3, 1)
    return (_calls(f, x, ([0, 1, 2], [2, 1, 0], [1, 0, 2]))
            + _calls(g, dg.arange(12.0), ([3, 4], [4, 3], [2, 6], (6, 2))))


@case
def bool_argument(wrap):
    f = wrap(lambda x, b: x * b + (1 if b else 0))
    return _calls(f, dg.ones(2), (True, False, True, 1, 0))


@case
def float_argument_changes(wrap):
    f = wrap(lambda x, s: x * s)
    return _calls(f, dg.ones(2), (0.5, 1.5, 2, 3, 2.5, -0.0))


@case
def int_that_becomes_a_float(wrap):
    f = wrap(lambda x, s: x / s + s // 2 + (s if isinstance(s, int) else 0))
    return _calls(f, dg.arange(3.0), (2, 3, 3.0, 4, 2.5, True))


@case
def int_negative_zero_and_large(wrap):
    f = wrap(lambda x, n: x * n + n % 3 + n // 2 + abs(n) - n)
    return _calls(f, dg.ones(2), (5, -7, 0, -1, 2**40))


@case
def int_isinstance_check(wrap):
    def g(x, n):
        if isinstance(n, int):
            return x * n
        return x - 100

    def h(x, n):
        return x * n + (1 if isinstance(n, numbers.Integral) else 50) + \
            (7 if isinstance(n, bool) else 0)

    return _calls(wrap(g), dg.ones(2), (2, 3, 4)) + _calls(wrap(h), dg.ones(2), (2, 3, 4))


@case
def int_type_check(wrap):
    f = wrap(lambda x, n: x * n if type(n) is int else x - 100)
    return _calls(f, dg.ones(2), (2, 3, 4))


@case
def int_as_reduction_dim_and_index(wrap):
    f = wrap(lambda x, d: x.sum(d) + x[d].sum())
    return _calls(f, dg.arange(6.0).reshape(2, 3), (0, 1, -1, 0))


@case
def int_in_factories_and_expand(wrap):
    f = wrap(lambda x, n: x.expand(n, -1) + dg.zeros(n, 1) + x.new_full((n, 1), n)
             + dg.full((2,), n))
    return _calls(f, dg.arange(2.0).reshape(1, 2), (1, 2, 3, 0))


@case
def int_compared_with_a_tensor(wrap):
    f = wrap(lambda x, n: (x > n).float() + (x == n).float() + x.clamp(max=n) + x.roll(n, 0))
    return _calls(f, dg.arange(5.0), (1, 2, 3))


@case
def int_as_exponent_and_divisor(wrap):
    f = wrap(lambda x, n: x ** n + n / 2 + 2 ** n)
    g = wrap(lambda x, n: x // n + x % n)
    return (_calls(f, dg.arange(3.0), (1, 2, 3))
            + _calls(g, dg.tensor([-7, -3, 0, 5, 9]), (2, 3, -4)))


@case
def int_out_of_a_narrow_integer_range(wrap):
    f = wrap(lambda x, n: x + n)
    g = wrap(lambda x, n: x * n + n)
    return (_calls(f, dg.tensor(np.array([1, 2], dtype=np.int32)), (1, 2, 2**40, -2**35, 3))
            + _calls(g, dg.tensor(np.array([1, 200], dtype=np.uint8)), (1, 2, 300, -1, 3)))


@case
def int_literal_out_of_a_narrow_integer_range(wrap):
    fns = [lambda x: x.masked_fill(x > 2, 300), lambda x: dg.where(x > 2, x, 300),
           lambda x: x.clamp(max=300), lambda x: x + 255, lambda x: x - 256,
           lambda x: x // 1000, lambda x: x * -1, lambda x: x.clamp(min=-1),
           lambda x: (x == 300, x != -1, x < 256, x >= -5, x > 2**40)]
    return [_outcome(wrap(f), dg.tensor(np.array([1, 200], dtype=np.uint8))) for f in fns]


@case
def int_keyword_argument(wrap):
    f = wrap(lambda x, *, k=1: x * k)
    x = dg.ones(2)
    return [_outcome(f, x, k=k) for k in (1, 2, 3)] + [_outcome(f, x)]


@case
def int_in_python_builtins(wrap):
    def g(x, n, m):
        return (x * max(n, 2) + len(range(n)) + math.sqrt(n) + divmod(n, 3)[1]
                + int(f"{n}") + sum([n, m, 1]) - n * m)

    f = wrap(g)
    return [_outcome(f, dg.ones(2), n, m) for n, m in ((1, 2), (3, 4), (5, 6), (2, 0))]


@case
def int_seeds_the_generator(wrap):
    def g(x, s):
        dg.manual_seed(s)
        return nn.functional.dropout(x, 0.5, True) * s

    return _calls(wrap(g), dg.ones(6), (1, 2, 3, 2))


@case
def int_then_numpy_integer_and_tensor(wrap):
    f = wrap(lambda x, n: x * n)
    return _calls(f, dg.ones(2), (2, 3, np.int64(4), np.int32(5), dg.tensor(6), 7))


# ------------------------------------------------------------------ arguments and aliasing
@case
def varargs_and_kwargs(wrap):
    def g(*xs, **kw):
        s = sum(xs[1:], xs[0])
        for k in sorted(kw):
            s = s * kw[k]
        return s

    f = wrap(g)
    a, b = dg.ones(2), dg.arange(2.0)
    return [_outcome(f, a, b, p=2), _outcome(f, a, b, b, p=2, q=b), _outcome(f, a, p=3),
            _outcome(f, a, b, q=a, p=2)]


@case
def tensors_as_keyword_arguments(wrap):
    f = wrap(lambda x, w=None, b=None: x * w + (b if b is not None else 0))
    x = dg.ones(2)
    return [_outcome(f, x, w=dg.arange(2.0)), _outcome(f, x, w=dg.arange(2.0) + 1, b=x),
            _outcome(f, x, b=x, w=x)]


@case
def in_place_on_views_of_an_argument(wrap):
    def g(x):
        x[0].add_(1)
        x.t().mul_(2)
        x.view(-1)[::2].zero_()
        return x.sum()

    f = wrap(g)
    out = []
    for _ in range(2):
        x = dg.arange(6.0).reshape(2, 3)
        out += [_outcome(f, x), x]
    return out


@case
def one_tensor_passed_twice_and_a_view_with_its_base(wrap):
    f = wrap(lambda a, b: (a.add_(1), b * 2)[1])
    g = wrap(lambda v, base: (base.mul_(3), v + 0)[1])
    out = []
    for _ in range(2):
        x, y = dg.ones(3), dg.arange(4.0)
        out += [_outcome(f, x, x), x, _outcome(g, y[1:3], y), y]
    a, b = dg.ones(3), dg.ones(3)
    return out + [_outcome(f, a, b), a, b]


@case
def in_place_on_a_leaf_that_requires_grad(wrap):
    f = wrap(lambda x: x.add_(1))
    x = dg.ones(2, requires_grad=True)
    return [_outcome(f, x), _outcome(f, x), x]


@case
def data_of_an_argument_written(wrap):
    def g(x):
        x.data.mul_(2)
        return x * 1

    f = wrap(g)
    x = dg.ones(2, requires_grad=True)
    out = [f(x), f(x)]
    out[1].sum().backward()
    return out + [x, x.grad, x.is_leaf]


# ------------------------------------------------------------------ autograd inside
@case
def no_grad_block_inside(wrap):
    def g(x):
        with dg.no_grad():
            y = x * 2
        return x * y

    f = wrap(g)
    out = []
    for _ in range(2):
        x = dg.arange(3.0, requires_grad=True)
        s = f(x)
        s.sum().backward()
        out += [s, x.grad]
    return out


@case
def requires_grad_on_an_intermediate(wrap):
    def g(x):
        y = (x * 2).detach().requires_grad_()
        z = (y ** 2).sum()
        z.backward()
        return y.grad, z

    f = wrap(g)
    return [_outcome(f, dg.arange(3.0)), _outcome(f, dg.ones(3))]


@case
def requires_grad_on_an_intermediate_returned(wrap):
    def g(x):
        y = x * 2
        y.requires_grad_()
        return y, y.is_leaf, y.requires_grad

    f = wrap(g)
    out = []
    for _ in range(2):
        y, leaf, rg = f(dg.ones(2))
        (y * 3).sum().backward()
        out += [y, leaf, rg, y.is_leaf, y.grad_fn is None, y.grad]
    return out


@case
def detach_in_place_on_an_intermediate(wrap):
    def g(x):
        y = x * 2
        y.detach_()
        return y + x, y.requires_grad

    f = wrap(g)
    out = []
    for _ in range(2):
        x = dg.arange(3.0, requires_grad=True)
        r, rg = f(x)
        r.sum().backward()
        out += [r, rg, x.grad]
    return out


# ------------------------------------------------------------------ outputs
@case
def outputs_repeated_unchanged_and_views(wrap):
    def g(x):
        y = x * 2
        return y, y, x, x[1:]

    f = wrap(g)
    x = dg.arange(3.0)
    a, b = f(x), f(x)
    return [list(a), list(b), a[0] is a[1], b[0] is b[1], a[2] is x, b[2] is x]


@case
def nested_outputs_with_none(wrap):
    f = wrap(lambda x: {"p": (x * 2, [x + 1, None]), "q": None, "n": 3})
    x = dg.arange(3.0)
    return [f(x), f(x)]


# ------------------------------------------------------------------ modules
@case
def compiled_forward_method(wrap):
    dg.manual_seed(0)
    m = nn.Linear(2, 2)
    m.forward = wrap(m.forward)
    x = dg.ones(1, 2)
    first = m(x)
    with dg.no_grad():
        m.weight.mul_(2)
    return [first, m(x)]


@case
def compiled_module_switched_to_train(wrap):
    dg.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    f = wrap(m)
    x = dg.ones(2, 4)
    m.eval()
    a = f(x)
    m.train()
    dg.manual_seed(1)
    b = f(x)
    dg.manual_seed(1)
    c = f(x)
    m.eval()
    return [a, f(x), dg.equal(b, c)]


@case
def parameter_added_and_removed(wrap):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(dg.ones(2))

        def forward(self, x):
            y = x * self.w
            if hasattr(self, "extra"):
                y = y + self.extra
            return y * getattr(self, "scale", 1.0)

    m = M()
    f = wrap(m)
    x = dg.ones(2)
    out = [f(x)]
    m.extra = nn.Parameter(dg.full((2,), 5.0))
    out.append(f(x))
    m.scale = 3.0
    out.append(f(x))
    del m.extra
    out.append(f(x))
    m.register_buffer("extra", dg.full((2,), -1.0))
    return out + [f(x)]


@case
def forward_hook_registered_after_compiling(wrap):
    dg.manual_seed(0)
    m = nn.Linear(2, 2)
    f = wrap(m)
    x = dg.ones(1, 2)
    out = [f(x)]
    h = m.register_forward_hook(lambda mod, i, o: o * 10)
    out.append(f(x))
    h.remove()
    return out + [f(x)]


@case
def generator_advance_equals_eager(wrap):
    f = wrap(lambda x: nn.functional.dropout(x, 0.5, True))
    dg.manual_seed(3)
    f(dg.ones(8))
    f(dg.ones(8))
    return [dg.rand(4)]


# ------------------------------------------------------------------ errors and edges
@case
def exception_raised_inside(wrap):
    def g(x, n):
        if n > 2:
            raise ValueError(f"n too big: {n}")
        return x.view(5, 7)

    f = wrap(g)
    h = wrap(lambda x, y: x @ y)
    return (_calls(f, dg.ones(6), (3, 1, 4))
            + [_outcome(h, dg.ones(2, 3), dg.ones(2, 3)), _outcome(h, dg.ones(2, 3), dg.ones(4))])


@case
def exception_after_writes_in_place(wrap):
    def g(x, n):
        x.add_(1)
        if n > 2:
            raise ValueError("too big")
        return x * 2

    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)

    def step(x, n):
        opt.zero_grad()
        lin(x).sum().backward()
        opt.step()
        if n:
            raise KeyError("stop")

    f, h = wrap(g), wrap(step)
    out = []
    for n in (1, 3, 3, 1):
        x = dg.zeros(2)
        out += [_outcome(f, x, n), x]
    x = dg.ones(1, 2)
    for n in (0, 1, 1, 0):
        out += [_outcome(h, x, n), lin.weight.detach().clone()]
    return out


@case
def empty_single_element_and_dtypes(wrap):
    f = wrap(lambda x: (x.sum(0), x.mean(), x * 2))
    g = wrap(lambda x: (x * 2, x.sum(), x + x))
    return ([_outcome(f, dg.ones(0, 3)), _outcome(f, dg.ones(1, 1)), _outcome(f, dg.ones(3, 0))]
            + [_outcome(g, dg.tensor(np.arange(3, dtype=np.float64))),
               _outcome(g, dg.tensor([1, 2, 3])), _outcome(g, dg.tensor([True, False]))])


@case
def flipped_and_negative_stride_arguments(wrap):
    f = wrap(lambda x: x.flip(0) * dg.arange(3.0) + x[1:].sum())
    x = dg.arange(3.0)
    return [_outcome(f, x), _outcome(f, x.flip(0)), _outcome(f, dg.tensor(np.arange(3.0)[::-1]))]


@case
def nan_inf_and_division_by_zero(wrap):
    f = wrap(lambda x: (x / 0, x.max(), dg.maximum(x, dg.zeros(4)), x.sum(), (x * 0).exp(),
                        x.clamp(0, 1), x.relu(), x // 0.0, x % 0.0, dg.fmod(x, 0.0), 1.0 / x))
    g = wrap(lambda x, y: (x // y, x % y, x / y))
    return [_outcome(f, dg.tensor([1.0, float("nan"), float("inf"), -1.0])),
            _outcome(g, dg.tensor([1, -1, 0]), dg.tensor([0, 0, 0]))]


@case
def integer_overflow_wraps(wrap):
    f = wrap(lambda x: (x * x, x + x, x.sum()))
    return [_outcome(f, dg.tensor(np.array([2**62, 3], dtype=np.int64))),
            _outcome(f, dg.tensor(np.array([2**30, 3], dtype=np.int32)))]


@case
def attribute_written_before_read_in_one_call_read_only_in_another(wrap):
    class Box:
        pass

    box = Box()
    box.h = dg.ones(2)

    def g(x, write):
        if write:
            box.h = x * 3
        return box.h + x

    f = wrap(g)
    x = dg.arange(2.0)
    return [f(x, True), box.h, f(x, False), f(x + 1, True), box.h, f(x, False)]


def eager_and_compiled(scenario) -> tuple:
    """What ``scenario`` gives run eagerly and compiled, as plain values."""
    with warnings.catch_warnings():
        # A signature that runs eagerly says so once; the values are what is compared.
        warnings.simplefilter("ignore", RuntimeWarning)
        return _plain(scenario(_identity)), _plain(scenario(_compile))


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_gives_the_eager_answer(name):
    _same(*eager_and_compiled(CASES[name]))


# ------------------------------------------------------------------ documented differences
def test_documented_clear_errors():
    @dataclasses.dataclass
    class Out:
        a: object

    with pytest.raises(TraceError, match="Out"):
        dg.compile(lambda x: Out(x * 2))(dg.ones(2))
    with pytest.raises(TypeError, match="complex"):
        dg.compile(lambda x: x.exp())(np.array([1 + 2j]))

    def keep(x):
        y = x * 2
        y.retain_grad()
        return y

    with pytest.raises(TraceError, match="retain_grad"):
        dg.compile(keep)(dg.ones(2, requires_grad=True))
    add = dg.compile(lambda x, n: x + n)
    x = dg.zeros(1, dtype=dg.int64)
    assert [add(x, n).item() for n in (1, 2, 3)] == [1, 2, 3]
    with pytest.raises(OverflowError):  # eagerly a RuntimeError
        add(x, 2**63)


def test_python_side_effects_run_per_trace():
    """A warning inside is a Python side effect: under the default filter it shows once,
    eagerly and compiled; a print shows the traced value's description, once."""

    def g(x):
        warnings.warn("careful", UserWarning, stacklevel=1)
        print(x * 2)
        return x + 1

    for fn in (g, dg.compile(g)):
        buf = io.StringIO()
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(buf):
            warnings.simplefilter("default")
            for _ in range(3):
                fn(dg.ones(2))
        assert [str(w.message) for w in caught if w.category is UserWarning] == ["careful"]
        assert buf.getvalue().count("\n") == (3 if fn is g else 1)
