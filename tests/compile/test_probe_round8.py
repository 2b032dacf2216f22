"""Same program, same answer: what a step reads of a captured tensor besides its data (its
dtype alone, its layout, its version counter), generator functions, float arguments at
their edges (NaN, infinities, a float that becomes an int, NumPy float32, exponents,
``//`` and ``%``), grad mode set from an argument, a module's properties, non-persistent
buffers replaced, seeds and Python random draws inside, string, enum and dataclass
arguments, and keyword-only and variable arguments. Each case runs eagerly and compiled
(`test_probe_round4`'s harness) and must give the same results; cases share their
compiled functions between checks."""

from __future__ import annotations

import dataclasses
import enum
import math
import random
import warnings

import numpy as np
import pytest

import dualgraph as dg

from .test_probe_fidelity import _same
from .test_probe_round4 import _outcome, eager_and_compiled

nn = dg.nn
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _calls(f, x, values):
    return [_outcome(f, x, v) for v in values]


# ------------------------------------------------------------------ captured tensors
@case
def captured_dtype_read_alone(wrap):
    """``x.to(buf.dtype)``, ``dg.zeros(3, dtype=m.weight.dtype)``: the dtype is read
    without the data, then ``.data`` gives the tensor another dtype."""
    buf = dg.zeros(2)
    m = nn.Linear(2, 2)
    f = wrap(lambda x: (x.to(buf.dtype) + 1, dg.zeros(3, dtype=m.weight.dtype),
                        x * buf.ndim))
    x = dg.ones(2)
    out = [f(x), f(x)]
    buf.data = buf.data.double()
    m.weight.data = m.weight.data.double()
    out.append(f(x))
    buf.data = dg.zeros(1, 2)
    return out + [f(x)]


@case
def captured_layout_read(wrap):
    """``stride()``, ``is_contiguous()``, ``storage_offset()`` of a captured tensor,
    then ``.data`` makes it a transposed slice."""
    buf = dg.arange(6.0).reshape(2, 3).clone()
    f = wrap(lambda x: x * buf.stride()[0] + buf.is_contiguous() + buf.storage_offset())
    x = dg.ones(2)
    out = [f(x), f(x)]
    buf.data = dg.arange(12.0).reshape(3, 4).t()[1:]
    out.append(f(x))
    buf.data = dg.arange(6.0).reshape(2, 3).clone()
    return out + [f(x)]


@case
def version_counter_read_inside(wrap):
    """``x._version`` counts the in-place ops so far: read inside, the call runs
    eagerly."""
    f = wrap(lambda x: x * x._version[0] + 1)
    x = dg.ones(2)
    out = [_outcome(f, x)]
    x.add_(1)
    return out + [_outcome(f, x), _outcome(f, x)]


@case
def generator_function(wrap):
    def gen(x, n):
        for i in range(n):
            yield x * i

    f = wrap(gen)
    return [list(f(dg.ones(2), 3)), list(f(dg.ones(2), 2))]


# ------------------------------------------------------------------ float arguments
@case
def float_arguments_at_their_edges(wrap):
    f = wrap(lambda x, s: (x * s + (1.0 if s != s else 0.0), x ** s, x // s, x % s,
                           dg.tensor(s) * 1))
    x = dg.tensor([-3.0, 2.5, 7.0])
    return _calls(f, x, (1.5, math.nan, math.inf, -math.inf, -0.0, np.float64(3.0), 2,
                         np.float32(0.1), True))


# ------------------------------------------------------------------ grad mode
@case
def grad_mode_from_an_argument(wrap):
    w = dg.tensor([1.0, 2.0], requires_grad=True)

    def g(x, flag):
        with dg.set_grad_enabled(flag):
            y = x * w
        return y, y.requires_grad

    return _calls(wrap(g), dg.ones(2), (True, False, True))


# ------------------------------------------------------------------ modules
@case
def module_property_computing_a_tensor(wrap):
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(dg.tensor([1.0, 2.0]))
            self.k = 1.0

        @property
        def w2(self):
            return self.w * 2 * self.k

        def forward(self, x):
            return x * self.w2

    m = M()
    f = wrap(m)
    x = dg.ones(2)
    out = [f(x)]
    with dg.no_grad():
        m.w.add_(1.0)
    out.append(f(x))
    m.k = 3.0
    out.append(f(x))
    M.w2 = property(lambda self: self.w * -1)
    return out + [f(x)]


@case
def non_persistent_buffer_replaced(wrap):
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", dg.tensor([2.0, 3.0]), persistent=False)

        def forward(self, x):
            return x * self.scale

    m = M()
    f = wrap(m)
    x = dg.ones(2)
    out = [f(x)]
    m.register_buffer("scale", dg.tensor([5.0, 7.0]), persistent=False)
    out.append(f(x))
    m.register_buffer("scale", dg.tensor([4.0, 4.0], dtype=dg.float64), persistent=False)
    return out + [f(x), list(m.state_dict())]


