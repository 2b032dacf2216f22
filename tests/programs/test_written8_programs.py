"""The library behaviour the eighth written set (``written8/``, run by
``test_written_programs.py``; its programs are listed in ``written8_programs.py``) found
missing, each on its own: the ``torch._foreach_*`` functions, in-place math methods of a
tensor that requires grad, ``arange(end=)``, plain attributes set before
``Module.__init__``, and optimizers written by users (callable settings, a wrapper that
skips ``Optimizer.__init__``)."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def _lists() -> tuple[list, list]:
    a = [dg.tensor([1.0, 2.0]), dg.tensor([[3.0, -4.0]])]
    b = [dg.tensor([0.5, 0.25]), dg.tensor([[2.0, 1.0]])]
    return a, b


def test_foreach_functions_apply_the_tensor_method_to_each_tensor() -> None:
    a, b = _lists()
    for got, want in zip(dg._foreach_add(a, b, alpha=2), [x + 2 * y for x, y in zip(a, b)]):
        dg.testing.assert_close(got, want)
    for got, want in zip(dg._foreach_mul(a, [2.0, 3.0]), [a[0] * 2, a[1] * 3]):
        dg.testing.assert_close(got, want)
    for got, want in zip(dg._foreach_div(a, dg.tensor(2.0)), [x / 2 for x in a]):
        dg.testing.assert_close(got, want)
    for got, want in zip(dg._foreach_sqrt(b), [x.sqrt() for x in b]):
        dg.testing.assert_close(got, want)
    for got, want in zip(dg._foreach_maximum(a, 1.5), [x.clamp_min(1.5) for x in a]):
        dg.testing.assert_close(got, want)
    norms = dg._foreach_norm(a)
    assert isinstance(norms, tuple)
    dg.testing.assert_close(dg.stack(list(norms)), dg.tensor([5.0 ** 0.5, 5.0]))
    # the in-place forms write into the tensors and hand back the list
    keep = [x for x in a]
    out = dg._foreach_mul_(a, 0.5)
    assert all(x is y for x, y in zip(out, keep))
    dg.testing.assert_close(a[1], dg.tensor([[1.5, -2.0]]))
    dg._foreach_lerp_(a, b, 0.5)
    dg.testing.assert_close(a[0], dg.tensor([0.5, 0.625]))
    dg._foreach_addcmul_(a, b, b, value=2.0)
    dg.testing.assert_close(a[0], dg.tensor([1.0, 0.75]))
    dg._foreach_addcdiv_(a, b, b, [1.0, -1.0])
    dg.testing.assert_close(a[1], dg.tensor([[8.75, 0.5]]))
    dg._foreach_maximum_(a, 1.9)
    dg.testing.assert_close(a[0], dg.tensor([2.0, 1.9]))
    dg._foreach_copy_(a, b)
    dg._foreach_sub_(a, b)
    dg._foreach_zero_(b)
    assert all(float(x.abs().sum()) == 0.0 for x in a + b)


def test_foreach_functions_refuse_lists_that_do_not_match() -> None:
    a, b = _lists()
    with pytest.raises(RuntimeError, match="same number of tensors, got 2 and 1"):
        dg._foreach_add_(a, b[:1])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        dg._foreach_mul_([], 2.0)
    with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
        dg._foreach_mul_(a, [2.0])
    with pytest.raises(TypeError, match="a number, a tensor, or a list"):
        dg._foreach_add_(a, "x")
    with pytest.raises(TypeError, match="list of tensors"):
        dg._foreach_sqrt(a[0])


def test_foreach_gradient() -> None:
    def f(x, y):
        s, t = dg._foreach_add(dg._foreach_mul([x, y], [y, x]), [x, y], alpha=0.5)
        return (s * t.sum()).sum() + dg.stack(list(dg._foreach_norm([x, y]))).sum()

    x = dg.tensor([0.3, -1.2, 2.0], dtype=dg.float64, requires_grad=True)
    y = dg.tensor([1.1, 0.7, -0.4], dtype=dg.float64, requires_grad=True)
    assert dg.autograd.gradcheck(f, (x, y))


def test_foreach_ema_in_a_compiled_step_equals_eager() -> None:
    def make():
        w = dg.nn.Parameter(dg.tensor([1.0, -2.0, 3.0]))
        ema = [w.detach().clone()]
        opt = dg.optim.SGD([w], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (w * x).pow(2).sum()
            loss.backward()
            opt.step()
            with dg.no_grad():
                dg._foreach_mul_(ema, 0.9)
                dg._foreach_add_(ema, [w], alpha=0.1)
            return loss

        return ema, step

    (ema_e, eager), (ema_c, step) = make(), make()
    f = dg.compile(step)
    for i in range(3):
        x = dg.tensor([0.5, 1.0, -1.0]) * (i + 1)
        dg.testing.assert_close(f(x), eager(x))
    dg.testing.assert_close(ema_c[0], ema_e[0])
    assert f.stats.traces == 1


_INPLACE = ["pow_", "abs_", "log_", "sin_", "rsqrt_", "reciprocal_", "square_", "clamp_min_",
            "lerp_"]


def _apply(h, name):
    if name == "pow_":
        return h.pow_(3)
    if name == "clamp_min_":
        return h.clamp_min_(0.9)
    if name == "lerp_":
        return h.lerp_(dg.full((2, 3), 3.0, dtype=dg.float64), 0.25)
    return getattr(h, name)()


@pytest.mark.parametrize("name", _INPLACE)
def test_inplace_math_of_a_non_leaf_has_the_out_of_place_gradient(name: str) -> None:
    # Barlow Twins' ``torch.diagonal(c).add_(-1).pow_(2)``: the op's backward reads the
    # value before the write.
    w = dg.tensor(np.linspace(0.5, 2.0, 6).reshape(2, 3), requires_grad=True)
    grads = []
    for inplace in (False, True):
        w.grad = None
        h = w * 1.5
        y = _apply(h, name) if inplace else _apply(h.clone(), name)
        assert (y is h) == inplace
        (y * dg.arange(6.0, dtype=dg.float64).reshape(2, 3)).sum().backward()
        grads.append(w.grad)
    dg.testing.assert_close(grads[1], grads[0])


def test_inplace_math_through_a_view_in_a_compiled_function_equals_eager() -> None:
    def f(w):
        c = w @ w.T
        c.div_(2.0)
        on_diag = dg.diagonal(c).add_(-1).pow_(2).sum()
        g = dg.autograd.grad(on_diag + c.abs_().sum(), w)[0]
        return on_diag, g

    w = dg.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3), requires_grad=True)
    fc = dg.compile(f)
    for got, want in zip(fc(w), f(w)):
        dg.testing.assert_close(got, want)
    assert fc.stats.traces == 1


def test_arange_with_only_end_as_keyword() -> None:
    assert dg.arange(end=4).tolist() == [0, 1, 2, 3]
    assert dg.arange(2, end=5).tolist() == [2, 3, 4]
    with pytest.raises(TypeError, match="'end'"):
        dg.arange()


def test_plain_attributes_may_be_set_before_module_init() -> None:
    class Sparsemax(dg.nn.Module):
        def __init__(self, dim=-1):
            self.dim = dim
            super().__init__()

    assert Sparsemax(1).dim == 1

    class Early(dg.nn.Module):
        def __init__(self):
            self.w = dg.nn.Parameter(dg.ones(2))
            super().__init__()

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_optimizer_subclass_settings_may_be_functions() -> None:
    class LARS(dg.optim.Optimizer):
        def __init__(self, params, lr, weight_decay_filter=None):
            super().__init__(params, dict(lr=lr, weight_decay_filter=weight_decay_filter))

    w = dg.nn.Parameter(dg.ones(2))
    opt = LARS([w], lr=0.1, weight_decay_filter=lambda p: p.ndim == 1)
    assert opt.param_groups[0]["weight_decay_filter"](w)
    # the numeric settings are still checked
    with pytest.raises(TypeError, match="lr must be a number"):
        opt.add_param_group({"params": [dg.nn.Parameter(dg.ones(1))], "lr": "fast"})


def test_wrapper_optimizer_without_optimizer_init() -> None:
    class Lookahead(dg.optim.Optimizer):
        def __init__(self, optimizer, k=2, alpha=0.5):
            self.optimizer, self.k, self.alpha = optimizer, k, alpha
            self.param_groups = self.optimizer.param_groups
            self.state = {}
            for group in self.param_groups:
                group["counter"] = 0

        def step(self, closure=None):
            loss = self.optimizer.step(closure)
            for group in self.param_groups:
                if group["counter"] == 0:
                    for p in group["params"]:
                        slow = self.state.setdefault(p, {}).setdefault("slow", p.detach().clone())
                        slow += (p.detach() - slow) * self.alpha
                        p.data.copy_(slow)
                group["counter"] = (group["counter"] + 1) % self.k
            return loss

    w = dg.nn.Parameter(dg.tensor([1.0, 2.0]))
    look = Lookahead(dg.optim.SGD([w], lr=0.5))
    assert look.param_groups[0] is look.optimizer.param_groups[0]
    for _ in range(3):
        look.zero_grad()
        (w * w).sum().backward()
        look.step()
    # first step: slow = fast = 0; the next plain SGD step halves again; the third resyncs
    dg.testing.assert_close(w, dg.tensor([0.0, 0.0]))
    assert look.optimizer.param_groups[0]["counter"] == 1


class _Shifted(dg.autograd.Function):
    """``exp(x - max(x))`` whose forward writes into its input, as TabNet's sparsemax
    does (``input -= max_val``)."""

    @staticmethod
    def forward(ctx, x):
        x -= x.max(dim=-1, keepdim=True)[0]
        out = x.exp()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out


def test_data_writes_and_a_function_writing_its_input_compiled_equal_eager() -> None:
    # TransE renormalises ``weight.data[:-1]`` before the forward reads ``weight``; the
    # compiled step must read the written rows (it read the old ones, silently).
    def make():
        emb = dg.nn.Embedding(4, 3)
        with dg.no_grad():
            emb.weight.copy_(dg.tensor(np.linspace(-1.0, 2.0, 12).reshape(4, 3)))
        opt = dg.optim.SGD(emb.parameters(), lr=0.1)

        def step(i, c):
            emb.weight.data[:-1, :].div_(emb.weight.data[:-1, :].norm(p=2, dim=1, keepdim=True))
            opt.zero_grad()
            loss = (_Shifted.apply(emb(i) * 2.0) * c).sum()
            loss.backward()
            opt.step()
            return loss

        return emb, step

    (emb_e, eager), (emb_c, step) = make(), make()
    f = dg.compile(step)
    i = dg.tensor([0, 3, 1])
    for k in range(3):
        c = dg.tensor(np.arange(9.0, dtype=np.float32).reshape(3, 3)) - k
        dg.testing.assert_close(f(i, c), eager(i, c))
    dg.testing.assert_close(emb_c.weight, emb_e.weight)
    assert f.stats.traces == 1


def test_compiled_module_unwraps_by_orig_mod() -> None:
    lin = dg.nn.Linear(2, 2)
    assert dg.compile(lin)._orig_mod is lin
