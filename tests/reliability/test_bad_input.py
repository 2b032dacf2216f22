"""The bad-input catalogue: public functions fed wrong types, wrong shapes, empty and 0-d
tensors, non-contiguous and read-only arrays.

Wrong input must raise a clear exception (the type and the words asserted here; shape
errors name both shapes) and leave nothing half-updated: optimizer state, module
parameters, compile caches. Valid but unusual input (zero-size dims, 0-d, non-contiguous,
read-only arrays) must simply work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F


@dataclass(frozen=True)
class Bad:
    label: str
    call: Callable[[], object]
    exc: type
    match: str  # regex the message must contain


def _rg(*shape):
    return dg.ones(*shape, requires_grad=True)


CATALOGUE = [
    # dg.tensor and creation
    Bad("tensor_of_str", lambda: dg.tensor("abc"), TypeError, "cannot build a numeric tensor"),
    Bad("tensor_of_none", lambda: dg.tensor(None), TypeError, "None"),
    Bad("tensor_ragged", lambda: dg.tensor([[1, 2], [3]]), ValueError, r"\[\[1, 2\], \[3\]\]"),
    Bad("tensor_of_object", lambda: dg.tensor(object()), TypeError, "numeric tensor"),
    Bad("int_requires_grad", lambda: dg.tensor([1, 2], requires_grad=True), TypeError,
        "floating point"),
    Bad("unknown_dtype", lambda: dg.tensor([1.0], dtype="nonsense"), TypeError, "not a dtype"),
    Bad("item_of_vector", lambda: dg.ones(2).item(), ValueError, r"one-element.*\(2,\)"),
    Bad("len_of_0d", lambda: len(dg.tensor(2.0)), TypeError, "0-d"),
    Bad("index_0d", lambda: dg.tensor(2.0)[0], IndexError, r"too many indices.*\(\)"),
    # ops: wrong shapes name both shapes, wrong types say what was given
    Bad("add_shapes", lambda: dg.ones(2, 3) + dg.ones(4), ValueError, r"\(2, 3\) and \(4,\)"),
    Bad("add_str", lambda: dg.ones(2) + "a", TypeError, "str"),
    Bad("mul_none", lambda: dg.ones(2) * None, TypeError, "NoneType"),
    Bad("matmul_shapes", lambda: dg.ones(2, 3) @ dg.ones(4, 5), ValueError,
        r"\(2, 3\) and \(4, 5\)"),
    Bad("matmul_0d", lambda: dg.matmul(dg.tensor(1.0), dg.ones(3)), ValueError,
        r"\(\) and \(3,\)"),
    Bad("reshape_size", lambda: dg.ones(2, 3).reshape(4, 2), ValueError, r"\(2, 3\).*\(4, 2\)"),
    Bad("sum_axis", lambda: dg.ones(2, 3).sum(axis=2), IndexError,
        r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    Bad("sum_axis_0d", lambda: dg.tensor(2.0).sum(axis=1), IndexError, "out of range"),
    Bad("max_of_empty", lambda: dg.zeros(0).max(), ValueError, r"empty.*\(0,\)"),
    Bad("permute_axes", lambda: dg.ones(2, 3).permute(0, 0), ValueError,
        r"\(0, 0\).*\(2, 3\)"),
    Bad("index_out_of_bounds", lambda: dg.ones(2, 3)[5], IndexError, "index 5.*size 2"),
    # Integer tensors index (advanced indexing); float ones are PyTorch's IndexError.
    Bad("index_with_float_tensor", lambda: dg.ones(2, 3)[dg.tensor([0.5])], IndexError,
        "long, int, byte or bool"),
    Bad("index_with_float", lambda: dg.ones(2, 3)[1.5], IndexError, "long, int, byte or bool"),
    Bad("concatenate_shapes", lambda: dg.concatenate([dg.ones(2, 3), dg.ones(2, 4)]),
        ValueError, r"\(2, 3\) and \(2, 4\)"),
    Bad("concatenate_nothing", lambda: dg.concatenate([]), ValueError, "at least one"),
    Bad("stack_shapes", lambda: dg.stack([dg.ones(2), dg.ones(3)]), ValueError,
        r"\(2,\) and \(3,\)"),
    Bad("where_shapes", lambda: dg.where(dg.ones(2) > 0, dg.ones(3), dg.ones(2)), ValueError,
        r"\(2,\) and \(3,\)"),
    # autograd
    Bad("backward_non_scalar", lambda: _rg(2).exp().backward(), RuntimeError,
        "only for scalar outputs"),
    Bad("backward_without_grad", lambda: dg.ones(2).sum().backward(), RuntimeError,
        "does not require grad"),
    Bad("backward_gradient_shape", lambda: _rg(2).exp().backward(dg.ones(3)), RuntimeError,
        r"\(3,\).*\(2,\)"),
    Bad("grad_of_unused", lambda: dg.grad(_rg(2).sum(), [_rg(2)]), RuntimeError,
        "allow_unused"),
    Bad("grad_set_wrong_shape", lambda: setattr(_rg(2), "grad", dg.ones(3)), RuntimeError,
        r"\(3,\).*\(2,\)"),
    Bad("grad_set_array", lambda: setattr(_rg(2), "grad", np.ones(2)), TypeError,
        "Tensor or None"),
    # nn
    Bad("linear_features", lambda: dg.nn.Linear(3, 2)(dg.ones(4, 5)), ValueError,
        r"\(4, 5\).*\(2, 3\)"),
    Bad("linear_str_input", lambda: dg.nn.Linear(3, 2)("x"), TypeError, "tensor, got str"),
    Bad("linear_negative", lambda: dg.nn.Linear(-1, 2), ValueError, "non-negative int"),
    Bad("linear_float_features", lambda: dg.nn.Linear(2.5, 2), ValueError, "non-negative int"),
    Bad("mse_shapes", lambda: dg.nn.MSELoss()(dg.ones(2, 3), dg.ones(3, 2)), ValueError,
        r"\(2, 3\).*\(3, 2\)"),
    Bad("loss_reduction", lambda: dg.nn.MSELoss(reduction="bogus"), ValueError, "bogus"),
    Bad("ce_float_target", lambda: F.cross_entropy(dg.ones(2, 3), dg.ones(2)), TypeError,
        "integer classes"),
    Bad("ce_class_range", lambda: F.cross_entropy(dg.ones(2, 3), dg.tensor([0, 5])), IndexError,
        "Target 5 is out of bounds"),
    Bad("ce_target_shape", lambda: F.cross_entropy(dg.ones(2, 3), dg.tensor([0, 1, 2])),
        ValueError, r"\(3,\).*\(2, 3\)"),
    Bad("ce_0d_logits", lambda: F.cross_entropy(dg.tensor(1.0), dg.tensor(0)), ValueError,
        "at least 1 dimension"),
    Bad("bce_shapes", lambda: dg.nn.BCEWithLogitsLoss()(dg.ones(2, 3), dg.ones(3)), ValueError,
        r"\(2, 3\).*\(3,\)"),
    # optim
    Bad("sgd_negative_lr", lambda: dg.optim.SGD([_rg(2)], lr=-1), ValueError, "learning rate"),
    Bad("sgd_none_lr", lambda: dg.optim.SGD([_rg(2)], lr=None), TypeError, "lr"),
    Bad("sgd_no_params", lambda: dg.optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
    Bad("sgd_not_tensors", lambda: dg.optim.SGD([1.0], lr=0.1), TypeError, "float"),
    Bad("sgd_momentum", lambda: dg.optim.SGD([_rg(2)], lr=0.1, momentum=-0.5), ValueError,
        "momentum"),
    Bad("adam_betas", lambda: dg.optim.Adam([_rg(2)], betas=(1.5, 0.9)), ValueError, "beta"),
    Bad("adam_eps", lambda: dg.optim.Adam([_rg(2)], eps=-1), ValueError, "epsilon"),
    # compile and trace
    Bad("compile_non_callable", lambda: dg.compile(3), TypeError, "function or a module"),
    # Keyword arguments bind as in Python.
    Bad("compiled_kwargs", lambda: dg.compile(lambda x: x)(y=dg.ones(2)), TypeError,
        "argument"),
    # Tensors inside tuples, lists and dicts are flattened into arguments
    # (tests/compile/test_fidelity.py); a set is an opaque constant, so returning it is
    # the error.
    Bad("compiled_set_arg", lambda: dg.compile(lambda x: x)({dg.ones(2)}), dg.TraceError,
        "returned a set"),
    Bad("compiled_returns_object", lambda: dg.compile(lambda x: object())(dg.ones(2)),
        dg.TraceError, "returned a object"),
    Bad("compiled_shapes", lambda: dg.compile(lambda x, y: x + y)(dg.ones(2), dg.ones(3)),
        ValueError, r"\(2,\) and \(3,\)"),
    Bad("trace_data_dependent_if", lambda: dg.trace(
        lambda x: x if x.sum() > 0 else -x, dg.ones(2)), dg.TraceError, "dg.where"),
    Bad("compiled_if_on_many_values", lambda: dg.compile(
        lambda x: x if x > 0 else -x)(dg.ones(2)), RuntimeError, "ambiguous"),
    Bad("trace_non_callable", lambda: dg.trace(3, dg.ones(2)), TypeError, "not callable"),
    Bad("trace_str_arg", lambda: dg.trace(lambda x: x, "a"), TypeError, "argument 0 is a str"),
    Bad("trace_returns_int", lambda: dg.trace(lambda x: 3, dg.ones(2)), dg.TraceError,
        "returned a int"),
    Bad("where_float_condition", lambda: dg.where(dg.ones(2), dg.ones(2), 0.0), TypeError,
        "must be a bool tensor.*float32"),
    Bad("sgd_str_lr", lambda: dg.optim.SGD([_rg(2)], lr="a"), TypeError, "lr must be a number"),
    Bad("adam_str_beta", lambda: dg.optim.Adam([_rg(2)], betas=(0.9, "x")), TypeError,
        "pair of numbers"),
    Bad("interpret_arity", lambda: dg.interpret(dg.trace(lambda x: x * 2, dg.ones(2))),
        TypeError, "takes 1 inputs, got 0"),
]


@pytest.mark.parametrize("case", CATALOGUE, ids=lambda c: c.label)
def test_bad_input_raises_clear_error(case):
    with pytest.raises(case.exc, match=case.match):
        case.call()


# --------------------------------------------------------------- nothing half-updated


def _snapshot(params, opt) -> list:
    out = [p.numpy().copy() for p in params]
    for p in params:
        state = opt.state.get(p, {})
        out += [v.numpy().copy() for _, v in sorted(state.items())]
    return out


@pytest.mark.parametrize("make", [lambda ps: dg.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: dg.optim.Adam(ps, lr=0.1)], ids=["sgd", "adam"])
def test_failed_optimizer_step_changes_nothing(make):
    a, b = _rg(2), _rg(3)
    opt = make([a, b])
    ((a * 2.0).sum() + (b * 3.0).sum()).backward()
    opt.step()  # state exists now
    a.grad, b.grad = dg.ones(2), dg.ones(3)
    b._grad = dg.ones(4)  # damaged behind the setter's back (it checks assignments)
    before = _snapshot([a, b], opt)
    with pytest.raises(RuntimeError, match=r"\(3,\) has shape \(4,\)"):
        opt.step()
    after = _snapshot([a, b], opt)
    assert len(after) == len(before)
    for x, y in zip(before, after):
        np.testing.assert_array_equal(x, y)  # a was not stepped, no state moved


def test_failed_grad_assignment_keeps_old_grad():
    a = _rg(2)
    a.sum().backward()
    with pytest.raises(RuntimeError):
        a.grad = dg.ones(5)
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0])


def test_failed_load_state_dict_changes_no_parameter():
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.Linear(3, 1))
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    bad = {k: v.numpy() + 1.0 for k, v in net.state_dict().items()}
    bad["1.weight"] = np.zeros((2, 3))  # the last key is wrong: nothing may be copied
    with pytest.raises(RuntimeError, match=r"size mismatch for 1.weight.*\(2, 3\).*\(1, 3\)"):
        net.load_state_dict(bad)
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_failed_module_call_leaves_parameters_and_grads():
    net = dg.nn.Linear(3, 2)
    before = [p.numpy().copy() for p in net.parameters()]
    with pytest.raises(ValueError):
        net(dg.ones(4, 5))
    for p, b in zip(net.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
        assert p.grad is None


def test_failed_trace_leaves_compile_cache_clean():
    f = dg.compile(lambda x, y: x + y)
    with pytest.raises(ValueError):
        f(dg.ones(2), dg.ones(3))
    assert f.entries() == [] and f.stats.kernels == 0 and f.stats.traces == 0
    np.testing.assert_array_equal(f(dg.ones(2), dg.ones(2)).numpy(), [2.0, 2.0])
    assert f.stats.traces == 1 and f.stats.retrace_reasons == []  # the failure is no reason
    with pytest.raises(ValueError):  # a new signature that fails: still one entry
        f(dg.ones(4), dg.ones(3))
    assert len(f.entries()) == 1


def test_failed_compiled_training_step_leaves_what_eager_leaves():
    """A whole-step compiled function that fails after ``zero_grad`` (while tracing) leaves
    parameters, their ``.grad`` and optimizer state as the same call leaves them eagerly:
    parameters and momentum untouched, ``.grad`` set to None by ``zero_grad``."""
    net = dg.nn.Linear(2, 1)
    opt = dg.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    eager_x, eager_y = dg.ones(4, 2), dg.zeros(4, 1)
    step(eager_x, eager_y)  # grads and momentum buffers exist
    before = _snapshot(list(net.parameters()), opt)
    compiled = dg.compile(step)
    with pytest.raises(ValueError, match=r"\(4, 1\) and \(3, 1\)"), \
            pytest.warns(RuntimeWarning, match="after changing tensors in place"):
        compiled(eager_x, dg.zeros(3, 1))
    for x, y in zip(before, _snapshot(list(net.parameters()), opt)):
        np.testing.assert_array_equal(x, y)
    assert all(p.grad is None for p in net.parameters())  # as eager's zero_grad left them
    assert compiled.entries() == []


# --------------------------------------------------------------- valid, unusual input


def test_zero_size_dims_work_eager_and_compiled():
    def f(x, w):
        return (dg.tanh(x) * 2.0 + 1.0).sum(axis=1), x @ w, (x * x).sum()

    x = np.zeros((0, 3))
    w = np.ones((3, 2))
    xt = dg.tensor(x, requires_grad=True)
    outs = f(xt, dg.tensor(w))
    assert [o.shape for o in outs] == [(0,), (0, 2), ()]
    assert outs[2].item() == 0.0
    outs[2].backward()
    assert xt.grad.shape == (0, 3)
    compiled = dg.compile(f)
    res = compiled(dg.tensor(x), dg.tensor(w))
    assert [r.shape for r in res] == [(0,), (0, 2), ()] and res[2].item() == 0.0


def test_zero_d_tensors_work_everywhere():
    a = dg.tensor(2.0, requires_grad=True)
    y = a * a + dg.exp(a) + a.sum() + a.mean() + a.max()
    y.backward()
    dg.testing.assert_close(a.grad.item(), 4.0 + np.exp(2.0) + 3.0, rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    compiled = dg.compile(lambda t, v: t * v + t)
    dg.testing.assert_close(compiled(dg.tensor(3.0), dg.ones(2)).numpy(), [6.0, 6.0], rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)


def test_non_contiguous_arrays_work():
    base = np.arange(24.0).reshape(4, 6)
    views = {"strided": base[:, ::2], "transposed": base.T, "reversed": base[::-1, 1:4],
             "fortran": np.asfortranarray(base)}
    compiled = dg.compile(lambda x: (x * 2.0 + 1.0).sum(axis=0))
    for name, v in views.items():
        t = dg.tensor(v)
        np.testing.assert_array_equal(t.numpy(), v, err_msg=name)
        np.testing.assert_array_equal((t * 2.0 + 1.0).sum(axis=0).numpy(),
                                      (v * 2 + 1).sum(axis=0), err_msg=name)
        np.testing.assert_array_equal(compiled(v).numpy(), (v * 2 + 1).sum(axis=0),
                                      err_msg=f"compiled {name}")
        np.testing.assert_array_equal(compiled(t).numpy(), (v * 2 + 1).sum(axis=0),
                                      err_msg=f"compiled tensor {name}")


def test_read_only_arrays_work_and_are_never_written():
    ro = np.arange(6.0).reshape(2, 3)
    ro.flags.writeable = False
    t = dg.tensor(ro, requires_grad=True)
    (t * t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), 2 * ro)
    compiled = dg.compile(lambda x: dg.exp(x).sum(axis=1))
    dg.testing.assert_close(compiled(ro).numpy(), np.exp(ro).sum(axis=1), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(compiled(dg.tensor(ro)).numpy(), np.exp(ro).sum(axis=1), rtol=1e-7,
                            atol=0, equal_nan=True, check_dtype=False)
    # A parameter built from a read-only array trains (the optimizer must not write into
    # the caller's array).
    p = dg.tensor(ro, requires_grad=True)
    opt = dg.optim.SGD([p], lr=0.5)
    (p * 1.0).sum().backward()
    opt.step()
    np.testing.assert_array_equal(p.numpy(), ro - 0.5)
    np.testing.assert_array_equal(ro, np.arange(6.0).reshape(2, 3))
    # from_numpy shares memory, so an in-place write to a read-only array is refused.
    shared = dg.from_numpy(ro)
    with pytest.raises(ValueError, match="read-only"):
        shared += 1.0
    np.testing.assert_array_equal(ro, np.arange(6.0).reshape(2, 3))
