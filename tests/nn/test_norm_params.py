"""Parametrizations (`nn.utils.parametrize`), weight and spectral normalisation, old style
and as parametrizations: equal to torch (goldens from record_norm_param_goldens.py),
gradients equal to finite differences, a compiled training step equal to eager with one
trace (the power-iteration buffers written back), state dicts that round-trip."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close, gradcheck

from . import norm_param_cases as cases

GOLD = np.load(Path(__file__).with_name("norm_param_goldens.npz"))
P = dg.nn.utils.parametrizations
parametrize = dg.nn.utils.parametrize


@pytest.fixture(scope="module")
def ours() -> dict:
    return {**cases.run(dg), **cases.run_orthogonal(dg)}


KEYS = [k for k in GOLD.files if k != "torch" and not k.startswith("emb_")]


@pytest.mark.parametrize("key", KEYS)
def test_matches_torch(ours: dict, key: str) -> None:
    want, got = GOLD[key], ours[key]
    if want.dtype.kind == "U":
        assert str(got) == str(want)
    else:
        assert got.shape == want.shape, key
        assert_close(got, want, rtol=1e-9, atol=1e-11, check_dtype=False, msg=key)
    assert sorted(ours) == sorted(KEYS)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_gradients_match_finite_differences(dim) -> None:
    def f(g, v, x):
        return P._WeightNorm(dim)(g, v) @ x

    v = dg.tensor(cases.W, requires_grad=True)
    g = P._WeightNorm(dim).right_inverse(v.detach())[0].detach() * 1.5
    g.requires_grad_()
    assert gradcheck(f, g, v, dg.tensor(np.ascontiguousarray(cases.X.T), requires_grad=True))


def test_spectral_norm_gradient_matches_finite_differences() -> None:
    lin = P.spectral_norm(dg.nn.Linear(4, 3).double()).eval()
    sn = lin.parametrizations.weight[0]
    assert gradcheck(lambda w: sn(w), dg.tensor(cases.W, requires_grad=True))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3)])
@pytest.mark.parametrize("mp", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_maps_are_orthogonal_with_finite_difference_gradients(mp, shape) -> None:
    rng = np.random.default_rng(5)
    orth = P._Orthogonal(dg.zeros(*shape, dtype=dg.float64), mp, use_trivialization=False)
    x = dg.tensor(rng.standard_normal(shape) * 0.5)
    if mp == "householder":
        # The diagonal holds the reflectors' signs, truncated to integers: +-1.5 keeps
        # finite differences away from the jumps.
        idx = np.arange(min(shape[-2:]))
        x.numpy()[..., idx, idx] = np.where(rng.random(len(idx)) < 0.5, -1.5, 1.5)
    q = orth(x)
    gram = q.mT @ q if shape[-2] >= shape[-1] else q @ q.mT
    assert_close(gram, dg.eye(min(shape[-2:]), dtype=dg.float64).expand(gram.shape),
                 rtol=0, atol=1e-12)
    assert gradcheck(lambda a: orth(a), x.requires_grad_())


def test_householder_product_matches_its_reflectors_with_gradients() -> None:
    rng = np.random.default_rng(6)
    a, tau = rng.standard_normal((2, 4, 3)), rng.uniform(0.5, 1.5, (2, 2))
    q = dg.linalg.householder_product(dg.tensor(a), dg.tensor(tau)).numpy()
    for b in range(2):
        want = np.eye(4)
        for i in range(2):
            v = np.tril(a[b], -1)[:, i] + np.eye(4, 3)[:, i]
            want = want @ (np.eye(4) - tau[b, i] * np.outer(v, v))
        assert_close(q[b], want[:, :3], rtol=1e-12, atol=1e-14)
    assert gradcheck(dg.linalg.householder_product, dg.tensor(a, requires_grad=True),
                     dg.tensor(tau, requires_grad=True))
    with pytest.raises(RuntimeError, match="input.shape\\[-2\\] must be greater"):
        dg.linalg.householder_product(dg.ones(2, 3), dg.ones(1))
    with pytest.raises(RuntimeError, match="must be greater than or equal to tau"):
        dg.linalg.householder_product(dg.ones(3, 2), dg.ones(3))


def test_orthogonal_registration_assignment_and_errors() -> None:
    m = P.orthogonal(dg.nn.Linear(4, 3))
    assert sorted(m.state_dict()) == ["bias", "parametrizations.weight.0.base",
                                      "parametrizations.weight.original"]
    w = m.weight.detach()
    assert_close(w @ w.mT, dg.eye(3), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        P.orthogonal(dg.nn.Linear(4, 3), "bias")
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        P.orthogonal(dg.nn.Linear(4, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="no parameter or buffer with name 'w'"):
        P.orthogonal(dg.nn.Linear(4, 3), "w")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        m.weight = dg.ones(3, 3)
    m2 = P.orthogonal(dg.nn.Linear(3, 3), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m2.weight = dg.eye(3)


class Symmetric(dg.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)

    def right_inverse(self, a):
        return a.triu()


def test_parametrize_api() -> None:
    m = dg.nn.Linear(3, 3)
    w0 = m.weight
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear"
    assert parametrize.type_before_parametrizations(m) is dg.nn.Linear
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert m.parametrizations.weight.original is w0  # the same parameter, now upper
    np.testing.assert_array_equal(m.weight.numpy(), m.weight.numpy().T)
    assert [k for k, _ in m.named_parameters()] == ["bias", "parametrizations.weight.original"]
    # Assigning goes through right_inverse.
    a = dg.tensor(np.arange(9.0, dtype=np.float32).reshape(3, 3))
    m.weight = a
    np.testing.assert_array_equal(m.parametrizations.weight.original.numpy(),
                                  np.triu(a.numpy()))
    # cached(): one computation for every read inside the block.
    with parametrize.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    c = copy.deepcopy(m)
    assert type(c) is type(m) and c.parametrizations.weight.original is not w0
    np.testing.assert_array_equal(c.weight.numpy(), m.weight.numpy())
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is dg.nn.Linear and "weight" in dict(m.named_parameters())
    np.testing.assert_array_equal(m.weight.numpy(), m.weight.numpy().T)


class Transposed(dg.nn.Module):
    def forward(self, x):
        return x.T


def test_parametrize_errors() -> None:
    m = dg.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer"):
        parametrize.register_parametrization(m, "nope", Symmetric())
    with pytest.raises(ValueError, match="may not change the shape"):
        parametrize.register_parametrization(m, "weight", Transposed())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(m, "weight")
    dg.nn.utils.weight_norm(m)
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        dg.nn.utils.weight_norm(m)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found"):
        dg.nn.utils.remove_spectral_norm(m)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        P.spectral_norm(dg.nn.Linear(3, 2), n_power_iterations=0)


def _model(seed: int = 0) -> dg.nn.Module:
    dg.manual_seed(seed)
    net = dg.nn.Sequential(dg.nn.Linear(4, 6), dg.nn.Tanh(), dg.nn.Linear(6, 5),
                           dg.nn.Tanh(), dg.nn.Linear(5, 3), dg.nn.Tanh(), dg.nn.Linear(3, 2))
    P.weight_norm(net[0])
    P.spectral_norm(net[2])
    dg.nn.utils.weight_norm(net[4], dim=None)
    dg.nn.utils.spectral_norm(net[6])
    return net


def _sgd_step(net: dg.nn.Module):
    """A training step of ``net`` (squared error, SGD with lr 0.1)."""
    opt = dg.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def test_compiled_training_step_equals_eager() -> None:
    rng = np.random.default_rng(1)
    data = [(dg.tensor(rng.standard_normal((8, 4)).astype(np.float32)),
             dg.tensor(rng.standard_normal((8, 2)).astype(np.float32))) for _ in range(3)]
    runs = []
    for compiled in (False, True):
        net = _model()
        step = _sgd_step(net)
        f = dg.compile(step) if compiled else step
        losses = [f(x, y).item() for x, y in data]
        # The old-style hooks leave module.weight as the last forward computed it.
        last = [net[4].weight.detach().clone(), net[6].weight.detach().clone()]
        net.eval()
        pred = net(data[0][0])  # eager, after the compiled calls: no stale traced weight
        runs.append((losses, net.state_dict(), pred, f, last))
    (le, se, pe, _, we), (lc, sc, pc, f, wc) = runs
    assert_close(wc, we, rtol=1e-5, atol=1e-6)
    assert_close(lc, le, rtol=1e-5, atol=0.0)
    assert list(sc) == list(se)
    for k in se:
        assert_close(sc[k], se[k], rtol=1e-5, atol=1e-6, msg=k)
    assert_close(pc, pe, rtol=1e-5, atol=1e-6)
    assert f.stats.traces == 1
    # The power iteration ran in every compiled call: the buffers moved from their start.
    assert not np.allclose(sc["2.parametrizations.weight.0._u"].numpy(),
                           _model().state_dict()["2.parametrizations.weight.0._u"].numpy())


def test_orthogonal_compiled_training_step_equals_eager() -> None:
    rng = np.random.default_rng(2)
    x = dg.tensor(rng.standard_normal((6, 3)))
    y = dg.tensor(rng.standard_normal((6, 2)))
    runs = []
    for compiled in (False, True):
        dg.manual_seed(0)
        net = dg.nn.Sequential(dg.nn.Linear(3, 3), dg.nn.Tanh(), dg.nn.Linear(3, 4),
                               dg.nn.Tanh(), dg.nn.Linear(4, 2)).double()
        P.orthogonal(net[0])  # matrix_exp
        P.orthogonal(net[2], orthogonal_map="householder", use_trivialization=False)
        P.orthogonal(net[4], orthogonal_map="cayley", use_trivialization=False)
        step = _sgd_step(net)
        f = dg.compile(step) if compiled else step
        losses = [f(x, y).item() for _ in range(3)]
        runs.append((losses, net.state_dict(), f))
    (le, se, _), (lc, sc, f) = runs
    assert_close(lc, le, rtol=1e-10, atol=0.0)
    for k in se:
        assert_close(sc[k], se[k], rtol=1e-10, atol=1e-12, msg=k)
    assert f.stats.traces == 1


def test_state_dict_round_trip() -> None:
    a, b = _model(0), _model(1)
    b.load_state_dict(a.state_dict())
    x = dg.randn(3, 4)
    a.eval()
    b.eval()
    assert_close(b(x), a(x))
    with pytest.raises(RuntimeError, match="Missing key"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if "original0" not in k})


def test_cached_cannot_be_traced() -> None:
    m = P.weight_norm(dg.nn.Linear(2, 2))
    f = dg.compile(lambda x: m(x))
    with parametrize.cached(), pytest.raises(RuntimeError, match="Cannot trace a model while "
                                                                  "caching"):
        f(dg.ones(1, 2))
