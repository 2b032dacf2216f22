"""Complex tensors, eagerly: values against NumPy's complex arithmetic, float64
finite-difference gradients of real losses through complex intermediates, views sharing
memory, promotion and the errors. PyTorch's own results are in tests/goldens (source
``complex``)."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.autograd import gradcheck

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
B = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))


def _c(a: np.ndarray) -> dg.ComplexTensor:
    return dg.tensor(a.astype(np.complex128))


# (name, dualgraph function of two complex tensors, NumPy function of two complex arrays)
VALUES = [
    ("add", lambda z, w: z + w, lambda a, b: a + b),
    ("sub_real", lambda z, w: z - w.real, lambda a, b: a - b.real),
    ("mul", lambda z, w: z * w, lambda a, b: a * b),
    ("div", lambda z, w: z / w, lambda a, b: a / b),
    ("rdiv_scalar", lambda z, w: (2 - 1j) / z, lambda a, b: (2 - 1j) / a),
    ("scalar_mul", lambda z, w: 1.5j * z * 2, lambda a, b: 1.5j * a * 2),
    ("exp", lambda z, w: dg.exp(z), np.exp),
    ("log", lambda z, w: z.log(), lambda a, b: np.log(a)),
    ("sin", lambda z, w: dg.sin(z), np.sin),
    ("cos", lambda z, w: z.cos(), lambda a, b: np.cos(a)),
    ("tanh", lambda z, w: dg.tanh(z * 3.0), lambda a, b: np.tanh(a * 3.0)),
    ("sigmoid", lambda z, w: z.sigmoid(), lambda a, b: 1.0 / (1.0 + np.exp(-a))),
    ("sqrt", lambda z, w: z.sqrt(), lambda a, b: np.sqrt(a)),
    ("abs", lambda z, w: dg.abs(z), lambda a, b: np.abs(a)),
    ("angle", lambda z, w: dg.angle(w), lambda a, b: np.angle(b)),
    ("conj", lambda z, w: dg.conj(z), lambda a, b: np.conj(a)),
    ("pow3", lambda z, w: z ** 3, lambda a, b: a ** 3),
    ("pow_half", lambda z, w: z ** 0.5, lambda a, b: a ** 0.5),
    ("sum", lambda z, w: dg.sum(z, 1), lambda a, b: a.sum(1)),
    ("mean", lambda z, w: z.mean(), lambda a, b: a.mean()),
    ("matmul", lambda z, w: z @ w.T, lambda a, b: a @ b.T),
    ("einsum", lambda z, w: dg.einsum("ij,kj->ik", z, w), lambda a, b: a @ b.T),
    ("polar", lambda z, w: dg.polar(z.abs(), w.angle()), lambda a, b: np.abs(a) * np.exp(
        1j * np.angle(b))),
    ("complex", lambda z, w: dg.complex(z.real, w.imag), lambda a, b: a.real + 1j * b.imag),
    ("index", lambda z, w: z[1:, ::2].t().reshape(-1), lambda a, b: a[1:, ::2].T.reshape(-1)),
    ("cat", lambda z, w: dg.cat([z, w], 1), lambda a, b: np.concatenate([a, b], 1)),
]


@pytest.mark.parametrize(("name", "fn", "ref"), VALUES, ids=[v[0] for v in VALUES])
def test_values_match_numpy(name, fn, ref):
    out = fn(_c(A), _c(B))
    dg.testing.assert_close(np.asarray(out.numpy()), ref(A, B), rtol=1e-12, atol=1e-12,
                            check_dtype=False)


# Real losses of complex intermediates, each a function of real float64 tensors.
LOSSES = [
    ("arith", lambda x, y: ((dg.complex(x, y) * dg.complex(y, x) + 2j) / dg.complex(
        y + 3, x)).abs().sum()),
    ("exp_log", lambda x, y: dg.view_as_real(dg.exp(dg.complex(x, y)).log() * 1j).sum()),
    ("matmul", lambda x, y: dg.view_as_real(dg.complex(x, y) @ dg.complex(y, x).T).pow(2).sum()),
    ("einsum3", lambda x, y: dg.einsum("ij,kj,kl->il", dg.complex(x, y), dg.complex(y, x),
                                       dg.complex(x, x)).real.sum()),
    ("polar_angle", lambda x, y: (dg.polar(x.abs() + 1, y) * dg.complex(x, y)).angle().sum()),
    ("view_as_complex", lambda x, y: dg.view_as_real(
        dg.view_as_complex(x.reshape(3, 2, 2)) * dg.view_as_complex(y.reshape(3, 2, 2))).sum()),
    ("reductions", lambda x, y: (dg.complex(x, y).sum(0) * dg.complex(y, x).mean(1, True))
     .imag.sum()),
    ("trig", lambda x, y: dg.view_as_real(dg.sin(dg.complex(x, y)) * dg.cos(dg.complex(y, x))
                                          + dg.tanh(dg.complex(x, y * 0.5)).sigmoid()).sum()),
    ("conj_sqrt", lambda x, y: (dg.complex(x, y).conj() * dg.complex(x + 3, y).sqrt()).real.sum()),
]


def check_gradients(loss) -> None:
    """``loss`` of two real float64 (3, 4) tensors: its gradient against finite differences."""
    x = dg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    y = dg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(loss, (x, y), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize(("name", "loss"), LOSSES, ids=[v[0] for v in LOSSES])
def test_gradients_match_finite_differences(name, loss):
    check_gradients(loss)


def test_leaf_gradient_is_the_conjugate_wirtinger_form():
    # L = |z|^2 + Re(c z): dL/dre + i dL/dim = 2 z + conj(c), PyTorch's z.grad.
    z = dg.tensor(A, requires_grad=True)
    c = _c(B)
    assert z.is_leaf and z.requires_grad and z.dtype == dg.complex128
    ((z * z.conj()).real.sum() + (c * z).real.sum()).backward()
    dg.testing.assert_close(z.grad.numpy(), 2 * A + np.conj(B), rtol=1e-12, atol=0,
                            check_dtype=False)


def test_views_share_memory():
    x = dg.zeros(3, 2)
    z = dg.view_as_complex(x)
    z[1] = 2 - 3j
    z.imag[0] = 5.0
    dg.view_as_real(z)[2, 0] = 7.0
    assert x.tolist() == [[0.0, 5.0], [2.0, -3.0], [7.0, 0.0]]
    assert z.tolist() == [5j, 2 - 3j, 7 + 0j]
    a = np.array([1 + 1j, 2 - 1j], np.complex64)
    t = dg.from_numpy(a)
    t.real.mul_(10)  # from_numpy shares the array's memory, as PyTorch's
    assert a.tolist() == [10 + 1j, 20 - 1j] and t.dtype == dg.complex64


def test_dtypes_and_promotion():
    x32, x64 = dg.ones(2), dg.ones(2, dtype=dg.float64)
    z64, z128 = dg.ones(2, dtype=dg.cfloat), dg.ones(2, dtype=dg.cdouble)
    assert (x32 * 1j).dtype == dg.complex64 and (x64 * 1j).dtype == dg.complex128
    assert (dg.arange(2) * 1j).dtype == dg.complex64
    assert (z64 * x64).dtype == dg.complex128 and (z64 * dg.tensor(2.0, dtype=dg.float64)
                                                   ).dtype == dg.complex64
    assert (z64 + z128).dtype == dg.complex128 and (x32 - z64).dtype == dg.complex64
    assert z64.abs().dtype == dg.float32 and z128.angle().dtype == dg.float64
    assert dg.is_complex(z64) and z64.is_complex() and not dg.is_complex(x32)
    assert x32.to(dg.cfloat).dtype == dg.complex64 and x32.cdouble().dtype == dg.complex128
    assert z64.to(dg.complex128).dtype == dg.complex128 and z64.type_as(z128).dtype == z128.dtype
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        assert z64.to(dg.float32).dtype == dg.float32
    assert dg.tensor([1j]).dtype == dg.complex64
    assert dg.tensor(np.array([1j])).dtype == dg.complex128
    assert dg.full((2,), 1 + 1j).dtype == dg.complex64
    r = dg.randn(4000, dtype=dg.cfloat)
    assert r.dtype == dg.complex64 and abs(float((r.abs() ** 2).mean()) - 1.0) < 0.1
    assert dg.rand(3, dtype=dg.cdouble).real.dtype == dg.float64
    assert dg.zeros_like(z64).dtype == dg.complex64 and dg.randn_like(z64).shape == (2,)


def test_shapes_and_views():
    z = _c(A)
    assert z.shape == (3, 4) and z.ndim == 2 and len(z) == 3 and z.numel() == 12
    assert z.view(4, 3).shape == (4, 3) and z.flatten().shape == (12,)
    assert z.unsqueeze(1).shape == (3, 1, 4) and z.permute(1, 0).shape == (4, 3)
    assert [c.shape for c in z.chunk(2, 1)] == [(3, 2), (3, 2)]
    assert dg.view_as_real(z).shape == (3, 4, 2)
    np.testing.assert_array_equal(z[..., 1].numpy(), A[..., 1])
    np.testing.assert_array_equal(z[dg.tensor([2, 0])].numpy(), A[[2, 0]])
    assert "j" in repr(z) and "dtype=dg.complex128" in repr(z)


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        dg.view_as_complex(dg.ones(3, 3))
    with pytest.raises(RuntimeError, match="one or more dimensions"):
        dg.view_as_complex(dg.tensor(1.0))
    with pytest.raises(RuntimeError, match="stride divisible by 2"):
        dg.view_as_complex(dg.ones(4, 3)[:, :2])
    with pytest.raises(RuntimeError, match="float and double"):
        dg.view_as_complex(dg.ones(3, 2, dtype=dg.int64))
    with pytest.raises(RuntimeError, match="only supported for complex"):
        dg.view_as_real(dg.ones(2))
    with pytest.raises(RuntimeError, match="Float|float"):
        dg.complex(dg.ones(2), dg.ones(2, dtype=dg.float64))
    with pytest.raises(RuntimeError, match="same dtype"):
        _c(A) @ dg.ones(4, 2, dtype=dg.float64)
    with pytest.raises(RuntimeError, match="implicitly created only for real scalar"):
        dg.tensor([1j], requires_grad=True).sum().backward()
    with pytest.raises(TypeError, match="complex half"):
        dg.zeros(2, dtype=dg.chalf)
    # a real op given a complex tensor: the same error eagerly and while tracing
    for run in (dg.floor, dg.compile(dg.floor)):
        with pytest.raises(TypeError, match="does not take complex tensors"):
            run(_c(A))


def test_complex_parameter_is_registered_and_stepped():
    class Mod(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = dg.nn.Parameter(dg.tensor(A))

    m = Mod()
    w = m.w
    assert isinstance(w, dg.ComplexTensor) and w.requires_grad and w.dtype == dg.complex128
    (p,) = m.parameters()  # the real (*shape, 2) storage, what optimizers step
    assert p.shape == (3, 4, 2) and list(m.state_dict()) == ["w"]
    opt = dg.optim.SGD(m.parameters(), lr=0.1)
    target = _c(B)
    ((m.w - target).abs() ** 2).sum().backward()
    opt.step()
    # d|w - t|^2 = 2 (w - t) in PyTorch's convention: w - lr * 2 (w - t)
    dg.testing.assert_close(m.w.numpy(), A - 0.2 * (A - B), rtol=1e-12, atol=0, check_dtype=False)


def test_complex_tensor_is_a_tensor_and_saves():
    import io

    z = _c(A)
    assert isinstance(z, dg.Tensor) and dg.is_tensor(z) and not isinstance(dg.ones(2),
                                                                           dg.ComplexTensor)

    class Mod(dg.nn.Module):
        def __init__(self, a):
            super().__init__()
            self.w = dg.nn.Parameter(dg.tensor(a))
            self.b = dg.nn.Parameter(dg.ones(2))

    m, other = Mod(A), Mod(B)
    sd = m.state_dict()
    assert isinstance(sd["w"], dg.ComplexTensor) and not sd["w"].requires_grad
    assert isinstance(m.state_dict(keep_vars=True)["w"], dg.nn.Parameter)
    buf = io.BytesIO()
    dg.save({"sd": sd, "z": z, "p": m.w}, buf)
    buf.seek(0)
    loaded = dg.load(buf)
    np.testing.assert_array_equal(loaded["z"].numpy(), A)
    assert isinstance(loaded["p"], dg.nn.Parameter) and loaded["p"].requires_grad
    np.testing.assert_array_equal(loaded["p"].detach().numpy(), A)
    other.load_state_dict(loaded["sd"])
    np.testing.assert_array_equal(other.w.detach().numpy(), A)
    assert other.w.requires_grad


@pytest.mark.parametrize("opt", ["Adam", "AdamW", "RMSprop", "Adagrad", "SGD"])
def test_optimizers_step_complex_parameters_as_their_real_view(opt):
    # PyTorch steps a complex parameter as view_as_real of it: the same steps as the real
    # (*shape, 2) parameter under the same loss.
    target = _c(B)
    cp = dg.nn.Parameter(dg.tensor(A))
    rp = dg.nn.Parameter(dg.view_as_real(dg.tensor(A)).detach().clone())
    kw = {"momentum": 0.9} if opt == "SGD" else {}
    copt = getattr(dg.optim, opt)([cp], lr=0.05, **kw)
    ropt = getattr(dg.optim, opt)([rp], lr=0.05, **kw)
    for _ in range(3):
        for o, w in ((copt, cp), (ropt, dg.view_as_complex(rp))):
            o.zero_grad()
            ((w - target).abs() ** 2).sum().backward()
            o.step()
    dg.testing.assert_close(cp.detach().numpy(), dg.view_as_complex(rp).detach().numpy(),
                            rtol=1e-12, atol=1e-12)
