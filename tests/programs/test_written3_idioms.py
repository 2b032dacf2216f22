"""The library behaviours the third set of written programs needed, each on its own:
a boolean-mask write of a value with one row per masked element, and a mask made from
constants, inside a compiled function; ``autograd.grad``'s full signature; reading a traced
value into Python (``loss.item()`` returned by a step) or making an argument a leaf inside
a compiled function, which run that signature eagerly; ``Embedding(sparse=True)`` with
``SparseAdam``; and ``zero_grad()`` in a compiled L-BFGS closure, which L-BFGS's state
changes between calls do not retrace."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def _masked_write(x, m, v):
    y = x.clone()
    y[m] = v * 2.0
    return (y * y).sum(), y


def test_masked_write_of_a_value_per_masked_element_compiles() -> None:
    f = dg.compile(_masked_write)
    x = dg.zeros(5, 2)
    for mask in ([True, False, True, True, False], [False, True, True, False, True]):
        m = dg.tensor(mask)
        v = dg.arange(6.0).reshape(3, 2).requires_grad_()
        loss, y = _masked_write(x, m, v)
        loss.backward()
        want_grad = v.grad.clone()
        v.grad = None
        got_loss, got_y = f(x, m, v)
        got_loss.backward()
        dg.testing.assert_close(got_y, y)
        dg.testing.assert_close(v.grad, want_grad)
    assert f.stats.traces == 1  # another mask of the same shape: the same kernel


def test_masked_write_of_a_value_spanning_other_dims_still_refuses() -> None:
    def f(x, m, v):
        y = x.clone()
        y[:, m] = v
        return y

    with pytest.raises(dg.TraceError, match="boolean mask"):
        dg.trace(f, dg.zeros(2, 3), dg.tensor([True, False, True]), dg.ones(2, 2))


def _info_nce(sim):
    self_mask = dg.eye(sim.shape[0], dtype=dg.bool)
    pos_mask = self_mask.roll(shifts=sim.shape[0] // 2, dims=0)
    sim = sim.masked_fill(self_mask, -9e15)
    return (-sim[pos_mask] + dg.logsumexp(sim, dim=-1)).mean()


def test_a_mask_made_from_constants_indexes_inside_a_compiled_function() -> None:
    f = dg.compile(_info_nce)
    for seed in (0, 1):
        sim = dg.tensor(np.random.default_rng(seed).standard_normal((6, 6)).astype(np.float32))
        dg.testing.assert_close(f(sim), _info_nce(sim))
    assert f.stats.traces == 1


def test_a_mask_computed_from_an_input_still_refuses() -> None:
    with pytest.raises(dg.TraceError, match="depends on the data"):
        dg.trace(lambda x: x[x > 0], dg.ones(3))


def test_autograd_grad_takes_pytorchs_keywords() -> None:
    x = dg.ones(3, requires_grad=True)
    y = dg.ones(2, requires_grad=True)
    (gx,) = dg.autograd.grad((x * x).sum(), x, only_inputs=True)
    assert gx.tolist() == [2.0, 2.0, 2.0]
    gx, gy = dg.autograd.grad((x * x).sum(), [x, y], materialize_grads=True)
    assert gy.tolist() == [0.0, 0.0]
    assert dg.autograd.grad((x * x).sum(), [x, y], allow_unused=True)[1] is None
    with pytest.raises(ValueError, match="allow_unused"):
        dg.autograd.grad((x * x).sum(), [x, y], allow_unused=False, materialize_grads=True)
    f = dg.compile(lambda a, b: dg.autograd.grad((a * a).sum(), [a, b], materialize_grads=True))
    got = f(x, y)
    assert got[0].tolist() == [2.0, 2.0, 2.0] and got[1].tolist() == [0.0, 0.0]


def _step_returning_item(w, x):
    loss = ((w * x) ** 2).sum()
    loss.backward()
    return loss.item()


def test_item_returned_by_a_compiled_step_is_computed_by_the_call() -> None:
    f = dg.compile(_step_returning_item)
    w = dg.ones(3, requires_grad=True)
    first = f(w, dg.full((3,), 2.0))
    assert type(first) is float and first == 12.0
    assert f(w, dg.full((3,), 1.0)) == 3.0
    assert w.grad.tolist() == [10.0, 10.0, 10.0]  # both calls' gradients, as eagerly
    # The second call adds to the .grad the first one set: an entry of its own.
    assert f.stats.traces == 2 and f.stats.tier1_calls == 2
    # dg.trace still refuses, with the same error class as before
    with pytest.raises(dg.TraceError, match=r"\.item\(\)"):
        dg.trace(lambda x: x.sum().item(), dg.ones(2))


def _attack(data, eps):
    data.requires_grad = True
    loss = (data * data).sum()
    loss.backward()
    return data + eps * data.grad.sign()


def test_making_an_argument_a_leaf_runs_eagerly_as_pytorch_does() -> None:
    f = dg.compile(_attack)
    data = dg.tensor([1.0, -2.0])
    with pytest.warns(RuntimeWarning, match="on an argument"):
        out = f(data, 0.5)
    assert out.tolist() == [1.5, -2.5]
    assert data.requires_grad and data.grad.tolist() == [2.0, -4.0]


def test_requires_grad_setter_makes_a_computed_value_a_leaf() -> None:
    def g(x):
        h = x * 3.0
        h.requires_grad = True
        (gh,) = dg.autograd.grad((h * h).sum(), h)
        return gh

    f = dg.compile(g)
    dg.testing.assert_close(f(dg.ones(2)), dg.full((2,), 6.0))
    assert f.stats.traces == 1


def _sparse_adam_reference(p, grads, lr, betas=(0.9, 0.999), eps=1e-8):
    """torch.optim.SparseAdam's arithmetic on the touched rows, in NumPy float32."""
    p = p.copy()
    m, v = np.zeros_like(p), np.zeros_like(p)
    b1, b2 = betas
    for step, g in enumerate(grads, 1):
        rows = np.flatnonzero(np.any(g != 0, axis=1))
        gv = g[rows]
        mu = (gv - m[rows]) * np.float32(1 - b1)
        vu = (gv ** 2 - v[rows]) * np.float32(1 - b2)
        m[rows] += mu
        v[rows] += vu
        size = lr * np.sqrt(1 - b2 ** step) / (1 - b1 ** step)
        p[rows] += np.float32(-size) * (m[rows] / (np.sqrt(v[rows]) + np.float32(eps)))
    return p, m, v


