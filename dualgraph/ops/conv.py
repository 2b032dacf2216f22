"""Convolution lowered to GEMM: ``im2col`` (``F.unfold``), ``col2im`` (``F.fold``),
``conv2d`` and its two gradients ``conv2d_input`` and ``conv2d_weight``.

``im2col`` and ``col2im`` are each other's VJP. ``conv2d`` is a primitive (so its tape node
is PyTorch's ``ConvolutionBackward0`` with the input, weight and bias as inputs) whose
forward is ``im2col`` then one matrix product per group, and whose VJP is
``conv2d_input``, ``conv2d_weight`` and a sum. The three are bilinear and each one's VJP
is written with the other two, so gradients of gradients follow. Each gradient is an op
of its own so that a backend can run it sample by sample, the sample's columns staying in
cache, where ``im2col``, reshapes and ``matmul`` over the whole batch would make the
batch's columns and copies of the gradient.

Attributes are canonical: ``kernel_size``, ``dilation`` and ``stride`` are pairs,
``padding`` is ``((top, bottom), (left, right))`` (``padding='same'`` with an even kernel
pads one more at the end, as PyTorch does; ``conv_transpose2d``'s ``output_padding`` can
make an end padding negative: the windows then stop short of the end).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from .precision import AUTOCAST, lower
from .reduce import _sum_impl
from .reduce import sum as _sum
from .registry import OpDef, register

Pair = tuple[int, int]
Pads = tuple[Pair, Pair]


def out_size(size: Pair, kernel: Pair, dilation: Pair, padding: Pads, stride: Pair) -> Pair:
    """The number of sliding-window positions along each spatial dimension (may be <= 0)."""
    return tuple(  # type: ignore[return-value]
        (size[i] + padding[i][0] + padding[i][1] - dilation[i] * (kernel[i] - 1) - 1)
        // stride[i] + 1
        for i in range(2))


def _window(i: int, d: int, s: int, n: int) -> slice:
    """The rows of the padded input that kernel offset ``i`` reads for ``n`` positions."""
    return slice(i * d, i * d + s * (n - 1) + 1, s)


# ----------------------------------------------------------------------- im2col / col2im


def _windows_view(x: np.ndarray, kernel_size: Pair, dilation: Pair, padding: Pads,
                  stride: Pair) -> np.ndarray:
    """Every sliding window of ``x`` (N, C, H, W) as a strided view (N, C, oH, oW, kH, kW)
    of the padded input: no copy beyond the padding."""
    (kh, kw), (dh, dw), (sh, sw) = kernel_size, dilation, stride
    oh, ow = out_size(x.shape[2:], kernel_size, dilation, padding, stride)
    # A negative end padding (conv_transpose2d's output_padding beyond its padding) means
    # the windows stop short of the end: nothing to pad there.
    pads = tuple((p0, max(p1, 0)) for p0, p1 in padding)
    if any(p for pair in pads for p in pair):
        # Zeros and one copy into the middle: np.pad's general path costs 3x that.
        (pt, pb), (pl, pr) = pads
        h, w = x.shape[2:]
        padded = np.zeros(x.shape[:2] + (h + pt + pb, w + pl + pr), x.dtype)
        padded[:, :, pt:pt + h, pl:pl + w] = x
        x = padded
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    v = np.lib.stride_tricks.sliding_window_view(x, span, axis=(2, 3))
    return v[:, :, 0:(oh - 1) * sh + 1:sh, 0:(ow - 1) * sw + 1:sw, ::dh, ::dw]


def _columns(x: np.ndarray, kernel_size: Pair, dilation: Pair, padding: Pads,
             stride: Pair) -> np.ndarray:
    """The columns of ``x`` laid out (C*kH*kW, N, oH*oW): one strided copy, and the
    convolution's product over the whole batch is then one GEMM."""
    n, c = x.shape[:2]
    v = _windows_view(x, kernel_size, dilation, padding, stride)
    oh, ow = v.shape[2:4]
    cols = np.empty((c, kernel_size[0], kernel_size[1], n, oh, ow), x.dtype)
    np.copyto(cols, v.transpose(1, 4, 5, 0, 2, 3))
    return cols.reshape(c * kernel_size[0] * kernel_size[1], n, oh * ow)


