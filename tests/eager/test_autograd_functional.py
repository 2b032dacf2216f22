"""``dg.autograd.functional``: jacobian, hessian, vjp, jvp, hvp, vhp against finite
differences (float64) and, when installed, PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.autograd import functional as AF
from dualgraph.testing import assert_close

X = np.array([0.3, -1.2, 2.0])
Y = np.array([0.5, 0.1, -0.7])
V = np.array([1.0, -2.0, 0.5])


def f2(x, y):
    return x ** 2 * y.sin()


def scalar(x):
    return (x ** 3).sum() * x.sum()


def scalar2(a, b):
    return (a * a * b.exp()).sum()


def _num_jac(f, xs, k, eps=1e-6) -> np.ndarray:
    """d f(xs) / d xs[k] by central differences, shape out.shape + xs[k].shape."""
    x = xs[k]
    cols = []
    for i in np.ndindex(x.shape):
        p = [a.copy() for a in xs]
        m = [a.copy() for a in xs]
        p[k][i] += eps
        m[k][i] -= eps
        cols.append((f(*p) - f(*m)) / (2 * eps))
    out = np.stack(cols, -1)
    return out.reshape(np.shape(cols[0]) + x.shape)


def _np(fn):
    return lambda *a: fn(*[dg.tensor(b) for b in a]).numpy()


def test_jacobian_one_input_one_output():
    J = AF.jacobian(lambda x: x.exp() * x[0], dg.tensor(X))
    assert J.shape == (3, 3) and not J.requires_grad
    assert_close(J.numpy(), _num_jac(_np(lambda x: x.exp() * x[0]), [X], 0), rtol=1e-6,
                 atol=1e-8)


def test_jacobian_tuple_inputs_and_outputs():
    J = AF.jacobian(lambda x, y: (f2(x, y), (x * y).sum()), (dg.tensor(X), dg.tensor(Y)))
    assert len(J) == 2 and len(J[0]) == 2
    for j in range(2):
        assert_close(J[0][j].numpy(), _num_jac(_np(f2), [X, Y], j), rtol=1e-6, atol=1e-8)
        assert_close(J[1][j].numpy(), (Y, X)[j])
    assert J[1][0].shape == (3,)


def test_jacobian_of_unused_input_is_zero_or_strict_error():
    J = AF.jacobian(lambda x, y: x * 2, (dg.tensor(X), dg.tensor(Y)))
    assert_close(J[1].numpy(), np.zeros((3, 3)))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        AF.jacobian(lambda x, y: x * 2, (dg.tensor(X), dg.tensor(Y)), strict=True)


def test_jacobian_create_graph_is_differentiable():
    x = dg.tensor(X, requires_grad=True)
    J = AF.jacobian(lambda a: a ** 3, x, create_graph=True, vectorize=True)
    assert J.requires_grad
    J.sum().backward()
    assert_close(x.grad.numpy(), 6 * X)


def test_hessian_one_and_two_inputs():
    H = AF.hessian(scalar, dg.tensor(X))
    grad = _np(lambda x: dg.grad(scalar(x.requires_grad_()), [x])[0])
    num = _num_jac(lambda x: grad(x), [X], 0)
    assert_close(H.numpy(), num, rtol=1e-5, atol=1e-7)
    H2 = AF.hessian(scalar2, (dg.tensor(X), dg.tensor(Y)))
    a, b = X, Y
    assert_close(H2[0][0].numpy(), np.diag(2 * np.exp(b)))
    assert_close(H2[0][1].numpy(), np.diag(2 * a * np.exp(b)))
    assert_close(H2[1][1].numpy(), np.diag(a * a * np.exp(b)))
    with pytest.raises(RuntimeError, match="single element"):
        AF.hessian(lambda x: x * 2, dg.tensor(X))


def test_vjp_jvp_hvp_vhp():
    J = _num_jac(_np(lambda x: x.exp() * x), [X], 0)
    out, g = AF.vjp(lambda x: x.exp() * x, dg.tensor(X), dg.tensor(V))
    assert_close(out.numpy(), np.exp(X) * X)
    assert_close(g.numpy(), V @ J, rtol=1e-6, atol=1e-8)
    out, t = AF.jvp(lambda x: x.exp() * x, dg.tensor(X), dg.tensor(V))
    assert_close(t.numpy(), J @ V, rtol=1e-6, atol=1e-8)
    H = AF.hessian(scalar, dg.tensor(X)).numpy()
    for fn in (AF.hvp, AF.vhp):
        out, hv = fn(scalar, dg.tensor(X), dg.tensor(V))
        assert_close(out.numpy(), np.float64((X ** 3).sum() * X.sum()))
        assert_close(hv.numpy(), H @ V)
    with pytest.raises(RuntimeError, match="single element"):
        AF.vjp(lambda x: x * 2, dg.tensor(X))
    with pytest.raises(RuntimeError, match="shape"):
        AF.jvp(lambda x: x * 2, dg.tensor(X), dg.tensor(V[:2]))
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        AF.jacobian(lambda x: x, [1.0, 2.0])


def test_matches_torch():
    torch = pytest.importorskip("torch")
    TF = torch.autograd.functional
    t = torch.tensor

    def both(fn, *args):
        ours = fn(AF, *[dg.tensor(a) for a in args])
        theirs = fn(TF, *[t(a) for a in args])
        return ours, theirs

    cases = [
        lambda M, x, y: M.jacobian(f2, (x, y)),
        lambda M, x, y: M.hessian(scalar2, (x, y)),
        lambda M, x, v: M.vjp(lambda a: a.sin() * a, x, v)[1],
        lambda M, x, v: M.jvp(lambda a: a.sin() * a, x, v)[1],
        lambda M, x, v: M.hvp(scalar, x, v)[1],
        lambda M, x, v: M.vhp(scalar, x, v)[1],
    ]
    for k, fn in enumerate(cases):
        ours, theirs = both(fn, X, Y if k < 2 else V)
        flat_o = np.concatenate([np.ravel(np.asarray(o.numpy())) for o in _leaves(ours)])
        flat_t = np.concatenate([np.ravel(o.numpy()) for o in _leaves(theirs)])
        assert_close(flat_o, flat_t, rtol=1e-10, atol=1e-12, msg=f"case {k}")


def _leaves(x):
    if isinstance(x, tuple):
        return [leaf for e in x for leaf in _leaves(e)]
    return [x]
