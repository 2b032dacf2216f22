"""``as_strided``: a tensor of a given size whose element ``i`` is read at
``storage_offset + sum(i[k] * stride[k])`` of the input's row-major (contiguous) layout.

It is a gather of the flattened input at a constant index, so it differentiates (the
gradient scatter-adds, summing where positions overlap, as PyTorch's) and traces.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import index as I
from . import shape as S

__all__ = ["as_strided"]


def _ints(name: str, value: Any) -> tuple:
    if isinstance(value, (int, np.integer)):
        return (int(value),)
    try:
        return tuple(int(v) for v in value)
    except TypeError:
        raise TypeError(f"as_strided(): {name} must be a sequence of ints, got "
                        f"{type(value).__name__}") from None


def as_strided(input: Any, size: Any, stride: Any,  # noqa: A002
               storage_offset: int | None = None) -> Any:
    """PyTorch's ``as_strided`` over the input's contiguous layout (for a contiguous input,
    exactly PyTorch's result; the result is a new tensor, not a view).

    >>> dg.arange(6.0).as_strided((2, 2), (1, 2))
    tensor([[0., 2.],
            [1., 3.]])
    """
    size, stride = _ints("size", size), _ints("stride", stride)
    offset = 0 if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} sizes, "
                           f"{len(stride)} strides")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise RuntimeError(f"as_strided: negative size, stride or storage offset "
                           f"(size={size}, stride={stride}, storage_offset={offset})")
    n = math.prod(input.shape)
    flat = np.full(size, offset, dtype=np.int64)
    for k, (sz, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = sz
        flat = flat + (np.arange(sz, dtype=np.int64) * st).reshape(shape)
    needed = int(flat.max()) + 1 if flat.size else 0
    if needed > n:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {offset} require a storage of {needed} elements, out of "
                           f"bounds for a storage of {n} elements")
    return I.getitem(S.reshape(input, (-1,)), flat)
