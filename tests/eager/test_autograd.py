"""The tape (API.md A3): grad_fn structure, backward, dg.grad, grad mode, hooks, in-place
checks, memory, and `dg.graph_of`. PyTorch's semantics throughout; with torch installed the
classic examples are also compared against it number for number and node for node.
"""

from __future__ import annotations

import gc
import re
import textwrap
import tracemalloc
import weakref

import numpy as np
import pytest

import dualgraph as dg


def _leaves():
    x = dg.tensor(2.0, requires_grad=True)
    y = dg.tensor(3.0, requires_grad=True)
    return x, y


# ------------------------------------------------------------------- the classic example


def test_classic_example_gradients() -> None:
    x, y = _leaves()
    z = x * y + y**2
    assert z.item() == 15.0
    assert z.requires_grad and not z.is_leaf
    assert x.grad is None and y.grad is None
    z.backward()
    assert x.grad.item() == 3.0  # dz/dx = y
    assert y.grad.item() == 8.0  # dz/dy = x + 2y
    assert isinstance(x.grad, dg.Tensor) and x.grad.dtype == np.float32
    assert not x.grad.requires_grad
    assert z.grad is None  # non-leaves keep no .grad


def test_grad_fn_names_and_next_functions() -> None:
    x, y = _leaves()
    z = x * y + y**2
    assert x.grad_fn is None and y.grad_fn is None and x.is_leaf
    add = z.grad_fn
    assert add.name() == "AddBackward0"
    (mul, i0), (pow_, i1) = add.next_functions
    assert (i0, i1) == (0, 0)
    assert mul.name() == "MulBackward0" and pow_.name() == "PowBackward0"
    (acc_x, _), (acc_y, _) = mul.next_functions
    assert acc_x.name() == "AccumulateGrad" and acc_y.name() == "AccumulateGrad"
    assert acc_x.variable is x and acc_y.variable is y
    assert acc_x.next_functions == ()
    # y**2: one tensor input (the exponent is a Python number, not a tensor).
    assert len(pow_.next_functions) == 1
    # One AccumulateGrad node per leaf, shared by all its uses.
    assert pow_.next_functions[0][0] is acc_y


def test_constants_appear_as_none_in_next_functions() -> None:
    x, _ = _leaves()
    for c in (dg.tensor(5.0), np.array(5.0, dtype=np.float32)):
        fn = (x * c).grad_fn
        assert fn.name() == "MulBackward0"
        assert len(fn.next_functions) == 2
        assert fn.next_functions[0][0].variable is x
        assert fn.next_functions[1] == (None, 0)


def test_grad_fn_repr() -> None:
    x, y = _leaves()
    z = x * y
    assert re.fullmatch(r"<MulBackward0 object at 0x[0-9a-f]+>", repr(z.grad_fn))
    acc = z.grad_fn.next_functions[0][0]
    assert re.fullmatch(r"<AccumulateGrad object at 0x[0-9a-f]+>", repr(acc))
    assert repr(z) == "tensor(6., grad_fn=<MulBackward0>)"


NAMED_PROGRAMS = [
    (lambda x, w: x + w, "AddBackward0"),
    (lambda x, w: x - w, "SubBackward0"),
    (lambda x, w: x * w, "MulBackward0"),
    (lambda x, w: x / w, "DivBackward0"),
    (lambda x, w: x**2, "PowBackward0"),
    (lambda x, w: -x, "NegBackward0"),
    (lambda x, w: x.exp(), "ExpBackward0"),
    (lambda x, w: x.log(), "LogBackward0"),
    (lambda x, w: x.tanh(), "TanhBackward0"),
    (lambda x, w: x.sigmoid(), "SigmoidBackward0"),
    (lambda x, w: x.relu(), "ReluBackward0"),
    (lambda x, w: x.sum(), "SumBackward0"),
    (lambda x, w: x.sum(dim=1), "SumBackward1"),
    (lambda x, w: x.mean(), "MeanBackward0"),
    (lambda x, w: x.mean(dim=0), "MeanBackward1"),
    (lambda x, w: x @ w.T, "MmBackward0"),
]


