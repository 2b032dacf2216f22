"""Values a compiled call bakes in, aliased arguments written in place, and IEEE edges
across the tier swap: same answer as eager, or a warning that says what to do."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn as nn
from dualgraph.compile.baked import CHECK_EVERY

from .conftest import MODES

COMPILED = ["blocking", "tiered"]


def _baked_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "captured a NumPy array" in str(w.message)]


@pytest.mark.parametrize("runner", COMPILED, indirect=True)
def test_a_changed_captured_array_warns_once(runner):
    table = np.array([1.0, 2.0, 3.0], np.float32)
    f = runner(lambda x: x * table)
    x = dg.ones(3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2 * CHECK_EVERY):
            assert f(x).tolist() == [1.0, 2.0, 3.0]
        assert _baked_warnings(record) == []
        table[0] = 10.0
        for _ in range(3 * CHECK_EVERY):
            f(x)
    msgs = _baked_warnings(record)
    assert len(msgs) == 1, msgs
    assert "test_baked_values.py" in msgs[0]  # where the trace read it
    assert "Pass it as an argument" in msgs[0]
    assert record[[str(w.message) for w in record].index(msgs[0])].category is RuntimeWarning


@pytest.mark.parametrize("runner", ["blocking"], indirect=True)
def test_each_changed_array_warns_once_per_function(runner):
    a = np.zeros(2)
    b = np.zeros(2)
    f = runner(lambda x: x + a + b)
    g = runner(lambda x: x - a)
    x = dg.ones(2, dtype=dg.float64)
    f(x), g(x)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        a[0] = -0.0  # a new bit pattern is a change: the kernel would see it
        for _ in range(2 * CHECK_EVERY):
            f(x), g(x)
        assert len(_baked_warnings(record)) == 2  # once for f, once for g
        b[1] = np.nan
        for _ in range(2 * CHECK_EVERY):
            f(x), g(x)
        assert len(_baked_warnings(record)) == 3  # b, in f only


@pytest.mark.parametrize("runner", ["blocking"], indirect=True)
def test_arrays_that_do_not_change_never_warn(runner):
    c = np.array([np.nan, -0.0])
    f = runner(lambda x: x * c)
    x = dg.ones(2, dtype=dg.float64)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(4 * CHECK_EVERY):
            f(x)
    assert _baked_warnings(record) == []


# ---------------------------------------------------------- aliased arguments
def _fill_then_sum(v, a):
    v.fill_(0.0)
    return a.sum()


def _mul_then_copy(v, w):
    v.mul_(10)
    return w * 1


def test_overlapping_arguments_written_in_place_match_eager_on_every_call(runner):
    h = runner(_fill_then_sum)
    f = runner(_mul_then_copy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # the first call, and the calls after it (tiered: after waiting)
            x = dg.arange(6, dtype=dg.float32)
            assert h(x[1:3], x).item() == 12.0
            assert x.tolist() == [0.0, 0.0, 0.0, 3.0, 4.0, 5.0]
            y = dg.tensor([1.0, 2.0, 3.0, 4.0])
            assert f(y[0:3], y[1:4]).tolist() == [20.0, 30.0, 4.0]
            assert y.tolist() == [10.0, 20.0, 30.0, 4.0]
            # The same functions on arguments that do not overlap run compiled.
            z = dg.arange(6, dtype=dg.float32)
            assert h(z[0:2], z[2:6]).item() == 14.0
    if runner.mode != "eager":
        shared = [str(w.message) for w in caught if "shares memory" in str(w.message)]
        assert len(shared) == 1, shared  # once per function and signature, not per call
        # ``x[1:3]`` is a view of ``x``: traced as one, it runs a kernel. ``y[0:3]`` and
        # ``y[1:4]`` are views of a third array: they run eagerly.
        assert h.stats.tier0_calls + h.stats.tier1_calls == 6
        assert f.stats.tier0_calls + f.stats.tier1_calls == 0


@pytest.mark.parametrize("tiered", [False, True])
def test_strict_refuses_overlapping_arguments_written_in_place(tiered, private_cache):
    f = dg.compile(_mul_then_copy, strict=True, tiered=tiered)
    y = dg.tensor([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(dg.EagerOnlyError, match="argument 0 is changed in place and shares "
                                                 "memory with tensor argument 1"):
        f(y[0:3], y[1:4])
    assert y.tolist() == [1.0, 2.0, 3.0, 4.0]  # refused before running anything


def _add_then_double(a, b):
    a.add_(1.0)
    return (b * 2).sum()


_VIEWS = {
    "row": (lambda x: (x[1], x), (3, 4)),
    "column": (lambda x: (x[:, 2], x), (3, 4)),
    "strided": (lambda x: (x[::2, 1:], x), (3, 4)),
    "base first": (lambda x: (x, x[1:, :2]), (3, 4)),
    "new axis": (lambda x: (x[1:2], x), (3, 4)),
    "same": (lambda x: (x, x), (6,)),
    "of a reshape": (lambda x: (x.reshape(3, 4)[2], x), (12,)),
}


@pytest.mark.parametrize("view", list(_VIEWS))
def test_an_argument_that_is_a_view_of_another_is_traced_as_one(runner, view):
    """Written through either one, the other sees it, as in eager mode; the call runs
    compiled, and another placement of the view is another signature."""
    make, shape = _VIEWS[view]
    f = runner(_add_then_double)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs eagerly" warning
        for _ in range(3):
            x = dg.arange(float(np.prod(shape))).reshape(shape)
            expected = dg.arange(float(np.prod(shape))).reshape(shape)
            want = _add_then_double(*make(expected))
            assert f(*make(x)).item() == want.item()
            assert x.tolist() == expected.tolist()
    if runner.mode != "eager":
        assert f.stats.traces == 1
        assert f.stats.tier0_calls + f.stats.tier1_calls == 3


def test_another_placement_of_a_view_argument_retraces():
    f = dg.compile(_fill_then_sum, tiered=False)
    for start in (1, 2, 1, 3):
        x = dg.arange(6, dtype=dg.float32)
        expected = 15.0 - start - (start + 1)
        assert f(x[start:start + 2], x).item() == expected
    assert f.stats.traces == 3
    assert "another view of argument 1" in f.stats.retrace_reasons[-1]


def test_overlapping_arguments_only_read_are_one_entry_for_any_placement():
    f = dg.compile(lambda w, x: (w * x.sum()).sum(), tiered=False)
    x = dg.arange(6, dtype=dg.float32)
    for start in range(4):
        assert f(x[start:start + 2], x).item() == 15.0 * (2 * start + 1)
    assert f.stats.traces == 1


# ---------------------------------------------------------- IEEE edges across the tier swap
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sign_of_zeros_and_nan_before_and_after_the_swap(runner, dtype):
    f = runner(lambda x: dg.sign(x) * 1.0)
    # Each mode its own shape: a kernel another mode put in the cache would skip tier 0.
    reps = MODES.index(runner.mode) + 1
    x = dg.tensor(np.tile(np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -3.5, 2.0], dtype),
                          reps))
    expected = np.tile(np.array([0.0, 0.0, 0.0, -1.0, 1.0, -1.0, 1.0], dtype),  # PyTorch's
                       reps)
    for _ in range(3):  # tiered: tier 0, then the swapped-in kernel
        got = f(x).numpy()
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    if runner.mode == "tiered":
        assert f.stats.tier0_calls == 1 and f.stats.tier1_calls == 2


# ---------------------------------------------------------- short lists and dicts, guarded
class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scales = [1.0, 2.0]
        self.table = {"bias": 0.5}

    def forward(self, x):
        return x * self.scales[1] + self.table["bias"]


def test_a_module_list_or_dict_changed_in_place_retraces(runner):
    m = _Scaled()
    f = runner(m)
    x = dg.ones(2)
    assert f(x).tolist() == [2.5, 2.5]
    m.scales[1] = 5.0
    assert f(x).tolist() == [5.5, 5.5]
    m.table["bias"] = -1.0
    assert f(x).tolist() == [4.0, 4.0]
    if runner.mode != "eager":
        assert f.stats.traces == 3
        assert "_Scaled.scales is [1.0, 5.0] (traced with [1.0, 2.0])" in \
            f.stats.retrace_reasons


_SETTINGS = {"gain": 2.0}
_SHIFTS = [0.0, 1.0]


def test_a_global_list_or_dict_changed_in_place_retraces(runner):
    f = runner(lambda x: x * _SETTINGS["gain"] + _SHIFTS[1])
    x = dg.ones(2)
    try:
        assert f(x).tolist() == [3.0, 3.0]
        _SETTINGS["gain"] = 3.0
        assert f(x).tolist() == [4.0, 4.0]
        _SHIFTS[1] = -0.0
        assert np.signbit(f(-x).numpy()).tolist() == [True, True]
        if runner.mode != "eager":
            assert f.stats.traces == 3
            assert any("global '_SETTINGS' is {'gain': 3.0} (traced with {'gain': 2.0}" in r
                       for r in f.stats.retrace_reasons)
    finally:
        _SETTINGS["gain"], _SHIFTS[1] = 2.0, 1.0


def test_long_lists_are_not_guarded(runner):
    m = _Scaled()
    m.scales = [1.0] * 17  # beyond MAX_GUARDED_ITEMS: baked in, as documented
    f = runner(m)
    x = dg.ones(2)
    assert f(x).tolist() == [1.5, 1.5]
    m.scales[1] = 5.0
    assert f(x).tolist() == ([5.5, 5.5] if runner.mode == "eager" else [1.5, 1.5])


# ------------------------------------------------------------ other baked values warn
def _value_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "was traced with the value of" in str(w.message)]


def _calls_then_change(f, x, change) -> list[str]:
    """``f(x)`` for two check periods, ``change()``, two more: the baked-value warnings
    (none may come before the change)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2 * CHECK_EVERY):
            f(x)
        assert _value_warnings(record) == []
        change()
        for _ in range(3 * CHECK_EVERY):
            f(x)
    return _value_warnings(record)