# ------------------------------------------------------------------ random draws
@case
def seeds_and_python_random_inside(wrap):
    def seeded(x):
        dg.manual_seed(0)
        return x + dg.randn(3)

    def drawn(x):
        return x * random.random() + np.random.rand()

    f, g = wrap(seeded), wrap(drawn)
    random.seed(0)
    np.random.seed(0)
    return [f(dg.zeros(3)), f(dg.zeros(3)), dg.randn(2), g(dg.ones(2)), g(dg.ones(2)),
            random.random(), np.random.rand()]


# ------------------------------------------------------------------ other arguments
class _Reduce(enum.Enum):
    SUM = "sum"
    MEAN = "mean"


@dataclasses.dataclass(frozen=True)
class _Frozen:
    w: object
    s: float = 1.0


@dataclasses.dataclass
class _Cfg:
    w: object
    scale: float = 1.0


@case
def string_enum_and_dataclass_arguments(wrap):
    """A frozen dataclass holding a tensor is keyed by ``==``, which compares the
    tensors: another instance is another key, not an error."""
    f = wrap(lambda x, how, mode: (x.sum() if how == "sum" else x.mean())
             * (2 if mode is _Reduce.SUM else 3))
    x = dg.tensor([1.0, 2.0, 6.0])
    out = [_outcome(f, x, h, m) for h, m in (("sum", _Reduce.SUM), ("mean", _Reduce.SUM),
                                                ("su" + "m", _Reduce("mean")))]
    g = wrap(lambda x, c: x * c.w * c.s)
    x = dg.ones(2)
    out += [_outcome(g, x, _Frozen(dg.tensor([1.0, 2.0]))),
            _outcome(g, x, _Frozen(dg.tensor([3.0, 4.0]))),
            _outcome(g, x, _Frozen(dg.tensor([3.0, 4.0]), 2.0))]
    cfg = _Cfg(dg.tensor([1.0, 2.0]))
    out.append(_outcome(g, x, cfg))
    cfg.w = dg.tensor([3.0, 4.0])
    out.append(_outcome(g, x, cfg))
    cfg.w.mul_(2)
    cfg.s = 0.5
    return out + [_outcome(g, x, cfg)]


@case
def keyword_only_and_variable_arguments(wrap):
    def g(x, *args, k=1.0, **kw):
        y = x * k
        for a in args:
            y = y + a
        for name in sorted(kw):
            y = y * kw[name]
        return y

    def h(x, *, scale, shift=0.0):
        return x * scale + shift

    f, fh = wrap(g), wrap(h)
    x = dg.ones(2)
    return [_outcome(f, x), _outcome(f, x, dg.ones(2), 2.0), _outcome(f, x, k=3.0),
            _outcome(f, x, a=2.0, b=dg.ones(2)), _outcome(f, x, dg.ones(2), a=2.0),
            _outcome(fh, x, scale=2.0), _outcome(fh, x, scale=3.0, shift=1.0),
            _outcome(fh, x), _outcome(fh, x, 2.0)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_gives_the_eager_answer(name):
    _same(*eager_and_compiled(CASES[name]))


# ------------------------------------------------------------------ messages
def test_a_generator_function_runs_eagerly_naming_it():
    def frames(x):
        yield x * 2

    f = dg.compile(frames)
    with pytest.warns(RuntimeWarning, match=r"frames is a generator .*runs eagerly"):
        assert [t.tolist() for t in f(dg.ones(2))] == [[2.0, 2.0]]
    assert f.stats.traces == 0
    with pytest.raises(dg.EagerOnlyError, match="frames is a generator"):
        dg.compile(frames, strict=True)(dg.ones(2))


def test_a_version_read_runs_eagerly_naming_the_line():
    f = dg.compile(lambda x: x * x._version[0], strict=True)
    with pytest.raises(dg.EagerOnlyError, match=r"test_probe_round8\.py:\d+: \._version"):
        f(dg.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x = dg.ones(2)
        x.add_(1)
        assert dg.compile(lambda x: x * x._version[0])(x).tolist() == [2.0, 2.0]


def test_captured_dtype_and_layout_reads_say_why_they_retrace():
    buf = dg.zeros(2, 3)
    f = dg.compile(lambda x: x.to(buf.dtype) * buf.stride()[0])
    f(dg.ones(2))
    buf.data = dg.zeros(2, 3, dtype=dg.float64)
    f(dg.ones(2))
    buf.data = dg.zeros(3, 2, dtype=dg.float64).t()
    f(dg.ones(2))
    assert f.stats.traces == 3
    assert "float64 instead of (2, 3) float32" in f.stats.retrace_reasons[0]
    assert "strides (1, 2)" in f.stats.retrace_reasons[1]
