"""Pooling. The 1-D and 2-D pools are `dualgraph.ops.pool`'s primitives; the volumetric
pools and max unpooling are compositions of them (one 2-D op per kernel offset along the
depth, max-reduced), so they trace, differentiate and compile with no primitive of their
own."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...eager.internal import array_of
from ...eager.tensor import Tensor
from ...errors import EagerOnlyError
from ...ops import elementwise as E
from ...ops import index as I
from ...ops import reduce as R
from ...ops import shape as S
from ...ops.pool import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
    pad,
)
from ...ops.pool import pooled_size as _pooled_size
from ._args import _check_input
from .conv import _depth_slices, _ints

# The 1-D and 2-D pools are primitives' public functions (dualgraph/ops/pool.py).
__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d",
    "adaptive_avg_pool3d", "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d",
    "adaptive_max_pool3d_with_indices", "avg_pool3d", "lp_pool1d", "lp_pool2d",
    "lp_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d",
    "max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "fractional_max_pool2d",
]


def _pool3d_args(name: str, x: Any, kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any, ceil_mode: bool) -> tuple:
    if x.ndim not in (4, 5) or 0 in tuple(x.shape)[-4:]:
        raise RuntimeError(f"{name}: non-empty 4D or 5D (batch mode) tensor expected for input")
    k = _ints("kernel_size", kernel_size, 3, "pooling")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _ints("stride", stride, 3, "pooling")
    p, d = _ints("padding", padding, 3, "pooling"), _ints("dilation", dilation, 3, "pooling")
    if min(k) <= 0 or min(s) <= 0 or min(d) <= 0:
        raise RuntimeError(f"{name}: kernel_size, stride and dilation must be greater than "
                           f"zero, got {k}, {s}, {d}")
    for i in range(3):
        if p[i] < 0 or 2 * p[i] > (k[i] - 1) * d[i] + 1:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p[i]}, kernel_size={k[i]} and dilation={d[i]}")
    size = tuple(x.shape)[-3:]
    out = tuple(_pooled_size(size[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(3))
    if min(out) < 1:
        raise RuntimeError(f"{name}: given input size {size}, calculated output size {out} is "
                           "too small")
    return k, s, p, d, out


def _as5d(x: Any) -> tuple[Any, bool]:
    return (S.reshape(x, (1,) + tuple(x.shape)), True) if x.ndim == 4 else (x, False)


def _depth_padded(x: Any, before: int, n_needed: int, value: float) -> Any:
    """``x`` padded along dim 2 by ``before`` and at the end up to ``n_needed`` positions."""
    after = max(n_needed - x.shape[2] - before, 0)
    return pad(x, (0, 0, 0, 0, before, after), value=value) if before or after else x


def avg_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """3-D average pooling of (N, C, D, H, W) or (C, D, H, W) input, as PyTorch: window sums
    (2-D sum pooling, then sums over the depth offsets) over each window's divisor.
    ``F.avg_pool3d(x, 2)``"""
    _check_input("avg_pool3d", input)
    k, s, p, _, out = _pool3d_args("avg_pool3d", input, kernel_size, stride, padding, 1,
                                   ceil_mode)
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    x, added = _as5d(input)
    n, c, dd, h, w = x.shape
    sums = avg_pool2d(S.reshape(x, (n, c * dd, h, w)), k[1:], s[1:], p[1:], ceil_mode, True, 1)
    sums = S.reshape(sums, (n, c, dd) + out[1:])
    sums = _depth_padded(sums, p[0], (out[0] - 1) * s[0] + k[0], 0.0)
    total = None
    for part in _depth_slices(sums, k[0], s[0], 1, out[0]):
        total = part if total is None else E.add(total, part)
    if divisor_override is not None:
        res = E.div(total, float(divisor_override))
    else:
        counts = [_window_counts(size, kk, ss, pp, o, count_include_pad)
                  for size, kk, ss, pp, o in zip((dd, h, w), k, s, p, out)]
        div = counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]
        res = E.div(total, div.astype(np.dtype(x.dtype)))
    return S.reshape(res, tuple(res.shape[1:])) if added else res


def _window_counts(size: int, k: int, s: int, p: int, n_out: int, include_pad: bool
                   ) -> np.ndarray:
    """Per output position of one dim, how many elements its window averages (PyTorch's
    rule: padding counts, when included, but not beyond the padded end)."""
    start = np.arange(n_out) * s - p
    end = np.minimum(start + k, size + p)
    if include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def max_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """3-D max pooling of (N, C, D, H, W) or (C, D, H, W) input, as PyTorch: 2-D max
    pooling of each depth slice, then the max over each window's depth offsets.
    ``return_indices`` adds the int64 index of each max in the flattened ``D*H*W`` volume
    (ties: the first in depth, then row, then column order, as PyTorch's CPU kernel).
    ``F.max_pool3d(x, 2)``"""
    _check_input("max_pool3d", input)
    k, s, p, d, out = _pool3d_args("max_pool3d", input, kernel_size, stride, padding,
                                   dilation, ceil_mode)
    x, added = _as5d(input)
    n, c, dd, h, w = x.shape
    planes = max_pool2d(S.reshape(x, (n, c * dd, h, w)), k[1:], s[1:], p[1:], d[1:], ceil_mode,
                        return_indices)
    if return_indices:
        planes, where = planes
    span = (out[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1
    planes = _depth_padded(S.reshape(planes, (n, c, dd) + out[1:]), p[0], span, -math.inf)
    parts = _depth_slices(planes, k[0], s[0], d[0], out[0])
    if len(parts) == 1:
        res, offset = parts[0], None
    else:  # the max over the depth offsets, as one 2-D reduction
        shape = tuple(parts[0].shape)
        stacked = S.reshape(S.stack(parts, -1), (-1, len(parts)))
        res = S.reshape(R.amax(stacked, -1), shape)
        offset = S.reshape(R.argmax(stacked, -1), shape) if return_indices else None
    if not return_indices:
        return S.reshape(res, tuple(res.shape[1:])) if added else res
    where = _depth_padded(S.reshape(where, (n, c, dd) + out[1:]), p[0], span, 0)
    iparts = _depth_slices(where, k[0], s[0], d[0], out[0])
    first = np.arange(out[0], dtype=np.int64)[:, None, None] * s[0] - p[0]
    if offset is None:
        plane_index, depth = iparts[0], first
    else:  # the chosen offset's plane index, and its depth
        stacked = S.reshape(S.stack(iparts, -1), (-1, len(iparts)))
        pick = S.reshape(offset, (-1, 1))
        plane_index = S.reshape(I.gather(stacked, 1, pick), tuple(res.shape))
        depth = E.add(E.mul(offset, d[0]), first)
    index = E.add(E.mul(depth, h * w), plane_index)
    if added:
        return S.reshape(res, tuple(res.shape[1:])), S.reshape(index, tuple(index.shape[1:]))
    return res, index


def _max_unpool(name: str, input: Any, indices: Any, kernel_size: Any, stride: Any,  # noqa: A002
                padding: Any, output_size: Any, dims: int) -> Any:
    """Each value of ``input`` put at its index (as pooling returned it) in a zero tensor
    whose last ``dims`` dims are ``(n - 1) * stride - 2 * padding + kernel_size``, or
    ``output_size``."""
    _check_input(name, input)
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{name}: expected a {dims + 1}-D or {dims + 2}-D input, got "
                           f"shape {tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({tuple(input.shape)}) but got indices tensor with shape: "
                           f"{tuple(indices.shape)}")
    k = _ints("kernel_size", kernel_size, dims, "pooling")
    s = k if stride is None else _ints("stride", stride, dims, "pooling")
    p = _ints("padding", padding, dims, "pooling")
    spatial = tuple(input.shape[-dims:])
    size = tuple((n - 1) * ss - 2 * pp + kk for n, ss, pp, kk in zip(spatial, s, p, k))
    if output_size is not None:
        given = tuple(int(v) for v in tuple(output_size))
        if len(given) not in (dims, input.ndim):
            raise ValueError(f"output_size should be a sequence containing {dims} or "
                             f"{input.ndim} elements, but it has a length of '{len(given)}'")
        for i, (v, default, ss) in enumerate(zip(given[-dims:], size, s)):
            if not default - ss < v < default + ss:
                raise ValueError(f'invalid output_size "{given}" (dim {i} must be between '
                                 f'{default - ss} and {default + ss})')
        size = given[-dims:]
    lead = tuple(input.shape[:-dims])
    count = int(np.prod(spatial))
    if isinstance(indices, Tensor) and indices.numel():  # traced indices are not known here
        worst = array_of(indices)
        bad = worst[(worst < 0) | (worst >= int(np.prod(size)))]
        if bad.size:
            raise RuntimeError(f"Found an invalid max index: {int(bad.flat[0])} (output "
                               f"volumes are of size {'x'.join(map(str, size))})")
    flat_x = S.reshape(input, lead + (count,))
    flat_i = S.reshape(indices, lead + (count,))
    zeros = np.zeros(lead + (int(np.prod(size)),), np.dtype(input.dtype))
    out = I.scatter(zeros, -1, flat_i, flat_x)
    return S.reshape(out, lead + size)


def max_unpool2d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The inverse of `max_pool2d` with ``return_indices``: each value put back at its
    index in a zero (N, C, H_out, W_out) plane, ``H_out = (H - 1) * stride - 2 * padding +
    kernel_size`` unless ``output_size`` says otherwise.
    ``F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2)``"""
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding,
                       output_size, 2)


