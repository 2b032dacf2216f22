"""Dtype queries as PyTorch has them: ``finfo``, ``iinfo``, ``promote_types``,
``result_type``, ``can_cast``, ``is_floating_point``, ``is_complex``, ``is_signed``.

    >>> dg.finfo(dg.float32).eps
    1.1920928955078125e-07
    >>> dg.promote_types(dg.int64, dg.float32)
    dtype('float32')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import as_dtype, float32
from .ops.broadcast import result_dtype

_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}


class finfo:  # noqa: N801 - PyTorch's name
    """Machine limits of a floating dtype (float32 by default), as Python floats: ``bits``,
    ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype``."""

    def __init__(self, type: Any = None) -> None:  # noqa: A002
        dtype = float32 if type is None else as_dtype(type)
        if dtype.kind != "f":
            raise TypeError(f"finfo(): expected a floating point dtype, got {dtype}")
        info = np.finfo(dtype)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = float(info.resolution)
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: ``bits``, ``max``, ``min``, ``dtype``."""

    def __init__(self, type: Any) -> None:  # noqa: A002
        dtype = as_dtype(type)
        if dtype.kind not in "iub":
            raise TypeError(f"iinfo(): expected an integer dtype, got {dtype}")
        if dtype.kind == "b":
            self.bits, self.max, self.min = 8, 1, 0
        else:
            info = np.iinfo(dtype)
            self.bits, self.max, self.min = int(info.bits), int(info.max), int(info.min)
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def promote_types(type1: Any, type2: Any) -> np.dtype:
    """The dtype two tensors of these dtypes combine to."""
    a, b = as_dtype(type1), as_dtype(type2)
    return result_dtype(np.empty(0, a), np.empty(0, b))


def result_type(tensor1: Any, tensor2: Any) -> np.dtype:
    """The dtype of an arithmetic op on the two operands (tensors or numbers), by the same
    promotion rules the ops use."""
    return result_dtype(tensor1, tensor2)


def can_cast(from_: Any, to: Any) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` (no lower category:
    float to int or int to bool is refused)."""
    a, b = as_dtype(from_), as_dtype(to)
    return _KIND_RANK.get(a.kind, 3) <= _KIND_RANK.get(b.kind, 3)


def is_floating_point(input: Any) -> bool:  # noqa: A002
    return np.dtype(input.dtype).kind == "f"


def is_complex(input: Any) -> bool:  # noqa: A002
    """False: complex tensors are not supported."""
    return np.dtype(input.dtype).kind == "c"


def is_signed(input: Any) -> bool:  # noqa: A002
    return np.dtype(input.dtype).kind in "if"


__all__ = ["can_cast", "finfo", "iinfo", "is_complex", "is_floating_point", "is_signed",
           "promote_types", "result_type"]