def _im2col_impl(x: np.ndarray, kernel_size: Pair, dilation: Pair, padding: Pads,
                 stride: Pair) -> np.ndarray:
    # (N, C*kH*kW, L) as a transposed view of the (C*kH*kW, N, L) columns: each sample's
    # (K, L) block is still a BLAS operand (unit stride along L).
    return _columns(x, kernel_size, dilation, padding, stride).transpose(1, 0, 2)


def _col2im_impl(cols: np.ndarray, output_size: Pair, kernel_size: Pair, dilation: Pair,
                 padding: Pads, stride: Pair) -> np.ndarray:
    n = cols.shape[0]
    (kh, kw), (dh, dw), (sh, sw) = kernel_size, dilation, stride
    h, w = output_size
    c = cols.shape[1] // (kh * kw)
    oh, ow = out_size(output_size, kernel_size, dilation, padding, stride)
    (pt, pb), (pl, pr) = padding
    hp, wp = h + pt + max(pb, 0), w + pl + max(pr, 0)
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    # Each kernel offset's columns are added in place over the window positions they
    # cover, offset by offset in (i, j) order (the compiled kernel's order, so the same
    # sums). The image is laid out (C, N, Hp, Wp): the convolution's gradient hands the
    # columns over as (C, kH, kW, N, oH, oW), so each addition reads one contiguous block
    # and writes rows of the padded plane; a (N, C, ...) image would have each addition
    # stride across channels (measured 1.25x slower on LeNet's second layer, and the
    # (C, N) image 1.5x faster than laying every offset over a zero-margined plane).
    acc = np.zeros((c, n, hp, wp), cols.dtype)
    src = cols.transpose(1, 2, 3, 0, 4, 5)  # (C, kH, kW, N, oH, oW)
    for i in range(kh):
        rows = _window(i, dh, sh, oh)
        for j in range(kw):
            acc[:, :, rows, _window(j, dw, sw, ow)] += src[:, i, j]
    out = acc.transpose(1, 0, 2, 3)
    return np.ascontiguousarray(out[:, :, pt:pt + h, pl:pl + w])


def _col2im_batch_inner(src: np.ndarray, output_size: Pair, dilation: Pair, padding: Pads,
                        stride: Pair) -> np.ndarray:
    """`_col2im_impl` of columns laid out (C, kH, kW, oH, oW, N), the batch innermost, into
    a C-ordered (N, C, H, W) image: each kernel offset's columns are added in place over
    the window positions they cover, in (i, j) order as `_col2im_impl` adds them, into an
    image laid out (C, Hp, Wp, N). With stride 1 along the width each addition runs rows of
    oW*N contiguous elements (``_col2im_impl``'s run only oW: LeNet's second layer, 3,840
    rows of 10 per offset there, 60 rows of 640 here)."""
    c, kh, kw, oh, ow, n = src.shape
    (dh, dw), (sh, sw) = dilation, stride
    h, w = output_size
    (pt, pb), (pl, pr) = padding
    acc = np.zeros((c, h + pt + max(pb, 0), w + pl + max(pr, 0), n), src.dtype)
    for i in range(kh):
        rows = _window(i, dh, sh, oh)
        for j in range(kw):
            acc[:, rows, _window(j, dw, sw, ow)] += src[:, i, j]
    return np.ascontiguousarray(acc[:, pt:pt + h, pl:pl + w].transpose(3, 0, 1, 2))


def _blocks(name: str, size: Pair, kernel_size: Pair, dilation: Pair, padding: Pads,
            stride: Pair) -> Pair:
    oh, ow = out_size(size, kernel_size, dilation, padding, stride)
    if oh < 1 or ow < 1:
        sym = tuple(p[0] for p in padding)
        raise ShapeError(
            f"{name}: given input with spatial size {tuple(size)}, kernel_size={kernel_size}, "
            f"dilation={dilation}, padding={sym}, calculated shape of the array of sliding "
            f"blocks as ({oh}, {ow}), but its components must be at least one")
    return oh, ow


def _im2col_infer(x: Any, kernel_size: Pair, dilation: Pair, padding: Pads,
                  stride: Pair) -> tuple:
    shape = tuple(x.shape)
    if len(shape) != 4:
        raise ShapeError(f"im2col: expected a 4-D (N, C, H, W) input, got shape {shape}")
    oh, ow = _blocks("unfold", shape[2:], kernel_size, dilation, padding, stride)
    return (shape[0], shape[1] * kernel_size[0] * kernel_size[1], oh * ow), x.dtype


