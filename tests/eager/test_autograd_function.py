"""``dg.autograd.Function``: custom ops with a user-written backward, eager and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from .._support.compiled import graph_ops


class Exp(dg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        r = x.exp()
        ctx.save_for_backward(r)
        return r

    @staticmethod
    def backward(ctx, g):
        (r,) = ctx.saved_tensors
        return g * r


class MulAdd(dg.autograd.Function):
    """x * y + c, with a non-tensor argument and needs_input_grad."""

    @staticmethod
    def forward(ctx, x, y, c):
        ctx.save_for_backward(x, y)
        ctx.c = c
        return x * y + c

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = g * y if ctx.needs_input_grad[0] else None
        gy = g * x if ctx.needs_input_grad[1] else None
        return gx, gy, None


class SinCos(dg.autograd.Function):
    """Two outputs, and an integer output marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        idx = x.argmax()
        ctx.mark_non_differentiable(idx)
        return x.sin(), x.cos() * 2, idx

    @staticmethod
    def backward(ctx, gs, gc, gi):
        (x,) = ctx.saved_tensors
        return gs * x.cos() - gc * 2 * x.sin()


class Cube(dg.autograd.Function):
    """setup_context style: forward takes no ctx."""

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g


class ClampGrad(dg.autograd.Function):
    """A backward that is not the forward's derivative (straight-through estimator)."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    @dg.autograd.once_differentiable
    def backward(ctx, g):
        return g.clamp(-0.5, 0.5)


def _x(*shape, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return dg.tensor(rng.uniform(-1.5, 1.5, shape).astype(dtype), requires_grad=True)


def _numeric_grad(f, x: np.ndarray, eps=1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("fn, ref", [
    (lambda x: Exp.apply(x), np.exp),
    (lambda x: Cube.apply(x), lambda x: x ** 3),
    (lambda x: MulAdd.apply(x, x * 2, 0.5), lambda x: 2 * x * x + 0.5),
    (lambda x: SinCos.apply(x)[0] + SinCos.apply(x)[1], lambda x: np.sin(x) + 2 * np.cos(x)),
], ids=["exp", "setup_context", "two_tensor_args", "two_outputs"])
def test_gradcheck_float64(fn, ref):
    x = _x(2, 3)
    y = fn(x)
    assert_close(y.numpy(), ref(x.numpy()))
    w = np.random.default_rng(1).uniform(0.5, 1.5, (2, 3))
    (y * dg.tensor(w)).sum().backward()
    num = _numeric_grad(lambda a: float((ref(a) * w).sum()), x.numpy())
    assert_close(x.grad.numpy(), num, rtol=1e-6, atol=1e-7)


def test_grad_fn_is_named_after_the_class():
    x = _x(3)
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward"
    assert repr(y).endswith("grad_fn=<ExpBackward>)")
    acc = [n for n, _ in y.grad_fn.next_functions if n is not None]
    assert [n.name() for n in acc] == ["AccumulateGrad"] and acc[0].variable is x


def test_needs_input_grad_and_none_gradients():
    x = _x(3)
    y = dg.tensor(np.ones(3))  # no grad
    seen = []

    class Spy(MulAdd):
        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return MulAdd.backward(ctx, g)

    Spy.apply(x, y, 1.0).sum().backward()
    assert seen == [(True, False, False)]
    assert_close(x.grad.numpy(), np.ones(3))


def test_no_input_requires_grad_gives_a_plain_result():
    x = dg.tensor([1.0, 2.0])
    y = Exp.apply(x)
    assert not y.requires_grad and y.grad_fn is None
    with dg.no_grad():
        assert Exp.apply(_x(2)).grad_fn is None


def test_non_differentiable_output():
    x = _x(4)
    s, c, idx = SinCos.apply(x)
    assert not idx.requires_grad and idx.dtype == np.int64
    assert s.requires_grad and c.requires_grad
    (s.sum() * 0 + c.sum()).backward()
    assert_close(x.grad.numpy(), -2 * np.sin(x.numpy()))


def test_straight_through_backward_and_double_backward():
    x = dg.tensor([0.2, 1.7, -2.2], requires_grad=True)
    y = ClampGrad.apply(x * 3)
    assert_close(y.numpy(), np.round(x.numpy() * 3))
    y.sum().backward()
    assert_close(x.grad.numpy(), np.full(3, 1.5, np.float32))
    # A differentiable backward (saved inputs keep their history) supports create_graph.
    x2 = dg.tensor([0.5, 1.0], dtype=dg.float64, requires_grad=True)
    (g,) = dg.grad(Cube.apply(x2).sum(), [x2], create_graph=True)
    (gg,) = dg.grad(g.sum(), [x2])
    assert_close(gg.numpy(), 6 * x2.numpy())


def test_wrong_number_of_gradients_raises():
    class Bad(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(_x(2), _x(2)).sum().backward()


def test_wrong_gradient_shape_raises():
    class Bad(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g[:1]

    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        Bad.apply(_x(3)).sum().backward()


def test_saved_tensor_changed_in_place_raises():
    class Keep(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return g * w, None

    w = dg.tensor([1.0, 2.0])
    y = Keep.apply(_x(2), w)
    w += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_instantiating_and_mark_dirty_raise():
    with pytest.raises(RuntimeError, match="apply"):
        Exp()

    class Dirty(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

    with pytest.raises(NotImplementedError, match="mark_dirty"):
        Dirty.apply(_x(2))


def test_materialize_grads_off_passes_none():
    got = []

    class Two(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, a, b):
            got.append(a)
            return b * 2

    x = _x(3)
    _, b = Two.apply(x)
    b.sum().backward()
    assert_close(x.grad.numpy(), np.full(3, 2.0))
    # Packed outputs: the unused one's gradient is a zero slice, not None (the pack
    # carries one gradient); PyTorch gives None here. The backward still gets zeros.
    assert got[0] is None or np.all(got[0].numpy() == 0)


# ------------------------------------------------------------------------- compiled


def _model_step(apply):
    w = dg.nn.Parameter(dg.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=dg.float64))

    def step(x):
        loss = apply(x @ w).sum()
        loss.backward()
        return loss

    return w, step


@pytest.mark.parametrize("apply", [
    lambda h: Exp.apply(h * 0.5),
    lambda h: MulAdd.apply(h, h.tanh(), 2.0),
    lambda h: SinCos.apply(h)[1] * SinCos.apply(h)[0],
    lambda h: Cube.apply(h),
], ids=["exp", "muladd", "multi_output", "setup_context"])
def test_compiled_step_equals_eager_and_traces_the_backward(apply):
    x = dg.tensor(np.random.default_rng(3).uniform(-1, 1, (2, 3)))
    w_e, step_e = _model_step(apply)
    w_c, step_c = _model_step(apply)
    compiled = dg.compile(step_c)
    for _ in range(3):
        le = step_e(x)
        lc = compiled(x)
        assert_close(lc.numpy(), le.numpy(), rtol=1e-10, atol=1e-12)
        assert_close(w_c.grad.numpy(), w_e.grad.numpy(), rtol=1e-10, atol=1e-12)
        w_e.grad = w_c.grad = None
    assert compiled.stats.traces == 1
    (entry,) = compiled.entries()
    assert "custom_function" in graph_ops(entry.optimized)


def test_compiled_function_runs_the_python_backward_only_while_tracing():
    calls = {"forward": 0, "backward": 0}

    class Counted(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            calls["forward"] += 1
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            calls["backward"] += 1
            (x,) = ctx.saved_tensors
            return 2 * x * g

    @dg.compile
    def f(x):
        return Counted.apply(x * 3)

    x = dg.tensor([1.0, -2.0], requires_grad=True)
    for k in range(3):
        y = f(x)
        y.backward(dg.tensor([1.0, 0.5]))
        assert_close(x.grad.numpy(), (k + 1) * 18 * x.numpy() * np.float32([1.0, 0.5]))
    # Traced once: the forward ran on tracers and the backward became the compiled
    # backward graph; later calls run kernels only.
    assert calls == {"forward": 1, "backward": 1}
    assert f.stats.traces == 1


def test_explain_shows_the_node_and_its_traced_backward():
    def f(x):
        return Exp.apply(x * 2)

    report = str(dg.explain(f, dg.tensor([1.0, 2.0], requires_grad=True)))
    assert "custom_function" in report
    assert "exp" in report.split("backward", 1)[1]
