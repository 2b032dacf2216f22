"""Convolutions. conv2d is one primitive (ops/conv.py, PyTorch's ConvolutionBackward0);
conv1d runs it with a unit height; the transposed convolutions, unfold and fold are matrix
products and im2col / col2im; the volumetric ones are one 2-D op per kernel offset along the
depth, summed."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import conv as C
from ...ops import elementwise as E
from ...ops import shape as S
from ...ops.mixin import TensorOps
from ...ops.pool import (
    pad,
)

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "fold", "unfold",
]


def _ints(name: str, value: Any, n: int, what: str = "convolution") -> tuple:
    """``value`` (an int or a sequence of one or ``n`` ints) as an ``n``-tuple."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    if isinstance(value, (tuple, list)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return (int(value[0]),) * n
        if len(value) == n:
            return tuple(int(v) for v in value)
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {n} values to match "
            f"the {what} dimensions, but got {name}={list(value)}")
    raise TypeError(f"{name} must be an int or a tuple of {n} ints, got "
                    f"{type(value).__name__} {value!r}")


def _positive(stride: tuple, dilation: tuple, groups: Any) -> None:
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("non-positive dilation is not supported")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError(f"non-positive groups is not supported (groups={groups!r})")


def _conv_padding(padding: Any, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """PyTorch's padding argument (ints, 'valid', 'same') as ((before, after), ...)."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: {padding!r}")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        # The total d*(k-1) split with the extra one at the end (PyTorch's rule).
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    pads = _ints("padding", padding, n)
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    return tuple((p, p) for p in pads)


def _batched(name: str, x: Any, spatial: int) -> tuple[Any, bool]:
    """``x`` with a batch dimension (added for unbatched input), and whether it was added."""
    if not isinstance(x, TensorOps):
        raise TypeError(f"{name}: input must be a tensor, got {type(x).__name__}")
    if x.ndim == spatial + 2:
        return x, False
    if x.ndim == spatial + 1:
        return S.reshape(x, (1,) + tuple(x.shape)), True
    raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input "
                       f"to {name}, but got input of size: {list(x.shape)}")


def _unbatched(out: Any, added: bool) -> Any:
    return S.reshape(out, tuple(out.shape[1:])) if added else out


def _weight(name: str, w: Any, ndim: int) -> None:
    if not isinstance(w, TensorOps):
        raise TypeError(f"{name}: weight must be a tensor, got {type(w).__name__}")
    if w.ndim != ndim:
        raise RuntimeError(f"{name}: expected a {ndim}-D weight, got weight of size "
                           f"{list(w.shape)}")


def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """2-D convolution (cross-correlation, as PyTorch) of (N, C, H, W) or (C, H, W) input
    with weight (out_channels, C/groups, kH, kW); ``padding`` may be ints, 'valid' or 'same'.

    >>> y = F.conv2d(dg.randn(1, 3, 8, 8), dg.randn(4, 3, 3, 3), padding=1)  # (1, 4, 8, 8)
    """
    x, added = _batched("conv2d", input, 2)
    _weight("conv2d", weight, 4)
    stride, dilation = _ints("stride", stride, 2), _ints("dilation", dilation, 2)
    _positive(stride, dilation, groups)
    pads = _conv_padding(padding, tuple(weight.shape[2:]), stride, dilation)
    return _unbatched(C.conv2d(x, weight, bias, stride, pads, dilation, groups), added)


def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """1-D convolution of (N, C, L) or (C, L) input with weight (out_channels, C/groups, k):
    the 2-D primitive on a unit height."""
    x, added = _batched("conv1d", input, 1)
    _weight("conv1d", weight, 3)
    (s,), (d,) = _ints("stride", stride, 1), _ints("dilation", dilation, 1)
    _positive((s,), (d,), groups)
    (pad,) = _conv_padding(padding, tuple(weight.shape[2:]), (s,), (d,))
    n, c, length = x.shape
    o, cg, k = weight.shape
    out = C.conv2d(S.reshape(x, (n, c, 1, length)), S.reshape(weight, (o, cg, 1, k)), bias,
                   (1, s), ((0, 0), pad), (1, d), groups)
    return _unbatched(S.reshape(out, (n, o, out.shape[3])), added)


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 2-D convolution (the gradient of `conv2d` with respect to its input) of
    (N, C_in, H, W) input with weight (C_in, C_out/groups, kH, kW): `conv2d_input` of
    ``input`` taken as the convolution's output gradient."""
    x, added = _batched("conv_transpose2d", input, 2)
    _weight("conv_transpose2d", weight, 4)
    if isinstance(padding, str):
        raise TypeError("conv_transpose2d(): argument 'padding' must be tuple of ints, not str")
    stride, dilation = _ints("stride", stride, 2), _ints("dilation", dilation, 2)
    _positive(stride, dilation, groups)
    pads = _ints("padding", padding, 2)
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    opad = _ints("output_padding", output_padding, 2)
    if any(op >= max(s, d) or op < 0 for op, s, d in zip(opad, stride, dilation)):
        raise RuntimeError(
            f"output padding must be smaller than either stride or dilation, but got "
            f"output_padding_height: {opad[0]} output_padding_width: {opad[1]} stride_height: "
            f"{stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
            f"dilation_width: {dilation[1]}")
    n, cin, h, w = x.shape
    wc, cog, kh, kw = weight.shape
    if wc % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
            f"0, but got weight of size {list(weight.shape)} instead")
    if cin != wc:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
            f"{list(x.shape)} to have {wc} channels, but got {cin} channels instead")
    if x.dtype != weight.dtype:
        raise RuntimeError(f"conv_transpose2d: input type ({x.dtype}) and weight type "
                           f"({weight.dtype}) should be the same")
    cout = cog * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected bias to be "
            f"1-dimensional with {cout} elements, but got bias of size {list(bias.shape)} "
            f"instead")
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                 zip((h, w), stride, pads, dilation, (kh, kw), opad))
    if min(size) < 1:
        raise RuntimeError(f"conv_transpose2d: the output size {size} of input "
                           f"{list(x.shape)} is too small")
    # The output's end padding shrinks by output_padding, so the windows number (H, W).
    canon = tuple((p, p - op) for p, op in zip(pads, opad))
    # The transposed convolution is the gradient of the convolution of weight ``weight``
    # with respect to its input: one primitive, run sample by sample by the backends, whose
    # own gradients are the convolution and its weight gradient.
    out = C.conv_transpose2d(x, weight, size, stride, canon, dilation, groups)
    if bias is not None:
        out = E.add(out, S.reshape(bias, (cout, 1, 1)))
    return _unbatched(out, added)