@pytest.mark.parametrize(("prog", "name"), NAMED_PROGRAMS, ids=[n for _, n in NAMED_PROGRAMS])
def test_node_names(prog, name) -> None:
    x = dg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    w = dg.tensor([[0.5, 1.5], [2.5, 3.5]], requires_grad=True)
    assert prog(x, w).grad_fn.name() == name


def test_ops_on_tensors_without_grad_record_nothing() -> None:
    a, b = dg.tensor([1.0, 2.0]), dg.tensor([3.0, 4.0])
    c = (a * b).exp().sum()
    assert not c.requires_grad and c.grad_fn is None and c.is_leaf
    with pytest.raises(RuntimeError):
        c.backward()


# ----------------------------------------------------------------------------- backward


def test_gradients_accumulate_across_backward_calls() -> None:
    x, y = _leaves()
    (x * y).backward()
    (x * y).backward()
    assert x.grad.item() == 6.0 and y.grad.item() == 4.0
    x.grad = None
    (x * x).backward()
    assert x.grad.item() == 4.0


def test_value_used_several_times() -> None:
    x = dg.tensor(3.0, dtype=dg.float64, requires_grad=True)
    h = x * x
    z = h * x + h + x  # x**3 + x**2 + x
    z.backward()
    assert x.grad.item() == pytest.approx(3 * 9 + 2 * 3 + 1)


