"""Dtypes: NumPy dtypes under PyTorch-like names, and the short names the IR prints."""

from __future__ import annotations

from typing import Any

import numpy as np

float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

_SHORT = {
    float16: "f16",
    float32: "f32",
    float64: "f64",
    int32: "i32",
    int64: "i64",
    bool_: "bool",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint8): "u8",
}


def as_dtype(dtype: Any) -> np.dtype:
    """Turn a NumPy dtype, a Python type or a name (``"float32"``) into a NumPy dtype."""
    try:
        return np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"not a dtype: {dtype!r}") from e


def short_name(dtype: np.dtype) -> str:
    """The IR spelling of a dtype: ``f32``, ``f64``, ``i64``, ``bool``."""
    return _SHORT.get(dtype) or dtype.name


def is_floating(dtype: np.dtype) -> bool:
    return dtype.kind == "f"
