"""`dg.func`: functional_call, grad/grad_and_value, vjp, jvp, jacrev/jacfwd/hessian and
vmap, and `dg.autograd.forward_ad`'s dual tensors, eagerly (against autograd, closed forms
and finite differences) and inside `dg.compile`."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.autograd import forward_ad as fwad
from dualgraph.func import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    stack_module_state,
    vjp,
    vmap,
)
from dualgraph.testing import assert_close

R = np.random.default_rng(0)


def _mlp() -> dg.nn.Module:
    dg.manual_seed(0)
    return dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 2))


def test_functional_call_uses_the_given_tensors_and_restores_the_module() -> None:
    m = _mlp()
    before = {k: v for k, v in m.named_parameters()}
    new = {k: v.detach() * 2 for k, v in m.named_parameters()}
    x = dg.tensor(R.standard_normal((5, 3)).astype(np.float32))
    got = functional_call(m, new, (x,))
    want = F.linear(F.linear(x, new["0.weight"], new["0.bias"]).tanh(), new["2.weight"],
                    new["2.bias"])
    assert_close(got, want)
    assert all(p is before[k] for k, p in m.named_parameters())
    # a partial dict leaves the other parameters as they are; a tuple of dicts merges
    part = functional_call(m, ({"2.bias": new["2.bias"]}, {}), x)
    assert_close(part, m(x) - m[2].bias + new["2.bias"])
    with pytest.raises(RuntimeError, match="missing keys"):
        functional_call(m, {"2.bias": new["2.bias"]}, (x,), strict=True)
    with pytest.raises(ValueError, match="multiple dictionaries"):
        functional_call(m, ({"2.bias": x}, {"2.bias": x}), (x,))


def test_functional_call_ties_shared_weights() -> None:
    emb = dg.nn.Embedding(5, 3)
    head = dg.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    m = dg.nn.Sequential(emb, head)
    w = dg.ones(5, 3)
    out = functional_call(m, {"0.weight": w}, (dg.tensor([1, 2]),))
    assert_close(out, dg.full((2, 5), 3.0))
    untied = functional_call(m, {"0.weight": w}, (dg.tensor([1, 2]),), tie_weights=False)
    assert_close(untied, dg.ones(2, 3) @ emb.weight.detach().T)


def test_grad_and_value_match_autograd() -> None:
    x = dg.tensor(R.standard_normal(4), dtype=dg.float64)
    y = dg.tensor(R.standard_normal(4), dtype=dg.float64)

    def f(a, b):
        return (a.sin() * b).sum()

    gx = grad(f)(x, y)
    assert not gx.requires_grad
    assert_close(gx, x.cos() * y)
    (ga, gb), value = grad_and_value(f, argnums=(0, 1))(x, y)
    assert_close(ga, x.cos() * y)
    assert_close(gb, x.sin())
    assert_close(value, f(x, y))
    g, aux = grad(lambda a: ((a ** 2).sum(), a.max()), has_aux=True)(x)
    assert_close(g, 2 * x)
    assert_close(aux, x.max())
    # dict arguments come back as dicts; second derivatives compose
    gd = grad(lambda p: (p["w"] ** 3).sum())({"w": x})
    assert_close(gd["w"], 3 * x ** 2)
    assert_close(grad(grad(lambda a: (a ** 3).sum()))(x[:1].sum()), 6 * x[:1].sum())
    with pytest.raises(RuntimeError, match="scalar"):
        grad(lambda a: a * 2)(x)


def test_grad_keeps_history_for_an_outer_backward() -> None:
    w = dg.tensor([1.5, -0.5], dtype=dg.float64, requires_grad=True)
    g = grad(lambda a: (a ** 3).sum())(w)
    assert g.requires_grad
    g.sum().backward()
    assert_close(w.grad, 6 * w.detach())


def test_vjp_and_jacobians() -> None:
    x = dg.tensor(R.standard_normal(3), dtype=dg.float64)
    out, fn = vjp(lambda a: a.exp() * 2, x)
    assert_close(out, x.exp() * 2)
    (v,) = fn(dg.ones(3, dtype=dg.float64))
    assert_close(v, x.exp() * 2)
    assert_close(jacrev(lambda a: a.sin())(x), dg.diag(x.cos()))
    assert_close(jacfwd(lambda a: a.sin())(x), dg.diag(x.cos()))
    assert_close(hessian(lambda a: (a ** 3).sum())(x), dg.diag(6 * x))
    j0, j1 = jacrev(lambda a, b: a * b, argnums=(0, 1))(x, x + 1)
    assert_close(j0, dg.diag(x + 1))
    assert_close(j1, dg.diag(x))


def _directional(f, xs: tuple, ts: tuple, eps: float = 1e-6):
    """The central finite difference of ``f`` along the tangents (float64)."""
    hi = f(*[x + eps * t for x, t in zip(xs, ts)])
    lo = f(*[x - eps * t for x, t in zip(xs, ts)])
    return (hi - lo) / (2 * eps)


def _mixed(a, b):
    return (a.tanh() * b[0] + b[1].exp()).sum(0) * a.sin()


def test_jvp_equals_finite_differences_over_trees() -> None:
    a = dg.tensor(R.standard_normal(3), dtype=dg.float64)
    b = (dg.tensor(R.standard_normal(3), dtype=dg.float64),
         dg.tensor(R.standard_normal((2, 3)), dtype=dg.float64))
    ta = dg.tensor(R.standard_normal(3), dtype=dg.float64)
    tb = (dg.tensor(R.standard_normal(3), dtype=dg.float64),
          dg.tensor(R.standard_normal((2, 3)), dtype=dg.float64))
    out, t = jvp(_mixed, (a, b), (ta, tb))
    assert_close(out, _mixed(a, b))
    fd = _directional(lambda x, y0, y1: _mixed(x, (y0, y1)), (a, *b), (ta, *tb))
    assert_close(t, fd, rtol=1e-7, atol=1e-8)
    assert not t.requires_grad and not out.requires_grad
    # tree outputs, aux, and an output that does not depend on the primals (zeros)
    (o1, o2), (t1, t2), aux = jvp(lambda x: ((x * x, {"c": dg.ones(2)}), "aux"), (a,),
                                  (ta,), has_aux=True)
    assert aux == "aux"
    assert_close(t1, 2 * a * ta)
    assert_close(t2["c"], dg.zeros(2))
    with pytest.raises(RuntimeError, match="does not depend"):
        jvp(lambda x: dg.ones(2), (a,), (ta,), strict=True)
    with pytest.raises(RuntimeError, match="same shape"):
        jvp(lambda x: x, (a,), (dg.ones(2),))
    with pytest.raises(RuntimeError, match="tuples"):
        jvp(lambda x: x, a, ta)


def test_jvp_keeps_history_for_an_outer_gradient() -> None:
    # d/dx of (J(x) t) . 1 for f = x^3 is 6 x t
    x = dg.tensor(R.standard_normal(3), dtype=dg.float64, requires_grad=True)
    t = dg.tensor(R.standard_normal(3), dtype=dg.float64)
    _, jt = jvp(lambda a: a ** 3, (x,), (t,))
    (g,) = dg.autograd.grad(jt.sum(), [x])
    assert_close(g, 6 * x.detach() * t)


def test_forward_ad_dual_tensors() -> None:
    x = dg.tensor(R.standard_normal((2, 3)), dtype=dg.float64)
    t = dg.tensor(R.standard_normal((2, 3)), dtype=dg.float64)
    w = dg.tensor(R.standard_normal((3, 2)), dtype=dg.float64, requires_grad=True)
    with fwad.dual_level():
        d = fwad.make_dual(x, t)
        assert fwad.unpack_dual(d).tangent is t
        y = (d @ w).tanh() * d.sum(1, keepdim=True)
        primal, tangent = fwad.unpack_dual(y)
        assert fwad.unpack_dual(w).tangent is None  # not derived from a dual input
        assert fwad.unpack_dual(dg.ones(2)).tangent is None
        with pytest.raises(RuntimeError, match="different size"):
            fwad.make_dual(x, dg.ones(3, dtype=dg.float64))
        with pytest.raises(RuntimeError, match="Nested"):
            fwad.enter_dual_level()
    assert_close(primal, (x @ w).tanh() * x.sum(1, keepdim=True))
    fd = _directional(lambda a: (a @ w.detach()).tanh() * a.sum(1, keepdim=True), (x,), (t,))
    assert_close(tangent, fd, rtol=1e-7, atol=1e-8)
    # the reverse-mode history of w stays usable
    primal.sum().backward()
    assert w.grad is not None
    assert fwad.unpack_dual(y).tangent is None  # the level is gone
    with pytest.raises(RuntimeError, match="no dual level"):
        fwad.make_dual(x, t)


def test_jvp_and_dual_tensors_compile_to_eager_values() -> None:
    def f(x, t):
        _, jt = jvp(lambda a: (a.tanh() * a).sum(1), (x,), (t,))
        with fwad.dual_level():
            d = fwad.make_dual(x, t)
            dt = fwad.unpack_dual(d.exp() * d).tangent
        return jt, dt

    x = dg.tensor(R.standard_normal((3, 4)), dtype=dg.float64)
    t = dg.tensor(R.standard_normal((3, 4)), dtype=dg.float64)
    c = dg.compile(f)
    for _ in range(2):
        for got, want in zip(c(x, t), f(x, t)):
            assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert c.stats.traces == 1
    assert_close(f(x, t)[1], (x.exp() * (x + 1)) * t)


def test_vmap_maps_and_stacks() -> None:
    x = dg.tensor(R.standard_normal((5, 3)).astype(np.float32))
    w = dg.tensor(R.standard_normal((3,)).astype(np.float32))
    assert_close(vmap(lambda a, b: (a * b).sum())(x, dg.stack([w] * 5)), x @ w)
    assert_close(vmap(lambda a, b: (a * b).sum(), in_dims=(0, None))(x, w), x @ w)
    assert_close(vmap(lambda a: a * 2, in_dims=1, out_dims=1)(x), x * 2)
    assert_close(dg.vmap(dg.outer)(x, x), dg.einsum("bi,bj->bij", x, x))
    out = vmap(lambda d: {"s": d["a"].sum(), "t": (d["a"].max(), d["a"].min())})({"a": x})
    assert_close(out["s"], x.sum(1))
    assert_close(out["t"][1], x.amin(1))
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap(lambda a, b: a + b)(x, dg.ones(4, 3))
    with pytest.raises(ValueError, match="in_dim=2"):
        vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda a: a, randomness="sometimes")


def test_per_sample_gradients_equal_each_samples_gradient() -> None:
    m = _mlp()
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = dg.tensor(R.standard_normal((4, 3)).astype(np.float32))
    y = dg.tensor(R.integers(0, 2, 4))

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(m, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    per = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(4):
        m.zero_grad()
        F.cross_entropy(m(x[i:i + 1]), y[i:i + 1]).backward()
        for k, p in m.named_parameters():
            assert_close(per[k][i], p.grad, atol=1e-6, rtol=1e-5)


def test_stack_module_state_runs_an_ensemble() -> None:
    models = [_mlp() for _ in range(3)]
    for k, mdl in enumerate(models):
        with dg.no_grad():
            mdl[2].bias.add_(k)
    params, buffers = stack_module_state(models)
    assert params["2.bias"].shape == (3, 2)
    x = dg.ones(2, 3)
    out = vmap(lambda p, b: functional_call(models[0], (p, b), (x,)))(params, buffers)
    assert_close(out, dg.stack([mdl(x) for mdl in models]).detach())


def test_compiled_step_with_functional_call_traces_once() -> None:
    # vmap loops over the batch in the trace, so the batch is kept at two
    dg.manual_seed(0)
    m = dg.nn.Linear(3, 2)
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = dg.tensor(R.standard_normal((2, 3)).astype(np.float32))
    y = dg.tensor(R.standard_normal((2, 2)).astype(np.float32))

    def step(p, xb, yb):
        per = vmap(grad(lambda q, a, b: ((functional_call(m, q, a) - b) ** 2).sum()),
                   in_dims=(None, 0, 0))(p, xb, yb)
        return {k: v - 0.1 * per[k].mean(0) for k, v in p.items()}

    f = dg.compile(step)
    pe, pc = params, params
    for _ in range(3):
        pe, pc = step(pe, x, y), f(pc, x, y)
        assert sorted(pc) == sorted(pe)
        for k in pe:
            assert_close(pc[k], pe[k], rtol=1e-5, atol=1e-6)
    assert f.stats.traces == 1
    assert m.weight is not pc["weight"] and m.weight is dict(m.named_parameters())["weight"]