def test_broadcast_gradients_are_summed_to_input_shape() -> None:
    a = dg.tensor(np.arange(3.0).reshape(3, 1), requires_grad=True)
    b = dg.tensor(np.arange(4.0).reshape(1, 4), requires_grad=True)
    c = dg.tensor(2.0, dtype=dg.float64, requires_grad=True)
    d = dg.tensor(np.ones(4), requires_grad=True)
    out = (a * b + c) * d
    assert out.shape == (3, 4)
    out.sum().backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (1, 4)
    assert c.grad.shape == () and d.grad.shape == (4,)
    dg.testing.assert_close(a.grad.numpy(), np.full((3, 1), 0.0 + 1 + 2 + 3), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(b.grad.numpy(), np.full((1, 4), 0.0 + 1 + 2), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    assert c.grad.item() == 12.0
    dg.testing.assert_close(d.grad.numpy(), (np.arange(3.0)[:, None] * np.arange(4.0) + 2)
                               .sum(axis=0),
                            rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)


def test_backward_with_explicit_gradient() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    (a * a).backward(dg.tensor([1.0, 10.0]))
    dg.testing.assert_close(a.grad.numpy(), [2.0, 40.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)


def test_non_scalar_backward_needs_gradient() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    msg = "grad can be implicitly created only for scalar outputs"
    with pytest.raises(RuntimeError, match=msg):
        (a * 2).backward()
    assert a.grad is None


def test_gradient_of_wrong_shape_names_both_shapes() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        (a * 2).backward(dg.ones(3))
    assert "(3,)" in str(info.value) and "(2,)" in str(info.value)


def test_second_backward_without_retain_graph_raises() -> None:
    x, y = _leaves()
    z = x * y + y**2
    z.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        z.backward()
    assert x.grad.item() == 3.0  # the failed call added nothing


def test_retain_graph_allows_backward_twice() -> None:
    x, y = _leaves()
    z = x * y + y**2
    z.backward(retain_graph=True)
    z.backward(retain_graph=True)
    z.backward()
    assert x.grad.item() == 9.0 and y.grad.item() == 24.0
    with pytest.raises(RuntimeError, match="retain_graph"):
        z.backward()


def test_create_graph_double_and_triple_derivatives() -> None:
    x = dg.tensor(2.0, dtype=dg.float64, requires_grad=True)
    y = x**4
    y.backward(create_graph=True)
    g1 = x.grad
    assert g1.item() == 32.0  # 4x^3
    assert g1.requires_grad and g1.grad_fn is not None
    x.grad = None
    g1.backward(create_graph=True)
    g2 = x.grad
    assert g2.item() == 48.0  # 12x^2
    x.grad = None
    g2.backward()
    assert x.grad.item() == 48.0  # 24x


def test_dg_grad_higher_order() -> None:
    x = dg.tensor(0.5, dtype=dg.float64, requires_grad=True)
    y = x.sin() * x.exp()
    (g1,) = dg.grad(y, x, create_graph=True)
    (g2,) = dg.grad(g1, x, create_graph=True)
    (g3,) = dg.grad(g2, x)
    s, c, e = np.sin(0.5), np.cos(0.5), np.exp(0.5)
    assert g1.item() == pytest.approx((s + c) * e, rel=1e-12)
    assert g2.item() == pytest.approx(2 * c * e, rel=1e-12)
    assert g3.item() == pytest.approx(2 * (c - s) * e, rel=1e-12)
    assert x.grad is None


# ---------------------------------------------------------------------------- dg.grad


def test_dg_grad_does_not_touch_dot_grad() -> None:
    x, y = _leaves()
    gx, gy = dg.grad(x * y + y**2, [x, y])
    assert gx.item() == 3.0 and gy.item() == 8.0
    assert x.grad is None and y.grad is None
    x.grad = dg.tensor(100.0)
    dg.grad(x * y, [x])
    assert x.grad.item() == 100.0


def test_dg_grad_with_grad_outputs() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    (g,) = dg.grad(a * a, a, grad_outputs=dg.tensor([1.0, 10.0]))
    dg.testing.assert_close(g.numpy(), [2.0, 40.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        dg.grad(a * a, a)


def test_dg_grad_allow_unused() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    u = dg.tensor(1.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        dg.grad((a * 3).sum(), [a, u])
    ga, gu = dg.grad((a * 3).sum(), [a, u], allow_unused=True)
    dg.testing.assert_close(ga.numpy(), [3.0, 3.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    assert gu is None


def test_dg_grad_with_respect_to_non_leaf() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 2
    out = (h * h).sum()
    (gh,) = dg.grad(out, h, retain_graph=True)
    dg.testing.assert_close(gh.numpy(), [4.0, 8.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)  # 2h
    (ga,) = dg.grad(out, a)
    dg.testing.assert_close(ga.numpy(), [8.0, 16.0], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)  # 8a
    assert a.grad is None and h.grad is None


def test_dg_grad_input_must_require_grad() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError):
        dg.grad((a * 2).sum(), [dg.tensor([1.0, 2.0])])


# -------------------------------------------------------------------------- grad mode


def test_no_grad_context_manager() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    assert dg.is_grad_enabled()
    with dg.no_grad():
        assert not dg.is_grad_enabled()
        b = a * 2
    assert dg.is_grad_enabled()
    assert not b.requires_grad and b.grad_fn is None
    np.testing.assert_array_equal(b.numpy(), [2.0, 4.0])


def test_no_grad_decorator() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)

    @dg.no_grad()
    def double(t):
        return t * 2, dg.is_grad_enabled()

    out, enabled = double(a)
    assert not enabled and not out.requires_grad
    assert dg.is_grad_enabled()
    assert double.__name__ == "double"


def test_no_grad_restores_mode_after_exception() -> None:
    with pytest.raises(KeyError), dg.no_grad():
        {}["missing"]
    assert dg.is_grad_enabled()


def test_enable_grad_inside_no_grad() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    with dg.no_grad():
        with dg.enable_grad():
            assert dg.is_grad_enabled()
            b = a * 2
        assert not dg.is_grad_enabled()
        c = a * 2
    assert b.requires_grad and b.grad_fn.name() == "MulBackward0"
    assert not c.requires_grad


def test_detach_shares_data_and_leaves_the_graph() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 3
    d = h.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    np.testing.assert_array_equal(d.numpy(), [3.0, 6.0])
    d2 = a.detach()
    d2 += 10.0  # d2 is not a leaf that requires grad: allowed, and visible through a
    assert a.tolist() == [11.0, 12.0]
    # A detached value acts as a constant.
    (a * d).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 6.0])


def test_requires_grad_() -> None:
    t = dg.tensor([1.0, 2.0])
    assert t.requires_grad_() is t
    assert t.requires_grad and t.is_leaf
    (t * t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [2.0, 4.0])


# ------------------------------------------------------------------------------- hooks


def test_hook_on_leaf_sees_gradient_and_can_be_removed() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = a.register_hook(lambda g: seen.append(g.numpy().copy()))
    (a * 3).sum().backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [3.0, 3.0])
    handle.remove()
    (a * 3).sum().backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 6.0])


def test_hook_on_leaf_can_replace_gradient() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    a.register_hook(lambda g: g * 2)
    (a * 3).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 6.0])