def _fold_args(kernel_size: Any, dilation: Any, padding: Any, stride: Any, name: str) -> tuple:
    kernel = _ints("kernel_size", kernel_size, 2, name)
    dilation, stride = _ints("dilation", dilation, 2, name), _ints("stride", stride, 2, name)
    pads = _ints("padding", padding, 2, name)
    if min(kernel) <= 0 or min(dilation) <= 0 or min(stride) <= 0 or min(pads) < 0:
        raise RuntimeError(
            f"{name}: kernel_size, dilation and stride must be positive and padding "
            f"non-negative, got kernel_size={kernel}, dilation={dilation}, padding={pads}, "
            f"stride={stride}")
    return kernel, dilation, tuple((p, p) for p in pads), stride


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,  # noqa: A002
           stride: Any = 1) -> Any:
    """Sliding blocks of (N, C, H, W) or (C, H, W) input as columns, (N, C*kH*kW, L)
    (im2col); `fold` sums them back.

    >>> F.unfold(dg.ones(1, 2, 4, 4), 3).shape
    (1, 18, 4)
    """
    x, added = _batched("unfold", input, 2)
    geometry = _fold_args(kernel_size, dilation, padding, stride, "unfold")
    return _unbatched(C.im2col(x, *geometry), added)


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1,  # noqa: A002
         padding: Any = 0, stride: Any = 1) -> Any:
    """Sum columns (N, C*kH*kW, L) or (C*kH*kW, L) of sliding blocks into an image of
    ``output_size`` (col2im): the adjoint of `unfold`."""
    if not isinstance(input, TensorOps):
        raise TypeError(f"fold: input must be a tensor, got {type(input).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    added = input.ndim == 2
    x = S.reshape(input, (1,) + tuple(input.shape)) if added else input
    size = _ints("output_size", output_size, 2, "fold")
    geometry = _fold_args(kernel_size, dilation, padding, stride, "fold")
    return _unbatched(C.col2im(x, size, *geometry), added)


def _depth_slices(x: Any, k: int, s: int, d: int, n_out: int) -> list:
    """The ``k`` strided views of dim 2 that a depth window of size ``k`` (dilation ``d``,
    stride ``s``) reads at its ``n_out`` positions."""
    return [x[:, :, i * d:i * d + s * (n_out - 1) + 1:s] for i in range(k)]


def _planes(x: Any) -> tuple[Any, tuple]:
    """(N, C, D, H, W) as (N*D, C, H, W) (each depth slice an image), and (N, D)."""
    n, c, dd, h, w = x.shape
    return S.reshape(S.permute(x, 0, 2, 1, 3, 4), (n * dd, c, h, w)), (n, dd)


def _volumes(y: Any, nd: tuple) -> Any:
    """The inverse of `_planes`: (N*D, C, H, W) back to (N, C, D, H, W)."""
    _, c, h, w = y.shape
    return S.permute(S.reshape(y, nd + (c, h, w)), 0, 2, 1, 3, 4)


def conv3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """3-D convolution of (N, C, D, H, W) or (C, D, H, W) input with weight
    (out_channels, C/groups, kD, kH, kW): the sum over depth offsets of 2-D convolutions of
    the depth slices each offset reads. ``F.conv3d(x, w, padding=1)``"""
    x, added = _batched("conv3d", input, 3)
    _weight("conv3d", weight, 5)
    stride, dilation = _ints("stride", stride, 3), _ints("dilation", dilation, 3)
    _positive(stride, dilation, groups)
    kd = weight.shape[2]
    pads = _conv_padding(padding, tuple(weight.shape[2:]), stride, dilation)
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {weight.shape[1] * groups} "
                           f"channels, but got {x.shape[1]} channels instead")
    if any(pads[0]):
        x = pad(x, (0, 0, 0, 0) + tuple(pads[0]))
    n_out = (x.shape[2] - dilation[0] * (kd - 1) - 1) // stride[0] + 1
    if n_out < 1:
        raise RuntimeError(f"conv3d: the input's depth {x.shape[2]} (padded) is smaller than "
                           f"the kernel's {dilation[0] * (kd - 1) + 1}")
    total = None
    for i, part in enumerate(_depth_slices(x, kd, stride[0], dilation[0], n_out)):
        planes, nd = _planes(part)
        y = C.conv2d(planes, weight[:, :, i], None, stride[1:], pads[1:], dilation[1:], groups)
        total = y if total is None else E.add(total, y)
    out = _volumes(total, nd)
    if bias is not None:
        out = E.add(out, S.reshape(bias, (-1, 1, 1, 1)))
    return _unbatched(out, added)


