"""Eager ``linear`` on a batch of rows runs its transpose and ``addmm`` in one step
(``dualgraph/eager/fused.py``) and records the tape the two ops record one by one: the same
node names and structure, saved values, versions, gradients (bits), hooks, ``retain_grad``
and double backward. Call counts, never time."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.ops import linalg as L

from .._support.profiling import python_calls

F = dg.nn.functional


def _leaves(dtype=np.float32, x_grad=False, w_grad=True, b_grad=True, seed=0):
    rng = np.random.default_rng(seed)
    x = dg.tensor(rng.standard_normal((5, 4)).astype(dtype), requires_grad=x_grad)
    w = dg.tensor(rng.standard_normal((3, 4)).astype(dtype), requires_grad=w_grad)
    b = dg.tensor(rng.standard_normal(3).astype(dtype), requires_grad=b_grad)
    return x, w, b


def _by_ops(x, w, b):
    return L.addmm(b, x, w.t())


def _eager_process_calls(fn) -> int:
    return sum(name == "eager_process" for _, name in python_calls(fn))


def _tree(fn) -> tuple:
    """A node's name and its inputs' trees (``None`` for a constant)."""
    if fn is None:
        return None
    return (fn.name(), tuple(_tree(f) for f, _ in fn.next_functions))


def test_linear_records_in_one_step_without_the_op_path():
    x, w, b = _leaves()
    assert _eager_process_calls(lambda: F.linear(x, w, b)) == 0
    # The op path it replaces runs two ops (transpose, addmm).
    assert _eager_process_calls(lambda: _by_ops(x, w, b)) == 2


@pytest.mark.parametrize("grads", [(False, True, True), (True, True, True), (True, False, False),
                                   (True, True, False), (False, False, True)])
def test_same_tape_and_bits_as_the_two_ops(grads):
    xg, wg, bg = grads
    got, want = (_leaves(x_grad=xg, w_grad=wg, b_grad=bg) for _ in range(2))
    y = F.linear(*got)
    z = _by_ops(*want)
    assert _tree(y.grad_fn) == _tree(z.grad_fn)
    assert _tree(y.grad_fn)[0] == "AddmmBackward0"
    np.testing.assert_array_equal(y.numpy(), z.numpy())
    g = dg.tensor(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
    y.backward(g)
    z.backward(g)
    for a, c in zip(got, want):
        if c.grad is None:
            assert a.grad is None
        else:
            assert a.grad.numpy().tobytes() == c.grad.numpy().tobytes()
            assert a.grad.numpy().flags.c_contiguous == c.grad.numpy().flags.c_contiguous


def test_hooks_retain_grad_and_accumulation_as_the_two_ops():
    results = []
    for fn in (F.linear, _by_ops):
        x, w, b = _leaves(x_grad=True)
        seen = []
        w.register_hook(lambda g, seen=seen: seen.append(g.numpy().copy()))
        b.register_hook(lambda g: g * 2)
        y = fn(x, w, b)
        y.retain_grad()
        (y * y).sum().backward(retain_graph=True)
        (y * y).sum().backward()  # accumulates
        results.append((seen, y.grad.numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()))
    (s1, *a1), (s2, *a2) = results
    assert len(s1) == len(s2) == 2
    for u, v in zip(s1, s2):
        np.testing.assert_array_equal(u, v)
    for u, v in zip(a1, a2):
        np.testing.assert_array_equal(u, v)


def test_inplace_change_of_a_saved_input_is_caught_as_by_the_two_ops():
    messages = []
    for fn in (F.linear, _by_ops):
        x, w, b = _leaves(x_grad=True)
        y = fn(x, w, b)
        with dg.no_grad():
            w.mul_(2)  # weight.T is saved for x's gradient
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as e:
            y.sum().backward()
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_double_backward_through_linear_float64():
    x, w, b = _leaves(np.float64, x_grad=True)

    def grad_norm(x, w, b):
        # gradcheck's finite differences pass inputs that do not require grad.
        x, w = (t if t.requires_grad else t.detach().requires_grad_(True) for t in (x, w))
        y = F.linear(x, w, b)
        gx, gw = dg.autograd.grad((y.tanh() ** 2).sum(), (x, w), create_graph=True)
        return (gx * gx).sum() + (gw * gw).sum()

    assert dg.testing.gradcheck(grad_norm, x, w, b)
    assert dg.testing.gradcheck(F.linear, x, w, b)


@pytest.mark.parametrize("case", ["view_weight", "mixed_dtype", "three_d", "no_bias",
                                  "view_input"])
def test_other_forms_run_the_ops(case):
    x, w, b = _leaves(x_grad=True)
    leaf = x
    if case == "view_weight":
        w = w.t().t()
    elif case == "mixed_dtype":
        b = dg.tensor(b.numpy().astype(np.float64), requires_grad=True)
    elif case == "three_d":
        x = leaf = dg.tensor(np.ones((2, 5, 4), np.float32), requires_grad=True)
    elif case == "no_bias":
        b = None
    else:
        x = x[1:]
    assert _eager_process_calls(lambda: F.linear(x, w, b)) >= 2
    y = F.linear(x, w, b)
    y.sum().backward()
    assert leaf.grad is not None


def test_no_grad_records_nothing():
    x, w, b = _leaves(x_grad=True)
    with dg.no_grad():
        y = F.linear(x, w, b)
    assert y.grad_fn is None and not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), _by_ops(x, w, b).detach().numpy())


def test_compiled_linear_matches_eager():
    x, w, b = _leaves()
    f = dg.compile(lambda x, w, b: F.linear(x, w, b).relu().sum(), tiered=False)
    dg.testing.assert_close(f(x, w, b).item(), F.linear(x, w, b).relu().sum().item(),
                               rtol=1e-6, atol=0, check_dtype=False)


# ``x.sum()`` over everything: the op's kernel and node without the generic op path.
from dualgraph.ops import reduce as R  # noqa: E402


def _summed(dtype=np.float32, requires_grad=True, seed=1):
    rng = np.random.default_rng(seed)
    return dg.tensor(rng.standard_normal((6, 7)).astype(dtype) * 1e3, requires_grad=requires_grad)


def test_full_sum_records_without_the_op_path():
    x = _summed()
    assert _eager_process_calls(lambda: x.sum()) == 0
    assert _eager_process_calls(lambda: R.sum(x)) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_full_sum_same_tape_value_and_gradient_as_the_op(dtype, requires_grad):
    got, want = _summed(dtype, requires_grad), _summed(dtype, requires_grad)
    y, z = (got * got).sum(), R.sum(want * want)
    assert y.numpy().tobytes() == z.numpy().tobytes()
    assert y.dtype == z.dtype and tuple(y.shape) == tuple(z.shape) == ()
    assert _tree(y.grad_fn) == _tree(z.grad_fn)
    assert y.requires_grad == z.requires_grad == requires_grad
    if requires_grad:
        assert _tree(y.grad_fn)[0] == "SumBackward0"
        y.backward()
        z.backward()
        assert got.grad.numpy().tobytes() == want.grad.numpy().tobytes()


def test_full_sum_of_a_leaf_hooks_and_double_backward_float64():
    x = _summed(np.float64)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    y = x.sum()
    y.retain_grad()
    y.backward(retain_graph=True)
    y.backward()  # accumulates
    np.testing.assert_array_equal(x.grad.numpy(), np.full((6, 7), 2.0))
    assert y.grad.item() == 2.0 and len(seen) == 2
    assert dg.testing.gradcheck(lambda t: (t.tanh() * t).sum(), _summed(np.float64) / 1e3)
    # The gradient of a gradient through the sum's node.
    t = (_summed(np.float64) / 1e3).detach().requires_grad_(True)
    (g,) = dg.autograd.grad((t ** 3).sum(), (t,), create_graph=True)
    (gg,) = dg.autograd.grad(g.sum(), (t,))
    dg.testing.assert_close(gg.numpy(), 6 * t.detach().numpy(), rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("case", ["view", "int", "parameter", "dim", "dtype", "no_grad"])
def test_full_sum_other_forms(case):
    x = _summed()
    if case == "view":
        x = x[1:]
    elif case == "int":
        x = dg.tensor(np.arange(6, dtype=np.int32))
    elif case == "parameter":
        x = dg.nn.Parameter(x.detach())
    if case == "dim":
        y, calls = x.sum(dim=0), _eager_process_calls(lambda: x.sum(dim=0))
    elif case == "dtype":
        y, calls = x.sum(dtype=dg.float64), _eager_process_calls(lambda: x.sum(dtype=dg.float64))
    elif case == "no_grad":
        with dg.no_grad():
            y, calls = x.sum(), _eager_process_calls(lambda: x.sum())
        assert y.grad_fn is None and calls == 0
        return
    else:
        y, calls = x.sum(), _eager_process_calls(lambda: x.sum())
    assert calls >= 1
    want = R.sum(x, 0 if case == "dim" else None, dtype=dg.float64 if case == "dtype" else None)
    assert y.numpy().tobytes() == want.numpy().tobytes() and y.dtype == want.dtype


# ``F.relu`` of a plain float tensor: the op's kernel and node without the generic op path.
from dualgraph.ops import elementwise as E  # noqa: E402


def test_relu_records_without_the_op_path():
    x = _summed()
    assert _eager_process_calls(lambda: F.relu(x)) == 0
    assert _eager_process_calls(lambda: E.relu(x)) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_relu_same_tape_value_and_gradient_as_the_op(dtype, requires_grad):
    got, want = _summed(dtype, requires_grad), _summed(dtype, requires_grad)
    got.data[0, :3] = want.data[0, :3] = dg.tensor(np.array([0.0, -0.0, np.nan], dtype))
    y, z = F.relu(got * 1), E.relu(want * 1)
    assert y.numpy().tobytes() == z.numpy().tobytes()
    assert y.numpy().flags.c_contiguous and y.dtype == z.dtype
    assert _tree(y.grad_fn) == _tree(z.grad_fn)
    assert y.requires_grad == z.requires_grad == requires_grad
    if requires_grad:
        assert _tree(y.grad_fn)[0] == "ReluBackward0"
        g = dg.tensor(np.random.default_rng(2).standard_normal((6, 7)).astype(dtype))
        y.backward(g)
        z.backward(g)
        assert got.grad.numpy().tobytes() == want.grad.numpy().tobytes()


def test_relu_saved_output_changed_in_place_is_caught_as_by_the_op():
    messages = []
    for fn in (F.relu, E.relu):
        x = _summed()
        y = fn(x)
        y.mul_(2)  # ReluBackward0 saves its output
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as e:
            y.sum().backward()
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_relu_gradcheck_and_double_backward_float64():
    x = _summed(np.float64) / 1e3
    assert dg.testing.gradcheck(F.relu, x)
    t = x.detach().requires_grad_(True)
    (g,) = dg.autograd.grad((F.relu(t) ** 2).sum(), (t,), create_graph=True)
    (gg,) = dg.autograd.grad(g.sum(), (t,))
    np.testing.assert_array_equal(gg.numpy(), 2.0 * (t.detach().numpy() > 0))


@pytest.mark.parametrize("case", ["view", "int", "parameter"])
def test_relu_other_forms_run_the_op(case):
    x = _summed()
    if case == "view":
        x = x[1:]
    elif case == "int":
        x = dg.tensor(np.arange(-3, 3, dtype=np.int32))
    else:
        x = dg.nn.Parameter(x.detach())
    assert _eager_process_calls(lambda: F.relu(x)) == 1
    assert F.relu(x).numpy().tobytes() == E.relu(x).numpy().tobytes()


def test_relu_and_full_sum_inside_a_compiled_function_are_the_traced_ops():
    x = _summed()
    f = dg.compile(lambda t: F.relu(t * 2).sum(), tiered=False)
    dg.testing.assert_close(f(x).item(), F.relu(x * 2).sum().item(), rtol=1e-6, atol=0,
                            check_dtype=False)
