"""The math surface beyond the case table: in-place forms, errors, casts and the
gradient conventions of prod and the step functions (PyTorch's values, pinned)."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def test_prod_gradient_with_zeros_follows_pytorch():
    x = dg.tensor([[1.0, 0.0, 3.0], [2.0, 0.0, 0.0], [1.5, 2.0, -1.0]], dtype=dg.float64,
                  requires_grad=True)
    x.prod(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 3, 0], [0, 0, 0], [-2, -1.5, 3]])


def test_step_functions_have_zero_gradient_and_record():
    x = dg.tensor([0.5, -1.5, 2.25], requires_grad=True)
    for f in (dg.sign, dg.floor, dg.ceil, dg.round, dg.trunc):
        y = f(x)
        assert y.requires_grad
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), 0.0)
        x.grad = None


def test_inplace_unary_forms():
    x = dg.tensor([0.25, 0.5])
    assert x.tan_() is x
    dg.testing.assert_close(x.numpy(), np.tan([0.25, 0.5]).astype(np.float32), rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    y = dg.tensor([1.5, -2.5])
    y.floor_()
    np.testing.assert_array_equal(y.numpy(), [1.0, -3.0])
    leaf = dg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.exp_()


def test_bitwise_ops_refuse_floats():
    with pytest.raises(TypeError, match="float"):
        dg.tensor([1.0]) & dg.tensor([1.0])
    with pytest.raises(TypeError):
        ~dg.tensor([1.5])


def test_div_rounding_mode_checked():
    with pytest.raises(ValueError, match="rounding_mode"):
        dg.div(dg.tensor([1.0]), 2.0, rounding_mode="ceil")


def test_integer_casts_cut_the_tape():
    x = dg.tensor([1.5, -2.5], requires_grad=True)
    for t in (x.int(), x.long(), x.bool(), x.type(dg.int64)):
        assert not t.requires_grad and t.grad_fn is None
    assert x.type(dg.float64).requires_grad
    assert x.int().dtype == dg.int32 and x.half().dtype == dg.float16


def test_constructors():
    x = dg.ones(2, 3, dtype=dg.float64)
    assert dg.zeros_like(x).dtype == dg.float64 and dg.empty_like(x).shape == (2, 3)
    assert dg.full_like(x, 7, dtype=dg.int64).tolist() == [[7, 7, 7], [7, 7, 7]]
    assert dg.eye(2, 3).tolist() == [[1, 0, 0], [0, 1, 0]]
    assert dg.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert dg.linspace(0, 1, 3).dtype == dg.float32
    assert dg.empty(2, 1).shape == (2, 1)


def test_allclose_is_a_python_bool():
    a = dg.tensor([1.0, float("inf")])
    assert dg.allclose(a, a) is True
    assert a.allclose(a * -1) is False


def test_activation_modules_repr():
    assert repr(dg.nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2, inplace=False)"
    assert repr(dg.nn.Softmax(dim=1)) == "Softmax(dim=1)"


def test_one_compiled_function_over_composites_fuses():
    """Compositions need no lowering: a chain of activations summed to a loss compiles to
    one kernel that returns the loss and its gradient."""
    F = dg.nn.functional

    @dg.compile
    def f(x):
        return (F.gelu(x) + F.silu(x) * F.softplus(x) + F.mish(x) - F.logsigmoid(x)).sum()

    x = dg.tensor(np.linspace(-2, 2, 12).reshape(3, 4), requires_grad=True)
    y = f(x)
    y.backward()
    xe = dg.tensor(x.numpy(), requires_grad=True)
    ye = (F.gelu(xe) + F.silu(xe) * F.softplus(xe) + F.mish(xe) - F.logsigmoid(xe)).sum()
    ye.backward()
    dg.testing.assert_close(y.numpy(), ye.numpy(), rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                            check_dtype=False)
    assert f.stats.traces == 1 and f.stats.kernels == 1  # a scalar loss: value and grad


def test_xlogy_and_xlog1py_take_a_python_number_on_either_side():
    """PyTorch's values (torch 2.13): a number ``other`` is a constant log, a number
    ``input`` scales; gradients and the compiled function agree with eager."""
    t = dg.tensor([0.0, 0.5, 2.0, -1.0])
    ln2, l1p2 = np.float32(np.log(2.0)), np.float32(np.log1p(2.0))
    dg.testing.assert_close(dg.xlogy(t, 2.0).numpy(), np.float32([0, 0.5, 2, -1]) * ln2)
    dg.testing.assert_close(dg.special.xlogy(t, 2.0).numpy(), np.float32([0, 0.5, 2, -1]) * ln2)
    dg.testing.assert_close(dg.special.xlog1py(t, 2.0).numpy(),
                            np.float32([0, 0.5, 2, -1]) * l1p2)
    np.testing.assert_array_equal(dg.xlogy(t, 0.0).numpy(), [0, -np.inf, -np.inf, np.inf])
    assert np.isnan(dg.xlogy(t, float("nan")).numpy()).all()
    dg.testing.assert_close(dg.xlogy(2.0, t).numpy()[1:3],
                            np.float32(2) * np.log(np.float32([0.5, 2])))
    with pytest.raises(TypeError, match="tensor"):
        dg.special.xlog1py(1.0, 2.0)
    with pytest.raises(TypeError, match="must be Tensor"):
        dg.ldexp(2.0, t)

    def f(x):
        return dg.xlogy(x, 3.0) + dg.special.xlog1py(x, 0.5) + dg.xlogy(1.5, x.abs() + 1.0)

    assert dg.testing.gradcheck(lambda x: f(x).sum(), np.array([0.3, -1.2, 2.0]))
    x = dg.tensor([0.3, 0.0, 2.0], dtype=dg.float64)
    dg.testing.assert_close(dg.compile(f)(x).numpy(), f(x).numpy(), rtol=1e-12, atol=0)
