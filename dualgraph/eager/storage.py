"""Tensor storage, as PyTorch reports it: the one buffer a tensor and its views read.

A tensor's data is a NumPy array; its storage is the array at the root of that array's
``base`` chain, the one that owns (or wraps) the memory. A view made by slicing,
transposing or ``view``/``reshape`` without a copy has the same root, so
``a.untyped_storage().data_ptr() == a[1:].untyped_storage().data_ptr()``, the idiom that
finds shared (tied) weights, holds as in PyTorch. A storage object is made per call and
holds the root array; it is not a handle that can be resized.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import device

__all__ = ["TypedStorage", "UntypedStorage", "root_array"]


def root_array(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory: the last NumPy array up ``a``'s ``base`` chain."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


class UntypedStorage:
    """The bytes under a tensor (``Tensor.untyped_storage()``)."""

    def __init__(self, root: np.ndarray) -> None:
        self._root = root

    def data_ptr(self) -> int:
        """The address of the first byte."""
        return _ptr(self._root)

    def nbytes(self) -> int:
        return int(self._root.nbytes)

    def size(self) -> int:
        return int(self._root.nbytes)

    def __len__(self) -> int:
        return int(self._root.nbytes)

    def element_size(self) -> int:
        return 1

    @property
    def device(self) -> device:
        return device("cpu")

    @property
    def is_cuda(self) -> bool:
        return False

    def _bytes(self) -> np.ndarray:
        # The root may be non-contiguous only when it wraps foreign memory (a transposed
        # frombuffer): its bytes are then read in memory order.
        return np.ascontiguousarray(self._root).reshape(-1).view(np.uint8)

    def tolist(self) -> list:
        return self._bytes().tolist()

    def __getitem__(self, i: Any) -> Any:
        return self._bytes()[i].tolist()

    def is_shared(self) -> bool:
        return False

    def is_pinned(self, device: Any = "cuda") -> bool:
        return False

    def cpu(self) -> "UntypedStorage":
        return self

    def untyped(self) -> "UntypedStorage":
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UntypedStorage) and other._root is self._root

    def __hash__(self) -> int:
        return id(self._root)

    def __repr__(self) -> str:
        return f"UntypedStorage(nbytes={self.nbytes()}, data_ptr={self.data_ptr():#x})"


class TypedStorage(UntypedStorage):
    """The elements under a tensor, in its dtype (``Tensor.storage()``): PyTorch's legacy
    typed view of the same storage."""

    def __init__(self, root: np.ndarray, dtype: Any) -> None:
        super().__init__(root)
        self.dtype = dtype
        self._np = np.dtype(root.dtype if dtype is None else np.dtype(dtype))

    def _elements(self) -> np.ndarray:
        return self._bytes()[: self.nbytes() - self.nbytes() % self._np.itemsize].view(self._np)

    def size(self) -> int:
        return self.nbytes() // self._np.itemsize

    def __len__(self) -> int:
        return self.size()

    def element_size(self) -> int:
        return self._np.itemsize

    def tolist(self) -> list:
        return self._elements().tolist()

    def __getitem__(self, i: Any) -> Any:
        return self._elements()[i].tolist()

    def untyped(self) -> UntypedStorage:
        return UntypedStorage(self._root)

    def __repr__(self) -> str:
        return f"TypedStorage(dtype={self._np}, size={self.size()})"