def conv_transpose3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 3-D convolution of (N, C_in, D, H, W) input with weight
    (C_in, C_out/groups, kD, kH, kW): per depth offset, a transposed 2-D convolution of
    every depth slice, spread along the output depth by the stride and summed."""
    x, added = _batched("conv_transpose3d", input, 3)
    _weight("conv_transpose3d", weight, 5)
    if isinstance(padding, str):
        raise TypeError("conv_transpose3d(): argument 'padding' must be tuple of ints, not str")
    stride, dilation = _ints("stride", stride, 3), _ints("dilation", dilation, 3)
    pads, opad = _ints("padding", padding, 3), _ints("output_padding", output_padding, 3)
    _positive(stride, dilation, groups)
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    if any(op >= max(s, d) or op < 0 for op, s, d in zip(opad, stride, dilation)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, "
                           f"but got output_padding={opad}, stride={stride}, "
                           f"dilation={dilation}")
    kd = weight.shape[2]
    (sd, dd, pd, od), depth = (stride[0], dilation[0], pads[0], opad[0]), x.shape[2]
    full = (depth - 1) * sd + dd * (kd - 1) + 1 + od
    n_out = full - 2 * pd
    if n_out < 1:
        raise RuntimeError(f"conv_transpose3d: the output depth {n_out} of input "
                           f"{list(x.shape)} is too small")
    planes, nd = _planes(x)
    spread = (depth - 1) * sd + 1
    total = None
    for i in range(kd):
        y = conv_transpose2d(planes, weight[:, :, i], None, stride[1:], pads[1:], opad[1:],
                             groups, dilation[1:])  # (N*D, C_out, H', W')
        c, h, w = y.shape[1:]
        z = S.reshape(y, nd + (1, c * h * w))
        if sd > 1:  # the stride's gaps: zeros between the depth slices
            z = S.reshape(pad(z, (0, 0, 0, sd - 1)), (nd[0], depth * sd, c * h * w))
            z = z[:, :spread]
        else:
            z = S.reshape(z, (nd[0], depth, c * h * w))
        z = pad(z, (0, 0, i * dd, full - i * dd - spread))
        total = z if total is None else E.add(total, z)
    total = total[:, pd:pd + n_out]
    out = S.permute(S.reshape(total, (nd[0], n_out, c, h, w)), 0, 2, 1, 3, 4)
    if bias is not None:
        out = E.add(out, S.reshape(bias, (-1, 1, 1, 1)))
    return _unbatched(out, added)


def conv_transpose1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 1-D convolution of (N, C_in, L) or (C_in, L) input with weight
    (C_in, C_out/groups, k): the 2-D one over a height of 1."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"conv_transpose1d: expected 2D or 3D input, got {input.ndim}D")

    def one(v: Any) -> int:
        return int(v[0] if isinstance(v, (tuple, list)) else v)

    x = S.reshape(input, tuple(input.shape[:-1]) + (1, input.shape[-1]))
    w = S.reshape(weight, tuple(weight.shape[:2]) + (1, weight.shape[2]))
    y = conv_transpose2d(x, w, bias, (1, one(stride)), (0, one(padding)),
                           (0, one(output_padding)), groups, (1, one(dilation)))
    return S.reshape(y, tuple(y.shape[:-2]) + (y.shape[-1],))

