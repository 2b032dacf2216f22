"""``dg.autograd.gradcheck`` / ``gradgradcheck``: pass on right gradients, fail (raise or
return False, as PyTorch) on wrong first or second derivatives, refuse float32 inputs."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.autograd import GradcheckError, gradcheck, gradgradcheck


def _x(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return dg.tensor(rng.standard_normal(shape)).requires_grad_(True)


class WrongFirst(dg.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * a  # the true derivative is 2a


class WrongSecond(dg.autograd.Function):
    """Right first derivative of a**3, but the backward is not differentiable through
    ``a`` (it is detached), so the second derivative is wrong."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a ** 3

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * 3 * a.detach() ** 2


def test_gradcheck_passes_on_composites_with_two_inputs():
    x, y = _x(2, 3), _x(3, seed=1)
    assert gradcheck(lambda a, b: (a * b).sin() + a.exp().sum(0), (x, y)) is True
    assert gradcheck(lambda a: (a.tanh(), a.sum()), x) is True


def test_gradcheck_catches_a_wrong_backward():
    x = _x(4)
    assert gradcheck(WrongFirst.apply, (x,), raise_exception=False) is False
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongFirst.apply, (x,))
    assert issubclass(GradcheckError, RuntimeError)


def test_gradgradcheck_checks_second_derivatives():
    x, y = _x(3), _x(3, seed=2)
    assert gradgradcheck(lambda a, b: (a * b).sin() + a ** 3, (x, y)) is True
    assert gradcheck(WrongSecond.apply, (x,)) is True
    assert gradgradcheck(WrongSecond.apply, (x,), raise_exception=False) is False


def test_gradcheck_refuses_bad_inputs():
    with pytest.raises(GradcheckError, match="float64"):
        gradcheck(dg.exp, (dg.randn(3, requires_grad=True),))
    with pytest.raises(ValueError, match="requires_grad"):
        gradcheck(dg.exp, (dg.randn(3, dtype=dg.float64),))


def test_save_on_cpu_leaves_gradients_unchanged():
    x = _x(3)
    with dg.autograd.graph.save_on_cpu(pin_memory=True):
        y = (x.sin() * x).sum()
    y.backward()
    xn = x.detach().numpy()
    dg.testing.assert_close(x.grad.numpy(), np.cos(xn) * xn + np.sin(xn), rtol=1e-7, atol=0,
                            check_dtype=False)
