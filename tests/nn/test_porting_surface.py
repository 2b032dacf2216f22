"""PyTorch names that ported programs use: module traversal with shared modules and tied
weights, ``reset_parameters``, ``EmbeddingBag.from_pretrained``, bare ``@no_grad``, the
remaining ``Module`` methods and ``nn.init`` spellings. Expected values are PyTorch's
documented behaviour, worked out by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5, 3)
        self.head = nn.Linear(3, 5, bias=False)
        self.head.weight = self.emb.weight
        self.act = nn.ReLU()
        self.again = self.act  # one module under two names


def test_shared_modules_and_tied_weights_come_once_unless_asked():
    m = _Tied()
    assert [n for n, _ in m.named_modules()] == ["", "emb", "head", "act"]
    assert [n for n, _ in m.named_modules(remove_duplicate=False)] == [
        "", "emb", "head", "act", "again"]
    assert len(list(m.modules())) == 4
    assert [n for n, _ in m.named_parameters()] == ["emb.weight"]
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == [
        "emb.weight", "head.weight"]
    assert [n for n, _ in m.named_modules(prefix="model")][:2] == ["model", "model.emb"]
    # state_dict keeps both keys of a tied weight, as PyTorch does, and loads strictly.
    assert list(m.state_dict()) == ["emb.weight", "head.weight"]
    m.load_state_dict(m.state_dict())
    m.register_buffer("b", dg.zeros(1))
    m.act.b = m.b
    assert [n for n, _ in m.named_buffers()] == ["b"]
    assert [n for n, _ in m.named_buffers(remove_duplicate=False)] == ["b"]


@pytest.mark.parametrize("make, bound", [
    (lambda: nn.Linear(16, 3), 1 / 4),
    (lambda: nn.Conv2d(2, 3, 2), 1 / math.sqrt(8)),
    (lambda: nn.ConvTranspose2d(4, 2, 3), 1 / math.sqrt(18)),
    (lambda: nn.Bilinear(9, 2, 3), 1 / 3),
])
def test_reset_parameters_redraws_uniform_in_place(make, bound):
    dg.manual_seed(0)
    m = make()
    w, b = m.weight, m.bias
    before = w.detach().numpy().copy()
    with dg.no_grad():
        w.fill_(7.0)
        b.fill_(7.0)
    m.reset_parameters()
    assert m.weight is w and m.bias is b and not w.grad_fn
    for t in (w, b):
        a = t.detach().numpy()
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.3 * bound
    assert not np.array_equal(before, w.detach().numpy())


def test_reset_parameters_of_embeddings_norms_and_prelu():
    e = nn.Embedding(50, 4, padding_idx=1)
    bag = nn.EmbeddingBag(50, 4, padding_idx=2)
    ln, gn, rms, pr = nn.LayerNorm(3), nn.GroupNorm(1, 3), nn.RMSNorm(3), nn.PReLU(2, 0.1)
    with dg.no_grad():
        for p in (e.weight, bag.weight, ln.weight, ln.bias, gn.weight, gn.bias, rms.weight,
                  pr.weight):
            p.fill_(5.0)
    for m in (e, bag, ln, gn, rms, pr):
        m.reset_parameters()
    assert e.weight[1].abs().sum().item() == 0 and bag.weight[2].abs().sum().item() == 0
    assert 0.5 < e.weight.std().item() < 1.5
    dg.testing.assert_close(ln.weight, dg.ones(3))
    dg.testing.assert_close(ln.bias, dg.zeros(3))
    dg.testing.assert_close(gn.bias, dg.zeros(3))
    dg.testing.assert_close(rms.weight, dg.ones(3))
    dg.testing.assert_close(pr.weight, dg.full((2,), 0.1))


def test_embedding_bag_from_pretrained():
    w = dg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    bag = nn.EmbeddingBag.from_pretrained(w, mode="sum")
    assert not bag.weight.requires_grad and bag.mode == "sum"
    out = bag(dg.tensor([0, 2, 1]), dg.tensor([0, 2]))
    dg.testing.assert_close(out, dg.tensor([[6.0, 8.0], [3.0, 4.0]]))
    bag = nn.EmbeddingBag.from_pretrained(w, freeze=False)
    assert bag.weight.requires_grad
    dg.testing.assert_close(bag(dg.tensor([[0, 1]])), dg.tensor([[2.0, 3.0]]))
    with pytest.raises(AssertionError, match="2-dimensional"):
        nn.EmbeddingBag.from_pretrained(dg.ones(3))


def test_bare_no_grad_and_enable_grad_decorate():
    @dg.no_grad
    def f(x):
        return x * 2

    @dg.enable_grad
    def g(x):
        return x * 2

    x = dg.ones(2, requires_grad=True)
    assert not f(x).requires_grad and f.__name__ == "f"
    with dg.no_grad():
        assert g(x).requires_grad
    assert dg.is_grad_enabled()
    with dg.no_grad() as ctx:
        assert isinstance(ctx, dg.no_grad)


def test_module_type_set_submodule_to_empty_and_old_backward_hook():
    m = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    assert m.type(dg.float64) is m and m[0].weight.dtype == dg.float64
    m.set_submodule("1", nn.ReLU())
    assert isinstance(m[1], nn.ReLU)
    with pytest.raises(AttributeError):
        m.set_submodule("5", nn.ReLU(), strict=True)
    assert m.to_empty(device="cpu") is m
    seen = []
    h = m[0].register_backward_hook(lambda mod, gi, go: seen.append(len(go)))
    m(dg.ones(1, 2, dtype=dg.float64, requires_grad=True)).sum().backward()
    assert seen == [1]
    h.remove()


def test_init_sparse_and_the_deprecated_spellings():
    w = dg.empty(10, 4)
    nn.init.sparse_(w, sparsity=0.3, std=0.5)
    a = w.numpy()
    assert ((a == 0).sum(axis=0) == 3).all()  # ceil(0.3 * 10) zeros per column
    with pytest.raises(ValueError, match="2 dimensions"):
        nn.init.sparse_(dg.empty(3), 0.1)
    for old, args in [("uniform", ()), ("normal", ()), ("constant", (0.5,)),
                      ("xavier_uniform", ()), ("xavier_normal", ()), ("kaiming_uniform", ()),
                      ("kaiming_normal", ()), ("orthogonal", ()), ("eye", ()),
                      ("sparse", (0.5,))]:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            assert getattr(nn.init, old)(w, *args) is w
        assert any(issubclass(r.category, FutureWarning) for r in rec), old
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nn.init.constant(w, 0.5)
    dg.testing.assert_close(w, dg.full((10, 4), 0.5))


class _WithExtra(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 1)
        self.n = 3

    def get_extra_state(self):
        return {"n": self.n}

    def set_extra_state(self, state) -> None:
        self.n = state["n"]


def test_state_dict_order_prefix_and_extra_state():
    # The key lists PyTorch 2.13 gives for the same module.
    m = _WithExtra()
    assert list(m.state_dict()) == ["_extra_state", "a.weight", "a.bias", "b.weight", "b.bias"]
    assert list(m.state_dict(prefix="model."))[:2] == ["model._extra_state", "model.a.weight"]
    sd = m.state_dict()
    sd["_extra_state"] = {"n": 9}
    r = m.load_state_dict(sd)
    assert m.n == 9 and repr(r) == "<All keys matched successfully>"
    assert r.missing_keys == [] and r.unexpected_keys == []


def test_load_state_dict_reports_and_refuses_off_keys_without_changing_anything():
    m = _WithExtra()
    before = m.a.weight.detach().numpy().copy()
    sd = m.state_dict()
    del sd["b.bias"]
    sd["zzz"] = dg.ones(1)
    sd["a.weight"] = sd["a.weight"] * 0 + 7
    r = m.load_state_dict(sd, strict=False)
    assert r == (["b.bias"], ["zzz"])
    assert repr(r) == "_IncompatibleKeys(missing_keys=['b.bias'], unexpected_keys=['zzz'])"
    dg.testing.assert_close(m.a.weight, dg.full((2, 2), 7.0))
    with dg.no_grad():
        m.a.weight.copy_(dg.tensor(before))
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "b.bias"'):
        m.load_state_dict(sd)
    dg.testing.assert_close(m.a.weight, dg.tensor(before))


def test_state_dict_and_load_hooks():
    m = _WithExtra()
    log = []

    def rename(state_dict, prefix, *rest):
        if prefix + "old_weight" in state_dict:
            state_dict[prefix + "weight"] = state_dict.pop(prefix + "old_weight")

    m.a._register_load_state_dict_pre_hook(rename)
    sd = m.state_dict()
    sd["a.old_weight"] = sd.pop("a.weight") * 0 + 7
    m.load_state_dict(sd)
    assert m.a.weight.sum().item() == 28.0
    h = m.register_load_state_dict_post_hook(lambda mod, keys: keys.unexpected_keys.clear())
    sd = m.state_dict()
    sd["junk"] = dg.ones(1)
    m.load_state_dict(sd)  # the hook forgives the unexpected key
    h.remove()
    with pytest.raises(RuntimeError, match="junk"):
        m.load_state_dict(sd)
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix)))
    m.b.register_state_dict_post_hook(
        lambda mod, d, prefix, meta: log.append(("post", prefix, len(d))))
    m.state_dict()
    assert log == [("pre", ""), ("post", "b.", 5)]
    m.b._register_state_dict_hook(lambda mod, d, prefix, meta: {"only": 1})
    assert m.state_dict() == {"only": 1}


def test_load_state_dict_assign_takes_the_tensors():
    m = nn.Linear(2, 2)
    w = m.weight
    sd = {k: v.double() for k, v in m.state_dict().items()}
    m.load_state_dict(sd, assign=True)
    assert m.weight is w and m.weight.dtype == dg.float64
    assert m.weight.data_ptr() == sd["weight"].data_ptr()


def test_optimizer_step_hooks():
    from dualgraph.optim.optimizer import register_optimizer_step_pre_hook

    log = []
    w = nn.Parameter(dg.ones(2))
    opt = dg.optim.SGD([w], lr=0.1)
    h1 = opt.register_step_pre_hook(lambda o, a, k: log.append(("pre", len(a), a[0] is o)))
    h2 = opt.register_step_post_hook(lambda o, a, k: log.append("post"))
    g = register_optimizer_step_pre_hook(lambda o, a, k: log.append("global"))
    (w * w).sum().backward()
    opt.step()
    h1.remove()
    g.remove()
    opt.step()
    h2.remove()
    opt.step()
    assert log == ["global", ("pre", 1, True), "post", "post"]  # PyTorch's calls
    dg.testing.assert_close(w, dg.full((2,), 0.4), rtol=1e-6, atol=1e-6)
    opt.register_step_pre_hook(lambda o, a, k: None)

    @dg.compile
    def step():
        opt.step()

    with pytest.raises(dg.TraceError, match="step hooks"):
        step()


def test_module_compile_in_place():
    dg.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x = dg.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    eager = m(x)
    seen = []
    m.register_forward_hook(lambda mod, i, o: seen.append(o.shape))
    assert m.compile(tiered=False, mode="reduce-overhead") is None
    y = m(x)
    dg.testing.assert_close(y, eager, rtol=1e-6, atol=1e-6)
    assert y.grad_fn.name() == "CompiledFunctionBackward" and seen == [(2, 1)]
    y.sum().backward()
    dg.optim.SGD(m.parameters(), lr=0.5).step()  # seen by the next call, no retrace
    with dg.no_grad():
        want = m[2](m[1](m[0](x)))
    dg.testing.assert_close(m(x), want, rtol=1e-6, atol=1e-6)
    assert m.forward.stats.traces == 1