class _Config:
    def __init__(self) -> None:
        self.lr = 0.5
        self.steps = 0  # not read by the function: changing it never warns


class _Inner:
    def __init__(self) -> None:
        self.lr = 0.5


_CFG = _Config()
_CFG.inner = _Inner()
_NESTED = [[1.0], [2.0]]
_TABLE = np.array([1.0, 2.0])


def _read_config(x):
    return x * _CFG.lr


def _read_inner(x):
    return x * _CFG.inner.lr


def _read_nested(x):
    return x + _NESTED[1][0]


def _read_out_of_array(x):
    return x * float(_TABLE[1])  # a value read out of an array in Python


@pytest.mark.parametrize("runner", COMPILED, indirect=True)
def test_a_plain_objects_number_the_code_names_is_guarded(runner):
    saved = _CFG.lr
    try:
        f = runner(lambda x: _read_config(x))  # read inside a helper
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            first = f(dg.ones(2, dtype=dg.float64)).numpy()
            _CFG.lr = 0.25
            second = f(dg.ones(2, dtype=dg.float64)).numpy()
    finally:
        _CFG.lr = saved
    dg.testing.assert_close(first, np.full(2, 0.5))
    dg.testing.assert_close(second, np.full(2, 0.25))
    assert _value_warnings(record) == []
    assert "_CFG.lr is 0.25 (traced with 0.5" in f.stats.retrace_reasons[-1]


