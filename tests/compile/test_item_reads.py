"""Numbers read from traced values (``loss.item()``) inside a compiled function: computed in
the graph and handed out by the call as the Python float or int eager mode gives, when the
function returns them, keeps them in a list it returns, accumulates them or uses them in
arithmetic; a branch or conversion on one is computed from the call's inputs and guarded
(`compile.speculate`); other uses of the value itself run that signature eagerly, naming
the line, as ``torch.compile`` breaks its graph there."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dualgraph as dg

from .conftest import traces


def _forms(x, d, n):
    logged = []
    total = 0.0
    for i in range(2):
        v = (x[i] * 3).sum().item()
        logged.append(v)
        total += v
    wide = d.sum().item() * 3 - total  # a float64 tensor's, in Python's double arithmetic
    count = (n > 1).sum().item()  # an int tensor's: a Python int
    one = x[:1, 0].item()  # shape (1,)
    last = n[-1].item()
    return (total, logged, count, {"c": count * 2 - 1, "half": count * 0.5, "mix": last + one},
            x * total - one, d * wide, n * last, x[2, 1].tolist())


def _same(got, want):
    """Equal values and equal types, through tuples, lists and dicts."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            _same(got[k], want[k])
    elif isinstance(want, dg.Tensor):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    else:
        assert got == want or (math.isnan(got) and math.isnan(want))


def test_read_numbers_are_handed_out_as_eager_gives_them_with_one_trace():
    f = dg.compile(_forms, tiered=False)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = dg.tensor(rng.standard_normal((3, 2)).astype(np.float32))
        d = dg.tensor(rng.standard_normal(3))
        n = dg.tensor(rng.integers(-3, 4, size=4))
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no eager fallback
            got = f(x, d, n)
        _same(got, _forms(x, d, n))
    assert traces(f) == 1, f.stats.retrace_reasons
    assert f.stats.tier1_calls == 3


class _Net(dg.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = dg.nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x)


def _training(compiled: bool):
    dg.manual_seed(3)
    net = _Net()
    opt = dg.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        before = loss.item()
        loss.backward()
        opt.step()
        return before, loss.item(), loss * 1

    return net, (dg.compile(step, tiered=False) if compiled else step)


