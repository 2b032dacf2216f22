"""``torch.fft``: discrete Fourier transforms of real and complex tensors, with autograd.

Eagerly every transform is NumPy's pocketfft, run as one autograd node whose gradient is
the adjoint transform (another FFT). Inside ``dg.compile`` a transform decomposes into real
matrix products with the DFT's cosine and sine tables, so the compiled graph holds only
real ops (O(n^2) per transformed axis: meant for the small spectral sizes of models such
as FNO; compiled results equal eager ones within rounding). float32 input gives complex64
results, as in PyTorch.

    >>> dg.fft.rfft(dg.tensor([1.0, 0.0, 0.0, 0.0]))
    tensor([1.+0.j, 1.+0.j, 1.+0.j])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .autograd.function import Function
from .dtypes import as_dtype, default_float
from .eager.tensor import tensor
from .modes import current_trace
from .nn.functional import fold
from .nn.functional import pad as _pad
from .ops import shape as S
from .ops.broadcast import normalize_dim
from .ops.complex import ComplexTensor, cat, from_parts, view_as_real
from .ops.mixin import TensorOps

_NORMS = ("backward", "ortho", "forward")


# ------------------------------------------------------------------ the transform
class FftC2CBackward(Function):
    """The unnormalised complex transform over ``dims`` times ``scale``, on interleaved
    real storage ``(..., 2)``; its gradient is the transform in the other direction with
    the same scale (the DFT matrix's adjoint is the unnormalised inverse)."""

    @staticmethod
    def forward(ctx: Any, ri: Any, dims: tuple, inverse: bool, scale: float) -> Any:
        ctx.fft = (dims, inverse, scale)
        a = ri.numpy()
        z = a[..., 0] + 1j * a[..., 1]
        out = np.fft.ifftn(z, axes=dims, norm="forward") if inverse else np.fft.fftn(z, axes=dims)
        if scale != 1.0:
            out = out * scale
        return tensor(np.stack([out.real, out.imag], -1).astype(a.dtype))

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        dims, inverse, scale = ctx.fft
        return _storage_c2c(g, dims, not inverse, scale), None, None, None


def _storage_c2c(ri: Any, dims: tuple, inverse: bool, scale: float) -> Any:
    if current_trace() is not None:
        return _dft(ComplexTensor(ri), dims, inverse, scale)._storage()
    return FftC2CBackward.apply(ri, dims, inverse, scale)


def _c2c(z: ComplexTensor, dims: tuple, inverse: bool, scale: float) -> ComplexTensor:
    """The complex transform of ``z`` over ``dims`` (non-negative), times ``scale``."""
    if not dims:
        return z
    if current_trace() is not None:
        return _dft(z, dims, inverse, scale)
    return ComplexTensor(FftC2CBackward.apply(z._storage(), dims, inverse, scale))


def _dft(z: ComplexTensor, dims: tuple, inverse: bool, scale: float) -> ComplexTensor:
    """`_c2c` as real matrix products, one transformed axis at a time (what a trace
    records: the backend sees only real kernels)."""
    re, im = z._parts()
    part = np.dtype(re.dtype)
    for k, d in enumerate(dims):
        n = re.shape[d]
        angle = 2.0 * np.pi * (np.outer(np.arange(n), np.arange(n)) % n) / n
        s = scale if k == 0 else 1.0
        cos = (np.cos(angle) * s).astype(part)
        sin = (np.sin(angle) * (s if inverse else -s)).astype(part)
        a, b = re.movedim(d, -1), im.movedim(d, -1)
        # (a + ib)(cos + i sin), with sin's sign giving the direction
        re = (a @ cos - b @ sin).movedim(-1, d)
        im = (a @ sin + b @ cos).movedim(-1, d)
    return from_parts(re, im)


# ------------------------------------------------------------------------ helpers
def _complex(x: Any, fn: str) -> ComplexTensor:
    """``x`` as a complex tensor (a real one gets a zero imaginary part; integers become
    the default float first, as in PyTorch)."""
    if isinstance(x, ComplexTensor):
        return x
    return from_parts(*_real_pair(x, fn))


def _real_pair(x: Any, fn: str) -> tuple:
    if not isinstance(x, TensorOps):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if np.dtype(x.dtype).kind != "f":
        x = S.astype(x, default_float())
    elif np.dtype(x.dtype) == np.float16:
        raise RuntimeError(f"{fn}(): float16 input is not supported (use float32)")
    return x, x * 0.0


def _real(x: Any, fn: str) -> Any:
    if isinstance(x, ComplexTensor):
        raise RuntimeError(f"{fn} expects a real input tensor, but got {x.dtype}")
    return _real_pair(x, fn)[0]


def _scale(norm: str | None, n: int, inverse: bool) -> float:
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"Invalid normalization mode: {norm!r} (expected one of "
                         f"{', '.join(_NORMS)})")
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "backward") == inverse else 1.0