@pytest.mark.parametrize("runner", COMPILED, indirect=True)
@pytest.mark.parametrize("case", ["nested", "array"])
def test_a_changed_baked_value_warns_once_naming_the_line(runner, case):
    fn, change, path = {
        # An object's number is guarded (above), as is one of an object it holds.
        "nested": (_read_nested, lambda: _NESTED[1].__setitem__(0, 7.0), "_NESTED[1][0]"),
        "array": (_read_out_of_array, lambda: _TABLE.__setitem__(1, 9.0), "_TABLE"),
    }[case]
    saved = (_CFG.inner.lr, _NESTED[1][0], _TABLE.copy())
    try:
        f = runner(lambda x: fn(x))  # read inside a helper
        _CFG.steps += 1
        msgs = _calls_then_change(f, dg.ones(2, dtype=dg.float64), change)
    finally:
        _CFG.inner.lr, _NESTED[1][0], _TABLE[:] = saved
    assert len(msgs) == 1, msgs
    assert f"{path} has changed since" in msgs[0]
    line = {"nested": "x + _NESTED[1][0]",
            "array": "x * float(_TABLE[1])"}[case]
    src = open(__file__).read().splitlines()
    lineno = next(i + 1 for i, s in enumerate(src) if line in s)
    assert f"test_baked_values.py:{lineno})" in msgs[0], msgs[0]
    assert "dynamic=" in msgs[0]  # the fix