def test_a_training_step_returning_loss_item_compiles_and_keeps_eagers_gradients():
    (net, step), (net_e, step_e) = _training(True), _training(False)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = dg.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        y = dg.tensor(rng.standard_normal((4, 1)).astype(np.float32))
        got, want = step(x, y), step_e(x, y)
        _same(got[:2], want[:2])
        assert got[0] == got[1] == got[2].item()
        for p, q in zip(net.parameters(), net_e.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert traces(step) == 1 and step.stats.tier1_calls == 3


def test_a_read_beside_a_loss_that_records_leaves_the_tape_to_the_loss():
    w = dg.tensor([0.5, -1.0], requires_grad=True)
    we = dg.tensor([0.5, -1.0], requires_grad=True)

    def loss_of(w, x):
        loss = (w * x).sum() ** 2
        return loss, loss.item() / 2

    f = dg.compile(loss_of, tiered=False)
    for k in range(2):
        x = dg.tensor([1.0 + k, 2.0])
        (loss, half), (loss_e, half_e) = f(w, x), loss_of(we, x)
        assert type(half) is float and half == half_e
        loss.backward()
        loss_e.backward()
    np.testing.assert_array_equal(w.grad.numpy(), we.grad.numpy())
    assert traces(f) == 1


def _branch(x):
    if x.sum().item() > 0:
        return x * 2
    return x


def _at_least_one(x):
    return x / max(1, (x > 0).sum().item())


def _log_of(x):
    return x * math.log(x.sum().item())


def _float_of(x):
    return x * float(x.sum()) + int(x.max())


@pytest.mark.parametrize("fn", [_branch, _at_least_one, _log_of, _float_of])
def test_a_read_python_branches_on_or_converts_compiles_guarded_on_what_it_took(fn):
    f = dg.compile(fn, strict=fn in (_branch, _at_least_one))
    x = dg.tensor([1.5, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(f(x), fn(x))
        _same(f(x), fn(x))
    assert traces(f) == 1
    if fn in (_branch, _at_least_one):
        _same(f(-x), fn(-x))  # the other outcome: a second entry
        assert traces(f) == 2
        assert ".item()" in f.stats.retrace_reasons[-1]
    else:
        # A number taken as a value that changed between calls would retrace on every
        # call: that signature runs eagerly from then on, and the traced value still
        # runs its entry.
        with pytest.warns(RuntimeWarning, match="Python needs its value"):
            _same(f(x * 3), fn(x * 3))
        assert traces(f) == 1
    hits = f.stats.cache_hits
    _same(f(x), fn(x))
    assert f.stats.cache_hits == hits + 1


def _logged(x):
    print(f"{x.sum().item():.3f}")
    return x * 2


def _divides_by(x):
    return x * (2 / x.sum().item())


@pytest.mark.parametrize("fn", [_logged, _divides_by])
def test_a_read_whose_value_python_needs_runs_eagerly_naming_the_line(fn):
    f = dg.compile(fn)
    x = dg.tensor([1.5, 2.0])
    with pytest.warns(RuntimeWarning, match=r"test_item_reads\.py:\d+: .*\n    .*item"):
        got = f(x)
    _same(got, fn(x))
    _same(f(x * 3), fn(x * 3))  # that signature stays eager, without a warning
    assert traces(f) == 0
    with pytest.raises(dg.EagerOnlyError, match="Python needs its value"):
        dg.compile(fn, strict=True)(x)


history: list = []


class _Box:
    last = 0.0


box = _Box()


def _appends(x):
    history.append(x.sum().item())
    return x * 2


def _sets(x):
    box.last = x.sum().item()
    return x * 2


@pytest.mark.parametrize(("fn", "named"), [(_appends, "'history'"), (_sets, "_Box.last")])
def test_a_read_stored_outside_the_call_runs_eagerly_leaving_what_eager_leaves(fn, named):
    history.clear()
    f = dg.compile(fn)
    with pytest.warns(RuntimeWarning, match=named):
        f(dg.tensor([1.0, 2.0]))
    f(dg.tensor([3.0, 4.0]))
    assert history == ([3.0, 7.0] if fn is _appends else [])
    assert type(box.last) is float and box.last == (7.0 if fn is _sets else 0.0)
    box.last = 0.0


def test_a_read_outside_a_compiled_call_and_of_a_bool_still_refuse():
    with pytest.raises(dg.TraceError, match=r"\.item\(\)"):
        dg.trace(lambda x: x * x.sum().item(), dg.ones(2))
    f = dg.compile(lambda x: x * (x > 0).all().item())
    with pytest.warns(RuntimeWarning, match=r"\.item\(\)"):
        _same(f(dg.ones(2)), dg.ones(2))
    with pytest.raises(ValueError, match="only one-element tensors"):
        dg.compile(lambda x: x.item(), strict=True)(dg.ones(2))


def test_a_read_with_a_float_argument_under_verify_stays_one_entry():
    # The float argument is a graph input (not keyed by value) though the number it
    # makes with the read is returned; verify's eager rerun compares the numbers.
    def scaled(x, lr):
        return lr * x.sum().item() + 1, x * lr

    f = dg.compile(scaled, tiered=False, verify=True)
    x = dg.tensor([0.5, 0.25], dtype=dg.float32)
    for lr in (0.5, 0.1, 3.0):
        _same(f(x, lr), scaled(x, lr))
    assert traces(f) == 1


def _padded(x):
    n = (x > 0).sum().item()
    return dg.cat([x, dg.zeros(n)])


def test_a_read_int_is_a_dimension_of_a_factory_and_keys_per_value():
    # A factory's dimension takes anything with __index__ (as PyTorch's does): an int read
    # with .item() is converted there, so the entry is keyed on its value.
    f = dg.compile(_padded, tiered=False)
    for x, n in (([1.0, -1.0], 1), ([2.0, -3.0], 1), ([1.0, 1.0], 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = f(dg.tensor(x))
        _same(got, _padded(dg.tensor(x)))
        assert traces(f) == n
    assert dg.zeros(dg.tensor(3)).shape == (3,)
    assert dg.ones(2, np.int64(2)).shape == (2, 2)
    with pytest.raises(TypeError, match="dimensions must be non-negative ints, got Tensor"):
        dg.zeros(dg.tensor(2.5))