def max_unpool3d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The inverse of `max_pool3d` with ``return_indices``, over (N, C, D, H, W) or
    (C, D, H, W). ``F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2)``"""
    return _max_unpool("max_unpool3d", input, indices, kernel_size, stride, padding,
                       output_size, 3)


def max_unpool1d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The inverse of `max_pool1d` with ``return_indices``, over (N, C, L) or (C, L)."""
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding,
                       output_size, 1)


# Power-average and volumetric adaptive pooling.
def _lp_finish(out: Any, norm_type: float, window: int) -> Any:
    """``(sign(s) * relu(|s|) * window) ** (1 / p)`` of the averaged powers, as PyTorch."""
    return E.pow(E.mul(E.mul(E.sign(out), E.relu(E.abs(out))), float(window)), 1.0 / norm_type)


def lp_pool1d(input: Any, norm_type: float, kernel_size: int, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling ``(sum over the window of x ** p) ** (1 / p)`` over the last
    dim of (N, C, L) or (C, L) input."""
    k = _ints("kernel_size", kernel_size, 1, "pooling")[0]
    s = k if stride is None else _ints("stride", stride, 1, "pooling")[0]
    out = avg_pool1d(E.pow(input, norm_type), k, s, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


def lp_pool2d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling over the last two dims of (N, C, H, W) or (C, H, W) input."""
    kh, kw = _ints("kernel_size", kernel_size, 2, "pooling")
    s = (kh, kw) if stride is None else _ints("stride", stride, 2, "pooling")
    out = avg_pool2d(E.pow(input, norm_type), (kh, kw), s, 0, ceil_mode)
    return _lp_finish(out, norm_type, kh * kw)


def lp_pool3d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling over the last three dims of a 5-D or 4-D input."""
    k = _ints("kernel_size", kernel_size, 3, "pooling")
    s = k if stride is None else _ints("stride", stride, 3, "pooling")
    out = avg_pool3d(E.pow(input, norm_type), k, s, 0, ceil_mode)
    return _lp_finish(out, norm_type, k[0] * k[1] * k[2])


def _adaptive3d(name: str, input: Any, output_size: Any) -> tuple:  # noqa: A002
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got "
                           f"{list(input.shape)}")
    if 0 in tuple(input.shape[-3:]):
        raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(input.shape)}")
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * 3
    out = tuple(int(o) if o is not None else int(n)
                for o, n in zip(output_size, input.shape[-3:]))
    x, added = _as5d(input)
    return x, added, out


def _windows(size: int, n_out: int) -> list:
    """PyTorch's adaptive windows ``[floor(i * size / n), ceil((i + 1) * size / n))``."""
    return [(i * size // n_out, -(-(i + 1) * size // n_out)) for i in range(n_out)]


def adaptive_avg_pool3d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) input to ``output_size``: 2-D
    adaptive pooling of the depth slices, then the mean over each depth window."""
    x, added, (od, oh, ow) = _adaptive3d("adaptive_avg_pool3d", input, output_size)
    n, c, dd, h, w = x.shape
    planes = S.reshape(adaptive_avg_pool2d(S.reshape(x, (n, c * dd, h, w)), (oh, ow)),
                       (n, c, dd, oh, ow))
    parts = [R.mean(planes[:, :, a:b], 2) for a, b in _windows(dd, od)]
    out = S.stack(parts, 2)
    return S.reshape(out, tuple(out.shape[1:])) if added else out


def adaptive_max_pool3d(input: Any, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Any:
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) input to ``output_size``;
    ``return_indices`` adds each max's index in the flattened ``D*H*W`` volume."""
    x, added, (od, oh, ow) = _adaptive3d("adaptive_max_pool3d", input, output_size)
    n, c, dd, h, w = x.shape
    planes, where = adaptive_max_pool2d(S.reshape(x, (n, c * dd, h, w)), (oh, ow), True)
    planes = S.reshape(planes, (n, c, dd, oh, ow))
    where = S.reshape(where, (n, c, dd, oh, ow))
    values, indices = [], []
    for a, b in _windows(dd, od):
        win = planes[:, :, a:b]
        values.append(R.amax(win, 2))
        if return_indices:
            pick = R.argmax(win, 2, keepdim=True)  # the first max in depth, as PyTorch
            plane_index = S.reshape(I.gather(where[:, :, a:b], 2, pick), (n, c, oh, ow))
            depth = S.reshape(E.add(pick, a), (n, c, oh, ow))
            indices.append(E.add(E.mul(depth, h * w), plane_index))
    out = S.stack(values, 2)
    if added:
        out = S.reshape(out, tuple(out.shape[1:]))
    if not return_indices:
        return out
    idx = S.stack(indices, 2)
    return out, (S.reshape(idx, tuple(idx.shape[1:])) if added else idx)


# PyTorch's ``*_with_indices`` spellings: the pools with ``return_indices=True``.
def max_pool1d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple:
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple:
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple:
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = True) -> tuple:
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = True) -> tuple:
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = True) -> tuple:
    return adaptive_max_pool3d(input, output_size, True)



