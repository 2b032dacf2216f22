"""State that eager mode reads on every call and a compiled call must notice: captured
parameters' ``requires_grad``, container modules' contents, Python numbers held by modules
and named by globals (also inside helper functions), arguments that share memory, and
fresh leaves each call.

Each scenario runs eagerly, compiled blocking and compiled tiered; the tiered run waits
after every call until the entry's kernels have swapped in, so later calls of the same
signature are served by the compiled kernels.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg

from .conftest import traces

nn = dg.nn


# ---------------------------------------------------------- captured requires_grad
def test_freezing_a_captured_parameter_stops_its_update(runner):
    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    x = dg.randn(4, 3)

    def step(x):
        opt.zero_grad()
        loss = net(x).sum()
        loss.backward()
        opt.step()
        return loss

    f = runner(step)
    f(x)
    net[0].weight.requires_grad_(False)
    frozen = net[0].weight.numpy().copy()
    f(x)
    f(x)
    assert np.array_equal(net[0].weight.numpy(), frozen)
    assert net[0].weight.grad is None
    # And back: unfrozen, it gets gradients and moves again.
    net[0].weight.requires_grad_(True)
    f(x)
    assert net[0].weight.grad is not None
    assert not np.array_equal(net[0].weight.numpy(), frozen)
    if runner.mode != "eager":
        assert traces(f) == 2  # the unfrozen entry is reused
        assert "requires_grad=False" in " ".join(f.stats.retrace_reasons)


def test_a_layer_compiled_frozen_gets_gradients_once_unfrozen(runner):
    dg.manual_seed(1)
    lin = nn.Linear(3, 1)
    lin.weight.requires_grad_(False)
    x = dg.randn(2, 3)
    f = runner(lambda x: lin(x).sum())
    f(x).backward()
    assert lin.weight.grad is None
    lin.weight.requires_grad_(True)
    f(x).backward()
    dg.testing.assert_close(lin.weight.grad.numpy(), x.numpy().sum(0, keepdims=True), rtol=1e-6,
                            atol=0, equal_nan=True, check_dtype=False)


def _gan_step(g, d, og, od, x):
    # The discriminator's loss and step, then its parameters frozen for the generator's
    # loss and step (the read after the freeze gives them no gradient), then unfrozen by
    # the attribute after the optimizer wrote them.
    od.zero_grad()
    loss_d = d(x).pow(2).mean() + d(g(x).detach()).mean()
    loss_d.backward()
    od.step()
    for p in d.parameters():
        p.requires_grad_(False)
    og.zero_grad()
    loss_g = d(g(x)).pow(2).mean()
    loss_g.backward()
    og.step()
    d.weight.requires_grad = True
    return loss_d.detach(), loss_g.detach()


def _gan_run(call, x, calls=3):
    dg.manual_seed(2)
    g, d = nn.Linear(3, 3), nn.Linear(3, 1)
    og, od = dg.optim.SGD(g.parameters(), lr=0.1), dg.optim.SGD(d.parameters(), lr=0.1)
    f = call(lambda x: _gan_step(g, d, og, od, x))
    seen = []
    for _ in range(calls):
        seen.append([*f(x), *[p.detach().clone() for p in (*g.parameters(), *d.parameters())],
                     *[p.grad for p in (*g.parameters(), *d.parameters())],
                     d.weight.requires_grad, d.bias.requires_grad])
        d.bias.requires_grad_(True)
    return seen, f


def test_a_gan_step_freezing_the_discriminator_compiles_as_eager(runner):
    x = dg.randn(4, 3)
    want, _ = _gan_run(lambda fn: fn, x)
    got, f = _gan_run(runner, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for a, b in zip(want, got):
            assert a[-2:] == b[-2:] == [True, False]  # d.bias left frozen: written back
            dg.testing.assert_close(b[:-2], a[:-2], rtol=1e-6, atol=1e-7)
    # The flag left False is set back to True before each next call: one trace serves all.
    assert runner.mode == "eager" or traces(f) == 1


def _compiled_as_eager(run, flags: list):
    """``run(call)`` eagerly and compiled: each call's values equal, its last items the
    ``requires_grad`` flags ``flags``; returns the compiled function."""
    want, _ = run(lambda fn: fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got, f = run(lambda fn: dg.compile(fn, tiered=False))
    n = len(flags)
    for a, b in zip(want, got):
        assert a[-n:] == b[-n:] == flags
        dg.testing.assert_close(b[:-n], a[:-n], rtol=1e-6, atol=1e-7)
    return f


def test_a_flag_left_changed_is_written_back_and_guarded() -> None:
    # w is read before it is frozen (that read keeps its gradient) and after (none); the
    # call leaves it frozen, and a call that begins with it frozen is another trace.
    def run(call):
        dg.manual_seed(3)
        w, v = nn.Linear(3, 1).weight, nn.Linear(3, 1).weight
        w.grad, v.grad = dg.zeros_like(w), dg.zeros_like(v)  # (a None .grad is keyed)

        def step(x):
            loss = (w * x).sum() + (v * x).sum()
            w.requires_grad_(False)
            loss = loss + (w * v * x).sum()
            loss.backward()
            return loss.detach()

        f = call(step)
        seen = []
        for flag in (True, True, False, True):
            w.requires_grad_(flag)
            out = f(dg.arange(3.0))
            seen.append([out, w.grad.clone(), v.grad.clone(), w.requires_grad])
        return seen, f

    assert traces(_compiled_as_eager(run, [False])) == 2


def test_requires_grad_turned_on_mid_step_makes_a_leaf_from_there() -> None:
    # Frozen at entry, w is a constant for the first term and a leaf for the second;
    # detach_() of u after its first read keeps that read's gradient.
    def run(call):
        dg.manual_seed(4)
        w, u = nn.Linear(3, 1).weight, nn.Linear(3, 1).weight
        w.grad = dg.zeros_like(w)  # (a None .grad is keyed)

        def step(x):
            w.requires_grad_(False)
            first = (w * x).sum() + (u * x).sum()
            w.requires_grad_()
            u.detach_()
            loss = first + (w * w * u * x).sum()
            loss.backward()
            return loss.detach()

        f = call(step)
        seen = []
        for _ in range(3):
            u.requires_grad_(True)
            u.grad = None
            out = f(dg.arange(3.0))
            seen.append([out, w.grad.clone(), u.grad, w.requires_grad,
                         u.requires_grad])
        return seen, f

    assert traces(_compiled_as_eager(run, [True, False])) == 1


def test_a_parameter_detached_in_place_inside_the_step_gets_eager_gradients() -> None:
    # detach_() turns requires_grad off as requires_grad_(False) does: the read before it
    # still gives the parameter its gradient in the backward after the call.
    def run(compiled):
        dg.manual_seed(3)
        w = nn.Linear(3, 1).weight

        def step(x):
            a = (w * x).sum()
            w.detach_()
            return a + (w * x * 2).sum()

        f = dg.compile(step, tiered=False) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            f(dg.ones(3)).backward()
        return w.grad.numpy(), w.requires_grad, traces(f)

    eager, compiled = run(False), run(True)
    assert np.array_equal(eager[0], compiled[0]) and eager[1] is compiled[1] is False
    assert compiled[2] == 1


def test_a_tensor_made_inside_may_become_a_leaf(runner):
    def f(x):
        w = dg.ones(3)
        w.requires_grad_()
        return (w * x).sum()

    x = dg.arange(3.0)
    assert f(x).item() == runner(f)(x).item() == 3.0


# ---------------------------------------------------------- containers
def _eager_of(net, x):
    return net(x).numpy()


@pytest.mark.parametrize("change", ["setitem", "append", "insert", "delitem"])
def test_sequential_mutation_runs_the_new_layers(runner, change):
    dg.manual_seed(2)
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3))
    x = dg.randn(2, 3)
    f = runner(net)
    f(x)
    if change == "setitem":
        net[2] = nn.Linear(3, 3)
    elif change == "append":
        net.append(nn.Tanh())
    elif change == "insert":
        net.insert(1, nn.Sigmoid())
    else:
        del net[1]
    for _ in range(2):
        dg.testing.assert_close(f(x).numpy(), _eager_of(net, x), rtol=1e-5, atol=1e-6,
                                equal_nan=True, check_dtype=False)
    if runner.mode != "eager":
        assert traces(f) == 2
        assert "submodules of a Sequential changed" in f.stats.retrace_reasons[0]


class _ListNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(3, 1), "b": nn.Linear(3, 2)})

    def forward(self, x):
        for m in self.layers:
            x = m(x).relu()
        return self.heads["a"](x)


@pytest.mark.parametrize("change", ["list_setitem", "list_append", "dict_setitem"])
def test_module_list_and_dict_mutation_runs_the_new_layers(runner, change):
    dg.manual_seed(3)
    net = _ListNet()
    x = dg.randn(2, 3)
    f = runner(net)
    f(x)
    if change == "list_setitem":
        net.layers[1] = nn.Linear(3, 3)
    elif change == "list_append":
        net.layers.append(nn.Linear(3, 3))
    else:
        net.heads["a"] = nn.Linear(3, 1)
    for _ in range(2):
        dg.testing.assert_close(f(x).numpy(), _eager_of(net, x), rtol=1e-5, atol=1e-6,
                                equal_nan=True, check_dtype=False)
    if runner.mode != "eager":
        assert traces(f) == 2


class _SlicedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 2)])

    def forward(self, x):
        for conv in self.convs[:-1]:  # a new ModuleList on every call
            x = conv(x).relu()
        return self.convs[-1](x)


def test_a_module_list_sliced_in_forward_traces_once():
    dg.manual_seed(4)
    net = _SlicedNet()
    x = dg.randn(2, 3)
    f = dg.compile(net)
    for _ in range(3):
        dg.testing.assert_close(f(x), net(x))
    assert traces(f) == 1
    net.convs[0] = nn.Linear(3, 3)  # the sliced list's layers are still guarded
    dg.testing.assert_close(f(x), net(x))
    assert traces(f) == 2


# ---------------------------------------------------------- Python numbers of modules
def test_dropout_p_changed_between_calls(runner):
    drop = nn.Dropout(0.5)
    f = runner(lambda x: drop(x))
    x = dg.ones(2000)
    assert (f(x).numpy() == 0).mean() > 0.3
    drop.p = 0.0
    for _ in range(2):
        np.testing.assert_array_equal(f(x).numpy(), np.ones(2000, np.float32))
    drop.p = 1.0
    np.testing.assert_array_equal(f(x).numpy(), np.zeros(2000, np.float32))
    if runner.mode != "eager":
        assert "Dropout.p is 0.0 (traced with 0.5)" in f.stats.retrace_reasons


def test_batchnorm_momentum_changed_between_calls(runner):
    bn = nn.BatchNorm1d(2)
    x = dg.tensor([[1.0, 2.0], [3.0, 6.0]])
    f = runner(lambda x: bn(x))
    f(x)
    bn.momentum = 0.5
    f(x)
    # Eager reference: the same two calls with the same momentum changes.
    ref = nn.BatchNorm1d(2)
    ref(x)
    ref.momentum = 0.5
    ref(x)
    dg.testing.assert_close(bn.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(bn.running_var.numpy(), ref.running_var.numpy(), rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    if runner.mode != "eager":
        assert any("momentum" in r for r in f.stats.retrace_reasons)


class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        return x * self.scale


def test_a_user_module_number_is_guarded(runner):
    m = _Scaled()
    f = runner(m)
    x = dg.ones(2)
    assert f(x).tolist() == [2.0, 2.0]
    m.scale = 3.0
    assert f(x).tolist() == [3.0, 3.0]
    m.scale = 2.0
    assert f(x).tolist() == [2.0, 2.0]
    if runner.mode != "eager":
        assert traces(f) == 2  # back to 2.0 reuses the first entry


# ---------------------------------------------------------- Python numbers in globals
SCALE = 2.0


def _scaled_by_global(x):
    return x * SCALE


def _calls_helper(x):
    return _scaled_by_global(x) + 1


@pytest.mark.parametrize("fn", [_scaled_by_global, _calls_helper])
def test_a_global_number_is_guarded_also_inside_a_helper(runner, fn):
    global SCALE
    f = runner(fn)
    x = dg.ones(2)
    extra = 0.0 if fn is _scaled_by_global else 1.0
    try:
        assert f(x).tolist() == [2.0 + extra] * 2
        SCALE = -0.0
        assert f(x).tolist() == [-0.0 + extra] * 2
        assert np.signbit(f(x).numpy()).all() == (extra == 0.0)
        SCALE = 5.0
        assert f(x).tolist() == [5.0 + extra] * 2
    finally:
        SCALE = 2.0
    if runner.mode != "eager":
        assert traces(f) == 3
        assert "global 'SCALE' is -0.0 (traced with 2.0" in f.stats.retrace_reasons[0]


def test_a_helper_names_a_rebound_global_tensor(runner):
    g = {"W": dg.tensor([1.0, 2.0])}
    exec("def helper(x):\n    return x * W\n", g)
    helper = g["helper"]
    f = runner(lambda x: helper(x).sum())
    x = dg.ones(2)
    assert f(x).item() == 3.0
    g["W"] = dg.tensor([10.0, 20.0])
    assert f(x).item() == 30.0


# ---------------------------------------------------------- aliased arguments
def _fill_then_sum(v, a):
    v.fill_(0.0)
    return a.sum()


def _mul_then_copy(v, w):
    v.mul_(10)
    return w * 1


def test_arguments_sharing_memory_give_eager_answers(runner):
    f = runner(_fill_then_sum)
    x = dg.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert f(x[1:3], x).item() == 10.0
        x = dg.tensor([1.0, 2.0, 3.0, 4.0])
        g = runner(_mul_then_copy)
        assert g(x[0:3], x[1:4]).tolist() == [20.0, 30.0, 4.0]
    if runner.mode != "eager":
        assert any("shares memory" in str(w.message) for w in caught)


def test_disjoint_views_of_one_tensor_still_compile(runner):
    g = runner(_mul_then_copy)
    for _ in range(3):
        x = dg.tensor([1.0, 2.0, 3.0, 4.0])
        assert g(x[0:2], x[2:4]).tolist() == [3.0, 4.0]
        assert x.tolist() == [10.0, 20.0, 3.0, 4.0]
    if runner.mode != "eager":
        assert traces(g) == 1


def test_an_argument_that_is_a_view_of_an_updated_parameter(runner):
    p = nn.Parameter(np.array([1.0, 2.0, 3.0], np.float32))

    def step(v):
        with dg.no_grad():
            p.mul_(2.0)
        return v * 1

    f = runner(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert f(p.detach()[1:]).tolist() == [4.0, 6.0]


def test_the_same_tensor_twice_written_through_one(runner):
    def f(a, b):
        a.add_(1.0)
        return b * 2

    g = runner(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = dg.tensor([1.0, 2.0])
        assert g(x, x).tolist() == [4.0, 6.0]
        y = dg.tensor([1.0, 2.0])
        assert g(y, dg.tensor([1.0, 2.0])).tolist() == [2.0, 4.0]


# ---------------------------------------------------------- fresh leaves each call
def _loss_and_backward(x):
    loss = (x * x).sum()
    loss.backward()
    return loss


def test_fresh_leaves_each_call_do_not_retrace(runner):
    f = runner(_loss_and_backward)
    leaves = []
    for i in range(4):
        x = dg.tensor([float(i + 1)], requires_grad=True)
        leaves.append(x)
        f(x)
    assert [t.grad.tolist() for t in leaves] == [[2.0], [4.0], [6.0], [8.0]]
    if runner.mode != "eager":
        assert traces(f) == 1


def test_a_leaf_with_a_gradient_accumulates_per_call(runner):
    f = runner(_loss_and_backward)
    a = dg.tensor([1.0], requires_grad=True)
    f(a)
    f(a)
    b = dg.tensor([3.0], requires_grad=True)
    f(b)
    f(b)
    assert a.grad.tolist() == [4.0] and b.grad.tolist() == [12.0]
    if runner.mode != "eager":
        assert traces(f) == 2  # .grad None, then .grad set: the leaf itself is not keyed


# ---------------------------------------------------------- tensors inside containers
def _weighted(pair, opts, scale):
    a, b = pair
    return a * b * scale + opts["bias"].sum()


def test_tensors_inside_tuples_lists_and_dicts_are_inputs(runner):
    f = runner(_weighted)
    a, b, bias = dg.ones(2), dg.tensor([2.0, 3.0]), dg.tensor([0.5, 0.5])
    assert f([a, b], {"bias": bias}, 2.0).tolist() == [5.0, 7.0]
    b2 = dg.tensor([4.0, 5.0])
    assert f([a, b2], {"bias": bias}, 2.0).tolist() == [9.0, 11.0]  # new values, no retrace
    assert f((a, b2), {"bias": bias}, 3.0).tolist() == [13.0, 16.0]
    if runner.mode != "eager":
        # The container's kind and the number are baked in: (list, 2.0) and (tuple, 3.0).
        assert traces(f) == 2


def test_in_place_updates_of_tensors_in_a_list(runner):
    def scale_all(ps):
        for p in ps:
            p.mul_(2.0)
        return ps[0] + 0

    f = runner(scale_all)
    ps = [dg.ones(2), dg.ones(3)]
    f(ps)
    f(ps)
    assert ps[0].tolist() == [4.0, 4.0] and ps[1].tolist() == [4.0, 4.0, 4.0]


def test_gradients_reach_leaves_inside_a_tuple(runner):
    f = runner(lambda t: (t[0] * t[1]).sum())
    for _ in range(2):
        x = dg.tensor([1.0, 2.0], requires_grad=True)
        y = dg.tensor([3.0, 4.0], requires_grad=True)
        f((x, y)).backward()
        assert x.grad.tolist() == [3.0, 4.0] and y.grad.tolist() == [1.0, 2.0]


# ---------------------------------------------------------- returning an argument
def test_returning_an_argument_returns_that_tensor(runner):
    f = runner(lambda x, y: (x, y * 2))
    x, y = dg.ones(2), dg.ones(2)
    for _ in range(2):
        a, b = f(x, y)
        assert a is x and b.tolist() == [2.0, 2.0]
    g = runner(lambda x: x.add_(1.0))
    z = dg.zeros(2)
    assert g(z) is z and g(z) is z and z.tolist() == [2.0, 2.0]


def test_returning_a_leaf_that_requires_grad(runner):
    f = runner(lambda x: (x, (x * 3).sum()))
    x = dg.ones(2, requires_grad=True)
    same, loss = f(x)
    assert same is x
    loss.backward()
    assert x.grad.tolist() == [3.0, 3.0]


# ---------------------------------------------------------- in-place dropout
def test_dropout_inplace(runner):
    F = dg.nn.functional

    def fn(x):
        h = x * 1
        F.dropout(h, 0.5, training=True, inplace=True)
        return h

    f = runner(fn)
    out = f(dg.ones(1000)).numpy()
    assert set(np.unique(out)) <= {0.0, 2.0} and 0.3 < (out == 0).mean() < 0.7
    z = dg.ones(100)
    assert runner(lambda x: F.dropout(x, 0.5, inplace=True))(z) is z
    assert set(np.unique(z.numpy())) <= {0.0, 2.0}
    with pytest.raises(RuntimeError, match="leaf"):
        F.dropout(dg.ones(2, requires_grad=True), 0.5, inplace=True)


class _Temperature(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.t = 2.0

    @dg.compile
    def scaled(self, x):
        return x / self.t


def test_a_compiled_method_sees_its_modules_numbers():
    m = _Temperature()
    x = dg.ones(2)
    assert m.scaled(x).tolist() == [0.5, 0.5]
    m.t = 4.0
    assert m.scaled(x).tolist() == [0.25, 0.25]


OFFSET = 1.0


@dg.compile
def _compiled_helper(x):
    return x + OFFSET


def test_a_global_read_by_an_inlined_compiled_helper(runner):
    global OFFSET
    f = runner(lambda x: _compiled_helper(x) * 2)
    x = dg.zeros(2)
    try:
        assert f(x).tolist() == [2.0, 2.0]
        OFFSET = 3.0
        assert f(x).tolist() == [6.0, 6.0]
    finally:
        OFFSET = 1.0


# ---------------------------------------------------------- arguments' .grad
def _clipped_step(x, p, q):
    loss = ((p + q) * x).sum()
    loss.backward()
    nn.utils.clip_grad_norm_([p, q], 0.5)
    return loss


def test_clipping_the_gradients_of_parameters_passed_as_arguments(runner):
    """Inside the trace ``p.grad`` of an argument is its gradient, so the in-place
    ``mul_`` of clip_grad_norm_ reaches the ``.grad`` written back."""
    f = runner(_clipped_step)
    p, q = nn.Parameter(dg.zeros(3)), nn.Parameter(dg.zeros(3))
    for _ in range(3):
        p.grad = q.grad = None
        f(dg.tensor([1.0, 2.0, 2.0]), p, q)
        expected = np.array([1.0, 2.0, 2.0]) * 0.5 / (3 * 2 ** 0.5)
        dg.testing.assert_close(p.grad.numpy(), expected, rtol=1e-5, atol=0,
                                equal_nan=True, check_dtype=False)
        dg.testing.assert_close(q.grad.numpy(), expected, rtol=1e-5, atol=0,
                                equal_nan=True, check_dtype=False)
    if runner.mode != "eager":
        assert traces(f) == 1


def test_an_arguments_existing_gradient_is_read_on_every_call(runner):
    f = runner(lambda p: p.grad * 2)
    for i in range(3):
        p = dg.ones(2, requires_grad=True)
        p.grad = dg.full((2,), float(i))
        assert f(p).tolist() == [2.0 * i, 2.0 * i]
    if runner.mode != "eager":
        assert traces(f) == 1


# ---------------------------------------------------------- globals read by modules
GAIN = 2.0


def _gained(x):
    return x * GAIN


class _GlobalReader(nn.Module):
    def forward(self, x):
        return self._shift(_gained(x))

    def _shift(self, x):
        return x + GAIN


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_global_number_read_in_a_modules_forward_is_guarded(runner, wrapped):
    """``forward`` and the methods it calls through ``self`` are helpers: the globals
    they name are guarded, whether the module itself or a function calling it is
    compiled."""
    global GAIN
    m = _GlobalReader()
    f = runner((lambda x: m(x)) if wrapped else m)
    x = dg.ones(2)
    try:
        assert f(x).tolist() == [4.0, 4.0]
        GAIN = 3.0
        assert f(x).tolist() == [6.0, 6.0]
        assert f(x).tolist() == [6.0, 6.0]
    finally:
        GAIN = 2.0
    if runner.mode != "eager":
        assert traces(f) == 2


# ---------------------------------------------------------- module hooks
def test_hooks_registered_or_removed_after_compiling_run_as_in_eager(runner):
    dg.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    f = runner(lambda x: net(x))
    x = dg.ones(1, 2)
    plain = f(x).tolist()
    handle = net[0].register_forward_hook(lambda m, i, out: out * 0 + 1.5)
    assert f(x).tolist() == [[1.5, 1.5]]
    assert f(x).tolist() == [[1.5, 1.5]]
    pre = net.register_forward_pre_hook(lambda m, args: (args[0] * 0 - 1.0,))
    assert f(x).tolist() == [[1.5, 1.5]]
    handle.remove()
    assert f(x).tolist() == net(-dg.ones(1, 2)).tolist()
    pre.remove()
    assert f(x).tolist() == plain