def test_hook_on_non_leaf_replaces_gradient_flowing_on() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 3
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    h.register_hook(lambda g: g * 10)
    (h * h).sum().backward()
    np.testing.assert_array_equal(seen[0], [6.0, 12.0])  # the hook saw dL/dh = 2h
    np.testing.assert_array_equal(a.grad.numpy(), [180.0, 360.0])  # 3 * 10 * 2h
    assert h.grad is None


def test_hook_returning_none_keeps_gradient_and_remove_on_non_leaf() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 3
    handle = h.register_hook(lambda g: g * 0)
    handle.remove()
    h.register_hook(lambda g: None)
    h.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0])


def test_hook_needs_requires_grad() -> None:
    with pytest.raises(RuntimeError):
        dg.tensor([1.0]).register_hook(lambda g: g)


def test_retain_grad() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 3
    h.retain_grad()
    assert h.retains_grad
    loss = (h * h).sum()
    loss.backward(retain_graph=True)
    np.testing.assert_array_equal(h.grad.numpy(), [6.0, 12.0])
    np.testing.assert_array_equal(a.grad.numpy(), [18.0, 36.0])
    loss.backward()
    np.testing.assert_array_equal(h.grad.numpy(), [12.0, 24.0])  # accumulates like a leaf
    with pytest.raises(RuntimeError):
        dg.tensor([1.0]).retain_grad()


# ---------------------------------------------------------------------------- in place

INPLACE = [
    lambda t: t.__iadd__(1.0),
    lambda t: t.__isub__(1.0),
    lambda t: t.__imul__(2.0),
    lambda t: t.zero_(),
    lambda t: t.copy_(dg.tensor([5.0, 6.0])),
]
INPLACE_IDS = ["+=", "-=", "*=", "zero_", "copy_"]


@pytest.mark.parametrize("op", INPLACE, ids=INPLACE_IDS)
def test_inplace_on_leaf_requiring_grad_raises(op) -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError):
        op(a)
    assert a.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    ("op", "expected"),
    list(zip(INPLACE, [[2.0, 3.0], [0.0, 1.0], [2.0, 4.0], [0.0, 0.0], [5.0, 6.0]])),
    ids=INPLACE_IDS,
)
def test_inplace_on_leaf_allowed_under_no_grad(op, expected) -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    with dg.no_grad():
        out = op(a)
    assert out is a
    assert a.tolist() == expected
    assert a.requires_grad and a.is_leaf


def test_inplace_operator_statements() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError):
        a += 1
    with dg.no_grad():
        a += 1
        a -= 0.5
        a *= 2
    assert a.tolist() == [3.0, 5.0]


def test_modifying_a_saved_tensor_makes_backward_raise() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 1
    loss = (h * h).sum()  # mul saves h
    h += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_modifying_a_saved_output_makes_backward_raise() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    e = a.exp()  # exp saves its output
    loss = e.sum()
    e *= 2
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_modifying_a_saved_leaf_under_no_grad_makes_backward_raise() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    loss = (a * a).sum()
    with dg.no_grad():
        a.zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_inplace_on_unsaved_intermediate_keeps_gradients_right() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 2
    loss = (h + 1).sum()  # add saves nothing: changing h afterwards is harmless
    h += 1
    loss.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0])


def test_inplace_on_non_leaf_is_recorded() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 2
    h *= a  # h = 2a * a
    h.sum().backward()
    np.testing.assert_array_equal(h.numpy(), [2.0, 8.0])
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 8.0])


def test_saving_inplace_op_after_an_earlier_inplace_op() -> None:
    # The node of ``h *= y`` saves h's value before the write; h was already at version 1
    # (h += 1, or a constant made to require grad by h += y), and the saved copy must pass
    # the version check (it raised "is at version 0; expected version 1").
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    y = dg.tensor([3.0, 5.0], requires_grad=True)
    h = a * 1.0
    h += 1.0
    h *= y  # h = (a + 1) y
    c = dg.tensor(np.ones((2, 2)))
    c += y
    c[1] *= y  # row 1: (1 + y) y
    (h.sum() + c.sum()).backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 5.0])
    np.testing.assert_array_equal(y.grad.numpy(), [2.0 + 1.0 + 7.0, 3.0 + 1.0 + 11.0])