def _col2im_infer(cols: Any, output_size: Pair, kernel_size: Pair, dilation: Pair,
                  padding: Pads, stride: Pair) -> tuple:
    shape = tuple(cols.shape)
    if len(shape) != 3:
        raise ShapeError(f"col2im: expected a 3-D (N, C*kH*kW, L) input, got shape {shape}")
    k = kernel_size[0] * kernel_size[1]
    if shape[1] % k:
        raise ShapeError(
            f"fold: expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={shape[1]} and kernel_size={kernel_size} "
            f"(input shape {shape})")
    oh, ow = _blocks("fold", output_size, kernel_size, dilation, padding, stride)
    if shape[2] != oh * ow:
        sym = tuple(p[0] for p in padding)
        raise ShapeError(
            f"fold: given output_size={tuple(output_size)}, kernel_size={kernel_size}, "
            f"dilation={dilation}, padding={sym}, stride={stride}, expected size of input's "
            f"dimension 2 to match the calculated number of sliding blocks {oh} * {ow} = "
            f"{oh * ow}, but got input.size(2)={shape[2]} (input shape {shape})")
    return (shape[0], shape[1] // k) + tuple(output_size), cols.dtype


def _im2col_vjp(ctx, g):
    a = ctx.attrs
    size = tuple(ctx.inputs[0].shape[2:])
    return (col2im(g, size, a["kernel_size"], a["dilation"], a["padding"], a["stride"]),)


def _col2im_vjp(ctx, g):
    a = ctx.attrs
    return (im2col(g, a["kernel_size"], a["dilation"], a["padding"], a["stride"]),)


IM2COL = register(OpDef(
    "im2col", _im2col_impl, _im2col_infer, _im2col_vjp, "Im2ColBackward0",
))
COL2IM = register(OpDef(
    "col2im", _col2im_impl, _col2im_infer, _col2im_vjp, "Col2ImBackward0",
))


def im2col(x: Any, kernel_size: Pair, dilation: Pair, padding: Pads, stride: Pair) -> Any:
    """Sliding blocks of a (N, C, H, W) tensor as columns, (N, C*kH*kW, L) (``F.unfold``
    with canonical attributes)."""
    return bind(IM2COL, x, kernel_size=tuple(kernel_size), dilation=tuple(dilation),
                padding=tuple(map(tuple, padding)), stride=tuple(stride))


def col2im(cols: Any, output_size: Pair, kernel_size: Pair, dilation: Pair, padding: Pads,
           stride: Pair) -> Any:
    """Sum of sliding-block columns (N, C*kH*kW, L) back into (N, C, H, W) (``F.fold``)."""
    return bind(COL2IM, cols, output_size=tuple(output_size), kernel_size=tuple(kernel_size),
                dilation=tuple(dilation), padding=tuple(map(tuple, padding)),
                stride=tuple(stride))


# --------------------------------------------------------------------------------- conv2d


def _conv2d_impl(x: np.ndarray, w: np.ndarray, *bias: np.ndarray, stride: Pair,
                 padding: Pads, dilation: Pair, groups: int) -> np.ndarray:
    return _conv2d_keep(x, w, *bias, stride=stride, padding=padding, dilation=dilation,
                        groups=groups)[0]


def _conv2d_keep(x: np.ndarray, w: np.ndarray, *bias: np.ndarray, stride: Pair,
                 padding: Pads, dilation: Pair, groups: int) -> tuple:
    """The convolution and its columns (G*K, N, L), which the weight's gradient reads
    again: a recorded eager node keeps them rather than copying them out of the input a
    second time in the backward."""
    # Eager mode asks the shape rule only when a kernel fails; mixed dtypes or channel
    # counts that happen to multiply must fail here, so check first (shape arithmetic only).
    _conv2d_infer(x, w, *bias, stride=stride, padding=padding, dilation=dilation,
                  groups=groups)
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    cols = _columns(x, (kh, kw), dilation, padding, stride)  # (G*K, N, L)
    oh, ow = out_size(x.shape[2:], (kh, kw), dilation, padding, stride)
    length = oh * ow
    wg = w.reshape(groups, o // groups, cg * kh * kw)
    out = np.empty((n, o, length), np.result_type(x, w))
    # One GEMM per group over a block of samples, (G, Og, K) @ (G, K, n*L): the whole
    # batch at once unless that passes `_LONG` columns (see there). Each output element
    # is the same K-long sum either way, so the blocks give the bits of one GEMM.
    step = _sample_block(n, length)
    for s in range(0, n, step):
        e = min(s + step, n)
        prod = np.matmul(wg, cols[:, s:e].reshape(groups, cg * kh * kw, (e - s) * length))
        # (O, n, L) -> (n, O, L), the bias added in the same pass.
        prod = prod.reshape(o, e - s, length).transpose(1, 0, 2)
        if bias:
            np.add(prod, bias[0].reshape(o, 1), out=out[s:e])
        else:
            np.copyto(out[s:e], prod)
    return out.reshape(n, o, oh, ow), cols


# OpenBLAS's sgemm runs 2 to 4 times slower once a product's long side passes about 8K
# columns at a convolution's small M and K (LeNet's first layer: 6 x 25 by 64 x 784,
# measured 0.58 ms as one product, 0.24 ms in blocks of 4K columns, which stay in cache
# between the product and the bias add); below that, one product is as fast.
_LONG = 8192
_BLOCK = 4096


def _sample_block(n: int, length: int) -> int:
    """How many samples of ``length`` output positions one product covers."""
    if n * length <= _LONG:
        return max(n, 1)
    return max(1, _BLOCK // max(length, 1))


def _weight_grad(g: np.ndarray, cols: np.ndarray, groups: int, og: int, k: int
                 ) -> np.ndarray:
    """The weight's gradient (G, Og, K) from the output gradient ``g`` (N, G*Og, L) and
    the columns (G*K, N, L): one GEMM over the whole batch, or, past `_LONG` columns, a
    sum of one GEMM per block of samples (a different rounding of the same sum)."""
    n, _, length = g.shape
    step = _sample_block(n, length)
    gw = None
    for s in range(0, n, step):
        e = min(s + step, n)
        gt = g[s:e].reshape(e - s, groups, og, length).transpose(1, 2, 0, 3).reshape(
            groups, og, (e - s) * length)
        # (cols @ gt^T)^T: the same product, which OpenBLAS runs up to 1.7x faster with
        # the columns as the left operand (LeNet's second layer: 16 x 150 by 6,400).
        part = np.matmul(cols[:, s:e].reshape(groups, k, (e - s) * length),
                         gt.transpose(0, 2, 1)).transpose(0, 2, 1)
        if gw is None:
            gw = part
        else:
            gw += part
    return gw


def _conv2d_infer(x: Any, w: Any, *bias: Any, stride: Pair, padding: Pads, dilation: Pair,
                  groups: int) -> tuple:
    xs, ws = tuple(x.shape), tuple(w.shape)
    if len(xs) != 4 or len(ws) != 4:
        raise ShapeError(f"conv2d: expected a 4-D input and a 4-D weight, got input of shape "
                         f"{xs} and weight of shape {ws}")
    for t in (w,) + bias:
        if t.dtype != x.dtype:
            raise _dtype_error(x.dtype, t.dtype)
    if x.dtype.kind != "f":
        raise RuntimeError(f"conv2d: only floating-point tensors are supported, got {x.dtype}")
    if ws[0] % groups:
        raise ShapeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at "
            f"dimension 0, but got weight of size {list(ws)} instead")
    if xs[1] != ws[1] * groups:
        raise ShapeError(
            f"Given groups={groups}, weight of size {list(ws)}, expected input{list(xs)} to "
            f"have {ws[1] * groups} channels, but got {xs[1]} channels instead")
    if bias and tuple(bias[0].shape) != (ws[0],):
        raise ShapeError(
            f"Given weight of size {list(ws)}, expected bias to be 1-dimensional with {ws[0]} "
            f"elements, but got bias of size {list(bias[0].shape)} instead")
    padded = tuple(xs[2 + i] + padding[i][0] + padding[i][1] for i in range(2))
    span = tuple(dilation[i] * (ws[2 + i] - 1) + 1 for i in range(2))
    if padded[0] < span[0] or padded[1] < span[1]:
        raise ShapeError(
            f"Calculated padded input size per channel: ({padded[0]} x {padded[1]}). Kernel "
            f"size: ({span[0]} x {span[1]}). Kernel size can't be greater than actual input "
            f"size (input {list(xs)}, weight {list(ws)})")
    oh, ow = out_size(xs[2:], ws[2:], dilation, padding, stride)
    return (xs[0], ws[0], oh, ow), x.dtype


def _dtype_error(a: np.dtype, b: np.dtype) -> RuntimeError:
    """PyTorch's error for operands of different dtypes (a RuntimeError there too)."""
    return RuntimeError(f"conv2d: input type ({a}) and weight type ({b}) should be the same")


def _conv2d_vjp(ctx, g):
    x, w = ctx.args[:2]
    needs = ctx.needs_input_grad
    a = ctx.attrs
    gx = gw = None
    if needs[0]:
        gx = conv2d_input(g, w, tuple(ctx.inputs[0].shape[2:]), a["stride"], a["padding"],
                          a["dilation"], a["groups"])
    if needs[1]:
        gw = conv2d_weight(x, g, tuple(ctx.inputs[1].shape[2:]), a["stride"], a["padding"],
                           a["dilation"], a["groups"])
    if len(needs) == 2:
        return gx, gw
    return gx, gw, (_sum(g, (0, 2, 3)) if needs[2] else None)


def _input_grad(g: np.ndarray, w: np.ndarray, size: Pair, attrs: dict) -> np.ndarray:
    """The gradient of ``conv2d(x, w)`` for ``x`` of spatial ``size`` given its output's
    gradient ``g``: the columns' gradient with the batch innermost, (G*K, L, N), so that
    `_col2im_batch_inner` adds each kernel offset's block as rows of oW*N (or N)
    elements."""
    groups = attrs["groups"]
    n, o, oh, ow = g.shape
    _, cg, kh, kw = w.shape
    og, k, length = o // groups, cg * kh * kw, oh * ow
    gl = g.reshape(n, groups, og, length).transpose(1, 2, 3, 0).reshape(
        groups, og, length * n)
    gcols = np.matmul(w.reshape(groups, og, k).transpose(0, 2, 1), gl)
    return _col2im_batch_inner(gcols.reshape(cg * groups, kh, kw, oh, ow, n), size,
                               attrs["dilation"], attrs["padding"], attrs["stride"])


def _conv2d_vjp_arrays(ctx, args, out, g):
    """`_conv2d_vjp`'s gradients on arrays: the weight's and the bias's with its kernels in
    its layouts (so the same bits), the weight's from the forward's kept columns when the
    node has them; the input's from the columns' gradient laid out with the batch
    innermost (the same sums per column, whose products BLAS may round differently in
    that layout, then added in `_col2im_impl`'s order)."""
    x, w = args[:2]
    dt = ctx.dtype
    if g.dtype != dt:
        return None  # a gradient of another dtype: the ops' promotion, op by op
    needs = ctx.needs_input_grad
    a = ctx.attrs
    groups = a["groups"]
    n, c, h, wd = ctx.inputs[0].shape
    o, cg, kh, kw = ctx.inputs[1].shape
    k, og = cg * kh * kw, o // groups
    length = g.shape[2] * g.shape[3]
    geometry = ((kh, kw), a["dilation"], a["padding"], a["stride"])
    gx = gw = None
    if needs[0]:
        gx = _input_grad(g, w, (h, wd), a)
    if needs[1]:
        cols = ctx._kept
        if cols is None:
            cols = _columns(x, *geometry)
        gw = _weight_grad(g.reshape(n, o, length), cols.reshape(groups * k, n, length),
                          groups, og, k).reshape(o, cg, kh, kw)
    if len(needs) == 2:
        return gx, gw
    return gx, gw, (_sum_impl(g, (0, 2, 3)) if needs[2] else None)


CONV2D = register(OpDef(
    "conv2d", _conv2d_impl, _conv2d_infer, _conv2d_vjp, "ConvolutionBackward0",
    saves=(0, 1), saves_for=(1, 0), vjp_arrays=_conv2d_vjp_arrays,
    impl_keep=_conv2d_keep, keeps_for=1,
))


def conv2d(x: Any, w: Any, bias: Any = None, stride: Pair = (1, 1),
           padding: Pads = ((0, 0), (0, 0)), dilation: Pair = (1, 1), groups: int = 1) -> Any:
    """The 2-D convolution primitive (4-D input, canonical attributes); ``F.conv2d`` is the
    public spelling."""
    args = (x, w) if bias is None else (x, w, bias)
    lowered = AUTOCAST.value is not None  # on autocast's lower-precision list
    if lowered:
        args = tuple(lower(a) for a in args)
    out = bind(CONV2D, *args, stride=tuple(stride), padding=tuple(map(tuple, padding)),
               dilation=tuple(dilation), groups=int(groups))
    return lower(out) if lowered else out


# ------------------------------------------------------------------------- conv2d_weight


def _conv2d_weight_impl(x: np.ndarray, g: np.ndarray, kernel_size: Pair, stride: Pair,
                        padding: Pads, dilation: Pair, groups: int) -> np.ndarray:
    _conv2d_weight_infer(x, g, kernel_size=kernel_size, stride=stride, padding=padding,
                         dilation=dilation, groups=groups)
    n, o = g.shape[:2]
    cg = x.shape[1] // groups
    k = cg * kernel_size[0] * kernel_size[1]
    cols = _columns(x, kernel_size, dilation, padding, stride)
    length = g.shape[2] * g.shape[3]
    gw = _weight_grad(g.reshape(n, o, length), cols.reshape(groups * k, n, length), groups,
                      o // groups, k)
    return gw.reshape(o, cg, *kernel_size)


def _four_d(name: str, a: Any, b: Any) -> tuple:
    """``b``'s shape, both operands checked 4-D."""
    if len(a.shape) != 4 or len(b.shape) != 4:
        raise ShapeError(f"{name}: expected 4-D operands, got shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    return tuple(b.shape)


def _gradient_infer(name: str, grad: Any, other: Any, weight: tuple, n: int,
                    size: Pair, groups: int, attrs: dict) -> tuple:
    """The shape rule both convolution gradients share: a 4-D output gradient ``grad``
    and a 4-D ``other`` operand of its dtype, a ``weight`` (O, C/groups, kH, kW) whose
    windows over an input of ``n`` samples and spatial ``size`` give ``grad``'s shape."""
    gs = _four_d(name, other, grad)
    if grad.dtype != other.dtype:
        raise _dtype_error(other.dtype, grad.dtype)
    if weight[0] % groups or gs[1] != weight[0]:
        raise ShapeError(f"{name}: a weight of shape {weight} with groups={groups} does not "
                         f"fit an output gradient of shape {gs}")
    hw = out_size(tuple(size), weight[2:], attrs["dilation"], attrs["padding"],
                  attrs["stride"])
    if gs != (n, weight[0], *hw):
        raise ShapeError(f"{name}: {n} inputs of spatial size {tuple(size)} give outputs of "
                         f"shape ({n}, {weight[0]}, {hw[0]}, {hw[1]}), got an output "
                         f"gradient of shape {gs}")
    return (n, weight[1] * groups, *size), grad.dtype


def _conv2d_weight_infer(x: Any, g: Any, kernel_size: Pair, stride: Pair, padding: Pads,
                         dilation: Pair, groups: int) -> tuple:
    gs, xs = _four_d("conv2d_weight", x, g), tuple(x.shape)
    if xs[1] % groups:
        raise ShapeError(f"conv2d_weight: groups={groups} must divide the input's {xs[1]} "
                         f"channels")
    weight = (gs[1], xs[1] // groups, *kernel_size)
    _gradient_infer("conv2d_weight", g, x, weight, xs[0], xs[2:], groups,
                    {"stride": stride, "padding": padding, "dilation": dilation})
    return weight, x.dtype


def _conv2d_weight_vjp(ctx, gg):
    # Bilinear in (x, g): the weight gradient's cotangent acts as a weight.
    x, g = ctx.args
    a = ctx.attrs
    needs = ctx.needs_input_grad
    gx = conv2d_input(g, gg, tuple(ctx.inputs[0].shape[2:]), a["stride"], a["padding"],
                      a["dilation"], a["groups"]) if needs[0] else None
    gg_ = conv2d(x, gg, None, a["stride"], a["padding"], a["dilation"],
                 a["groups"]) if needs[1] else None
    return gx, gg_


CONV2D_WEIGHT = register(OpDef(
    "conv2d_weight", _conv2d_weight_impl, _conv2d_weight_infer, _conv2d_weight_vjp,
    "ConvolutionBackwardBackward0", saves=(0, 1), saves_for=(1, 0),
))


def conv2d_weight(x: Any, g: Any, kernel_size: Pair, stride: Pair = (1, 1),
                  padding: Pads = ((0, 0), (0, 0)), dilation: Pair = (1, 1),
                  groups: int = 1) -> Any:
    """The gradient of ``conv2d``'s weight (O, C/groups, kH, kW) given its input ``x`` and
    its output's gradient ``g`` (``torch.nn.grad.conv2d_weight`` with canonical
    attributes), e.g. ``conv2d_weight(x, g, (5, 5), padding=((2, 2), (2, 2)))``."""
    return bind(CONV2D_WEIGHT, x, g, kernel_size=tuple(kernel_size), stride=tuple(stride),
                padding=tuple(map(tuple, padding)), dilation=tuple(dilation),
                groups=int(groups))


# -------------------------------------------------------------------------- conv2d_input


def _conv2d_input_impl(g: np.ndarray, w: np.ndarray, input_size: Pair, stride: Pair,
                       padding: Pads, dilation: Pair, groups: int) -> np.ndarray:
    _conv2d_input_infer(g, w, input_size=input_size, stride=stride, padding=padding,
                        dilation=dilation, groups=groups)
    return _input_grad(g, w, input_size, {"stride": stride, "padding": padding,
                                          "dilation": dilation, "groups": groups})


def _conv2d_input_infer(g: Any, w: Any, input_size: Pair, stride: Pair, padding: Pads,
                        dilation: Pair, groups: int) -> tuple:
    _four_d("conv2d_input", w, g)
    return _gradient_infer("conv2d_input", g, w, tuple(w.shape), g.shape[0], input_size,
                           groups, {"stride": stride, "padding": padding, "dilation": dilation})


def _conv2d_input_vjp(ctx, gg):
    # Bilinear in (g, w): the input gradient's cotangent acts as the convolution's input.
    g, w = ctx.args
    a = ctx.attrs
    needs = ctx.needs_input_grad
    geometry = (a["stride"], a["padding"], a["dilation"], a["groups"])
    return (conv2d(gg, w, None, *geometry) if needs[0] else None,
            conv2d_weight(gg, g, tuple(ctx.inputs[1].shape[2:]), *geometry)
            if needs[1] else None)


CONV2D_INPUT = register(OpDef(
    "conv2d_input", _conv2d_input_impl, _conv2d_input_infer, _conv2d_input_vjp,
    "ConvolutionBackwardBackward0", saves=(0, 1), saves_for=(1, 0),
))


def conv2d_input(g: Any, w: Any, input_size: Pair, stride: Pair = (1, 1),
                 padding: Pads = ((0, 0), (0, 0)), dilation: Pair = (1, 1),
                 groups: int = 1) -> Any:
    """The gradient of ``conv2d``'s input (N, C, *input_size) given its output's gradient
    ``g`` and its weight ``w`` (``torch.nn.grad.conv2d_input`` with canonical attributes),
    e.g. ``conv2d_input(g, w, (28, 28), padding=((2, 2), (2, 2)))``."""
    return bind(CONV2D_INPUT, g, w, input_size=tuple(input_size), stride=tuple(stride),
                padding=tuple(map(tuple, padding)), dilation=tuple(dilation),
                groups=int(groups))


def conv_transpose2d(x: Any, w: Any, output_size: Pair, stride: Pair = (1, 1),
                     padding: Pads = ((0, 0), (0, 0)), dilation: Pair = (1, 1),
                     groups: int = 1) -> Any:
    """The transposed convolution of ``x`` (N, C_in, H, W) by ``w`` (C_in, C_out/groups,
    kH, kW) into (N, C_out, *output_size): ``conv2d_input`` with ``x`` as the output
    gradient, on autocast's lower-precision list as ``conv2d`` is."""
    lowered = AUTOCAST.value is not None
    if lowered:
        x, w = lower(x), lower(w)
    out = conv2d_input(x, w, output_size, stride, padding, dilation, groups)
    return lower(out) if lowered else out
