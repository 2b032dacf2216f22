"""PyTorch's legacy tensor types: ``dg.FloatTensor``, ``dg.LongTensor``, ... Each
constructs a tensor of its dtype from data (``dg.LongTensor([1, 2])``) or a shape
(``dg.FloatTensor(2, 3)``, zero-filled: dualgraph never hands out uninitialised memory),
and ``isinstance(t, dg.FloatTensor)`` asks for a float32 tensor. ``x.type(dg.LongTensor)``
casts, as ``x.long()`` does.

    >>> dg.LongTensor([1, 2]).dtype
    dtype('int64')
    >>> isinstance(dg.zeros(2), dg.FloatTensor)
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import as_dtype
from .eager.creation import zeros
from .eager.tensor import Tensor, tensor


class _TensorType(type):
    """The metaclass: ``isinstance(t, FloatTensor)`` checks ``t``'s dtype."""

    dtype: np.dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and np.dtype(obj.dtype) == cls.dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        from .dtypes import check_device

        check_device(device, f"{cls.__name__}()")
        if not args:
            return zeros(0, dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], Tensor):
            return args[0].astype(cls.dtype)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return zeros(*args, dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], tuple) and all(
                isinstance(a, (int, np.integer)) for a in args[0]) and type(args[0]) is not tuple:
            return zeros(*args[0], dtype=cls.dtype)  # a dg.Size
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}(): expected data or sizes, got {args!r}")
        return tensor(args[0], dtype=cls.dtype)


def _make(name: str, dtype: Any) -> type:
    return _TensorType(name, (), {"dtype": as_dtype(dtype), "__module__": "dualgraph",
                                  "__doc__": f"Legacy constructor of {as_dtype(dtype)} "
                                             "tensors."})


FloatTensor = _make("FloatTensor", np.float32)
DoubleTensor = _make("DoubleTensor", np.float64)
HalfTensor = _make("HalfTensor", np.float16)
LongTensor = _make("LongTensor", np.int64)
IntTensor = _make("IntTensor", np.int32)
ShortTensor = _make("ShortTensor", np.int16)
CharTensor = _make("CharTensor", np.int8)
ByteTensor = _make("ByteTensor", np.uint8)
BoolTensor = _make("BoolTensor", np.bool_)

BY_NAME = {t.__name__: t for t in (FloatTensor, DoubleTensor, HalfTensor, LongTensor,
                                     IntTensor, ShortTensor, CharTensor, ByteTensor,
                                     BoolTensor)}


__all__ = list(BY_NAME)
