"""Padding, resampling, pixel and channel rearranging, and spatial transformers (sampling
grids from affine matrices, and sampling at them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import elementwise as E
from ...ops import index as I
from ...ops import linalg as L
from ...ops import math as M
from ...ops import reduce as R
from ...ops import shape as S
from ...ops.pool import interpolate, pad

__all__ = [
    "affine_grid", "channel_shuffle", "grid_sample", "interpolate", "native_channel_shuffle", "pad",
    "pixel_shuffle", "pixel_unshuffle", "upsample", "upsample_bilinear", "upsample_nearest",
]


def upsample(input: Any, size: Any = None, scale_factor: Any = None,  # noqa: A002
             mode: str = "nearest", align_corners: bool | None = None) -> Any:
    """The deprecated spelling of `interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def _factor(name: str, r: Any) -> int:
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r <= 0:
        raise RuntimeError(f"{name}: factor must be a positive integer, but got {r!r}")
    return int(r)


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:  # noqa: A002
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r): sub-pixel convolution's rearrangement."""
    r = _factor("pixel_shuffle", upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    lead, k = tuple(lead), len(lead)
    x = S.reshape(input, lead + (c // (r * r), r, r, h, w))
    x = S.permute(x, *range(k), k, k + 3, k + 1, k + 4, k + 2)
    return S.reshape(x, lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:  # noqa: A002
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W): the inverse of `pixel_shuffle`."""
    r = _factor("pixel_unshuffle", downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, "
                           f"but got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor, but input.size(-2)={h}, input.size(-1)={w} and "
                           f"downscale_factor={r}")
    lead, k = tuple(lead), len(lead)
    x = S.reshape(input, lead + (c, h // r, r, w // r, r))
    x = S.permute(x, *range(k), k, k + 2, k + 4, k + 1, k + 3)
    return S.reshape(x, lead + (c * r * r, h // r, w // r))


def channel_shuffle(input: Any, groups: int) -> Any:  # noqa: A002
    """(N, C, *) with the channels of ``groups`` groups interleaved: viewed as (N, g, C/g,
    *), the two group dims swapped."""
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with sizes {list(input.shape)}")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value "
                           f"of groups:{groups}")
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} "
                           f"channels and {groups} groups.")
    x = S.reshape(input, (n, groups, c // groups, *rest))
    return S.reshape(S.transpose(x, 1, 2), tuple(input.shape))


native_channel_shuffle = channel_shuffle


def upsample_nearest(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """`interpolate` with ``mode='nearest'`` (the deprecated spelling)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """`interpolate` with ``mode='bilinear'`` and ``align_corners=True``."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# Spatial transformers: sampling grids from affine matrices, and sampling at them.
def _base_coords(n: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates in [-1, 1] of ``n`` pixel centres (or corners)."""
    if n <= 1:
        return np.zeros((max(n, 0),))
    c = np.linspace(-1.0, 1.0, n)
    return c if align_corners else c * (n - 1) / n


def affine_grid(theta: Any, size: Any, align_corners: bool | None = None) -> Any:
    """The (N, H, W, 2) sampling grid of 2-D affine matrices ``theta`` (N, 2, 3) for an
    output of ``size`` (N, C, H, W): ``theta @ (x, y, 1)`` at each output pixel."""
    align = bool(align_corners)
    size = tuple(int(v) for v in size)
    if len(size) != 4:
        raise NotImplementedError("affine_grid only supports 4D sizes, for 2D affine "
                                  f"transformations, got size {list(size)}")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{list(size)}. Got {list(theta.shape)}.")
    n, _, h, w = size
    if theta.shape[0] != n:
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{list(size)}. Got {list(theta.shape)}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {list(size)}")
    xs, ys = _base_coords(w, align), _base_coords(h, align)
    base = np.stack([np.broadcast_to(xs[None, :], (h, w)), np.broadcast_to(ys[:, None], (h, w)),
                     np.ones((h, w))], -1).reshape(1, h * w, 3).astype(np.dtype(theta.dtype))
    grid = L.matmul(base, S.transpose(theta, 1, 2))  # (N, H*W, 2)
    return S.reshape(grid, (n, h, w, 2))


def _unnormalize(coord: Any, size: int, align_corners: bool) -> Any:
    if align_corners:
        return E.mul(E.add(coord, 1.0), (size - 1) / 2)
    return E.div(E.sub(E.mul(E.add(coord, 1.0), size), 1.0), 2.0)


def _reflect(coord: Any, size: int, align_corners: bool) -> Any:
    """Pixel coordinate ``coord`` reflected into the image, as PyTorch's ``reflection``
    padding: about the edge pixels' centres (``align_corners``) or their outer edges, then
    clamped to ``[0, size - 1]``."""
    low, high = (0.0, 2.0 * (size - 1)) if align_corners else (-1.0, 2.0 * size - 1.0)
    if low == high:
        return E.mul(coord, 0.0)
    lo, span = low / 2, (high - low) / 2
    u = E.abs(E.sub(coord, lo))
    flips = E.floor(E.div(S.stop_gradient(u), span))
    extra = E.sub(u, E.mul(flips, span))  # fmod(u, span), u >= 0
    even = E.eq(E.sub(flips, E.mul(E.floor(E.div(flips, 2.0)), 2.0)), 0.0)
    out = E.where(even, E.add(extra, lo), E.sub(span + lo, extra))
    return M.clamp(out, 0.0, float(size - 1))


def grid_sample(input: Any, grid: Any, mode: str = "bilinear",  # noqa: A002
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Any:
    """Sample (N, C, H, W) ``input`` at the normalized (x, y) locations of ``grid``
    (N, Ho, Wo, 2), ``-1`` and ``1`` the edges (pixel centres with ``align_corners``):
    ``mode`` ``'bilinear'``, ``'nearest'`` or ``'bicubic'``; ``padding_mode`` ``'zeros'``
    (outside reads 0), ``'border'`` (clamped to the edge) or ``'reflection'`` (mirrored at
    the edges).
    Differentiable in ``input`` and, for bilinear and bicubic, ``grid``."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sample(): expected 4D input and grid with last dimension 2 "
                           f"(2-D sampling), but got input of shape {list(input.shape)} and "
                           f"grid of shape {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch "
                           f"size, but got input with sizes {list(input.shape)} and grid with "
                           f"sizes {list(grid.shape)}")
    align = bool(align_corners)
    n, c, h, w = input.shape
    _, ho, wo, _ = grid.shape
    x = _unnormalize(grid[..., 0], w, align)
    y = _unnormalize(grid[..., 1], h, align)
    if mode == "bicubic":
        return _bicubic_sample(input, x, y, padding_mode, align)
    if padding_mode == "border":
        x = M.clamp(x, 0.0, float(w - 1))
        y = M.clamp(y, 0.0, float(h - 1))
    elif padding_mode == "reflection":
        x, y = _reflect(x, w, align), _reflect(y, h, align)
    tap = _tapper(input)

    if mode == "nearest":
        return tap(E.round(S.stop_gradient(x)), E.round(S.stop_gradient(y)))
    x0, y0 = E.floor(S.stop_gradient(x)), E.floor(S.stop_gradient(y))
    x1, y1 = E.add(x0, 1.0), E.add(y0, 1.0)
    wx1, wy1 = E.sub(x, x0), E.sub(y, y0)
    wx0, wy0 = E.sub(1.0, wx1), E.sub(1.0, wy1)

    def weight(a: Any, b: Any) -> Any:
        return S.reshape(E.mul(a, b), (n, 1, ho, wo))

    out = E.mul(tap(x0, y0), weight(wx0, wy0))
    out = E.add(out, E.mul(tap(x1, y0), weight(wx1, wy0)))
    out = E.add(out, E.mul(tap(x0, y1), weight(wx0, wy1)))
    return E.add(out, E.mul(tap(x1, y1), weight(wx1, wy1)))



def _tapper(input: Any) -> Any:  # noqa: A002
    """``tap(xi, yi)``: ``input[n, :, yi, xi]`` (N, C, *S) at integer-valued pixel
    coordinates of shape (N, *S), 0 where (xi, yi) is outside."""
    n, c, h, w = input.shape
    flat = S.reshape(input, (n, c, h * w))

    def tap(xi: Any, yi: Any) -> Any:
        rest = tuple(xi.shape[1:])
        m = int(np.prod(rest))
        inside = M.logical_and(M.logical_and(E.ge(xi, 0), E.le(xi, w - 1)),
                               M.logical_and(E.ge(yi, 0), E.le(yi, h - 1)))
        idx = E.add(E.mul(M.clamp(yi, 0, h - 1), w), M.clamp(xi, 0, w - 1))
        idx = S.broadcast_to(S.reshape(S.astype(idx, np.int64), (n, 1, m)), (n, c, m))
        vals = S.reshape(I.gather(flat, 2, idx), (n, c) + rest)
        return E.where(S.reshape(inside, (n, 1) + rest), vals, 0.0)

    return tap


# PyTorch's cubic convolution constant for bicubic sampling (as its bicubic upsampling).
_CUBIC_A = -0.75


def _cubic_weights(t: Any) -> Any:
    """The cubic-convolution weights of the taps at offsets -1, 0, 1, 2 from the pixel
    before a point at fraction ``t`` past it, stacked on a new last dim."""
    a = _CUBIC_A

    def near(d: Any) -> Any:  # |d| <= 1: ((a + 2) d - (a + 3)) d^2 + 1
        return E.add(E.mul(E.sub(E.mul(d, a + 2), a + 3), E.mul(d, d)), 1.0)

    def far(d: Any) -> Any:  # 1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a
        return E.sub(E.mul(E.add(E.mul(E.sub(E.mul(d, a), 5 * a), d), 8 * a), d), 4 * a)

    u = E.sub(1.0, t)
    return S.stack([far(E.add(t, 1.0)), near(t), near(u), far(E.add(u, 1.0))], -1)


def _bicubic_sample(input: Any, x: Any, y: Any, padding_mode: str,  # noqa: A002
                    align: bool) -> Any:
    """grid_sample's bicubic mode at pixel coordinates ``x``, ``y`` (N, Ho, Wo): the 4x4
    pixels around each point, each tap's coordinate padded on its own (clamped or
    reflected), as PyTorch does. The sixteen taps are one gather over a trailing (4, 4)."""
    n, _, h, w = input.shape
    offsets = np.arange(-1.0, 3.0, dtype=np.dtype(x.dtype))
    x0, y0 = E.floor(S.stop_gradient(x)), E.floor(S.stop_gradient(y))
    wx, wy = _cubic_weights(E.sub(x, x0)), _cubic_weights(E.sub(y, y0))

    def padded(coord: Any, size: int) -> Any:
        if padding_mode == "border":
            return M.clamp(coord, 0.0, float(size - 1))
        if padding_mode == "reflection":
            return _reflect(coord, size, align)
        return coord

    xs = padded(E.add(x0.unsqueeze(-1), offsets), w)  # (N, Ho, Wo, 4)
    ys = padded(E.add(y0.unsqueeze(-1), offsets), h)
    shape = tuple(x.shape) + (4, 4)
    vals = _tapper(input)(S.broadcast_to(xs.unsqueeze(-2), shape),
                          S.broadcast_to(ys.unsqueeze(-1), shape))  # (N, C, Ho, Wo, 4, 4)
    weights = E.mul(wy.unsqueeze(-1), wx.unsqueeze(-2))
    return R.sum(E.mul(vals, weights.unsqueeze(1)), (-2, -1))