@pytest.mark.parametrize("compiled", [False, True])
def test_sparse_adam_updates_only_the_rows_a_lookup_touched(compiled: bool) -> None:
    emb = dg.nn.Embedding(6, 3, sparse=True)
    start = emb.weight.detach().numpy().copy()
    opt = dg.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    batches = [[0, 2, 2], [2, 4, 4], [0, 5, 0]]

    def step(idx):
        opt.zero_grad()
        loss = (emb(idx) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    f = dg.compile(step) if compiled else step
    grads = []
    for b in batches:
        w = emb.weight.detach().numpy()
        g = np.zeros_like(w)
        np.add.at(g, b, 2 * w[b])
        grads.append(g)
        f(dg.tensor(b))
    want, m, v = _sparse_adam_reference(start, grads, 0.1)
    dg.testing.assert_close(emb.weight.detach(), want, rtol=1e-6, atol=1e-7)
    state = opt.state[emb.weight]
    dg.testing.assert_close(state["exp_avg"], m, rtol=1e-6, atol=1e-7)
    dg.testing.assert_close(state["exp_avg_sq"], v, rtol=1e-6, atol=1e-9)
    assert emb.weight.detach().numpy()[[1, 3]].tolist() == start[[1, 3]].tolist()
    if compiled:
        assert f.stats.traces == 1


def test_compiled_lbfgs_closure_calling_zero_grad_traces_once() -> None:
    x = dg.tensor([1.5, -0.5], requires_grad=True)
    opt = dg.optim.LBFGS([x], max_iter=5)

    def closure():
        opt.zero_grad()
        loss = ((x - dg.tensor([0.3, 0.7])) ** 2).sum() + (x ** 4).sum()
        loss.backward()
        return loss

    f = dg.compile(closure)
    for _ in range(3):
        opt.step(f)
    assert f.stats.calls > 3 and f.stats.traces == 1
    y = dg.tensor([1.5, -0.5], requires_grad=True)
    ref = dg.optim.LBFGS([y], max_iter=5)

    def eager_closure():
        ref.zero_grad()
        loss = ((y - dg.tensor([0.3, 0.7])) ** 2).sum() + (y ** 4).sum()
        loss.backward()
        return loss

    for _ in range(3):
        ref.step(eager_closure)
    dg.testing.assert_close(x.detach(), y.detach(), rtol=1e-6, atol=1e-7)
