"""``dg.Size``, the shape type of ``Tensor.shape`` and ``Tensor.size()`` (a tuple of ints,
as ``torch.Size``), ``dg.layout``/``dg.strided``, the (only) memory layout, and the
``dg.memory_format`` values that ``memory_format=`` arguments accept."""

from __future__ import annotations

import math
from typing import Any


class Size(tuple):
    """A tensor's shape: a tuple of ints that prints as ``dg.Size([2, 3])``. ``x.shape`` and
    ``x.size()`` return one (the library's own hot paths read the array's shape instead).

    >>> dg.ones(2, 3).size()
    dg.Size([2, 3])
    """

    __slots__ = ()

    def __new__(cls, sizes: Any = ()) -> Size:
        sizes = tuple(sizes)
        if all(type(s) is int for s in sizes):
            return tuple.__new__(cls, sizes)
        for s in sizes:
            if isinstance(s, bool) or not hasattr(s, "__index__"):
                raise TypeError(f"Size(): expected a tuple of ints, but got an element of type "
                                f"{type(s).__name__}")
        return tuple.__new__(cls, (s.__index__() for s in sizes))

    def numel(self) -> int:
        """The number of elements a tensor of this shape has."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"dg.Size({list(self)})"

    def __getitem__(self, index: Any) -> Any:
        out = tuple.__getitem__(self, index)
        return Size(out) if isinstance(index, slice) else out

    @classmethod
    def of(cls, shape: tuple) -> Size:
        """``shape`` (a tuple of Python ints, as an array's) as a Size, unchecked."""
        return tuple.__new__(cls, shape)

    def __add__(self, other: Any) -> Size:
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other: Any) -> Size:
        return Size(tuple(other) + tuple(self))

    def __reduce__(self) -> tuple:
        return (Size, (tuple(self),))


class layout:  # noqa: N801 - PyTorch's name
    """A memory layout; dualgraph tensors are all ``dg.strided`` (dense)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"dg.{self.name}"


strided = layout("strided")


class memory_format:  # noqa: N801 - PyTorch's name
    """A requested element order (``x.contiguous(memory_format=dg.channels_last)``):
    accepted everywhere PyTorch takes one; dualgraph tensors keep C order."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"dg.{self.name}"


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