def _fractional_starts(samples: np.ndarray, size: int, out: int, k: int) -> np.ndarray:
    """The window starts along one dim for each plane's sample u in [0, 1), as PyTorch
    draws them: ``int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (size - k) /
    (out - 1)`` in the input's dtype, and the last window ending at the edge."""
    t = samples.dtype.type
    starts = np.full(samples.shape + (out,), size - k, np.int64)
    if out > 1:
        alpha = t(size - k) / t(out - 1)
        i = np.arange(out - 1, dtype=samples.dtype)
        u = samples[..., None]
        starts[..., :-1] = ((i + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    return starts


def fractional_max_pool2d(input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Any = None) -> Any:
    """Fractional max pooling (Graham, 2014) over (N, C, H, W) or (C, H, W): windows of
    ``kernel_size`` at pseudo-random starts chosen per plane from ``_random_samples``
    (N, C, 2) in [0, 1) (drawn with `dg.rand` when not given; sample 0 places the columns,
    1 the rows, as PyTorch's), giving ``output_size`` or ``input size * output_ratio``.
    ``return_indices=True`` also returns each maximum's flat index in its H x W plane. The
    window starts come from the samples' values, so it runs eagerly only.

    >>> F.fractional_max_pool2d(dg.ones(1, 1, 4, 4), 2, output_size=2).shape
    (1, 1, 2, 2)
    """
    from ...eager.creation import rand
    from ...modes import current_trace

    x = input
    if len(x.shape) not in (3, 4):
        raise RuntimeError(f"fractional_max_pool2d(): Expected 3D or 4D tensor, but got: "
                           f"{tuple(x.shape)}")
    if current_trace() is not None:
        raise EagerOnlyError("fractional_max_pool2d places its windows from the values of "
                             "random samples, which a static graph cannot capture: run this "
                             "part eagerly")
    batched = len(x.shape) == 4
    if not batched:
        x = S.reshape(x, (1,) + tuple(x.shape))
    n, c, h, w = x.shape
    kh, kw = _ints("fractional_max_pool2d", kernel_size, 2, "pooling")
    if output_size is not None:
        oh, ow = _ints("fractional_max_pool2d", output_size, 2, "pooling")
    elif output_ratio is not None:
        rh, rw = (output_ratio, output_ratio) if np.isscalar(output_ratio) else output_ratio
        oh, ow = int(h * float(rh)), int(w * float(rw))
    else:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size "
                         "or an output_ratio")
    if oh + kh - 1 > h or ow + kw - 1 > w:
        raise RuntimeError(f"fractional_max_pool2d(): pool size ({kh}, {kw}) too large "
                           f"relative to input size ({h}, {w}) for output size ({oh}, {ow})")
    if _random_samples is None:
        _random_samples = rand(n, c, 2, dtype=x.dtype)
    samples = np.asarray(_random_samples)
    if samples.shape != (n, c, 2):
        raise RuntimeError(f"fractional_max_pool2d(): expected _random_samples of shape "
                           f"{(n, c, 2)}, but got {tuple(samples.shape)}")
    rows = _fractional_starts(samples[..., 1], h, oh, kh)[..., :, None] + np.arange(kh)
    cols = _fractional_starts(samples[..., 0], w, ow, kw)[..., :, None] + np.arange(kw)
    # (n, c, oh, ow, kh * kw): each window's flat indices into its plane
    idx = (rows[:, :, :, None, :, None] * w + cols[:, :, None, :, None, :]).reshape(
        n, c, oh, ow, kh * kw)
    vals = I.take_along_dim(S.reshape(x, (n, c, h * w)), idx.reshape(n, c, -1), -1)
    out, arg = R.max(S.reshape(vals, (n, c, oh, ow, kh * kw)), -1)
    if not batched:
        out = S.reshape(out, (c, oh, ow))
    if not return_indices:
        return out
    where = I.take_along_dim(idx, S.reshape(arg, (n, c, oh, ow, 1)), -1)
    where = S.reshape(where, (n, c, oh, ow) if batched else (c, oh, ow))
    return out, where
