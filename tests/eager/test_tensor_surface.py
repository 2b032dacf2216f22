"""PyTorch's everyday tensor surface: `contiguous`, `mm`/`bmm`, `squeeze_`/`unsqueeze_`,
the ``.data`` setter, `inference_mode`, ``nn.ReLU(True)`` and ``torch.compile``'s keywords."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import gradcheck

RNG = np.random.default_rng(0)


def test_contiguous_copies_only_what_is_not_c_ordered() -> None:
    x = dg.tensor(RNG.standard_normal((2, 3)).astype(np.float32))
    assert x.is_contiguous() and x.contiguous() is x
    t = x.t()
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c is not t
    np.testing.assert_array_equal(c.numpy(), x.numpy().T)
    c[0, 0] = 100.0  # a copy: the base is unchanged
    assert x.numpy()[0, 0] != 100.0


def test_contiguous_keeps_the_gradient() -> None:
    x = dg.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    (x.t().contiguous().view(6) * dg.arange(6.0, dtype=dg.float64)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(6.0).reshape(2, 3).T)


def test_mm_and_bmm_values_gradients_and_checks() -> None:
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    dg.testing.assert_close(dg.tensor(a).mm(dg.tensor(b)).numpy(), a @ b, rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    dg.testing.assert_close(dg.mm(dg.tensor(a), dg.tensor(b)).numpy(), a @ b, rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    assert dg.tensor(a, requires_grad=True).mm(dg.tensor(b)).grad_fn.name() == "MmBackward0"
    assert gradcheck(lambda x, y: x.mm(y), a, b)
    p, q = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))
    dg.testing.assert_close(dg.bmm(dg.tensor(p), dg.tensor(q)).numpy(), p @ q, rtol=1e-7, atol=0,
                            equal_nan=True, check_dtype=False)
    assert gradcheck(lambda x, y: x.bmm(y), p, q)
    with pytest.raises(RuntimeError, match="mm: self must be a 2-D tensor"):
        dg.tensor(p).mm(dg.tensor(b))
    with pytest.raises(ValueError, match="bmm: batch sizes differ"):
        dg.tensor(p).bmm(dg.tensor(q[:1]))


def test_squeeze_and_unsqueeze_in_place() -> None:
    x = dg.ones(2, 1, 3)
    assert x.squeeze_() is x and x.shape == (2, 3)
    assert x.unsqueeze_(0) is x and x.shape == (1, 2, 3)
    assert x.squeeze_(0).shape == (2, 3)
    leaf = dg.ones(2, 1, requires_grad=True)
    y = leaf * dg.tensor([[2.0], [3.0]])
    y.squeeze_(1)
    assert y.shape == (2,) and y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [[2.0], [3.0]])
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.squeeze_()
    with dg.no_grad():
        leaf.squeeze_()
    assert leaf.shape == (2,) and leaf.is_leaf


def _views_reshaped(y, in_place: bool):
    """Views of a non-leaf reshaped by squeeze_/transpose_/unsqueeze_/t_ (or their
    out-of-place forms), then a write to the base that the views must see."""
    z = y * 1.0
    v, w, u = z[0:1], z.t(), z[1]
    if in_place:
        assert v.squeeze_(0) is v and w.transpose_(0, 1) is w and u.unsqueeze_(0).t_() is u
    else:
        v, w, u = v.squeeze(0), w.transpose(0, 1), u.unsqueeze(0).t()
    z.mul_(2.0)
    return (v * dg.tensor([1.0, 2.0, 3.0], dtype=y.dtype)).sum() + (w ** 2).sum() + (u * 3).sum()


def test_view_shape_changes_in_place_equal_the_out_of_place_views() -> None:
    y = dg.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    (g_in,) = dg.autograd.grad(_views_reshaped(y, True), [y])
    (g_out,) = dg.autograd.grad(_views_reshaped(y, False), [y])
    dg.testing.assert_close(g_in.numpy(), g_out.numpy(), rtol=1e-12, atol=0, check_dtype=False)
    assert gradcheck(lambda a: _views_reshaped(a, True), y.detach())
    x = dg.zeros(2, 3)
    v = x[:, None]
    v.squeeze_()
    x.add_(1.0)
    assert v.shape == (2, 3) and np.all(v.numpy() == 1.0)
    leaf = dg.arange(6.0).reshape(2, 3).requires_grad_()
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        leaf[0:1].squeeze_(0)
    with dg.no_grad():
        assert leaf[0:1].squeeze_(0).shape == (3,)


def test_squeeze_in_place_inside_a_compiled_function_says_what_to_do() -> None:
    f = dg.compile(lambda x: x.squeeze_(), strict=True)
    with pytest.raises(dg.TraceError, match="x = x.squeeze"):
        f(dg.ones(2, 1))


def test_data_setter_swaps_the_data_and_keeps_the_parameter() -> None:
    p = dg.nn.Parameter(dg.ones(3))
    new = dg.zeros(4, dtype=dg.float64)
    p.data = new
    assert isinstance(p, dg.nn.Parameter) and p.requires_grad and p.shape == (4,)
    assert p.dtype == np.float64
    new[0] = 5.0  # shares the data, as PyTorch's .data = t
    assert p.numpy()[0] == 5.0
    with pytest.raises(TypeError, match="has to be a tensor"):
        p.data = [1.0, 2.0]
    with pytest.raises(TypeError, match="floating point"):
        p.data = dg.tensor([1, 2])
    lin = dg.nn.Linear(2, 2)
    lin.weight.data = dg.zeros(2, 2)
    assert float(lin(dg.ones(1, 2)).sub(lin.bias).abs().sum()) == 0.0


def test_data_add_updates_like_the_regression_example() -> None:
    w = dg.nn.Parameter(dg.tensor([1.0, 2.0]))
    (w * w).sum().backward()
    w.data.add_(-0.1 * w.grad)
    dg.testing.assert_close(w.numpy(), [0.8, 1.6], rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


@pytest.mark.parametrize("form", ["call", "bare", "false", "nested"])
def test_inference_mode_context_and_decorator(form) -> None:
    x = dg.ones(2, requires_grad=True)
    if form == "call":
        with dg.inference_mode():
            assert dg.is_inference_mode_enabled()
            y = x * 2
        assert not y.requires_grad and not dg.is_inference_mode_enabled()
    elif form == "bare":
        @dg.inference_mode
        def f(t):
            return t * 2

        assert not f(x).requires_grad and f.__name__ == "f"
    elif form == "false":
        @dg.inference_mode(mode=False)
        def g(t):
            return t * 2

        assert g(x).requires_grad
        with dg.inference_mode(False):
            assert (x * 2).requires_grad
    else:
        with dg.inference_mode():
            with dg.enable_grad():
                assert (x * 2).requires_grad
            assert not (x * 2).requires_grad
    assert dg.is_grad_enabled()


def test_inference_mode_inside_a_compiled_function_stops_gradients() -> None:
    def f(x):
        with dg.inference_mode():
            y = x * 3
        return (x * y).sum()

    x = dg.tensor([1.0, 2.0], requires_grad=True)
    g = dg.compile(f)
    g(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 6.0])  # y is a constant
    x.grad = None
    f(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 6.0])


@pytest.mark.parametrize("cls, args", [
    (dg.nn.ReLU, (True,)), (dg.nn.ReLU6, (True,)), (dg.nn.SiLU, (True,)),
    (dg.nn.ELU, (1.0, True)), (dg.nn.LeakyReLU, (0.2, True)), (dg.nn.SELU, (True,)),
    (dg.nn.Hardtanh, (-1.0, 1.0, True)), (dg.nn.CELU, (1.0, True)),
    (dg.nn.Hardswish, (True,)), (dg.nn.Hardsigmoid, (True,)), (dg.nn.Mish, (True,)),
])
def test_activation_inplace_given_positionally(cls, args) -> None:
    m = cls(*args)
    assert m.inplace is True and "inplace=True" in repr(m)
    x0 = np.linspace(-2, 2, 8).astype(np.float32)
    h = dg.tensor(x0, requires_grad=True) * 1.0  # a non-leaf, as in a network
    out = m(h)
    ref = cls(*args[:-1])(dg.tensor(x0)).numpy()
    dg.testing.assert_close(out.numpy(), ref, rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)
    # written into the input
    dg.testing.assert_close(h.numpy(), ref, rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)


def test_relu_inplace_gradient_and_compiled() -> None:
    def f(x, w):
        return dg.nn.ReLU(True)(x @ w).sum()

    x = dg.tensor(RNG.standard_normal((4, 3)).astype(np.float32))
    w = dg.tensor(RNG.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    f(x, w).backward()
    eager = w.grad.numpy().copy()
    dg.testing.assert_close(eager, x.numpy().T @ ((x.numpy() @ w.numpy()) > 0), rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    w.grad = None
    g = dg.compile(f)
    g(x, w).backward()
    dg.testing.assert_close(w.grad.numpy(), eager, rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    assert g.stats.traces == 1


@pytest.mark.parametrize("kwargs", [
    {"fullgraph": True}, {"fullgraph": False}, {"mode": "reduce-overhead"},
    {"mode": "max-autotune"}, {"mode": "default"}, {"dynamic": True}, {"dynamic": False},
    {"dynamic": None}, {"backend": "inductor"}, {"backend": "eager"},
    {"options": {"trace.enabled": False}},
    {"fullgraph": True, "mode": "max-autotune-no-cudagraphs", "dynamic": False},
])
def test_compile_accepts_torch_compile_keywords(kwargs) -> None:
    def f(x):
        return (x * x).sum()

    g = dg.compile(f, **kwargs)
    x = dg.tensor([1.0, 2.0])
    assert float(g(x)) == 5.0 and g.stats.traces == 1
    deco = dg.compile(**kwargs)(f)
    assert float(deco(x)) == 5.0


def test_compile_fullgraph_is_strict() -> None:
    assert dg.compile(lambda x: x, fullgraph=True).strict is True


def test_compile_disable_returns_the_function() -> None:
    def f(x):
        return x

    assert dg.compile(f, disable=True) is f
    assert dg.compile(disable=True)(f) is f


@pytest.mark.parametrize("kwargs, err, match", [
    ({"mode": "fastest"}, RuntimeError, "unrecognized mode"),
    ({"backend": "tvm"}, ValueError, "backend 'tvm'"),
    ({"fullgraph": 1}, TypeError, "fullgraph"),
    ({"options": 3}, TypeError, "options"),
])
def test_compile_refuses_bad_torch_keywords(kwargs, err, match) -> None:
    with pytest.raises(err, match=match):
        dg.compile(lambda x: x, **kwargs)


def test_tensor_methods_inside_a_compiled_function_match_eager() -> None:
    def f(a, b):
        c = a.mm(b).contiguous()
        d = a.t().contiguous().mm(c.t().contiguous().t())
        return d.sum() + a.is_floating_point()

    a = dg.tensor(RNG.standard_normal((3, 3)).astype(np.float32))
    b = dg.tensor(RNG.standard_normal((3, 3)).astype(np.float32))
    g = dg.compile(f)
    dg.testing.assert_close(g(a, b).numpy(), f(a, b).numpy(), rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    assert g.stats.traces == 1
