"""Eager kernels that work in cache-sized blocks or fewer passes: the convolution's
products over blocks of samples, max-pool indices over tiling windows, and the fused eager
cross-entropy. Each gives the bits of the code it replaces, or, where a sum is split into
blocks (the convolution's weight gradient), the definition within float32 rounding."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager.internal import array_of
from dualgraph.ops import conv as C

_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(_INT[a.dtype.itemsize])


# (input shape, out channels, kernel, padding): 8 x 1,600 and 5 x 2,025 output positions
# pass `_LONG`, so both run in blocks of samples; groups and a ragged last block included.
_BLOCKED = [((8, 1, 40, 40), 3, (3, 3), ((1, 1), (1, 1)), 1),
            ((5, 4, 47, 47), 6, (3, 3), ((0, 0), (0, 0)), 2)]


@pytest.mark.parametrize("shape,o,k,padding,groups", _BLOCKED)
def test_conv2d_in_blocks_of_samples_gives_the_bits_of_one_product(
        shape, o, k, padding, groups, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((o, shape[1] // groups) + k).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    attrs = dict(stride=(1, 1), padding=padding, dilation=(1, 1), groups=groups)
    n, length = shape[0], None
    out, cols = C._conv2d_keep(x, w, b, **attrs)
    length = out.shape[2] * out.shape[3]
    assert C._sample_block(n, length) < n  # the blocked path ran
    monkeypatch.setattr(C, "_LONG", 1 << 40)
    whole, _ = C._conv2d_keep(x, w, b, **attrs)
    np.testing.assert_array_equal(_bits(out), _bits(whole))
    # The weight's gradient, a sum over samples split into blocks: the definition's
    # within float32 rounding.
    g = rng.standard_normal(out.shape).astype(np.float32)
    monkeypatch.undo()
    og, kk = o // groups, cols.shape[0] // groups
    gw = C._weight_grad(g.reshape(n, o, length), cols, groups, og, kk)
    g64 = g.astype(np.float64).reshape(n, groups, og, length)
    c64 = cols.astype(np.float64).reshape(groups, kk, n, length)
    want = np.einsum("ngol,gknl->gok", g64, c64)
    dg.testing.assert_close(gw.astype(np.float64), want, rtol=1e-5, atol=1e-4)


def test_conv2d_blocked_backward_matches_the_recorded_one():
    # The array-form backward (blocked weight gradient) against the op-by-op VJP a
    # create_graph backward records (one product over the whole batch).
    rng = np.random.default_rng(1)
    grads = []
    for create_graph in (False, True):
        x = dg.tensor(rng.standard_normal((8, 1, 40, 40)).astype(np.float32),
                      requires_grad=True)
        w = dg.tensor(np.random.default_rng(2).standard_normal((3, 1, 3, 3))
                      .astype(np.float32), requires_grad=True)
        y = dg.nn.functional.conv2d(x, w, padding=1)
        g = dg.tensor(np.random.default_rng(3).standard_normal(tuple(y.shape))
                      .astype(np.float32))
        y.backward(g, create_graph=create_graph)
        grads.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
        rng = np.random.default_rng(1)
    (fx, fw), (sx, sw) = grads
    dg.testing.assert_close(fx, sx, rtol=1e-6, atol=1e-6)
    dg.testing.assert_close(fw, sw, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("k", [(1, 1), (2, 2), (2, 3), (3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_tiled_max_pool_indices_pick_the_first_maximum_of_each_window(k, dtype):
    from dualgraph.ops import pool as P

    kh, kw = k
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 3, (3, 2, 3 * kh + 1, 4 * kw)).astype(dtype)
    zeros = x == 0  # ties between -0 and +0 as well as between equal values
    x[zeros] = np.where(rng.random(zeros.sum()) < 0.5, -0.0, 0.0).astype(dtype)
    x[..., 0, 0] = -np.inf
    oh, ow = x.shape[2] // kh, x.shape[3] // kw
    got = P._tiled_max_indices(x, oh, kh, ow, kw)
    win = x[..., :oh * kh, :ow * kw].reshape(3, 2, oh, kh, ow, kw).transpose(0, 1, 2, 4, 3, 5)
    first = np.argmax(win.reshape(3, 2, oh, ow, kh * kw), axis=-1)  # the first maximum
    want = ((np.arange(oh)[:, None] * kh + first // kw) * x.shape[3]
            + np.arange(ow)[None, :] * kw + first % kw)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def _ce_run(monkeypatch, fused_on: bool, x_view: bool, dtype=np.float32,
            reduction: str = "mean"):
    from dualgraph.eager import fused

    calls = []
    real = fused.cross_entropy

    def spy(*a):
        out = real(*a) if fused_on else None
        calls.append(out is not None)
        return out

    monkeypatch.setattr(fused, "cross_entropy", spy)
    rng = np.random.default_rng(5)
    base = dg.tensor(rng.standard_normal((2, 6, 7)).astype(dtype), requires_grad=True)
    x = base.reshape(12, 7) if x_view else dg.tensor(array_of(base).reshape(12, 7),
                                                      requires_grad=True)
    t = dg.tensor(rng.integers(0, 7, 12))
    loss = dg.nn.functional.cross_entropy(x, t, reduction=reduction)
    node = loss.grad_fn
    names = (node.name(), node.next_functions[0][0].name())
    loss.backward()
    leaf = base if x_view else x
    monkeypatch.undo()
    return calls, np.asarray(loss.numpy()), leaf.grad.numpy().copy(), names


@pytest.mark.parametrize("x_view", [False, True])
@pytest.mark.parametrize("dtype,reduction", [(np.float32, "mean"), (np.float64, "sum")])
def test_fused_cross_entropy_records_the_ops_tape_with_their_bits(
        monkeypatch, x_view, dtype, reduction):
    calls, loss, grad, names = _ce_run(monkeypatch, True, x_view, dtype, reduction)
    assert calls == [True]  # the fused form ran
    calls, loss0, grad0, names0 = _ce_run(monkeypatch, False, x_view, dtype, reduction)
    assert calls == [False]
    assert names == names0 == ("NllLossBackward0", "LogSoftmaxBackward0")
    np.testing.assert_array_equal(_bits(loss), _bits(loss0))
    np.testing.assert_array_equal(_bits(grad), _bits(grad0))


def test_fused_cross_entropy_leaves_the_other_cases_to_the_ops():
    x = dg.tensor(np.zeros((3, 4), np.float32), requires_grad=True)
    F = dg.nn.functional
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(x, dg.tensor(np.array([0, 4, 1])))
    # An ignored class, and a target written in place after the loss: the saved target's
    # version check fires as for the ops.
    loss = F.cross_entropy(x, dg.tensor(np.array([0, -100, 1])))
    dg.testing.assert_close(loss.numpy(), np.float32(np.log(4.0)))
    t = dg.tensor(np.array([0, 2, 1]))
    loss = F.cross_entropy(x, t)
    t.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    with dg.no_grad():
        assert F.cross_entropy(x, dg.tensor(np.array([0, 2, 1]))).grad_fn is None


def test_fused_cross_entropy_double_backward_and_a_view_target(monkeypatch):
    from dualgraph.eager import fused

    def run(on: bool):
        monkeypatch.setattr(fused, "cross_entropy",
                            fused.cross_entropy if on else (lambda *a: None))
        rng = np.random.default_rng(6)
        x = dg.tensor(rng.standard_normal((6, 5)), requires_grad=True)
        t = dg.tensor(rng.integers(0, 5, (2, 3))).reshape(-1)  # a view of the classes
        loss = dg.nn.functional.cross_entropy(x, t)
        (gx,) = dg.autograd.grad(loss, x, create_graph=True)
        (gx * gx).sum().backward()
        monkeypatch.undo()
        return loss.numpy(), gx.detach().numpy(), x.grad.numpy()

    real = fused.cross_entropy
    seen = []
    monkeypatch.setattr(fused, "cross_entropy", lambda *a: seen.append(real(*a)) or seen[-1])
    loss = dg.nn.functional.cross_entropy(
        dg.tensor(np.zeros((6, 5)), requires_grad=True),
        dg.tensor(np.arange(6) % 5).reshape(2, 3).reshape(-1))
    monkeypatch.undo()
    assert seen and seen[0] is loss  # the view target takes the fused form
    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(_bits(np.asarray(a)), _bits(np.asarray(b)))


# The plain cross-entropy's backward in one pass: its nll_loss node (`PlainNll`) hands the
# log_softmax node below it the unfilled one-hot gradient, and that node's gradient is made
# in one temporary (`nll_log_softmax_grad`) with the bits of the two backward kernels.
from dualgraph.eager import autograd as AG  # noqa: E402
from dualgraph.modes import bind  # noqa: E402
from dualgraph.ops import loss as NL  # noqa: E402
from dualgraph.ops import softmax as SM  # noqa: E402


def _ce_by_ops(x, t, reduction="mean"):
    return bind(NL.NLL_LOSS, bind(SM.LOG_SOFTMAX, x, axis=1), t, 1.0, ignore_index=-100,
                reduction=reduction)


def _one_pass_calls(monkeypatch) -> list:
    calls = []
    real = AG.nll_log_softmax_grad
    monkeypatch.setattr(AG, "nll_log_softmax_grad", lambda *a: calls.append(1) or real(*a))
    return calls


def _logits(shape, dtype, seed=7):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    x[0, :] = 0.0          # a tie for the maximum
    x[1, 0] = 1e4          # a row whose other classes' exp underflow to 0
    return x, rng.integers(0, shape[1], shape[0])


@pytest.mark.parametrize("shape", [(12, 7), (70, 10), (256, 10), (40, 96)])
@pytest.mark.parametrize("dtype,reduction", [(np.float32, "mean"), (np.float32, "sum"),
                                             (np.float64, "mean")])
def test_cross_entropy_backward_in_one_pass_gives_the_ops_bits(
        monkeypatch, shape, dtype, reduction):
    a, k = _logits(shape, dtype)
    calls = _one_pass_calls(monkeypatch)
    x, x0 = (dg.tensor(a, requires_grad=True) for _ in range(2))
    t = dg.tensor(k)
    loss = dg.nn.functional.cross_entropy(x, t, reduction=reduction)
    loss0 = _ce_by_ops(x0, t, reduction)
    assert type(loss.grad_fn) is AG.PlainNll and type(loss0.grad_fn) is not AG.PlainNll
    loss.backward()
    loss0.backward()
    assert calls == [1]
    np.testing.assert_array_equal(_bits(loss.numpy()), _bits(loss0.numpy()))
    np.testing.assert_array_equal(_bits(x.grad.numpy()), _bits(x0.grad.numpy()))


def _node_hook_run(use_ops: bool, how: str):
    a, k = _logits((70, 10), np.float32)
    x = dg.tensor(a, requires_grad=True)
    t = dg.tensor(k)
    loss = (_ce_by_ops if use_ops else dg.nn.functional.cross_entropy)(x, t)
    seen = []
    if how == "node_hook":
        lsm = loss.grad_fn.next_functions[0][0]
        lsm.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
        loss.backward()
        return seen[0], x.grad.numpy()
    if how == "leaf_hook":
        x.register_hook(lambda g: seen.append(g.numpy().copy()))
        loss.backward()
        return seen[0], x.grad.numpy()
    if how == "grad":
        (gx,) = dg.autograd.grad(loss, [x])
        return gx.numpy(), gx.numpy()
    loss.retain_grad()  # "retain": the loss's own gradient kept, then accumulation
    loss.backward(retain_graph=True)
    loss.backward()
    return loss.grad.numpy(), x.grad.numpy()


@pytest.mark.parametrize("how", ["node_hook", "leaf_hook", "grad", "retain"])
def test_cross_entropy_backward_hooks_capture_and_retain_as_the_ops(monkeypatch, how):
    calls = _one_pass_calls(monkeypatch)
    got = _node_hook_run(False, how)
    # A hook on the log_softmax node, or dg.grad's capture, needs the filled gradient.
    assert calls == ([] if how in ("node_hook", "grad") else [1] * (2 if how == "retain" else 1))
    want = _node_hook_run(True, how)
    for u, v in zip(got, want):
        np.testing.assert_array_equal(_bits(np.asarray(u)), _bits(np.asarray(v)))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_one_pass_gradient_against_finite_differences_float64(
        monkeypatch, reduction):
    # gradcheck asks for its gradients through dg.grad (a captured, filled gradient), so
    # the one pass is checked here against central differences of the loss itself.
    calls = _one_pass_calls(monkeypatch)
    a, k = _logits((8, 5), np.float64)
    a[1, 0] = 3.0  # a row whose classes all move the loss
    t = dg.tensor(k)
    x = dg.tensor(a, requires_grad=True)
    dg.nn.functional.cross_entropy(x, t, reduction=reduction).backward()
    assert calls == [1]
    eps = 1e-6
    fd = np.empty_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        fd[i] = (dg.nn.functional.cross_entropy(dg.tensor(hi), t, reduction=reduction).item()
                 - dg.nn.functional.cross_entropy(dg.tensor(lo), t, reduction=reduction)
                 .item()) / (2 * eps)
    dg.testing.assert_close(x.grad.numpy(), fd, rtol=1e-6, atol=1e-8)
    assert dg.testing.gradcheck(
        lambda x: dg.nn.functional.cross_entropy(x, t, reduction=reduction),
        dg.tensor(a, requires_grad=True))


@pytest.mark.parametrize("case", ["weight", "ignored", "smoothing", "probabilities"])
def test_cross_entropy_other_cases_take_the_general_path_with_torch_answers(monkeypatch, case):
    torch = pytest.importorskip("torch")
    calls = _one_pass_calls(monkeypatch)
    a, k = _logits((9, 4), np.float64)
    kw = {"weight": {"weight": np.linspace(0.5, 2.0, 4)}, "ignored": {"ignore_index": 2},
          "smoothing": {"label_smoothing": 0.2}, "probabilities": {}}[case]
    target = (np.random.default_rng(8).dirichlet(np.ones(4), 9) if case == "probabilities"
              else k)
    got_x = dg.tensor(a, requires_grad=True)
    want_x = torch.tensor(a, requires_grad=True)
    loss = dg.nn.functional.cross_entropy(
        got_x, dg.tensor(target), **{n: dg.tensor(v) if n == "weight" else v
                                     for n, v in kw.items()})
    want = torch.nn.functional.cross_entropy(
        want_x, torch.tensor(target), **{n: torch.tensor(v) if n == "weight" else v
                                         for n, v in kw.items()})
    assert type(loss.grad_fn) is not AG.PlainNll
    loss.backward()
    want.backward()
    assert calls == []
    dg.testing.assert_close(loss.item(), want.item(), rtol=1e-12, atol=1e-14)
    dg.testing.assert_close(got_x.grad.numpy(), want_x.grad.numpy(), rtol=1e-10, atol=1e-14)