def _resize(z: ComplexTensor, n: int | None, d: int, fn: str) -> ComplexTensor:
    """``z`` cut or zero-padded to ``n`` along ``d`` (PyTorch's ``n=``/``s=``)."""
    size = z.shape[d]
    if n is None or n == size:
        return z
    if n < 1:
        raise RuntimeError(f"{fn}(): Invalid number of data points ({n}) specified")
    if n < size:
        return z[(slice(None),) * d + (slice(0, n),)]
    widths = [0, 0] * (z.ndim - 1 - d) + [0, n - size]
    re, im = z._parts()
    return from_parts(_pad(re, widths), _pad(im, widths))


def _dims(ndim: int, s: Any, dim: Any, fn: str) -> tuple:
    """The transformed dims (non-negative) and their sizes (None: as they are)."""
    if dim is None:
        dims = tuple(range(ndim - len(s), ndim)) if s is not None else tuple(range(ndim))
    else:
        dims = tuple(normalize_dim(fn, d, ndim)
                     for d in ((dim,) if isinstance(dim, int) else dim))
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{fn}(): dims must be unique")
    sizes = (None,) * len(dims) if s is None else tuple(s)
    if len(sizes) != len(dims):
        raise RuntimeError(f"{fn}(): when given, dim and shape arguments must have the same "
                           f"length, got {len(dims)} dims and {len(sizes)} sizes")
    return dims, sizes


def _fftn(x: Any, s: Any, dim: Any, norm: str | None, inverse: bool, fn: str) -> ComplexTensor:
    z = _complex(x, fn)
    dims, sizes = _dims(z.ndim, s, dim, fn)
    for d, n in zip(dims, sizes):
        z = _resize(z, n, d, fn)
    total = math.prod(z.shape[d] for d in dims)
    return _c2c(z, dims, inverse, _scale(norm, total, inverse))


