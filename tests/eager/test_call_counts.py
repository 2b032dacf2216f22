"""Python calls on the eager side of a compiled training step, counted with
``sys.setprofile``: for a small step they are its cost. This counts calls, it never times
them."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import dualgraph as dg

from .._support.profiling import python_calls


def _count(fn) -> tuple[int, list]:
    """The Python function calls made while running ``fn()``, as (file, function) pairs."""
    names = python_calls(fn)
    return len(names), names


def _scalar(x, y):
    return x * y + y ** 2


F = dg.compile(_scalar, tiered=False)


def _leaves():
    return (dg.tensor(np.float32(2.0), requires_grad=True),
            dg.tensor(np.float32(3.0), requires_grad=True))


def test_backward_of_a_compiled_scalar_loss_makes_few_calls():
    x, y = _leaves()
    for _ in range(2):  # compiled, and .grad set once: the steady state
        x.grad = y.grad = None
        z = F(x, y)
        z.backward()
    x.grad = y.grad = None
    z = F(x, y)
    n, names = _count(z.backward)
    # Tensor.backward and the node's hand_out, which gives the leaves their first .grad
    # itself.
    assert n <= 3, names
    assert x.grad.item() == 3.0 and y.grad.item() == 8.0


def test_accumulating_backward_makes_as_few_calls():
    x, y = _leaves()
    F(x, y).backward()
    z = F(x, y)
    n, names = _count(z.backward)
    assert n <= 2 + 2 * 2, names
    assert x.grad.item() == 6.0 and y.grad.item() == 16.0


def test_recording_a_compiled_call_makes_few_eager_calls():
    x, y = _leaves()
    F(x, y)
    _, names = _count(lambda: F(x, y))
    # The tape node of the call: built by the call path itself, with the loss tensor (the
    # leaves' nodes are cached), so no eager code runs.
    tape = [name for path, name in names if path.endswith(("dualgraph/eager/compiled_node.py",
                                                           "dualgraph/eager/autograd.py",
                                                           "dualgraph/ir/graph.py"))]
    assert tape == [], names


def _w1_step(x, y):
    x.grad = None
    y.grad = None
    z = F(x, y)
    z.backward()


def test_a_compiled_call_runs_its_generated_call_path_in_few_calls():
    x, y = _leaves()
    for _ in range(2):
        _w1_step(x, y)
    n, names = _count(lambda: F(x, y))
    # Besides the lambda: __call__, the generated call path, the kernel (called by the
    # path itself: no outputs' list or `run` call), and the tape node's call, which makes
    # the result too.
    assert ("<dg.compile call path of _scalar>", "fast") in names, names
    assert not {"new_outputs", "run"} & {name for _, name in names}, names
    assert n <= 1 + 6, (n, names)


def test_a_compiled_scalar_training_step_makes_few_calls():
    x, y = _leaves()
    for _ in range(2):
        _w1_step(x, y)
    n, names = _count(lambda: _w1_step(x, y))
    # The lambda and the step itself, then the calls the step makes: 3 in the compiled
    # call (`__call__`, the call path, the tape node's call; the kernel is C), 2 in the
    # two .grad setters, 2 in backward (`backward`, `hand_out`, which gives both leaves
    # their first gradient itself: no accumulation call, no tensor constructor's).
    assert n <= 2 + 7, (n, names)
    assert x.grad.item() == 3.0 and y.grad.item() == 8.0


def test_a_compiled_whole_training_step_makes_few_calls():
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU(), dg.nn.Linear(3, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    loss_fn = dg.nn.MSELoss()

    @dg.compile(tiered=False)
    def step(x, t):
        opt.zero_grad()
        loss = loss_fn(net(x), t)
        loss.backward()
        opt.step()
        return loss

    x, t = dg.ones(10, 2), dg.zeros(10, 1)
    for _ in range(2):
        step(x, t)
    before = net[0].weight.numpy().copy()
    n, names = _count(lambda: step(x, t))
    # The guards on the optimizer's hyperparameters call the optimizer's own getters;
    # the call runs its kernel (which takes work arrays) itself, bumps four parameters'
    # versions and writes their gradients (tensors set in C, no setter call).
    assert not {"new_outputs", "run", "new_scratch", "set_grad"} & {k for _, k in names}, names
    assert n <= 27, names
    assert step.stats.traces == 1
    assert not np.array_equal(net[0].weight.numpy(), before)


def test_recording_linear_calls_no_helpers_per_op():
    """An eager ``linear`` over leaves whose tape nodes exist records with no helper call
    per op: no leaf-node lookup, no view-step builder, no dtype promotion in the kernel, and
    its backward checks the saved versions inline."""
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    w = dg.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    b = dg.tensor(np.zeros(2, np.float32), requires_grad=True)
    lin = dg.nn.functional.linear
    lin(x, w, b).sum().backward()  # the leaves' nodes and the shape checks: made once
    _, names = _count(lambda: lin(x, w, b))
    called = {name for _, name in names}
    assert not called & {"_input_node", "view_step", "result_type"}, names
    y = lin(x, w, b).sum()
    _, names = _count(y.backward)
    assert "_check_saved_versions" not in {name for _, name in names}, names
    assert np.allclose(w.grad.numpy(), 2 * x.numpy().sum(0))


def test_saved_versions_still_checked_after_the_inline_check():
    w = dg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    x = dg.tensor(np.ones((4, 3), np.float32), requires_grad=True)
    y = dg.nn.functional.linear(x, w).sum()
    with dg.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def _two_layer():
    rng = np.random.default_rng(0)
    shapes = [(8, 4), (8,), (3, 8), (3,)]
    params = [dg.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
              for s in shapes]
    x = dg.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    F = dg.nn.functional

    def loss():
        return F.linear(F.relu(F.linear(x, params[0], params[1])), params[2], params[3]).sum()

    return params, loss


def test_a_layers_backward_makes_no_helper_call_per_node():
    """The engine's walk, each node's array-form VJP and each leaf's accumulation call no
    helper of their own: no comprehension, no ``args``, no per-gradient wrapper, no release,
    no root check."""
    params, loss = _two_layer()
    loss().backward()  # the leaves' nodes: made once
    expected = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    y = loss()
    _, names = _count(y.backward)
    called = [name for _, name in names]
    assert not set(called) & {"<listcomp>", "<genexpr>", "<setcomp>", "args", "release",
                              "_check_root", "_accumulate", "_array_grads", "_captured"}, names
    assert called[:3] == ["backward", "_make", "run_backward"], names  # the seed: _make
    for p, e in zip(params, expected):
        np.testing.assert_array_equal(p.grad.numpy(), e)


def test_an_op_on_a_view_reads_its_history_without_property_calls():
    w = dg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    wt = w.t()
    x = dg.tensor(np.ones((4, 3), np.float32))
    _, names = _count(lambda: x @ wt)
    assert not {"grad_fn", "_rg"} & {name for _, name in names}, names
    with dg.no_grad():
        w.mul_(2)  # the view's history is stale: regenerated before it is read
    y = (x @ wt).sum()
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((2, 3), 4.0, np.float32))


def test_resetting_grad_makes_one_call_besides_the_setter():
    w = dg.tensor(np.ones(2, np.float32), requires_grad=True)
    (w * 2).sum().backward()

    def reset():
        w.grad = None

    n, names = _count(reset)
    assert n <= 1 + 1, names  # reset and the setter (its mode lookup is written out)
    assert w.grad is None


def test_an_eager_linear_layer_makes_few_calls():
    lin = dg.nn.functional.linear
    x = dg.tensor(np.ones((4, 6), np.float32))
    w = dg.tensor(np.ones((3, 6), np.float32), requires_grad=True)
    b = dg.tensor(np.ones(3, np.float32), requires_grad=True)
    lin(x, w, b)
    n, names = _count(functools.partial(lin, x, w, b))
    # linear and two shape reads; per op (the transposed weight, then addmm) bind,
    # eager_process, its kernel and its tape node, plus the view's `_new_view`.
    assert n <= 3 + 4 + 1 + 5, names
    y = lin(x, w, b)
    assert y.grad_fn.name() == "AddmmBackward0"
    assert [f.name() if f else None for f, _ in y.grad_fn.next_functions] == [
        "AccumulateGrad", None, "TBackward0"]


def test_linear_through_a_transposed_view_keeps_its_gradients_and_errors():
    lin = dg.nn.functional.linear
    rng = np.random.default_rng(0)
    xa, wa, ba = rng.standard_normal((2, 5, 6)), rng.standard_normal((3, 6)), rng.standard_normal(3)
    x, w, b = (dg.tensor(a, requires_grad=True) for a in (xa, wa, ba))
    lin(x, w, b).sum().backward()
    dg.testing.assert_close(w.grad.numpy(), np.ones((10, 3)).T @ xa.reshape(10, 6),
                            rtol=1e-7, atol=0.0, check_dtype=False)
    dg.testing.assert_close(x.grad.numpy(), np.ones((2, 5, 3)) @ wa,
                            rtol=1e-7, atol=0.0, check_dtype=False)
    v = dg.tensor(rng.standard_normal(6), requires_grad=True)  # a 1-D weight
    dg.testing.assert_close(lin(x, v).numpy(), xa @ v.numpy(),
                            rtol=1e-7, atol=0.0, check_dtype=False)
    with pytest.raises(ValueError, match=r"input of shape \(2, 5, 6\) does not match weight "
                                         r"of shape \(3, 4\) \(in_features 4\)"):
        lin(x, dg.tensor(np.ones((3, 4))))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        lin(dg.tensor(1.0), w)
    with pytest.raises(TypeError, match="input must be a tensor"):
        lin(xa, w)
