"""Linear and bilinear maps."""

from __future__ import annotations

import math
from typing import Any

from ...eager import fused
from ...modes import bind
from ...ops import elementwise as E
from ...ops import linalg as L
from ...ops import reduce as R
from ...ops import shape as S
from ...ops.mixin import TensorOps
from ...ops.precision import AUTOCAST

__all__ = [
    "bilinear", "linear",
]


def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """``x @ weight.T + bias``; on 2-D input with a bias one ``addmm`` (``AddmmBackward0``)."""
    if not isinstance(x, TensorOps):
        raise TypeError(f"linear: input must be a tensor, got {type(x).__name__}")
    if bias is not None and AUTOCAST.value is None:
        # Eager rows of one float dtype: transpose and addmm recorded in one step.
        out = fused.linear(x, weight, bias)
        if out is not None:
            return out
    # Each shape read is a property call: a small eager step pays them per layer.
    xshape = x.shape
    wshape = weight.shape
    ndim = len(xshape)
    if ndim < 1:
        raise ValueError(f"linear: input must have at least 1 dimension, got shape "
                         f"{tuple(x.shape)}")
    if xshape[-1] != wshape[-1]:
        raise ValueError(
            f"linear: input of shape {tuple(xshape)} does not match weight of shape "
            f"{tuple(wshape)} (in_features {wshape[-1]})"
        )
    # weight.T of a matrix bound directly (a valid permutation: permute's checks would
    # only cost calls); it records TBackward0 as ``weight.t()`` does.
    wt = bind(S.TRANSPOSE, weight, axes=(1, 0)) if len(wshape) == 2 else S.transpose(weight)
    if bias is not None and ndim == 2:
        return L.addmm(bias, x, wt)
    if bias is not None and ndim > 2 and len(wshape) == 2:
        # As PyTorch's linear: the leading dimensions fold into one, so the product is one
        # GEMM (addmm) and so is the weight's gradient (not a batch of them summed).
        lead = tuple(xshape[:-1])
        rows = math.prod(lead)
        out = L.addmm(bias, S.reshape(x, (rows, xshape[-1])), wt)
        return S.reshape(out, lead + (wshape[0],))
    out = L.matmul(x, wt)
    return out if bias is None else E.add(out, bias)


def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Any:
    """``y_k = x1 @ weight[k] @ x2 + bias[k]`` over the last dims of ``input1`` (…, in1) and
    ``input2`` (…, in2), with weight (out, in1, in2)."""
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional, got shape "
                           f"{tuple(weight.shape)}")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input sizes {tuple(input1.shape)} and "
                           f"{tuple(input2.shape)} do not match weight of shape "
                           f"{tuple(weight.shape)}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    lead = tuple(input1.shape[:-1])
    x1 = S.reshape(input1, (-1, weight.shape[1]))
    x2 = S.reshape(input2, (-1, weight.shape[2]))
    o, i1, i2 = weight.shape
    # (B, in1) @ (in1, out*in2): one GEMM, then a row-wise product with x2.
    t = L.matmul(x1, S.reshape(S.permute(weight, 1, 0, 2), (i1, o * i2)))
    out = R.sum(E.mul(S.reshape(t, (-1, o, i2)), S.reshape(x2, (-1, 1, i2))), -1)
    if bias is not None:
        out = E.add(out, bias)
    return S.reshape(out, lead + (o,))

