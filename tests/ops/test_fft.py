"""``dg.fft`` eagerly: values against NumPy's pocketfft for every transform and norm,
float64 finite-difference gradients (through real losses), the dtypes PyTorch gives and
the errors. PyTorch's own values and gradients are in tests/goldens (source ``complex``);
the compiled path (DFT products) is in tests/compile/test_complex.py."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

from .test_complex import check_gradients

RNG = np.random.default_rng(11)
X = RNG.standard_normal((3, 4, 6))
C = RNG.standard_normal((3, 4, 5)) + 1j * RNG.standard_normal((3, 4, 5))

# (name, dualgraph call, NumPy reference), each over the real X or the complex C
TRANSFORMS = [
    ("fft", lambda m, a, norm: m.fft(a, norm=norm), "c"),
    ("fft_n_dim", lambda m, a, norm: m.fft(a, 7, 1, norm=norm), "c"),
    ("ifft", lambda m, a, norm: m.ifft(a, n=3, norm=norm), "c"),
    ("fft2", lambda m, a, norm: m.fft2(a, norm=norm), "c"),
    ("ifft2", lambda m, a, norm: m.ifft2(a, (5, 2), norm=norm), "c"),
    ("fftn", lambda m, a, norm: m.fftn(a, norm=norm), "c"),
    ("ifftn", lambda m, a, norm: m.ifftn(a, None, (0, 2), norm=norm), "c"),
    ("fft_real", lambda m, a, norm: m.fft(a, norm=norm), "x"),
    ("rfft", lambda m, a, norm: m.rfft(a, norm=norm), "x"),
    ("rfft_n", lambda m, a, norm: m.rfft(a, 9, 0, norm=norm), "x"),
    ("rfft2", lambda m, a, norm: m.rfft2(a, norm=norm), "x"),
    ("rfftn", lambda m, a, norm: m.rfftn(a, (3, 5), (1, 2), norm=norm), "x"),
    ("irfft", lambda m, a, norm: m.irfft(a, norm=norm), "c"),
    ("irfft_odd", lambda m, a, norm: m.irfft(a, 7, 1, norm=norm), "c"),
    ("irfft2", lambda m, a, norm: m.irfft2(a, norm=norm), "c"),
    ("irfftn", lambda m, a, norm: m.irfftn(a, (2, 3, 6), (0, 1, 2), norm=norm), "c"),
]


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize(("name", "call", "kind"), TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_values_match_numpy(name, call, kind, norm):
    a = X if kind == "x" else C
    out = call(dg.fft, dg.tensor(a), norm)
    dg.testing.assert_close(np.asarray(out.numpy()), call(np.fft, a, norm), rtol=1e-10,
                               atol=1e-12, check_dtype=False)


def test_float32_gives_complex64_and_float32():
    x = dg.tensor(X, dtype=dg.float32)
    assert dg.fft.rfft(x).dtype == dg.complex64 and dg.fft.fft(x).dtype == dg.complex64
    assert dg.fft.irfft(dg.fft.rfft(x)).dtype == dg.float32
    assert dg.fft.fft(dg.arange(4)).dtype == dg.complex64
    assert dg.fft.fft(dg.tensor(X)).dtype == dg.complex128
    dg.testing.assert_close(dg.fft.irfft(dg.fft.rfft(x), n=6).numpy(), X, rtol=1e-5,
                               atol=1e-5, check_dtype=False)


# Real losses through the transforms, over real float64 tensors (a complex input is made
# of two of them).
LOSSES = [
    ("fft", lambda x, y: dg.view_as_real(dg.fft.fft(dg.complex(x, y), n=5, norm="ortho"))
     .pow(2).sum() + dg.fft.fft(x, dim=0).abs().sum()),
    ("ifft2", lambda x, y: (dg.fft.ifft2(dg.complex(x, y)) * (1 + 2j)).real.sum()),
    ("rfft", lambda x, y: dg.fft.rfft(x * y, n=8).abs().sum()),
    ("irfft", lambda x, y: (dg.fft.irfft(dg.complex(x, y), n=7) ** 2).sum()),
    ("irfft_even", lambda x, y: (dg.fft.irfft(dg.complex(x, y), dim=0) * x[:1]).sum()),
    ("rfft2_irfft2", lambda x, y: (dg.fft.irfft2(dg.fft.rfft2(x) * dg.complex(y[:, :3], x[:, :3]),
                                                 s=(3, 4)) ** 2).sum()),
    ("fftn_shift", lambda x, y: dg.fft.fftshift(dg.fft.fftn(dg.complex(x, y), norm="forward"))
     .abs().sum()),
]


@pytest.mark.parametrize(("name", "loss"), LOSSES, ids=[v[0] for v in LOSSES])
def test_gradients_match_finite_differences(name, loss):
    check_gradients(loss)


def test_second_derivative_runs_the_transform_again():
    x = dg.tensor(RNG.standard_normal(6), requires_grad=True)
    (g,) = dg.grad(dg.fft.rfft(x ** 2).abs().pow(2).sum(), x, create_graph=True)
    (h,) = dg.grad(g.sum(), x)
    # |rfft(x^2)|^2 summed: the gradient is a polynomial in x; compare with differences
    eps = 1e-6

    def grad_sum(v):
        t = dg.tensor(v, requires_grad=True)
        (gv,) = dg.grad(dg.fft.rfft(t ** 2).abs().pow(2).sum(), t)
        return gv.sum().item()

    xv = x.detach().numpy()
    numeric = [(grad_sum(xv + eps * e) - grad_sum(xv - eps * e)) / (2 * eps) for e in np.eye(6)]
    dg.testing.assert_close(h.numpy(), numeric, rtol=1e-5, atol=1e-6, check_dtype=False)


def test_frequencies_and_shifts():
    dg.testing.assert_close(dg.fft.fftfreq(7, 0.5).numpy(), np.fft.fftfreq(7, 0.5),
                               rtol=1e-6, atol=0, check_dtype=False)
    dg.testing.assert_close(dg.fft.rfftfreq(8).numpy(), np.fft.rfftfreq(8), rtol=1e-7, atol=0,
                            check_dtype=False)
    assert dg.fft.fftfreq(4).dtype == dg.float32
    assert dg.fft.rfftfreq(4, dtype=dg.float64).dtype == dg.float64
    np.testing.assert_array_equal(dg.fft.fftshift(dg.tensor(X)).numpy(), np.fft.fftshift(X))
    np.testing.assert_array_equal(dg.fft.ifftshift(dg.tensor(C), dim=(0, 2)).numpy(),
                                  np.fft.ifftshift(C, axes=(0, 2)))


def test_errors():
    with pytest.raises(RuntimeError, match="expects a real input tensor"):
        dg.fft.rfft(dg.tensor(C))
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        dg.fft.fft(dg.tensor(X), n=0)
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        dg.fft.fft(dg.tensor(X), norm="sideways")
    with pytest.raises(IndexError):
        dg.fft.fft(dg.tensor(X), dim=3)
    with pytest.raises(RuntimeError, match="same length"):
        dg.fft.fftn(dg.tensor(X), s=(2, 3), dim=(0,))


def test_stft_istft_round_trip_and_shapes():
    x = dg.tensor(RNG.standard_normal((2, 40)))
    w = dg.hann_window(12, dtype=dg.float64)
    spec = dg.stft(x, 16, hop_length=4, win_length=12, window=w, return_complex=True)
    assert spec.shape == (2, 9, 11) and spec.dtype == dg.complex128
    assert dg.stft(x[0], 16, return_complex=True).shape == (9, 11)
    assert dg.stft(x, 8, center=False, return_complex=False).shape == (2, 5, 17, 2)
    back = dg.istft(spec, 16, hop_length=4, win_length=12, window=w, length=40)
    dg.testing.assert_close(back.numpy(), x.numpy(), atol=1e-12, rtol=0, check_dtype=False)
    # frame k is rfft(window * signal[k * hop : k * hop + n_fft]) without centring
    plain = dg.stft(x, 8, hop_length=3, center=False, return_complex=True)
    dg.testing.assert_close(plain.numpy()[1, :, 2], np.fft.rfft(x.numpy()[1, 6:14]),
                               atol=1e-12, rtol=0, check_dtype=False)


LOSSES_STFT = [
    ("stft", lambda x, y: dg.stft((x * y).flatten(), 4, hop_length=2, window=dg.hann_window(
        4, dtype=dg.float64), return_complex=True).abs().sum()),
    ("istft", lambda x, y: dg.istft(dg.complex(x, y).t()[:3], 4, hop_length=1,
                                    center=False).pow(2).sum()),
]


@pytest.mark.parametrize(("name", "loss"), LOSSES_STFT, ids=[v[0] for v in LOSSES_STFT])
def test_stft_gradients_match_finite_differences(name, loss):
    check_gradients(loss)


def test_stft_errors():
    x = dg.randn(30)
    with pytest.raises(RuntimeError, match="return_complex parameter be given"):
        dg.stft(x, 8)
    with pytest.raises(RuntimeError, match="requires a complex-valued input"):
        dg.istft(x, 8)
    with pytest.raises(RuntimeError, match="NOLA"):
        dg.istft(dg.stft(x, 8, return_complex=True), 8, window=dg.zeros(8))
    with pytest.raises(RuntimeError, match="win_length"):
        dg.stft(x, 8, win_length=9, return_complex=True)
