"""Eager tape node names are PyTorch's (torch 2.13's ``type(t.grad_fn).__name__``) for
functions recorded through a more general op: squeeze and unsqueeze through reshape,
transpose and ``.T`` through the permutation op, the losses through their last op."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F

# (what, PyTorch's name), on x of shape (1, 3, 4) and m of shape (3, 4), both non-leaves.
SHAPE_NAMES = [
    (lambda x, m: x.transpose(1, 2), "TransposeBackward0"),
    (lambda x, m: m.transpose(0, 1), "TransposeBackward0"),
    (lambda x, m: dg.transpose(m, 0, 1), "TransposeBackward0"),
    (lambda x, m: m.swapaxes(0, 1), "TransposeBackward0"),
    (lambda x, m: m.mT, "TransposeBackward0"),
    (lambda x, m: m.t(), "TBackward0"),
    (lambda x, m: dg.t(m), "TBackward0"),
    (lambda x, m: m.T, "PermuteBackward0"),
    (lambda x, m: m.permute(1, 0), "PermuteBackward0"),
    (lambda x, m: x.permute(2, 0, 1), "PermuteBackward0"),
    (lambda x, m: x.movedim(0, 2), "PermuteBackward0"),
    (lambda x, m: x.squeeze(), "SqueezeBackward0"),
    (lambda x, m: x.squeeze(0), "SqueezeBackward1"),
    (lambda x, m: dg.squeeze(x, 0), "SqueezeBackward1"),
    (lambda x, m: x.squeeze((0,)), "SqueezeBackward2"),
    (lambda x, m: x.unsqueeze(0), "UnsqueezeBackward0"),
    (lambda x, m: dg.unsqueeze(x, -1), "UnsqueezeBackward0"),
    (lambda x, m: x.view(3, 4), "ViewBackward0"),
    (lambda x, m: x.reshape(12), "ViewBackward0"),
    (lambda x, m: x.flatten(), "ViewBackward0"),
    (lambda x, m: x.expand(2, 3, 4), "ExpandBackward0"),
]


@pytest.mark.parametrize(("fn", "name"), SHAPE_NAMES)
def test_shape_function_node_names_are_pytorchs(fn, name):
    x = dg.randn(1, 3, 4, requires_grad=True) * 1
    m = dg.randn(3, 4, requires_grad=True) * 1
    assert fn(x, m).grad_fn.name() == name


LOSS_NAMES = [
    (lambda x, y: F.mse_loss(x, y), "MseLossBackward0"),
    (lambda x, y: F.mse_loss(x, y, reduction="sum"), "MseLossBackward0"),
    (lambda x, y: F.mse_loss(x, y, reduction="none"), "MseLossBackward0"),
    (lambda x, y: dg.nn.MSELoss()(x, y), "MseLossBackward0"),
    (lambda x, y: F.smooth_l1_loss(x, y), "SmoothL1LossBackward0"),
    (lambda x, y: F.smooth_l1_loss(x, y, beta=0.0), "MeanBackward0"),
    (lambda x, y: F.huber_loss(x, y, reduction="none"), "HuberLossBackward0"),
    (lambda x, y: F.huber_loss(x, y, weight=dg.ones(2, 3)), "MeanBackward0"),
    (lambda x, y: F.binary_cross_entropy(dg.sigmoid(x), y.sigmoid()),
     "BinaryCrossEntropyBackward0"),
    (lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid(), reduction="sum"),
     "BinaryCrossEntropyWithLogitsBackward0"),
    (lambda x, y: F.l1_loss(x, y), "MeanBackward0"),
]


@pytest.mark.parametrize(("fn", "name"), LOSS_NAMES)
def test_loss_node_names_are_pytorchs(fn, name):
    x = dg.randn(2, 3, requires_grad=True)
    assert fn(x, dg.randn(2, 3)).grad_fn.name() == name


def test_a_renamed_node_keeps_its_gradient_and_the_compiled_graph():
    """The name is the tape's label only: gradients are the op's, and the compiled
    function of the same program gives the same values."""
    def f(x):
        return F.mse_loss(x.unsqueeze(0).transpose(1, 2).squeeze(0), dg.zeros(3, 2))

    a = np.arange(6.0).reshape(2, 3) / 7
    x = dg.tensor(a, requires_grad=True)
    loss = f(x)
    loss.backward()
    dg.testing.assert_close(x.grad.numpy(), 2 * a / 6, rtol=1e-12, atol=0.0, check_dtype=False)
    y = dg.tensor(a, requires_grad=True)
    out = dg.compile(f)(y)
    out.backward()
    dg.testing.assert_close(out.numpy(), loss.numpy(), rtol=1e-12, atol=0.0, check_dtype=False)
    dg.testing.assert_close(y.grad.numpy(), x.grad.numpy(), rtol=1e-12, atol=0.0, check_dtype=False)


def test_squeezing_nothing_leaves_the_input_node_named():
    x = dg.randn(3, 4, requires_grad=True) * 1
    x.squeeze(0)
    x.view(3, 4)
    assert x.grad_fn.name() == "MulBackward0"
