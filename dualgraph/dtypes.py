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


def to_target(args: tuple, kwargs: dict) -> np.dtype | None:
    """The dtype a PyTorch-style ``.to(...)`` call asks for (None: keep the dtype).

    Accepts ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)`` and
    the keywords ``dtype=``, ``device=``, ``non_blocking=``, ``copy=``. dualgraph runs on
    the CPU only: a device is accepted when it is the CPU and refused otherwise.
    """
    unknown = set(kwargs) - {"dtype", "device", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise TypeError(f"to() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    dtype = kwargs.get("dtype")
    device = kwargs.get("device")
    for a in args:
        if (not isinstance(a, (type, np.dtype, str)) and hasattr(a, "dtype")
                and hasattr(a, "shape")):  # to(other): its dtype (not np.float64 itself)
            dtype = a.dtype
        elif isinstance(a, str) and not _is_dtype_name(a) or _is_device(a):
            device = a
        elif a is not None:
            dtype = a
    if device is not None:
        name = str(getattr(device, "type", device)).split(":")[0]
        if name != "cpu":
            raise RuntimeError(f"to({device!r}): dualgraph runs on the CPU only (NumPy and "
                               "Numba); use 'cpu' or leave the device out")
    return None if dtype is None else as_dtype(dtype)


def _is_dtype_name(name: str) -> bool:
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


def _is_device(a: Any) -> bool:
    return type(a).__name__ == "device" or isinstance(a, str) and a.split(":")[0] in (
        "cpu", "cuda", "mps", "meta", "xpu")
