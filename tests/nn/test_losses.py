"""Losses (eager): cross_entropy, nll_loss and the softmax family
as single ops, with PyTorch's arguments, edge cases and errors. Values against PyTorch are in
tests/goldens (programs `cross_entropy_forms`, `nll_loss_forms`, ...); these tests pin the
structure (one op forward, one backward), the compiled target input and the edge cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn
from dualgraph.nn import functional as F

from ..ops.cases import ce_ref

LOGITS = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [0.0, 3.0, 1.0], [-2.0, 0.5, 0.5]])
W = np.array([0.5, 2.0, 1.5])


def _tape_ops(t: dg.Tensor) -> list[str]:
    """The names of the tape nodes behind ``t``, depth first."""
    out, todo = [], [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node.name() == "AccumulateGrad":
            continue
        out.append(node.name())
        todo.extend(fn for fn, _ in node.next_functions)
    return out


def test_cross_entropy_is_two_ops_forward_and_two_backward():
    x = dg.tensor(LOGITS, requires_grad=True)
    loss = F.cross_entropy(x, dg.tensor([0, 2, 1, 1]))
    assert _tape_ops(loss) == ["NllLossBackward0", "LogSoftmaxBackward0"]
    (g,) = dg.grad(loss, [x], create_graph=True)
    assert _tape_ops(g) == ["LogSoftmaxBackwardDataBackward0", "LogSoftmaxBackward0"]


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    x = dg.tensor(LOGITS, requires_grad=True)
    k = np.array([0, 2, 1, -100])
    F.cross_entropy(x, dg.tensor(k)).backward()
    p = np.exp(LOGITS - LOGITS.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    onehot = np.zeros_like(p)
    onehot[np.arange(3), k[:3]] = 1
    expected = (p - onehot) / 3
    expected[3] = 0.0  # the ignored row gets no gradient
    dg.testing.assert_close(x.grad.numpy(), expected, rtol=1e-12, atol=1e-15, equal_nan=True,
                            check_dtype=False)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_weighted_ignore_index_matches_reference(reduction, smoothing):
    k = np.array([0, 2, 1, 1])
    out = F.cross_entropy(dg.tensor(LOGITS), dg.tensor(k), dg.tensor(W), ignore_index=1,
                          reduction=reduction, label_smoothing=smoothing)
    dg.testing.assert_close(out.numpy(), ce_ref(LOGITS, k, W, 1, reduction, smoothing), rtol=1e-12,
                            atol=0, equal_nan=True, check_dtype=False)


def test_all_targets_ignored_gives_nan_mean_and_zero_gradient():
    x = dg.tensor(LOGITS, requires_grad=True)
    k = dg.tensor([-100] * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy 0/0 warning leaks
        loss = F.cross_entropy(x, k)
        loss.backward()
    assert np.isnan(loss.item())
    assert F.cross_entropy(x, k, reduction="sum").item() == 0.0
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros_like(LOGITS))


def test_empty_batch():
    x = dg.zeros(0, 3, requires_grad=True)
    assert np.isnan(F.cross_entropy(x, dg.tensor(np.zeros(0, np.int64))).item())
    assert F.cross_entropy(x, dg.tensor(np.zeros(0, np.int64)), reduction="sum").item() == 0
    assert np.isnan(F.cross_entropy(x, dg.zeros(0, 3)).item())


def test_one_dimensional_logits_and_legacy_flags():
    v = dg.tensor(LOGITS[0], requires_grad=True)
    loss = F.cross_entropy(v, dg.tensor(2))
    assert loss.shape == () and loss.grad_fn.name() == "NllLossBackward0"
    dg.testing.assert_close(loss.item(), ce_ref(LOGITS[0], np.array(2)), rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
    assert F.cross_entropy(v, dg.tensor([2]), reduction="none").shape == ()
    # size_average=False is reduction="sum"; reduce=False is "none".
    x, k = dg.tensor(LOGITS), dg.tensor([0, 2, 1, 1])
    assert F.cross_entropy(x, k, size_average=False).item() == pytest.approx(
        F.cross_entropy(x, k, reduction="sum").item())
    assert F.nll_loss(x, k, reduce=False).shape == (4,)


def test_nd_logits_take_class_dim_one():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5))
    k = rng.integers(0, 3, (2, 4, 5))
    out = F.cross_entropy(dg.tensor(x, requires_grad=True), dg.tensor(k), reduction="none")
    assert out.shape == (2, 4, 5)
    dg.testing.assert_close(out.numpy(), ce_ref(x, k, reduction="none"), rtol=1e-12, atol=0,
                            equal_nan=True, check_dtype=False)
    assert F.nll_loss(dg.tensor(x, requires_grad=True), dg.tensor(k)).grad_fn.name() == \
        "NllLoss2DBackward0"


def test_probability_targets_promote_and_keep_gradients():
    x = dg.tensor(LOGITS.astype(np.float32), requires_grad=True)
    p = dg.tensor(np.full((4, 3), 1 / 3), requires_grad=True)
    loss = F.cross_entropy(x, p)
    assert loss.dtype == np.float64  # PyTorch: a float64 target promotes the loss
    loss.backward()
    assert x.grad.dtype == np.float32 and p.grad.shape == (4, 3)


def test_large_logits_stay_finite():
    x = dg.tensor(np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4]], np.float32), requires_grad=True)
    loss = F.cross_entropy(x, dg.tensor([0, 2]), label_smoothing=0.1)
    loss.backward()
    assert np.isfinite(loss.item()) and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: F.cross_entropy(dg.ones(2, 3), dg.tensor([0, 3])), IndexError,
     "Target 3 is out of bounds"),
    (lambda: F.cross_entropy(dg.ones(2, 3), dg.tensor([-1, 0])), IndexError,
     "Target -1 is out of bounds"),
    (lambda: F.nll_loss(dg.ones(2, 3), dg.tensor([0, 7]), ignore_index=7), None, None),
    (lambda: F.cross_entropy(dg.ones(4, 3), dg.tensor([0, 1])), ValueError,
     r"batch_size \(4\).*batch_size \(2\)"),
    (lambda: F.cross_entropy(dg.ones(2, 3), dg.ones(2)), RuntimeError, "Long or Byte"),
    (lambda: F.cross_entropy(dg.ones(2, 3), dg.tensor([[0, 1, 2], [0, 1, 2]])), RuntimeError,
     "floating point type for target with class probabilities"),
    (lambda: F.cross_entropy(dg.ones(2, 3), dg.ones(2, 3), ignore_index=0), RuntimeError,
     "ignore_index is not supported"),
    (lambda: F.cross_entropy(dg.ones(2, 3), dg.tensor([0, 1]), label_smoothing=-0.1),
     RuntimeError, "label_smoothing"),
    (lambda: F.cross_entropy(dg.ones(2, 3), dg.tensor([0, 1]), reduction="avg"), ValueError,
     "avg is not a valid value"),
    (lambda: F.nll_loss(dg.ones(2, 3, 4), dg.tensor(np.zeros((2, 5), np.int64))), RuntimeError,
     r"Expected target size \[2, 4\], got \[2, 5\]"),
    (lambda: F.nll_loss(dg.ones(2, 3), dg.tensor([0, 1]), dg.ones(2)), RuntimeError,
     "weight tensor should be defined either for all 3 classes"),
    (lambda: F.log_softmax(dg.ones(2, 3), 2), IndexError, "Dimension out of range"),
])
def test_errors_are_pytorchs(call, error, match):
    if error is None:
        call()  # an out-of-range class equal to ignore_index is simply ignored
        return
    with pytest.raises(error, match=match):
        call()


def test_softmax_implicit_dim_warns_like_pytorch():
    x = dg.tensor(LOGITS)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = F.softmax(x)
    dg.testing.assert_close(out.numpy(), F.softmax(x, 1).numpy(), rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)


def test_softmax_of_empty_0d_and_ints():
    assert F.softmax(dg.zeros(0, 3), 1).shape == (0, 3)
    assert F.log_softmax(dg.tensor(2.0), 0).item() == 0.0
    assert F.softmax(dg.tensor([1, 2]), 0).dtype == np.float32
    assert F.softmax(dg.tensor([[1.0, 2.0]]), 1, dtype=dg.float64).dtype == np.float64


def test_softmax_nan_and_inf_rows_like_numpy():
    x = np.array([[0.0, np.nan, 1.0], [-np.inf, 0.0, 1.0], [-np.inf] * 3])
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(1, keepdims=True))
        ref = e / e.sum(1, keepdims=True)
        out = F.softmax(dg.tensor(x), 1).numpy()
        compiled = dg.compile(lambda t: F.softmax(t, 1))(dg.tensor(x)).numpy()
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(compiled, ref)


def test_modules_take_pytorchs_arguments():
    x, k = dg.tensor(LOGITS), dg.tensor([0, 2, 1, 1])
    w = dg.tensor(W)
    mod = nn.CrossEntropyLoss(weight=w, ignore_index=1, label_smoothing=0.2)
    assert mod(x, k).item() == pytest.approx(
        F.cross_entropy(x, k, w, ignore_index=1, label_smoothing=0.2).item())
    assert nn.CrossEntropyLoss(reduction="none")(x, k).shape == (4,)
    lp = F.log_softmax(x, 1)
    assert nn.NLLLoss(w, reduction="sum")(lp, k).item() == pytest.approx(
        F.nll_loss(lp, k, w, reduction="sum").item())
    with pytest.raises(ValueError):
        nn.NLLLoss(reduction="avg")


def test_compiled_target_is_a_runtime_input():
    """New target values reach the same compiled kernel (no retrace, no baked constant),
    and an out-of-range class raises inside it."""
    x = dg.tensor(LOGITS.astype(np.float32), requires_grad=True)
    f = dg.compile(lambda x, k: F.cross_entropy(x, k, label_smoothing=0.1))
    for k in ([0, 2, 1, 1], [2, 2, 0, -100]):
        got = f(x, dg.tensor(k))
        want = F.cross_entropy(x, dg.tensor(k), label_smoothing=0.1)
        dg.testing.assert_close(got.numpy(), want.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                                check_dtype=False)
        x.grad = None
        got.backward()
        g = x.grad.numpy()
        x.grad = None
        want.backward()
        dg.testing.assert_close(g, x.grad.numpy(), rtol=1e-5, atol=1e-7, equal_nan=True,
                                check_dtype=False)
    assert f.stats.traces == 1
    with pytest.raises(IndexError, match="out of bounds"):
        f(x, dg.tensor([0, 2, 1, 3]))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_plain_cross_entropy_records_what_the_general_path_records(reduction, ignore_index):
    # F.cross_entropy's training-loop shortcut (float (N, C) logits, (N,) classes, no
    # weight or smoothing) must give the general path's ops, bits and gradients.
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    classes = rng.integers(0, 4, 6)
    x1 = dg.tensor(logits, requires_grad=True)
    x2 = dg.tensor(logits, requires_grad=True)
    fast = F.cross_entropy(x1, dg.tensor(classes), reduction=reduction,
                           ignore_index=ignore_index)
    general = dg.nn.functional.nll_loss(dg.log_softmax(x2, dim=1), dg.tensor(classes),
                                        reduction=reduction, ignore_index=ignore_index)
    assert fast.grad_fn.name() == "NllLossBackward0"
    assert fast.grad_fn.next_functions[0][0].name() == "LogSoftmaxBackward0"
    assert str(dg.graph_of(fast)) == str(dg.graph_of(general))
    np.testing.assert_array_equal(fast.numpy(), general.numpy())
    fast.backward()
    general.backward()
    np.testing.assert_array_equal(x1.grad.numpy(), x2.grad.numpy())


def test_plain_cross_entropy_keeps_the_general_errors():
    x = dg.zeros(3, 4, requires_grad=True)
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(x, dg.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(x, dg.tensor([0, -1, 1]))
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, dg.tensor([0, 1]))
