"""Convolutions: PyTorch's argument rules and errors, the tape, double backward,
the layers' parameters and initialisation, and a compiled CNN step equal to eager.

Values against PyTorch itself are in tests/goldens (conv2d_options, conv_modules, ...);
forward and gradient against NumPy loops in tests/ops/cases.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.testing import assert_close, gradcheck


def _t(*shape: int, rg: bool = False, seed: int = 0, dtype=np.float64) -> dg.Tensor:
    a = np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)
    return dg.tensor(a, requires_grad=rg)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda x, w: F.conv2d(x, w[:, :3]), RuntimeError,
     r"Given groups=1, weight of size \[6, 3, 3, 3\], expected input\[2, 4, 5, 5\] to have 3 "
     r"channels, but got 4 channels instead"),
    (lambda x, w: F.conv2d(x, w[:5, :2], groups=2), RuntimeError,
     "expected weight to be divisible by 2 at dimension 0"),
    (lambda x, w: F.conv2d(x, w, padding="same", stride=2), RuntimeError,
     "padding='same' is not supported for strided convolutions"),
    (lambda x, w: F.conv2d(x, w, padding="full"), RuntimeError, "Invalid padding string: 'full'"),
    (lambda x, w: F.conv2d(x[:, :, :2, :2], w), RuntimeError,
     "Kernel size can't be greater than actual input size"),
    (lambda x, w: F.conv2d(x[0, 0], w), RuntimeError,
     r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of size: "
     r"\[5, 5\]"),
    (lambda x, w: F.conv2d(x, w, dg.zeros(5, dtype=dg.float64)), RuntimeError,
     "expected bias to be 1-dimensional with 6 elements, but got bias of size"),
    (lambda x, w: F.conv2d(x, w, stride=0), RuntimeError, "non-positive stride"),
    (lambda x, w: F.conv2d(x, w, padding=-1), RuntimeError, "negative padding"),
    (lambda x, w: F.conv2d(x, w, dilation=(1, 0)), RuntimeError, "non-positive dilation"),
    (lambda x, w: F.conv2d(x, w, groups=0), RuntimeError, "non-positive groups"),
    (lambda x, w: F.conv2d(x, w, stride=(1, 2, 3)), RuntimeError,
     r"expected stride to be a single integer value or a list of 2 values"),
    (lambda x, w: F.conv2d(x, w.astype(dg.float32)), RuntimeError, "should be the same"),
    (lambda x, w: F.conv2d(x.astype(dg.int64), w.astype(dg.int64)), RuntimeError,
     "floating-point"),
    (lambda x, w: F.conv1d(x, w), RuntimeError, "Expected 2D .unbatched. or 3D"),
    (lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=2), RuntimeError,
     "output padding must be smaller than either stride or dilation"),
    (lambda x, w: F.conv_transpose2d(x, w[:, :4]), RuntimeError,
     r"Given transposed=1, weight of size \[6, 4, 3, 3\], expected input\[2, 4, 5, 5\] to have "
     r"6 channels"),
    (lambda x, w: F.conv_transpose2d(x, w, padding="same"), TypeError, "must be tuple of ints"),
    (lambda x, w: F.unfold(x, 7), RuntimeError, "must be at least one"),
    (lambda x, w: F.fold(F.unfold(x, 3), (6, 5), 3), RuntimeError,
     "match the calculated number of sliding blocks 4 \\* 3 = 12"),
    (lambda x, w: F.fold(x[:, :, :, 0], (5, 5), 3), RuntimeError,
     "divisible by the product of kernel_size"),
])
def test_errors_are_pytorchs(call, exc, match):
    x, w = _t(2, 4, 5, 5), _t(6, 4, 3, 3)
    with pytest.raises(exc, match=match):
        call(x, w)


def test_shape_errors_are_also_value_errors():
    with pytest.raises(ValueError):
        F.conv2d(_t(2, 4, 5, 5), _t(6, 3, 3, 3))


@pytest.mark.parametrize(("make", "match"), [
    (lambda: dg.nn.Conv2d(4, 6, 3, groups=4), "out_channels must be divisible by groups"),
    (lambda: dg.nn.Conv2d(3, 6, 3, groups=2), "in_channels must be divisible by groups"),
    (lambda: dg.nn.Conv2d(4, 6, 3, groups=0), "groups must be a positive integer"),
    (lambda: dg.nn.Conv2d(4, 6, 3, padding="same", stride=2), "strided convolutions"),
    (lambda: dg.nn.Conv2d(4, 6, 3, padding="full"), "Invalid padding string 'full'"),
    (lambda: dg.nn.Conv2d(4, 6, 3, padding_mode="mirror"), "padding_mode must be one of"),
    (lambda: dg.nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"),
     'Only "zeros" padding mode is supported for ConvTranspose2d'),
])
def test_module_argument_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_reflect_padding_larger_than_input_raises():
    m = dg.nn.Conv2d(2, 3, 3, padding=3, padding_mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        m(dg.zeros(1, 2, 3, 3))


# ----------------------------------------------------------------------- semantics


def test_tape_nodes_and_next_functions():
    x, w, b = _t(2, 4, 5, 5, rg=True), _t(6, 4, 3, 3, rg=True), _t(6, rg=True)
    y = F.conv2d(x, w, b)
    assert y.grad_fn.name() == "ConvolutionBackward0"
    assert [n.name() for n, _ in y.grad_fn.next_functions] == ["AccumulateGrad"] * 3
    assert F.conv2d(x, w).grad_fn.name() == "ConvolutionBackward0"
    assert F.unfold(x, 2).grad_fn.name() == "Im2ColBackward0"
    assert F.fold(F.unfold(x, 2), (5, 5), 2).grad_fn.name() == "Col2ImBackward0"


def test_same_padding_even_kernel_pads_the_end():
    # PyTorch: total d*(k-1) = 1, none before and one after.
    x = dg.tensor(np.arange(5.0).reshape(1, 1, 1, 5))
    w = dg.tensor(np.array([1.0, 10.0]).reshape(1, 1, 1, 2))
    np.testing.assert_array_equal(F.conv2d(x, w, padding="same").numpy().ravel(),
                                  [10.0, 21.0, 32.0, 43.0, 4.0])


def test_unfold_and_fold_are_adjoint():
    x, c = _t(2, 3, 6, 5, seed=1), _t(2, 3 * 6, 12, seed=2)
    kw = dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2))
    lhs = (F.unfold(x, **kw) * c).sum().item()
    rhs = (x * F.fold(c, (6, 5), **kw)).sum().item()
    assert math.isclose(lhs, rhs, rel_tol=1e-12)


def test_double_backward():
    def grads(x, w, b):
        # Finite differences call this with plain tensors: differentiate fresh leaves then.
        x, w = (t if t.requires_grad else t.detach().requires_grad_(True) for t in (x, w))
        y = F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2)
        gx, gw = dg.grad((y * y).sum(), [x, w], create_graph=True)
        return (gx * gx).sum() + (gw ** 3).sum()

    assert gradcheck(grads, _t(1, 4, 4, 3, seed=3), _t(4, 2, 2, 2, seed=4), _t(4, seed=5))


def test_empty_batch_and_non_contiguous_input():
    w = _t(3, 2, 2, 2, rg=True)
    assert F.conv2d(dg.zeros(0, 2, 4, 4, dtype=dg.float64), w).shape == (0, 3, 3, 3)
    base = _t(2, 5, 4, 2, rg=True)
    x = base.permute(0, 3, 2, 1)  # a (2, 2, 4, 5) view, not contiguous
    y = F.conv2d(x, w)
    expected = F.conv2d(dg.tensor(np.ascontiguousarray(x.detach().numpy())), w)
    assert_close(y, expected)
    y.sum().backward()
    assert base.grad.shape == base.shape


def test_conv1d_and_unbatched_agree_with_conv2d():
    x, w, b = _t(2, 4, 7), _t(6, 2, 3), _t(6)
    y = F.conv1d(x, w, b, stride=2, padding=1, groups=2)
    y2 = F.conv2d(x.reshape(2, 4, 1, 7), w.reshape(6, 2, 1, 3), b, (1, 2), (0, 1), groups=2)
    assert_close(y, y2.reshape(2, 6, 4))
    assert_close(F.conv1d(x[1], w, b, groups=2), F.conv1d(x, w, b, groups=2)[1])


# -------------------------------------------------------------------------- modules


def test_module_parameters_and_init():
    dg.manual_seed(0)
    m = dg.nn.Conv2d(4, 6, (3, 2), groups=2)
    assert m.weight.shape == (6, 2, 3, 2) and m.bias.shape == (6,)
    bound = 1 / math.sqrt(2 * 3 * 2)
    w = m.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(m.bias.numpy()).max() <= bound
    t = dg.nn.ConvTranspose2d(4, 6, 3, groups=2, bias=False)
    assert t.weight.shape == (4, 3, 3, 3) and t.bias is None
    assert np.abs(t.weight.numpy()).max() <= 1 / math.sqrt(3 * 9)
    assert dg.nn.Conv1d(4, 6, 5).weight.shape == (6, 4, 5)
    assert len(list(m.parameters())) == 2
    dg.manual_seed(0)
    assert_close(dg.nn.Conv2d(4, 6, (3, 2), groups=2).weight, m.weight)


def test_padding_modes_match_explicit_padding():
    x = _t(1, 2, 4, 5, seed=6).astype(dg.float32)
    a = x.numpy()
    m = dg.nn.Conv2d(2, 3, 3, padding=(2, 1))
    for mode, np_mode in (("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")):
        m.padding_mode = mode
        padded = dg.tensor(np.pad(a, ((0, 0), (0, 0), (2, 2), (1, 1)), mode=np_mode))
        assert_close(m(x), F.conv2d(padded, m.weight, m.bias), msg=mode)


def test_conv_transpose_output_size():
    t = dg.nn.ConvTranspose2d(2, 4, 3, stride=2)
    x = _t(1, 2, 4, 4).astype(dg.float32)
    assert t(x).shape == (1, 4, 9, 9)
    assert t(x, output_size=(10, 10)).shape == (1, 4, 10, 10)
    with pytest.raises(ValueError, match="valid sizes range from 9 to 10"):
        t(x, output_size=(11, 11))


def test_compiled_cnn_step_equals_eager():
    """conv -> relu -> strided conv -> linear, one SGD step compiled as a whole."""
    def build():
        dg.manual_seed(1)
        net = dg.nn.Sequential(dg.nn.Conv2d(1, 4, 3, padding=1), dg.nn.ReLU(),
                               dg.nn.Conv2d(4, 2, 3, stride=2, groups=2))
        head = dg.nn.Linear(2 * 3 * 3, 3)
        params = list(net.parameters()) + list(head.parameters())
        return net, head, dg.optim.SGD(params, lr=0.1), params

    def make_step(net, head, opt):
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(head(net(x).reshape(x.shape[0], -1)), y)
            loss.backward()
            opt.step()
            return loss
        return step

    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((4, 1, 7, 7)).astype(np.float32))
    y = dg.tensor(rng.integers(0, 3, 4))
    eager_parts, comp_parts = build(), build()
    eager = make_step(*eager_parts[:3])
    compiled = dg.compile(make_step(*comp_parts[:3]))
    for _ in range(3):
        assert_close(compiled(x, y), eager(x, y))
    for p, q in zip(comp_parts[3], eager_parts[3]):
        assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert compiled.stats.traces == 1
