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
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
uint8 = np.dtype(np.uint8)

# PyTorch's other spellings of the same dtypes (``torch.long is torch.int64``).
ALIASES = {
    "float": float32, "double": float64, "half": float16, "int": int32, "long": int64,
    "short": int16, "int8": int8, "int16": int16, "uint8": uint8, "bool": bool_,
}

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


class UnsupportedDtype:
    """A PyTorch dtype NumPy cannot hold (``dg.bfloat16``): the name exists, so code that
    only mentions it runs, and using it raises `TypeError` naming it."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def __repr__(self) -> str:
        return f"dg.{self.name}"


bfloat16 = UnsupportedDtype("bfloat16", "NumPy has no bfloat16 (use dg.float32 or dg.float16)")
complex32 = UnsupportedDtype("complex32", "NumPy has no complex half (use dg.complex64)")
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)
# PyTorch's other names of the same complex dtypes (``torch.cfloat is torch.complex64``).
COMPLEX_ALIASES = {"chalf": complex32, "cfloat": complex64, "cdouble": complex128}

# The default floating dtype (``dg.set_default_dtype``): what Python floats, the float
# factories and new layers' parameters give. One mutable cell, read on every use, so a
# compiled call's key can include it (`default_float`).
DEFAULT_FLOAT = [float32]


def default_float() -> np.dtype:
    """The default floating dtype: float32 unless ``dg.set_default_dtype`` changed it."""
    return DEFAULT_FLOAT[0]


def as_dtype(dtype: Any) -> np.dtype:
    """Turn a NumPy dtype, a Python type or a name (``"float32"``) into a NumPy dtype."""
    if isinstance(dtype, UnsupportedDtype):
        raise TypeError(f"dtype {dtype!r} is not supported: {dtype.reason}")
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
        check_device(device, "to()")
    return None if dtype is None else as_dtype(dtype)


def _is_dtype_name(name: str) -> bool:
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


def _is_device(a: Any) -> bool:
    return (isinstance(a, device) or type(a).__name__ == "device"
            or isinstance(a, str) and a.split(":")[0] in DEVICE_TYPES)


# ----------------------------------------------------------------------- devices
# The device types PyTorch's parser knows: any of them names a device (a CPU build of
# PyTorch builds ``torch.device("cuda")`` too), but only the CPU holds tensors here.
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                "privateuseone")


class device:  # noqa: N801 - PyTorch's name
    """A device, as ``torch.device``: ``dg.device("cpu")``, ``dg.device("cuda:1")``,
    ``dg.device("cpu", 0)``. Comparable and hashable, with ``.type`` and ``.index``.
    Any device PyTorch knows can be named; only the CPU can hold a tensor (dualgraph runs
    on NumPy and Numba), so using another raises `RuntimeError` naming it.

    >>> dg.device("cpu") == dg.zeros(2).device
    True
    """

    __slots__ = ("_type", "_index")

    def __init__(self, type: Any, index: int | None = None) -> None:  # noqa: A002
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device object")
            self._type, self._index = type.type, type.index
            return
        if isinstance(type, (int, np.integer)) and not isinstance(type, bool):
            raise RuntimeError(f"device({type}): a bare index names an accelerator device, "
                               "and dualgraph has none (it runs on the CPU only)")
        if not isinstance(type, str):
            raise TypeError(f"device() expects a string, got {_type_name(type)}")
        name, sep, idx = type.partition(":")
        if name not in DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start "
                               f"of device string: {type}")
        if sep:
            if index is not None:
                raise RuntimeError(f"device(): type {type!r} already holds an index")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: {type!r}")
            index = int(idx)
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
                raise RuntimeError(f"Device index must not be negative, got {index!r}")
            index = int(index)
        self._type, self._index = name, index

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self) -> int | None:
        return self._index

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, device) and other.type == self._type
                and other.index == self._index)

    def __hash__(self) -> int:
        return hash((self._type, self._index))

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self) -> str:
        extra = "" if self._index is None else f", index={self._index}"
        return f"device(type={self._type!r}{extra})"

    def __reduce__(self) -> tuple:
        return device, (self._type, self._index)


CPU = device("cpu")


def _type_name(x: Any) -> str:
    return type(x).__name__


def check_device(dev: Any, where: str) -> None:
    """Accept ``dev`` when it is the CPU (or None), else raise `RuntimeError` naming it."""
    if dev is None:
        return
    if isinstance(dev, device):
        d = dev
    else:  # a string, or another library's device object (its str is its name)
        d = device(str(dev) if hasattr(dev, "type") and not isinstance(dev, str) else dev)
    if d.type != "cpu":
        raise RuntimeError(f"{where}: device {str(d)!r} is not available: dualgraph runs on "
                           "the CPU only (NumPy and Numba); use 'cpu' or leave the device out")