def _rfftn(x: Any, s: Any, dim: Any, norm: str | None, fn: str) -> ComplexTensor:
    z = _fftn(_real(x, fn), s, dim, norm, False, fn)
    dims, _ = _dims(z.ndim, s, dim, fn)
    last = dims[-1]
    return z[(slice(None),) * last + (slice(0, z.shape[last] // 2 + 1),)]


def _irfftn(x: Any, s: Any, dim: Any, norm: str | None, fn: str) -> Any:
    z = _complex(x, fn)
    dims, sizes = _dims(z.ndim, s, dim, fn)
    *rest, last = dims
    if rest:
        z = _fftn(z, sizes[:-1], tuple(rest), norm, True, fn)
    n = sizes[-1] if sizes[-1] is not None else 2 * (z.shape[last] - 1)
    if n < 1:
        raise RuntimeError(f"{fn}(): Invalid number of data points ({n}) specified")
    z = _resize(z, n // 2 + 1, last, fn)
    # The full spectrum is Hermitian: X[n - k] = conj(X[k]); the imaginary parts of the
    # zero (and, n even, the Nyquist) term drop out of the real result, as in pocketfft.
    mirror = z[(slice(None),) * last + (slice(1, n - n // 2),)].flip(last).conj()
    full = cat([z, mirror], last)
    return _c2c(full, (last,), True, _scale(norm, n, True))._parts()[0]


# ---------------------------------------------------------------- public functions
def fft(input: Any, n: int | None = None, dim: int = -1,  # noqa: A002
        norm: str | None = None) -> ComplexTensor:
    """The 1-D discrete Fourier transform along ``dim`` (cut or zero-padded to ``n``)."""
    return _fftn(input, None if n is None else (n,), (dim,), norm, False, "fft")


def ifft(input: Any, n: int | None = None, dim: int = -1,  # noqa: A002
         norm: str | None = None) -> ComplexTensor:
    """The inverse of `fft`."""
    return _fftn(input, None if n is None else (n,), (dim,), norm, True, "ifft")


def fft2(input: Any, s: Any = None, dim: Any = (-2, -1),  # noqa: A002
         norm: str | None = None) -> ComplexTensor:
    """The 2-D transform over ``dim`` (the last two by default)."""
    return _fftn(input, s, dim, norm, False, "fft2")


def ifft2(input: Any, s: Any = None, dim: Any = (-2, -1),  # noqa: A002
          norm: str | None = None) -> ComplexTensor:
    return _fftn(input, s, dim, norm, True, "ifft2")


def fftn(input: Any, s: Any = None, dim: Any = None,  # noqa: A002
         norm: str | None = None) -> ComplexTensor:
    """The N-D transform over ``dim`` (all dims, or the last ``len(s)``, by default)."""
    return _fftn(input, s, dim, norm, False, "fftn")


def ifftn(input: Any, s: Any = None, dim: Any = None,  # noqa: A002
          norm: str | None = None) -> ComplexTensor:
    return _fftn(input, s, dim, norm, True, "ifftn")


def rfft(input: Any, n: int | None = None, dim: int = -1,  # noqa: A002
         norm: str | None = None) -> ComplexTensor:
    """The transform of a real signal: the ``n // 2 + 1`` non-negative frequencies."""
    return _rfftn(input, None if n is None else (n,), (dim,), norm, "rfft")


def irfft(input: Any, n: int | None = None, dim: int = -1,  # noqa: A002
          norm: str | None = None) -> Any:
    """The inverse of `rfft`: a real signal of length ``n`` (``2 * (m - 1)`` by default)."""
    return _irfftn(input, None if n is None else (n,), (dim,), norm, "irfft")


def rfft2(input: Any, s: Any = None, dim: Any = (-2, -1),  # noqa: A002
          norm: str | None = None) -> ComplexTensor:
    return _rfftn(input, s, dim, norm, "rfft2")


def irfft2(input: Any, s: Any = None, dim: Any = (-2, -1),  # noqa: A002
           norm: str | None = None) -> Any:
    return _irfftn(input, s, dim, norm, "irfft2")


def rfftn(input: Any, s: Any = None, dim: Any = None,  # noqa: A002
          norm: str | None = None) -> ComplexTensor:
    return _rfftn(input, s, dim, norm, "rfftn")


def irfftn(input: Any, s: Any = None, dim: Any = None,  # noqa: A002
           norm: str | None = None) -> Any:
    return _irfftn(input, s, dim, norm, "irfftn")


def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None,
            requires_grad: bool = False, **kwargs: Any) -> Any:
    """The sample frequencies of an ``n``-point transform: ``[0, 1, ..., -1] / (d * n)``."""
    freq = np.fft.fftfreq(n, d)
    return tensor(freq, dtype=as_dtype(dtype or default_float()), device=device,
                  requires_grad=requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False, **kwargs: Any) -> Any:
    """The sample frequencies of `rfft`'s ``n // 2 + 1`` outputs."""
    freq = np.fft.rfftfreq(n, d)
    return tensor(freq, dtype=as_dtype(dtype or default_float()), device=device,
                  requires_grad=requires_grad)


def _shift(x: Any, dim: Any, sign: int) -> Any:
    dims = tuple(range(x.ndim)) if dim is None else (
        (dim,) if isinstance(dim, int) else tuple(dim))
    dims = tuple(normalize_dim("fftshift", d, x.ndim) for d in dims)
    if not dims:
        return x
    return x.roll(tuple(sign * (x.shape[d] // 2) for d in dims), dims)


def fftshift(input: Any, dim: Any = None) -> Any:  # noqa: A002
    """The zero frequency moved to the middle (a roll by half of each of ``dim``)."""
    return _shift(input, dim, 1)


def ifftshift(input: Any, dim: Any = None) -> Any:  # noqa: A002
    """The inverse of `fftshift`."""
    return _shift(input, dim, -1)


# ------------------------------------------------------------- short-time transforms
def _window(window: Any, win_length: int, n_fft: int, like: Any, fn: str) -> Any:
    """The window (ones by default) centred in ``n_fft`` samples, as PyTorch pads it."""
    if window is None:
        w = np.ones(win_length, np.dtype(like.dtype))
        w = tensor(w)
    else:
        w = window
        if tuple(w.shape) != (win_length,):
            raise RuntimeError(f"{fn}: expected a 1D window tensor of size equal to "
                               f"win_length={win_length}, but got window with size "
                               f"{tuple(w.shape)}")
    if win_length > n_fft or win_length < 1:
        raise RuntimeError(f"{fn}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")
    left = (n_fft - win_length) // 2
    return _pad(w, [left, n_fft - win_length - left]) if win_length < n_fft else w


def stft(input: Any, n_fft: int, hop_length: int | None = None,  # noqa: A002
         win_length: int | None = None, window: Any = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None) -> Any:
    """PyTorch's short-time Fourier transform: frames of ``n_fft`` samples every
    ``hop_length`` (``n_fft // 4``), times ``window``, transformed; the result is
    ``(freq, frames)`` (with a leading batch dim for 2-D input), complex."""
    if return_complex is None and not isinstance(input, ComplexTensor):
        raise RuntimeError("stft requires the return_complex parameter be given for real "
                           "inputs, and will further require that return_complex=True in a "
                           "future PyTorch release.")
    if isinstance(input, ComplexTensor):
        raise RuntimeError("stft of a complex input is not supported (real signals only)")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if center:
        x = _pad(x.unsqueeze(1), [n_fft // 2, n_fft // 2], mode=pad_mode).squeeze(1)
    if not 0 < n_fft <= x.shape[-1]:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop) * _window(window, win, n_fft, x, "stft")
    norm = "ortho" if normalized else None
    spec = (rfft if onesided is None or onesided else fft)(frames, norm=norm)
    spec = spec.transpose(-1, -2)
    out = spec if input.ndim == 2 else spec.squeeze(0)
    return out if return_complex else view_as_real(out)


def istft(input: Any, n_fft: int, hop_length: int | None = None,  # noqa: A002
          win_length: int | None = None, window: Any = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Any:
    """The inverse of `stft`: each frame transformed back, windowed and overlap-added,
    divided by the overlap-added squared window (PyTorch's ``istft``)."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("istft requires a complex-valued input tensor")
    if return_complex:
        raise RuntimeError("istft(return_complex=True) is not supported (real signals only)")
    spec = input if input.ndim == 3 else input.unsqueeze(0)
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    norm = "ortho" if normalized else None
    full = onesided is None or onesided
    if full and spec.shape[1] != n_fft // 2 + 1:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft / 2 + 1 when onesided=True, but got "
                           f"{spec.shape[1]}")
    z = spec.transpose(1, 2)
    frames = irfft(z, n=n_fft, norm=norm) if full else ifft(z, n=n_fft, norm=norm)._parts()[0]
    w = _window(window, win, n_fft, frames, "istft")
    frames = frames * w
    count = frames.shape[1]
    total = n_fft + hop * (count - 1)
    def overlap_add(blocks: Any) -> Any:  # (batch, frames, n_fft) -> (batch, total)
        out = fold(blocks.transpose(1, 2), (1, total), (1, n_fft), stride=(1, hop))
        return out.reshape(out.shape[0], total)

    y = overlap_add(frames)
    envelope = overlap_add((w * w).detach().expand(1, count, n_fft))[0]
    start = n_fft // 2 if center else 0
    end = (total - n_fft // 2 if center else total) if length is None else min(
        start + length, total)
    envelope = envelope[start:end]
    # PyTorch's NOLA check reads the values: eagerly only (a trace cannot branch on them)
    if current_trace() is None and bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: 0, the window does not satisfy "
                           "the NOLA condition (nonzero overlap-add)")
    y = y[:, start:end] / envelope
    if length is not None and y.shape[1] < length:
        y = _pad(y, [0, length - y.shape[1]])
    return y if input.ndim == 3 else y.squeeze(0)


__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "ifft", "ifft2", "ifftn",
           "ifftshift", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn"]