def test_an_attribute_the_function_does_not_name_never_warns():
    f = dg.compile(_read_config, tiered=False)
    msgs = _calls_then_change(f, dg.ones(2), lambda: setattr(_CFG, "steps", _CFG.steps + 1))
    assert msgs == []


class _WithArrays(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.offsets = np.zeros(2, np.float32)
        self.cfg = _Config()

    def forward(self, x):
        return x * self.cfg.lr + float(self.offsets[0])


@pytest.mark.parametrize("runner", COMPILED, indirect=True)
def test_a_modules_array_or_object_attribute_changed_warns(runner):
    m = _WithArrays()
    f = runner(m)
    x = dg.ones(2)

    def change():
        m.offsets[0] = 1.0
        m.cfg.lr = 2.0

    msgs = _calls_then_change(f, x, change)
    assert len(msgs) == 2, msgs
    assert any("_WithArrays.offsets has changed" in s for s in msgs)
    assert any("_WithArrays.cfg.lr has changed" in s for s in msgs)


class _DuckOptimizer:
    """An optimizer of the user's own, not a dg.optim.Optimizer."""

    def __init__(self, params, lr) -> None:
        self.param_groups = [{"params": list(params), "lr": lr}]


def test_a_duck_typed_optimizers_learning_rate_changed_warns():
    lin = nn.Linear(2, 1)
    opt = _DuckOptimizer(lin.parameters(), 0.1)

    def step(x):
        lin.zero_grad()
        loss = lin(x).sum()
        loss.backward()
        with dg.no_grad():
            for group in opt.param_groups:
                for p in group["params"]:
                    p.sub_(group["lr"] * p.grad)
        return loss

    f = dg.compile(step, tiered=False)
    msgs = _calls_then_change(f, dg.ones(1, 2),
                              lambda: opt.param_groups[0].__setitem__("lr", 0.01))
    assert len(msgs) == 1 and "opt.param_groups[0]['lr'] has changed" in msgs[0], msgs


def test_numbers_of_an_object_passed_as_an_argument_or_held_are_guarded():
    f = dg.compile(lambda x, cfg: x * cfg.lr + _read_inner(x), tiered=False)
    cfg = _Config()
    saved = _CFG.inner.lr
    try:
        msgs = _calls_then_change(lambda x: f(x, cfg), dg.ones(2),
                                  lambda: (setattr(cfg, "lr", 3.0),
                                           setattr(_CFG.inner, "lr", 2.0)))
        dg.testing.assert_close(f(dg.ones(2), cfg), np.full(2, 5.0, np.float32))
    finally:
        _CFG.inner.lr = saved
    assert msgs == []
    assert f.stats.traces == 2
    assert f.stats.retrace_reasons[-1] in ("argument 1 (_Config).lr is 3.0 (traced with 0.5, "
                                           "a baked-in constant)", "_CFG.inner.lr is 2.0 "
                                           "(traced with 0.5, a baked-in constant)")
