"""Resampling that `interpolate` hands off: ``area`` on a 5-D input (adaptive average
pooling of the volume) and ``antialias=True`` for ``bilinear`` and ``bicubic``, where each
output pixel is a normalized, separable filter over every input pixel its footprint
covers (a triangle or a cubic stretched by the downscale factor), as PyTorch and PIL
resize. Both are products and means of existing ops, so they differentiate and compile
like any composition."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import linalg as L
from . import reduce as R
from . import shape as S


def area3d(input: Any, out: tuple) -> Any:  # noqa: A002
    """``(N, C, D, H, W)`` averaged over PyTorch's adaptive windows to ``out`` (D', H',
    W'): the planes pooled first, then each depth window averaged."""
    from .pool import adaptive_avg_pool2d

    n, c, d, h, w = input.shape
    od, oh, ow = out
    planes = S.reshape(adaptive_avg_pool2d(S.reshape(input, (n, c * d, h, w)), (oh, ow)),
                       (n, c, d, oh, ow))
    parts = [R.mean(planes[:, :, (i * d) // od:-((-(i + 1) * d) // od)], 2) for i in range(od)]
    return S.stack(parts, 2)


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _cubic(x: np.ndarray) -> np.ndarray:
    # Keys' cubic with a = -0.5 (PIL's, which antialiased resizing follows; the
    # interpolating bicubic mode uses -0.75).
    a = -0.5
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_cubic, 4)}


def antialias_weights(mode: str, size: int, out: int, scale: float | None,
                      align_corners: bool) -> np.ndarray:
    """The (out, size) matrix whose row ``i`` weighs the input pixels of output pixel
    ``i``: the filter centred on the output pixel's centre in input coordinates, widened
    by the scale when shrinking, cut to the input and normalized to sum 1."""
    fn, taps = _FILTERS[mode]
    if align_corners:
        ratio = (size - 1) / (out - 1) if out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else size / out
    support = taps * 0.5 * ratio if ratio >= 1.0 else taps * 0.5
    inv = 1.0 / ratio if ratio >= 1.0 else 1.0
    m = np.zeros((out, size))
    for i in range(out):
        center = ratio * (i + 0.5)
        # Truncation toward zero, as the C++ cast (the lower end is clamped to 0 anyway).
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), size)
        j = np.arange(lo, hi)
        wts = fn((j - center + 0.5) * inv)
        total = wts.sum()
        m[i, lo:hi] = wts / total if total != 0.0 else wts
    return m


def antialiased(input: Any, mode: str, out: tuple, scales: tuple,  # noqa: A002
                align_corners: bool) -> Any:
    """A 4-D ``input`` resized to ``out`` (H', W') by `antialias_weights` along H and W."""
    _, _, h, w = input.shape
    dtype = np.dtype(input.dtype)
    wh = antialias_weights(mode, h, out[0], scales[0], align_corners).astype(dtype)
    ww = antialias_weights(mode, w, out[1], scales[1], align_corners).astype(dtype)
    across = L.matmul(input, np.ascontiguousarray(ww.T))  # (N, C, H, W')
    return L.matmul(wh, across)  # (N, C, H', W')
