"""Saved-tensor hooks (`dg.autograd.graph.saved_tensors_hooks`) and tensor storage.

The expected calls and gradients are worked out by hand: PyTorch calls ``pack`` once per
tensor an op saves, when the op is recorded, and ``unpack`` each time backward reads it.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.autograd.graph import disable_saved_tensors_hooks, saved_tensors_hooks


def _x() -> dg.Tensor:
    return dg.tensor([0.5, -1.0, 2.0], dtype=dg.float64, requires_grad=True)


def test_pack_runs_per_saved_tensor_and_unpack_per_backward_read():
    calls = []

    def pack(t):
        calls.append(("pack", tuple(t.shape)))
        return t.detach().numpy().copy()  # any object: here, a NumPy copy

    def unpack(a):
        calls.append(("unpack", a.shape))
        return dg.tensor(a)

    x, w = _x(), dg.tensor([[1.0, 2.0, 3.0]], dtype=dg.float64, requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = (x * w).sum()  # mul saves both operands; sum saves nothing
    assert calls == [("pack", (3,)), ("pack", (1, 3))]
    y.backward(retain_graph=True)
    assert calls[2:] == [("unpack", (3,)), ("unpack", (1, 3))]
    y.backward()  # a second backward reads the saved values again
    assert len(calls) == 6
    dg.testing.assert_close(x.grad, 2 * np.array([1.0, 2.0, 3.0]))
    dg.testing.assert_close(w.grad, 2 * np.array([[0.5, -1.0, 2.0]]))


def test_backward_reads_what_unpack_returns():
    # Doubling in unpack doubles the saved operand, so x's gradient (w) doubles.
    x, w = _x(), dg.tensor([1.0, 2.0, 3.0], dtype=dg.float64)
    with saved_tensors_hooks(lambda t: t, lambda t: t * 2):
        y = (x * w).sum()
    y.backward()
    dg.testing.assert_close(x.grad, [2.0, 4.0, 6.0])


def test_hooked_gradients_equal_plain_ones_for_a_layer_stack():
    def run(hooks: bool):
        dg.manual_seed(0)
        lin = dg.nn.Linear(3, 4).double()
        x = dg.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
        packs = []

        def f():
            h = lin(x).tanh()
            return (h.exp() * h).sum() + dg.nn.functional.softmax(h, -1).max()

        if hooks:
            with saved_tensors_hooks(lambda t: packs.append(1) or t.numpy().copy(),
                                     lambda a: dg.tensor(a)):
                y = f()
        else:
            y = f()
        y.backward()
        return x.grad, lin.weight.grad, lin.bias.grad, len(packs)

    plain, hooked = run(False), run(True)
    for a, b in zip(plain[:3], hooked[:3]):
        dg.testing.assert_close(b, a, rtol=0, atol=0)
    assert hooked[3] >= 4  # the linear layer's input and weight, tanh's and exp's outputs


def test_custom_function_saved_tensors_pass_through_the_hooks():
    class Cube(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    seen = []
    x = _x()
    with saved_tensors_hooks(lambda t: seen.append(t.shape) or t, lambda t: t):
        Cube.apply(x).sum().backward()
    assert (3,) in seen
    dg.testing.assert_close(x.grad, 3 * np.array([0.25, 1.0, 4.0]))


def test_innermost_hooks_apply_and_ops_inside_pack_record_without_hooks():
    outer, inner = [], []
    x = _x()

    def pack_inner(t):
        inner.append(1)
        return t * 1  # an op inside pack: recorded without hooks

    with saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with saved_tensors_hooks(pack_inner, lambda t: t):
            y = (x * x).sum()
    y.backward()
    assert outer == [] and inner == [1, 1]
    dg.testing.assert_close(x.grad, 2 * x.detach().numpy())


def test_unpack_must_return_a_tensor_and_disable_refuses_hooks():
    x = _x()
    with saved_tensors_hooks(lambda t: t, lambda t: t.numpy()):
        y = (x * x).sum()
    with pytest.raises(TypeError, match="unpack hook must return a Tensor"):
        y.backward()
    with disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        pass  # allowed again after the block


def test_compiled_call_inside_the_block_runs_eagerly_and_entering_it_in_a_trace_raises():
    f = dg.compile(lambda x: (x * x).sum())
    packs = []
    x = _x()
    with saved_tensors_hooks(lambda t: packs.append(1) or t, lambda t: t):
        f(x).backward()
    assert packs == [1, 1] and f.stats.traces == 0
    dg.testing.assert_close(x.grad, 2 * x.detach().numpy())

    @dg.compile
    def g(x):
        with saved_tensors_hooks(lambda t: t, lambda t: t):
            return x * 2

    with pytest.raises(dg.TraceError, match="saved_tensors_hooks inside a compiled function"):
        g(x)


def test_views_share_storage_and_report_offsets():
    a = dg.arange(12.0).reshape(3, 4)
    views = [a[1:, 1:], a.t(), a.view(-1), a[2], a.detach(), a.transpose(0, 1)[1]]
    ptr = a.untyped_storage().data_ptr()
    assert all(v.untyped_storage().data_ptr() == ptr for v in views)
    assert [v.storage_offset() for v in views] == [5, 0, 0, 8, 0, 1]
    assert a.clone().untyped_storage().data_ptr() != ptr
    s = a[1:].storage()
    assert len(s) == 12 and s.size() == 12 and s.element_size() == 4 and s[5] == 5.0
    assert s.tolist() == list(map(float, range(12)))
    u = a.untyped_storage()
    assert u.nbytes() == 48 and len(u) == 48 and u.element_size() == 1
    assert u[:4] == list(np.float32(0).tobytes()) and str(u.device) == "cpu"
    assert s.untyped() == u and a[1:].untyped_storage() == u


def test_tied_parameters_share_storage():
    emb = dg.nn.Embedding(5, 3)
    head = dg.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    assert (head.weight.untyped_storage().data_ptr()
            == emb.weight.untyped_storage().data_ptr())
    other = dg.nn.Linear(3, 5, bias=False)
    assert (other.weight.untyped_storage().data_ptr()
            != emb.weight.untyped_storage().data_ptr())


def test_an_inplace_op_packs_the_value_it_overwrote():
    # a.mul_(y) saves a and then writes into it: y's gradient is a's old value [1, 2].
    packed = []
    w = dg.tensor([1.0, 2.0], requires_grad=True)
    y = dg.tensor([3.0, 4.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: packed.append(t.tolist()) or t, lambda t: t):
        a = w * 1
        a.mul_(y)
        (a * 1).sum().backward()
    dg.testing.assert_close(y.grad, dg.tensor([1.0, 2.0]))
    dg.testing.assert_close(w.grad, dg.tensor([3.0, 4.0]))
    assert packed[-1] == [1.0, 2.0]  # the copy of the old value, packed last
