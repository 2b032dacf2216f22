"""``Tensor.register_post_accumulate_grad_hook`` and leaf hooks seeing a leaf's summed
gradient once per backward (PyTorch's order, worked out by hand)."""

from __future__ import annotations

import pytest

import dualgraph as dg


def test_post_hook_runs_once_after_grad_holds_the_sum():
    seen = []
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    w = dg.tensor([3.0, 4.0], requires_grad=True)
    h = x.register_post_accumulate_grad_hook(lambda t: seen.append(("post", t.grad.tolist())))
    x.register_hook(lambda g: seen.append(("pre", g.tolist())))
    (x * x).sum().backward()  # x reaches mul twice: one summed gradient, one call each
    ((x * w).sum() + x.sum()).backward()
    h.remove()
    (x * 2).sum().backward()
    assert seen == [("pre", [2.0, 4.0]), ("post", [2.0, 4.0]), ("pre", [4.0, 5.0]),
                    ("post", [6.0, 9.0]), ("pre", [2.0, 2.0])]
    dg.testing.assert_close(x.grad, dg.tensor([8.0, 11.0]))


def test_post_hook_can_step_the_parameter_inside_backward():
    p = dg.nn.Parameter(dg.tensor([1.0, -1.0]))

    def sgd(t):
        with dg.no_grad():
            t -= 0.5 * t.grad
        t.grad = None

    p.register_post_accumulate_grad_hook(sgd)
    (p * p).sum().backward()
    dg.testing.assert_close(p, dg.tensor([0.0, 0.0]))
    assert p.grad is None


def test_post_hook_runs_for_a_compiled_call_and_create_graph_but_not_for_grad():
    calls = []
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.tolist()))
    f = dg.compile(lambda x: (x * x).sum(), tiered=False)
    f(x).backward()
    assert calls == [[2.0, 4.0]]
    (x * 3).sum().backward(create_graph=True)
    assert calls[-1] == [5.0, 7.0]
    dg.grad((x * x).sum(), x)  # dg.grad accumulates nothing: no call
    assert len(calls) == 2


def test_post_hook_only_on_leaves_that_require_grad():
    x = dg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        dg.ones(2).register_post_accumulate_grad_hook(lambda t: None)
