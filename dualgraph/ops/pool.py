"""Pooling, padding, resampling and sliding windows.

Primitives, each with a backward op whose own VJP is the forward again, so double backward
works:

- ``max_pool2d_indices`` / ``adaptive_max_pool2d_indices``: the int64 index (into the
  flattened ``H*W`` plane) of each window's max, PyTorch's choice among ties (the first)
  and nans (the last). Not differentiable; the values are a ``pool_gather`` by these
  indices (`dualgraph.ops.gather`, as is nearest upsampling, whose indices are a constant).
- ``avg_pool2d`` / ``adaptive_avg_pool2d`` and their transposes ``*_backward``.
- ``pad`` (constant; negative pads crop); reflect, replicate and circular padding are the
  gather ``pad_index`` (`dualgraph.ops.gather`).
- ``unfold`` (``Tensor.unfold``: sliding windows, a copy here) and ``unfold_backward``.

Every window is described once, by `pool_windows`: per spatial dim, each window's first
in-range position, its in-range count, the step between positions (the dilation) and the
averaging divisor. Kernels, shape rules and the Numba lowerings all read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from . import resample as RS
from .broadcast import normalize_dim
from .elementwise import add, mul
from .gather import PAD_INDEX, pool_gather
from .registry import OPS, OpDef, register
from .shape import reshape, transpose

# ------------------------------------------------------------------------------ windows


@dataclass(frozen=True)
class Windows:
    """The windows of one pooled dimension of size ``size``.

    Window ``o`` reads positions ``start[o] + k * step`` for ``k < count[o]``, all in range;
    ``div[o]`` is its factor of the averaging divisor (``divisor_override`` on the first dim,
    1 on the second)."""

    size: int
    start: tuple
    count: tuple
    step: int
    div: tuple

    def __len__(self) -> int:
        return len(self.start)


def pooled_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's output length of a sliding pool (``pooling_output_shape``)."""
    span = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = span // s + 1
    # With ceil_mode the last window must still start inside the input or its left padding.
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _sliding(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool,
             include_pad: bool) -> Windows:
    starts, counts, divs = [], [], []
    for o in range(pooled_size(size, k, s, p, d, ceil_mode)):
        first = o * s - p
        k0 = -(first // d) if first < 0 else 0  # the first k with first + k*d >= 0
        k1 = min(k - 1, (size - 1 - first) // d)
        n = max(0, k1 - k0 + 1)
        starts.append(first + k0 * d)
        counts.append(n)
        # count_include_pad counts padding positions but not what lies past the padding.
        divs.append(min(first + k, size + p) - first if include_pad else n)
    return Windows(size, tuple(starts), tuple(counts), d, tuple(divs))


def _adaptive(size: int, out: int) -> Windows:
    # PyTorch's start/end: floor(o * size / out) and ceil((o + 1) * size / out).
    starts = tuple((o * size) // out for o in range(out))
    ends = tuple(-((-(o + 1) * size) // out) for o in range(out))
    counts = tuple(e - s for s, e in zip(starts, ends))
    return Windows(size, starts, counts, 1, counts)


def pool_windows(attrs: dict, hw: tuple) -> tuple[Windows, Windows]:
    """The windows along H and W of a pooling op with ``attrs`` over a plane ``hw``."""
    if "output_size" in attrs:
        return tuple(_adaptive(n, o) for n, o in zip(hw, attrs["output_size"]))
    k, s, p = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    d = attrs.get("dilation", (1, 1))
    include = attrs.get("count_include_pad", True)
    wins = [_sliding(hw[i], k[i], s[i], p[i], d[i], attrs["ceil_mode"], include)
            for i in range(2)]
    override = attrs.get("divisor_override")
    if override is not None:
        h, w = wins
        wins = [Windows(h.size, h.start, h.count, h.step, (override,) * len(h)),
                Windows(w.size, w.start, w.count, w.step, (1,) * len(w))]
    return tuple(wins)


def _window_sums(x: np.ndarray, win: Windows, axis: int) -> np.ndarray:
    """Sums of ``x`` over each (step 1) window along ``axis``: one slice sum per window, so
    a nan or inf stays inside the windows that hold it (a 0/1 matrix product would not)."""
    x = np.moveaxis(x, axis, -1)
    out = np.empty(x.shape[:-1] + (len(win),), x.dtype)
    for o, (s, n) in enumerate(zip(win.start, win.count)):
        out[..., o] = x[..., s:s + n].sum(-1)
    return np.moveaxis(out, -1, axis)


def _window_spread(g: np.ndarray, win: Windows, axis: int) -> np.ndarray:
    """The transpose of `_window_sums`: each window's value added over its positions."""
    g = np.moveaxis(g, axis, -1)
    out = np.zeros(g.shape[:-1] + (win.size,), g.dtype)
    for o, (s, n) in enumerate(zip(win.start, win.count)):
        out[..., s:s + n] += g[..., o:o + 1]
    return np.moveaxis(out, -1, axis)


def _divisor(h: Windows, w: Windows, dtype: np.dtype) -> np.ndarray:
    return np.multiply.outer(np.asarray(h.div, dtype), np.asarray(w.div, dtype))


def _plane_infer(name: str, x: Any) -> tuple:
    shape = tuple(x.shape)
    if len(shape) < 2:
        raise ShapeError(f"{name}: expected an input of at least 2 dimensions, got {shape}")
    return shape


# ------------------------------------------------------------------------- max pooling


def _max_indices_infer(x: Any, **attrs: Any) -> tuple:
    shape = _plane_infer("max_pool2d", x)
    h, w = pool_windows(attrs, shape[-2:])
    return shape[:-2] + (len(h), len(w)), np.dtype(np.int64)


def _tiles(win: Windows) -> int:
    """The window length when the windows tile the dimension from 0 (stride == kernel, no
    padding or dilation, every window full), else 0."""
    k = win.count[0] if win.count else 0
    if (not k or win.step != 1 or win.count != (k,) * len(win)
            or win.start != tuple(range(0, k * len(win), k))):
        return 0
    return k


def _tiled_max_indices(x: np.ndarray, oh: int, kh: int, ow: int, kw: int) -> np.ndarray:
    """`_max_indices_impl` for windows that tile the plane (``MaxPool2d(2)``): the first
    maximum in window order (the lowest position, PyTorch's choice among ties) of each
    window. One strided copy lays the planes out as one contiguous slab per window offset
    (kh*kw, rows, oH, oW); the maximum is then a running ``np.maximum`` over the slabs, and
    the winning offset the first slab equal to it, found with no branch as
    ``n0 * (1 + n1 * (1 + ...))`` over the slabs' "not equal" flags in one byte per
    window. NumPy runs every pass over contiguous slabs with its vector loops, where the
    same passes over strided views of the plane ran element by element (2.4x slower on
    LeNet's first pool). ``-0`` and ``+0`` compare equal, so a tie between them goes to
    the first, as a strictly-greater scan gives. The caller sends planes holding a nan
    to the general path."""
    width = x.shape[-1]
    lead = x.shape[:-2]
    k = kh * kw
    v = x[..., :oh * kh, :ow * kw].reshape((-1, oh, kh, ow, kw))
    slabs = np.empty((kh, kw, v.shape[0], oh, ow), x.dtype)
    np.copyto(slabs, v.transpose(2, 4, 0, 1, 3))
    slabs = slabs.reshape((k,) + slabs.shape[2:])
    top = slabs[0].copy()
    for s in range(1, k):
        np.maximum(top, slabs[s], out=top)
    code_type = np.uint8 if k <= 255 else np.int64
    if k == 1:
        code = np.zeros(top.shape, code_type)
    else:
        # Horner from the last offset: past the first equal slab the product is zero.
        code = np.not_equal(slabs[k - 2], top).astype(code_type)
        if k > 2:
            code += code_type(1)
        for s in range(k - 3, -1, -1):
            np.multiply(code, np.not_equal(slabs[s], top), out=code)
            if s:
                code += code_type(1)
    offsets = np.arange(k, dtype=np.int64)
    out = np.take((offsets // kw) * width + offsets % kw, code)
    out += (np.arange(oh, dtype=np.int64)[:, None] * (kh * width)
            + np.arange(ow, dtype=np.int64)[None, :] * kw)
    return out.reshape(lead + (oh, ow))


def _max_indices_impl(x: np.ndarray, **attrs: Any) -> np.ndarray:
    shape = x.shape
    h, w = pool_windows(attrs, shape[-2:])
    width = shape[-1]
    kh, kw = _tiles(h), _tiles(w)
    # A nan makes PyTorch take the window's last nan: the general path below knows that.
    if kh and kw and x.size and x.dtype.kind == "f" and not np.isnan(x.max()):
        return _tiled_max_indices(x, len(h), kh, len(w), kw)
    # Every (window, slot) position; slots past a window's count repeat its first position,
    # which never changes which position wins (ties go to the lowest position anyway).
    def slots(win: Windows) -> np.ndarray:
        k = max(win.count, default=0)
        ks = np.arange(k)
        pos = np.asarray(win.start)[:, None] + ks * win.step
        return np.where(ks < np.asarray(win.count)[:, None], pos, np.asarray(win.start)[:, None])

    ph, pw = slots(h), slots(w)
    # pos[oh, ow, a, b] = ph[oh, a] * W + pw[ow, b], flattened per window.
    pos = (ph[:, None, :, None] * width + pw[None, :, None, :]).reshape(len(h), len(w), -1)
    flat = x.reshape(shape[:-2] + (shape[-2] * width,))
    vals = flat[..., pos]  # (..., OH, OW, K)
    best = vals.max(axis=-1, keepdims=True)  # nan when the window holds one
    big = np.iinfo(np.int64).max
    first_max = np.where(vals == best, pos, big).min(axis=-1)
    # PyTorch takes a nan whenever it meets one: the last nan of the window wins.
    isnan = vals != vals
    last_nan = np.where(isnan, pos, -1).max(axis=-1)
    return np.where(isnan.any(axis=-1), last_nan, first_max).astype(np.int64)


# ------------------------------------------------------------------------- avg pooling


def _check_float(name: str, x: Any) -> None:
    if x.dtype.kind not in "fc":
        raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype}")


def _avg_infer(x: Any, **attrs: Any) -> tuple:
    shape = _plane_infer("avg_pool2d", x)
    _check_float("avg_pool2d", x)
    h, w = pool_windows(attrs, shape[-2:])
    return shape[:-2] + (len(h), len(w)), x.dtype


def _avg_impl(x: np.ndarray, **attrs: Any) -> np.ndarray:
    h, w = pool_windows(attrs, x.shape[-2:])
    s = _window_sums(_window_sums(x, w, -1), h, -2)
    return (s / _divisor(h, w, x.dtype)).astype(x.dtype, copy=False)


def _avg_backward_infer(g: Any, size: tuple, **attrs: Any) -> tuple:
    return tuple(g.shape[:-2]) + tuple(size), g.dtype


def _avg_backward_impl(g: np.ndarray, size: tuple, **attrs: Any) -> np.ndarray:
    h, w = pool_windows(attrs, size)
    gd = g / _divisor(h, w, g.dtype)
    out = _window_spread(_window_spread(gd, h, -2), w, -1)
    return out.astype(g.dtype, copy=False)


def _avg_vjp(backward: str):
    def vjp(ctx, g):
        size = tuple(ctx.inputs[0].shape[-2:])
        return (bind(OPS[backward], g, size=size, **ctx.attrs),)

    return vjp


def _avg_backward_vjp(forward: str):
    def vjp(ctx, g):
        attrs = {k: v for k, v in ctx.attrs.items() if k != "size"}
        return (bind(OPS[forward], g, **attrs),)

    return vjp


# ----------------------------------------------------------------------------- padding
# ``pad`` attributes are canonical: one (before, after) pair per dimension of the input.


def _pad_infer(x: Any, pad: tuple, value: Any) -> tuple:
    shape = tuple(x.shape)
    out = []
    for d, (n, (b, a)) in enumerate(zip(shape, pad)):
        if n + b + a < 0:
            raise ShapeError(f"The input size {n}, plus negative padding {b} and {a} resulted "
                             f"in a negative output size, which is invalid. Check dimension "
                             f"{d} of your input.")
        out.append(n + b + a)
    return tuple(out), x.dtype


def _pad_impl(x: np.ndarray, pad: tuple, value: Any) -> np.ndarray:
    crop = tuple(slice(max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(x.shape, pad))
    widths = [(max(b, 0), max(a, 0)) for b, a in pad]
    return np.pad(x[crop], widths, constant_values=x.dtype.type(value))


def _pad_vjp(ctx, g):
    # Padding then cropping by the same amounts gives x back, and the reverse: the
    # transpose of a constant pad is the pad by the negated amounts, with zeros.
    return (bind(PAD, g, pad=tuple((-b, -a) for b, a in ctx.attrs["pad"]), value=0),)


# ----------------------------------------------------------------------------- unfold


def _unfold_infer(x: Any, dimension: int, size: int, step: int) -> tuple:
    shape = tuple(x.shape)
    n = shape[dimension]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {dimension} is {n} but size "
                           f"is {size}")
    out = shape[:dimension] + ((n - size) // step + 1,) + shape[dimension + 1:] + (size,)
    return out, x.dtype


def _unfold_impl(x: np.ndarray, dimension: int, size: int, step: int) -> np.ndarray:
    w = np.lib.stride_tricks.sliding_window_view(x, size, axis=dimension)
    index = (slice(None),) * dimension + (slice(None, None, step),)
    return np.ascontiguousarray(w[index])


def _unfold_backward_infer(g: Any, dimension: int, size: int, step: int, length: int) -> tuple:
    shape = tuple(g.shape)[:-1]
    return shape[:dimension] + (length,) + shape[dimension + 1:], g.dtype


def _unfold_backward_impl(g: np.ndarray, dimension: int, size: int, step: int,
                          length: int) -> np.ndarray:
    shape = g.shape[:-1]
    windows = shape[dimension]
    out = np.zeros(shape[:dimension] + (length,) + shape[dimension + 1:], g.dtype)
    lead = (slice(None),) * dimension
    for k in range(size):  # slot k of every window, all windows at once
        out[lead + (slice(k, k + step * (windows - 1) + 1, step),)] += g[..., k]
    return out


def _unfold_vjp(ctx, g):
    length = ctx.inputs[0].shape[ctx.attrs["dimension"]]
    return (bind(UNFOLD_BACKWARD, g, length=length, **ctx.attrs),)


def _unfold_backward_vjp(ctx, g):
    attrs = {k: v for k, v in ctx.attrs.items() if k != "length"}
    return (bind(UNFOLD, g, **attrs),)


# ------------------------------------------------------------------------ registration

MAX_POOL2D_INDICES = register(OpDef(
    "max_pool2d_indices", _max_indices_impl, _max_indices_infer, None,
    "MaxPool2DWithIndicesBackward0", differentiable=False,
))
ADAPTIVE_MAX_POOL2D_INDICES = register(OpDef(
    "adaptive_max_pool2d_indices", _max_indices_impl, _max_indices_infer, None,
    "AdaptiveMaxPool2DBackward0", differentiable=False,
))
AVG_POOL2D = register(OpDef(
    "avg_pool2d", _avg_impl, _avg_infer, _avg_vjp("avg_pool2d_backward"), "AvgPool2DBackward0",
))
AVG_POOL2D_BACKWARD = register(OpDef(
    "avg_pool2d_backward", _avg_backward_impl, _avg_backward_infer,
    _avg_backward_vjp("avg_pool2d"), "AvgPool2DBackwardBackward0",
))
ADAPTIVE_AVG_POOL2D = register(OpDef(
    "adaptive_avg_pool2d", _avg_impl, _avg_infer, _avg_vjp("adaptive_avg_pool2d_backward"),
    "AdaptiveAvgPool2DBackward0",
))
ADAPTIVE_AVG_POOL2D_BACKWARD = register(OpDef(
    "adaptive_avg_pool2d_backward", _avg_backward_impl, _avg_backward_infer,
    _avg_backward_vjp("adaptive_avg_pool2d"), "AdaptiveAvgPool2DBackwardBackward0",
))
PAD = register(OpDef("pad", _pad_impl, _pad_infer, _pad_vjp, "ConstantPadNdBackward0"))
UNFOLD = register(OpDef("unfold", _unfold_impl, _unfold_infer, _unfold_vjp, "UnfoldBackward0"))
UNFOLD_BACKWARD = register(OpDef(
    "unfold_backward", _unfold_backward_impl, _unfold_backward_infer, _unfold_backward_vjp,
    "UnfoldBackwardBackward0",
))


# ---------------------------------------------------------------------- public functions


def _ints(name: str, value: Any, n: int, what: str) -> tuple:
    """``value`` (an int or a sequence of 1 or ``n`` ints) as an ``n``-tuple."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    value = tuple(value)
    if len(value) == 1:
        value = value * n
    if len(value) != n or not all(isinstance(v, (int, np.integer)) for v in value):
        raise TypeError(f"{name}: {what} must be an int or a tuple of {n} ints, got {value!r}")
    return tuple(int(v) for v in value)


def _pool_args(name: str, x: Any, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any, ceil_mode: bool) -> dict:
    shape = tuple(x.shape)
    if len(shape) not in (3, 4) or 0 in shape[-3:]:
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    k = _ints(name, kernel_size, 2, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _ints(name, stride, 2, "stride")
    p = _ints(name, padding, 2, "padding")
    d = _ints(name, dilation, 2, "dilation")
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} "
                           f"kW: {k[1]}")
    if min(s) <= 0:
        raise RuntimeError("stride should not be zero")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} "
                           f"dilationW: {d[1]}")
    for i in range(2):
        if p[i] < 0 or 2 * p[i] > (k[i] - 1) * d[i] + 1:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p[i]}, kernel_size={k[i]} and dilation={d[i]}")
    out = [pooled_size(shape[-2 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(2)]
    if min(out) < 1:
        c, h, w = shape[-3:]
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}). Output size is too small")
    return {"kernel_size": k, "stride": s, "padding": p, "dilation": d,
            "ceil_mode": bool(ceil_mode)}


def max_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """2-D max pooling over the last two dims of a 3-D or 4-D input, as PyTorch (ties: the
    first position; a nan wins). ``return_indices`` adds the int64 index of each max in the
    flattened ``H*W`` plane. ``F.max_pool2d(x, 2)``"""
    attrs = _pool_args("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
    idx = bind(MAX_POOL2D_INDICES, input, **attrs)
    out = pool_gather(input, idx, "max_pool2d")
    return (out, idx) if return_indices else out


def avg_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """2-D average pooling over the last two dims of a 3-D or 4-D input, as PyTorch.
    ``F.avg_pool2d(x, 3, stride=2, padding=1)``"""
    attrs = _pool_args("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    del attrs["dilation"]
    _check_float("avg_pool2d", input)
    if divisor_override is not None:
        if int(divisor_override) == 0:
            raise RuntimeError("divisor must be not zero")
        divisor_override = int(divisor_override)
    return bind(AVG_POOL2D, input, count_include_pad=bool(count_include_pad),
                divisor_override=divisor_override, **attrs)


def _adaptive_size(name: str, x: Any, output_size: Any) -> tuple:
    shape = tuple(x.shape)
    if len(shape) not in (3, 4):
        raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got {list(shape)}")
    for d in range(len(shape) - 3 if len(shape) == 4 else 0, len(shape)):
        if d >= len(shape) - 2 and shape[d] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(shape)} with dimension "
                               f"{d} being empty")
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size, output_size)
    output_size = tuple(output_size)
    if len(output_size) != 2:
        raise RuntimeError(f"{name}: output_size must be 2")
    out = tuple(shape[-2 + i] if o is None else int(o) for i, o in enumerate(output_size))
    if min(out) < 0:
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to "
                           f"0 but received {out}")
    return out


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average pooling to ``output_size`` (an int, or a pair whose ``None`` keeps that dim),
    with PyTorch's windows ``[floor(i*H/OH), ceil((i+1)*H/OH))``.
    ``F.adaptive_avg_pool2d(x, (1, 1))``"""
    out = _adaptive_size("adaptive_avg_pool2d", input, output_size)
    _check_float("adaptive_avg_pool2d", input)
    return bind(ADAPTIVE_AVG_POOL2D, input, output_size=out)


def adaptive_max_pool2d(input: Any, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Any:
    """Max pooling to ``output_size``, with `adaptive_avg_pool2d`'s windows and
    `max_pool2d`'s indices. ``F.adaptive_max_pool2d(x, 2)``"""
    out = _adaptive_size("adaptive_max_pool2d", input, output_size)
    idx = bind(ADAPTIVE_MAX_POOL2D_INDICES, input, output_size=out)
    values = pool_gather(input, idx, "adaptive_max_pool2d")
    return (values, idx) if return_indices else values


def _as_plane(name: str, x: Any) -> Any:
    """A 2-D or 3-D input of a 1-D pool as ``(..., 1, L)``."""
    shape = tuple(x.shape)
    if len(shape) not in (2, 3):
        raise RuntimeError(f"{name}: expected a 2D or 3D (batch mode) input, got shape "
                           f"{shape}")
    return reshape(x, shape[:-1] + (1, shape[-1]))


def _one(name: str, value: Any, what: str) -> int:
    return _ints(name, value, 1, what)[0]


def _squeeze_plane(out: Any) -> Any:
    shape = tuple(out.shape)
    return reshape(out, shape[:-2] + (shape[-1],))


def max_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """1-D max pooling over the last dim of a 2-D or 3-D input (`max_pool2d` on a plane of
    height 1). ``F.max_pool1d(x, 2)``"""
    x = _as_plane("max_pool1d", input)
    k = _one("max_pool1d", kernel_size, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _one("max_pool1d", stride, "stride")
    out = max_pool2d(x, (1, k), (1, s), (0, _one("max_pool1d", padding, "padding")),
                     (1, _one("max_pool1d", dilation, "dilation")), ceil_mode, True)
    values, idx = _squeeze_plane(out[0]), _squeeze_plane(out[1])
    return (values, idx) if return_indices else values


def avg_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Any:
    """1-D average pooling over the last dim of a 2-D or 3-D input. ``F.avg_pool1d(x, 3)``"""
    x = _as_plane("avg_pool1d", input)
    k = _one("avg_pool1d", kernel_size, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _one("avg_pool1d", stride, "stride")
    return _squeeze_plane(avg_pool2d(x, (1, k), (1, s), (0, _one("avg_pool1d", padding,
                                                                 "padding")),
                                     ceil_mode, count_include_pad))


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average pooling of the last dim to ``output_size``. ``F.adaptive_avg_pool1d(x, 4)``"""
    x = _as_plane("adaptive_avg_pool1d", input)
    o = _one("adaptive_avg_pool1d", output_size, "output_size")
    return _squeeze_plane(adaptive_avg_pool2d(x, (1, o)))


def adaptive_max_pool1d(input: Any, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Any:
    """Max pooling of the last dim to ``output_size``. ``F.adaptive_max_pool1d(x, 4)``"""
    x = _as_plane("adaptive_max_pool1d", input)
    o = _one("adaptive_max_pool1d", output_size, "output_size")
    values, idx = adaptive_max_pool2d(x, (1, o), True)
    values, idx = _squeeze_plane(values), _squeeze_plane(idx)
    return (values, idx) if return_indices else values


_NON_CONSTANT = ("Supported combinations for non-constant padding:\n"
                 "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                 "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                 "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def pad(input: Any, pad: Any, mode: str = "constant", value: float | None = None) -> Any:  # noqa: A002
    """Pad the last ``len(pad) // 2`` dims; ``pad`` lists (before, after) pairs starting
    from the LAST dim, as PyTorch. ``mode``: ``constant`` (any number of dims; negative pads
    crop), ``reflect``, ``replicate`` or ``circular`` (1 to 3 trailing dims of a 2-D to 5-D
    input). ``F.pad(x, (1, 1, 2, 0), mode="reflect")``"""
    shape = tuple(input.shape)
    pads = tuple(int(p) for p in pad)
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pads) // 2
    if k > len(shape):
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pads)} and input of "
                           f"dimension {len(shape)}")
    # Pairs in dim order (PyTorch lists the last dim first).
    pairs = tuple((pads[2 * i], pads[2 * i + 1]) for i in reversed(range(k)))
    if mode == "constant":
        full = ((0, 0),) * (len(shape) - k) + pairs
        if all(p == (0, 0) for p in full):
            return input
        _pad_infer(input, full, value)  # eager runs no shape rule: PyTorch's error here
        return bind(PAD, input, pad=full, value=0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if k not in (1, 2, 3) or len(shape) not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pads)} is not supported for "
                                  f"{len(shape)}D input tensor.\n{_NON_CONSTANT}")
    lead = len(shape) - k
    for d, (b, a) in enumerate(pairs):
        n = shape[lead + d]
        if mode == "reflect" and (b >= n or a >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({b}, {a}) "
                               f"at dimension {lead + d} of input {list(shape)}")
        if mode == "circular" and (b > n or a > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n == 0 or n + b + a < 0:
            raise RuntimeError(f"input (size {n} at dimension {lead + d}) is too small for "
                               f"padding ({b}, {a}): calculated output size {n + b + a}")
    return bind(PAD_INDEX, input, pad=pairs, mode=mode)


def unfold(x: Any, dimension: int, size: int, step: int) -> Any:
    """All windows of ``size`` elements, ``step`` apart, along ``dimension``, as a new last
    dim (``Tensor.unfold``; a copy here, a view in PyTorch). ``x.unfold(1, 3, 2)``"""
    shape = tuple(x.shape)
    if not shape:  # a 0-d tensor is one window of one element
        d = normalize_dim("unfold", dimension, 1)
        if size > 1:
            raise RuntimeError(f"maximum size for tensor at dimension 0 is 1 but size is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        return reshape(x, (1,))
    d = normalize_dim("unfold", dimension, len(shape))
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    return bind(UNFOLD, x, dimension=d, size=int(size), step=int(step))


# ----------------------------------------------------------------------- interpolation

_INTERP_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area",
                 "nearest-exact")


def _nearest_index(n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    # PyTorch computes the source position in float32: floor(dst * scale), clamped.
    s = np.float32(1.0 / scale) if scale is not None else np.float32(n_in) / np.float32(n_out)
    src = np.floor(np.arange(n_out, dtype=np.float32) * s).astype(np.int64)
    return np.minimum(src, n_in - 1)


def _linear_weights(n_in: int, n_out: int, scale: float | None, align_corners: bool,
                    dtype: np.dtype) -> tuple:
    """Each output position's two source positions and their weights, computed in the
    input's precision as PyTorch does."""
    t = np.dtype(dtype).type
    dst = np.arange(n_out).astype(dtype)
    if align_corners:
        s = t((n_in - 1) / (n_out - 1)) if n_out > 1 else t(0)
        src = s * dst
    else:
        s = t(1.0 / scale) if scale is not None else t(n_in) / t(n_out)
        src = np.maximum(s * (dst + t(0.5)) - t(0.5), t(0))
    i0 = src.astype(np.int64)
    i1 = np.where(i0 < n_in - 1, i0 + 1, i0)
    w1 = src - i0.astype(dtype)
    return i0, i1, t(1) - w1, w1


def _lerp_last(x: Any, n_out: int, scale: float | None, corners: bool, source: str) -> Any:
    """Linear resampling of the last dim of ``x`` (at least 2-D): two gathers, weighted.
    Gathers keep a nan or inf among the two neighbours it belongs to."""
    rows, n_in = tuple(x.shape[-2:])
    i0, i1, w0, w1 = _linear_weights(n_in, n_out, scale, corners, x.dtype)
    base = np.arange(rows, dtype=np.int64)[:, None] * n_in
    return add(mul(pool_gather(x, base + i0, source), w0),
               mul(pool_gather(x, base + i1, source), w1))


def _cubic_weights(n_in: int, n_out: int, scale: float | None, align_corners: bool,
                   dtype: np.dtype) -> tuple:
    """Each output position's four source positions (clamped to the edge) and their
    cubic-convolution weights (Keys, A = -0.75), in the input's precision as PyTorch."""
    t = np.dtype(dtype).type
    dst = np.arange(n_out).astype(dtype)
    if align_corners:
        src = (t((n_in - 1) / (n_out - 1)) if n_out > 1 else t(0)) * dst
    else:  # unlike linear, the source position is not clamped at zero
        s = t(1.0 / scale) if scale is not None else t(n_in) / t(n_out)
        src = s * (dst + t(0.5)) - t(0.5)
    fl = np.floor(src)
    f = src - fl
    a = t(-0.75)

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + t(2)) * x - (a + t(3))) * x * x + t(1)

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - t(5) * a) * x + t(8) * a) * x - t(4) * a

    taps = [np.clip(fl.astype(np.int64) + k, 0, n_in - 1) for k in (-1, 0, 1, 2)]
    weights = [far(f + t(1)), near(f), near(t(1) - f), far(t(2) - f)]
    return taps, weights


def _cubic_last(x: Any, n_out: int, scale: float | None, corners: bool) -> Any:
    """Cubic resampling of the last dim of ``x`` (at least 2-D): four gathers, weighted."""
    rows, n_in = tuple(x.shape[-2:])
    taps, weights = _cubic_weights(n_in, n_out, scale, corners, x.dtype)
    base = np.arange(rows, dtype=np.int64)[:, None] * n_in
    y = None
    for i, w in zip(taps, weights):
        term = mul(pool_gather(x, base + i, "bicubic"), w)
        y = term if y is None else add(y, term)
    return y


def interpolate(input: Any, size: Any = None, scale_factor: Any = None,  # noqa: A002
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Any:
    """Resample the spatial dims of a 3-D ``(N, C, L)``, 4-D ``(N, C, H, W)`` or 5-D
    ``(N, C, D, H, W)`` input to ``size`` or by ``scale_factor``: ``nearest`` and
    ``nearest-exact`` (3-D to 5-D), ``area`` (3-D to 5-D), ``linear`` (3-D), ``bilinear``
    and ``bicubic`` (4-D; ``antialias=True`` filters when shrinking), ``trilinear`` (5-D),
    with ``align_corners``.
    ``F.interpolate(x, scale_factor=2, mode="bilinear")``"""
    shape = tuple(input.shape)
    _check_interp_mode(mode, shape, align_corners)
    out, scales = _interp_sizes(shape[2:], size, scale_factor, recompute_scale_factor)
    _check_interp_input(input, mode, antialias)
    if antialias:
        return RS.antialiased(input, mode, out, scales, bool(align_corners))
    return _resample(input, mode, out, scales, bool(align_corners))


def _check_interp_mode(mode: str, shape: tuple, align_corners: bool | None) -> None:
    if mode not in _INTERP_MODES:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {len(shape)}D) for the modes: nearest | linear | "
                                  f"bilinear | bicubic | trilinear | lanczos | area | "
                                  f"nearest-exact (got {mode})")
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")


def _interp_sizes(spatial: tuple, size: Any, scale_factor: Any,
                  recompute_scale_factor: bool | None) -> tuple[tuple, tuple]:
    """The output's spatial sizes, and the scales the source positions use (None: from
    the sizes), from exactly one of ``size`` and ``scale_factor``."""
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    k = len(spatial)
    if size is not None:
        out = (size,) * k if isinstance(size, (int, np.integer)) else tuple(size)
        if len(out) != k:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(spatial)} and output size of {size}. Please provide "
                             f"input tensor in (N, C, d1, d2, ...,dK) format and output size "
                             f"in (o1, o2, ...,oK) format.")
        return tuple(int(o) for o in out), (None,) * k
    scales = ((float(scale_factor),) * k if isinstance(scale_factor, (int, float))
              else tuple(float(f) for f in scale_factor))
    if len(scales) != k:
        raise ValueError(f"Input and scale_factor must have the same number of spatial "
                         f"dimensions, but got input with spatial dimensions of "
                         f"{list(spatial)} and scale_factor of shape {scale_factor}. "
                         f"Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                         f"and scale_factor in (s1, s2, ...,sK) format.")
    out = tuple(math.floor(n * f) for n, f in zip(spatial, scales))
    return out, (None,) * k if recompute_scale_factor else scales


def _check_interp_input(input: Any, mode: str, antialias: bool) -> None:  # noqa: A002
    """The ranks and dtypes each mode supports."""
    ndim = len(input.shape)
    want = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}.get(mode)
    if want is not None and ndim != want:
        raise NotImplementedError(f"Got {ndim}D input, but {mode} mode needs {want}D "
                                  f"input")
    if ndim not in (3, 4, 5):
        raise NotImplementedError(f"interpolate: mode={mode!r} on a {ndim}-D input is "
                                  f"not supported (nearest and nearest-exact on 3-D to 5-D, "
                                  f"area on 3-D to 5-D, linear on 3-D, bilinear and bicubic "
                                  f"on 4-D, trilinear on 5-D)")
    if antialias and (mode not in ("bilinear", "bicubic") or ndim != 4):
        raise NotImplementedError("Anti-alias option is restricted to bilinear and bicubic "
                                  "modes and requires a 4-D tensor as input")
    if input.dtype.kind != "f":
        raise NotImplementedError(f'"compute_indices_weights_{mode}" not implemented for '
                                  f"'{input.dtype}'")


def _resample(input: Any, mode: str, out: tuple, scales: tuple,  # noqa: A002
              corners: bool) -> Any:
    """``input`` resampled to spatial sizes ``out`` (arguments checked)."""
    shape = tuple(input.shape)
    spatial = shape[2:]
    k = len(spatial)
    if mode == "area":  # PyTorch's area mode is adaptive average pooling
        if k == 3:
            return RS.area3d(input, out)
        return (adaptive_avg_pool1d if k == 1 else adaptive_avg_pool2d)(input, out)
    if mode == "nearest" and k < 3:
        if k == 1:
            idx = _nearest_index(spatial[0], out[0], scales[0])[None, :]
            x = reshape(input, shape[:2] + (1, spatial[0]))
            return reshape(pool_gather(x, idx, "nearest"), shape[:2] + out)
        ih = _nearest_index(spatial[0], out[0], scales[0])
        iw = _nearest_index(spatial[1], out[1], scales[1])
        return pool_gather(input, ih[:, None] * spatial[1] + iw[None, :], "nearest")
    if k == 1 and mode == "linear":
        x = reshape(input, shape[:2] + (1, spatial[0]))
        return reshape(_lerp_last(x, out[0], scales[0], corners, "linear"), shape[:2] + out)
    # One spatial dim at a time (separable): the dim is moved last, resampled and moved
    # back; the last dim goes last, so the result's node is the resampling's own.
    y = input
    for a in range(k):
        axis = 2 + a
        last = axis == len(shape) - 1
        if not last:
            y = transpose(y, axis, -1)
        if mode in ("nearest", "nearest-exact"):
            y = _nearest_last(y, out[a], scales[a], mode == "nearest-exact", f"{mode}{k}d")
        elif mode == "bicubic":
            y = _cubic_last(y, out[a], scales[a], corners)
        else:
            y = _lerp_last(y, out[a], scales[a], corners, mode)
        if not last:
            y = transpose(y, axis, -1)
    return y


def _nearest_last(x: Any, n_out: int, scale: float | None, exact: bool, source: str) -> Any:
    """Nearest resampling of the last dim of ``x`` (at least 2-D): one gather. ``exact``
    is PyTorch's ``nearest-exact``: the source of output ``i`` is ``floor((i + 0.5) *
    in / out)``, not ``floor(i * in / out)``."""
    rows, n_in = tuple(x.shape[-2:])
    if exact:
        s = np.float32(1.0 / scale) if scale is not None else np.float32(n_in) / np.float32(n_out)
        src = np.floor((np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * s)
        idx = np.minimum(src.astype(np.int64), n_in - 1)
    else:
        idx = _nearest_index(n_in, n_out, scale)
    base = np.arange(rows, dtype=np.int64)[:, None] * n_in
    return pool_gather(x, base + idx, source)