# ------------------------------------------------------------------- depth and memory


def test_10000_op_chain_backward() -> None:
    x = dg.tensor(1.0, dtype=dg.float64, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    (g,) = dg.grad(y, x, retain_graph=True)
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001**10_000, rel=1e-9)
    assert g.item() == pytest.approx(1.0001**10_000, rel=1e-9)
    assert len(dg.graph_of(y).nodes) == 10_000
    del y, g  # tearing down the chain must not overflow the stack either
    gc.collect()


def _tiny_step(net, opt, X, Y):
    opt.zero_grad()
    loss = dg.nn.functional.mse_loss(net(X), Y)
    loss.backward()
    opt.step()
    return loss


def test_training_loop_memory_does_not_grow() -> None:
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU(), dg.nn.Linear(3, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    X, Y = dg.randn(16, 2), dg.randn(16, 1)
    tracemalloc.start()
    try:
        for step in range(1, 2001):
            loss = _tiny_step(net, opt, X, Y)
            if step == 200:
                gc.collect()
                current_200, _ = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
        del loss
        gc.collect()
        current_2000, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 1,800 more steps leave (almost) nothing behind, and no step holds more than one
    # step's worth of tape.
    assert current_2000 - current_200 < 16_000, (current_200, current_2000)
    assert peak - current_200 < 400_000, (current_200, peak)


def test_saved_values_are_released_after_backward() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 2
    ref = weakref.ref(h)
    loss = (h * h).sum()
    fn = loss.grad_fn.next_functions[0][0]
    assert fn.name() == "MulBackward0"
    assert len(fn._saved) == 2
    del h
    assert ref() is not None  # kept alive by the tape, for backward
    loss.backward()
    assert fn._saved == ()
    assert ref() is None  # released by backward
    with pytest.raises(RuntimeError, match="retain_graph"):
        _ = fn.args


def test_saved_values_kept_with_retain_graph() -> None:
    a = dg.tensor([1.0, 2.0], requires_grad=True)
    h = a * 2
    ref = weakref.ref(h)
    loss = (h * h).sum()
    del h
    loss.backward(retain_graph=True)
    assert ref() is not None
    del loss
    gc.collect()
    assert ref() is None  # the graph goes away with its last tensor


# ------------------------------------------------------------------------------ graph_of


def test_graph_of_prints_the_program() -> None:
    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = dg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    mask = np.array([1.0, 0.0, 2.0], dtype=np.float32)
    y = ((x * w + 1.0).exp() * mask).sum()
    expected = textwrap.dedent("""\
        graph(%0:f32[3], %1:f32[3]):
          %2:f32[3] = mul %0, %1
          %3:f32[3] = add %2, 1.0
          %4:f32[3] = exp %3
          %5:f32[3] = const [1., 0., 2.]
          %6:f32[3] = mul %4, %5
          %7:f32[] = sum[axis=None, keepdims=False] %6
          return %7""")
    assert str(dg.graph_of(y)) == expected
    # Exporting leaves the tape usable.
    y.backward()
    dg.testing.assert_close(x.grad.numpy(), np.exp(np.array([1.5, -1.0, 7.0])) * mask
                               * np.array([0.5, -1.0, 2.0]),
                            rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)


def test_graph_of_classic_example_and_constant_tensor() -> None:
    x, y = _leaves()
    c = dg.tensor([[1.0, 2.0], [3.0, 4.0]])  # does not require grad: a const node
    z = (x * y + y**2) * c
    expected = textwrap.dedent("""\
        graph(%0:f32[], %1:f32[]):
          %2:f32[] = mul %0, %1
          %3:f32[] = pow %1, 2
          %4:f32[] = add %2, %3
          %5:f32[2,2] = const [[1., 2.], [3., 4.]]
          %6:f32[2,2] = mul %4, %5
          return %6""")
    graph = dg.graph_of(z)
    assert str(graph) == expected
    assert [n.op for n in graph.nodes] == ["mul", "pow", "add", "const", "mul"]
    assert graph.nodes[1].inputs[1] == 2  # the literal sits inside the node
    graph.verify()


def test_graph_of_matches_trace_ops() -> None:
    def f(x, w):
        return ((x @ w).relu() * 2.0).mean(dim=0)

    xv = np.ones((4, 3), np.float32)
    wv = np.full((3, 2), 0.5, np.float32)
    eager = f(dg.tensor(xv, requires_grad=True), dg.tensor(wv, requires_grad=True))
    taped = [n.op for n in dg.graph_of(eager).nodes]
    traced = [n.op for n in dg.trace(f, dg.tensor(xv), dg.tensor(wv)).nodes]
    assert taped == traced == ["matmul", "relu", "mul", "mean"]


# --------------------------------------------------------------------------------- torch


def _structure(fn, name):
    """A grad_fn graph as nested (name, children) tuples, ``None`` for constants."""
    if fn is None:
        return None
    return (name(fn), tuple(_structure(f, name) for f, _ in fn.next_functions))


def _dg_name(fn):
    return fn.name()


def _torch_name(fn):
    return type(fn).__name__  # torch's AccumulateGrad.name() has a C++ namespace


TORCH_PROGRAMS = [
    lambda m, x, y, c: x * y + y**2,
    lambda m, x, y, c: ((x.exp() / y.sigmoid()) - x.tanh() * c).log(),
    lambda m, x, y, c: -(x.relu() * y - c).sum(),
    lambda m, x, y, c: (x @ y.t()).mean(dim=0),
    lambda m, x, y, c: (x - y).sum(dim=1) / (x * x).mean(),
    lambda m, x, y, c: ((x + c) ** 3 * y).mean(),
]


@pytest.mark.parametrize("prog", TORCH_PROGRAMS)
def test_matches_torch_values_gradients_and_node_structure(prog) -> None:
    torch = pytest.importorskip("torch")
    xv = np.array([[0.5, 1.5], [2.0, 0.25]])
    yv = np.array([[1.0, -0.5], [0.75, 2.0]])
    cv = np.array([[0.1, 0.2], [0.3, 0.4]])
    xd, yd = dg.tensor(xv, requires_grad=True), dg.tensor(yv, requires_grad=True)
    xt, yt = torch.tensor(xv, requires_grad=True), torch.tensor(yv, requires_grad=True)
    od = prog(dg, xd, yd, dg.tensor(cv))
    ot = prog(torch, xt, yt, torch.tensor(cv))
    dg.testing.assert_close(od.numpy(), ot.detach().numpy(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    assert _structure(od.grad_fn, _dg_name) == _structure(ot.grad_fn, _torch_name)
    gd = dg.tensor(np.linspace(1.0, 2.0, od.numpy().size).reshape(od.shape))
    od.backward(gd if od.ndim else None)
    ot.backward(torch.tensor(gd.numpy()) if ot.ndim else None)
    dg.testing.assert_close(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(yd.grad.numpy(), yt.grad.numpy(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)


def test_classic_example_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    results = []
    for m in (dg, torch):
        x = m.tensor(2.0, requires_grad=True)
        y = m.tensor(3.0, requires_grad=True)
        z = x * y + y**2
        z.backward(retain_graph=True)
        z.backward()
        name = _dg_name if m is dg else _torch_name
        results.append((z.item(), x.grad.item(), y.grad.item(), _structure(z.grad_fn, name),
                        repr(z).replace("torch.", "dg.")))
    assert results[0] == results[1]


def test_higher_order_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    out = []
    for m in (dg, torch):
        x = m.tensor(np.array([0.3, -1.2]), requires_grad=True)
        y = (x.tanh() * x.exp()).sum()
        (g1,) = (dg.grad if m is dg else torch.autograd.grad)(y, x, create_graph=True)
        (g2,) = (dg.grad if m is dg else torch.autograd.grad)(g1.sum(), x)
        out.append((g1.detach().numpy(), g2.numpy()))
    dg.testing.assert_close(out[0][0], out[1][0], rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(out[0][1], out[1][1], rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
