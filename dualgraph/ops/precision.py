"""Lower precision emulated in float32: the ``reduce_precision`` primitive and the autocast
state that the matrix products and convolutions read.

NumPy has no bfloat16, and the compiled kernels take no float16, so a value "in bfloat16"
is a float32 array holding only bfloat16 values: ``reduce_precision(x, 7, 8)`` rounds each
element to the nearest one with 7 mantissa and 8 exponent bits (ties to even, overflow to
infinity, NaN kept), as a cast to bfloat16 and back does; ``(10, 5)`` is float16's format.
Its gradient is the incoming gradient rounded the same way: the gradient of a value held in
the lower precision is itself held in it, as PyTorch's cast leaves it.

`AUTOCAST.value` holds the format of this thread's active ``dg.autocast`` region (None
outside one); the ops on PyTorch's CPU lower-precision list call `lower` on their float32
operands and result. It is part of a compiled function's signature key.

>>> reduce_precision(dg.tensor([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8]), 7, 8).tolist()
[1.0, 1.015625]
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..modes import bind
from .registry import OpDef, register


class _AutocastState(threading.local):
    """The active autocast format of this thread, ``state.value``: None, or ``(name,
    mantissa bits, exponent bits)``. Per thread, as PyTorch's autocast state is: a region
    entered in one thread must not round the products another thread computes (or
    compiles). Hot paths read the attribute directly."""

    def __init__(self) -> None:
        self.value: tuple | None = None


AUTOCAST = _AutocastState()

FORMATS = {"bfloat16": (7, 8), "float16": (10, 5)}


def _round_to_format(x: np.ndarray, mbits: Any, ebits: Any) -> np.ndarray:
    mbits, ebits = int(mbits), int(ebits)
    v = x.astype(np.float64)
    _, e = np.frexp(v)
    # Below the smallest normal exponent the spacing stays fixed (subnormals).
    exp = np.maximum(e - 1, 2 - 2 ** (ebits - 1))
    step = np.ldexp(1.0, exp - mbits)
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.rint(v / step) * step
    largest = (2.0 - 2.0 ** -mbits) * 2.0 ** (2 ** (ebits - 1) - 1)
    r = np.where(np.abs(r) > largest, np.copysign(np.inf, v), r)
    r = np.where(np.isfinite(v), r, v)
    return r.astype(x.dtype)


def _infer(x: Any, mbits: Any, ebits: Any) -> tuple:
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"reduce_precision: expected a floating-point tensor, got {x.dtype}")
    return tuple(x.shape), x.dtype


def _vjp(ctx: Any, g: Any) -> tuple:
    _, mbits, ebits = ctx.args
    return reduce_precision(g, mbits, ebits), None, None


REDUCE_PRECISION = register(OpDef(
    "reduce_precision", _round_to_format, _infer, _vjp, "ToCopyBackward0", saves=(),
    elementwise=True,
))


def reduce_precision(x: Any, mantissa_bits: int, exponent_bits: int) -> Any:
    """``x`` rounded to the nearest value with ``mantissa_bits`` and ``exponent_bits``
    (``(7, 8)``: bfloat16, ``(10, 5)``: float16), kept in ``x``'s dtype."""
    return bind(REDUCE_PRECISION, x, int(mantissa_bits), int(exponent_bits))


def lower(x: Any) -> Any:
    """``x`` in the active autocast format when it is a float32 tensor (PyTorch's CPU
    autocast casts neither float64 nor integer tensors); else ``x``."""
    fmt = AUTOCAST.value
    if fmt is None or getattr(x, "dtype", None) != np.float32:
        return x
    return bind(REDUCE_PRECISION, x, fmt[1], fmt[2])


__all__ = ["AUTOCAST", "FORMATS", "lower", "reduce_precision"]
