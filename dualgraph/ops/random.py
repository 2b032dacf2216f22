"""Random ops: ``randn``, ``rand`` and ``dropout``, drawn from a counter-based generator.

Every random op takes a **key** (a 0-d int64 value) and a ``stream`` attribute, and its
numbers are a pure function of ``(key, stream, element index)``: SplitMix64's output
function applied to ``mix(key + stream * gamma) + (counter + 1) * gamma``. So the NumPy
kernel here (the reference interpreter), the Numba lowering and a backward pass that
regenerates a dropout mask all draw the same numbers from the same key, and a graph's
randomness is an ordinary input: a compiled call draws a fresh key per call from
dualgraph's generator (`dg.manual_seed` makes it reproducible).

Where the key comes from is the caller's business (ops know no modes): eager ``dropout``
draws one from dualgraph's generator per call, a trace reads the trace key (see
``dualgraph/eager/tensor.py``, `random_key`). Eager ``dg.randn``/``dg.rand`` keep drawing
NumPy's stream, as they always have; only traced code binds these ops for them.

Element ``i`` (C order) of ``rand`` uses counter ``i``: the top 24 bits give a float32 in
[0, 1), the top 53 a float64. ``randn`` uses counters ``2i`` and ``2i + 1`` (Box-Muller in
float64, then cast). ``dropout`` keeps element ``i`` when the 53-bit uniform of counter
``i`` is at least ``p`` and scales kept elements by ``1 / (1 - p)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..modes import bind
from .registry import OpDef, register

# SplitMix64's constants (Steele, Lea and Flood, "Fast splittable pseudorandom number
# generators", 2014): the Weyl increment and the two multipliers of the output function.
GAMMA = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
TWO_PI = 2.0 * math.pi
# The names of the ops whose values depend on a key (compare and verify skip them).
RANDOM_OPS = frozenset({"randn", "rand", "dropout"})


def is_random(op_name: str) -> bool:
    """Whether op ``op_name`` draws random numbers."""
    return op_name in RANDOM_OPS


# ------------------------------------------------------------------ the generator
# Arrays throughout (shape (1,) for scalars): NumPy warns on uint64 scalar overflow but
# wraps arrays silently, and wrapping is the arithmetic SplitMix64 wants.


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
    return z ^ (z >> np.uint64(31))


def bits(key: Any, stream: int, n: int) -> np.ndarray:
    """``n`` random 64-bit words for ``(key, stream)``: counters 0 .. n-1."""
    k = np.asarray(key).astype(np.int64).reshape(1).view(np.uint64)
    base = _mix(k + np.array([stream], np.uint64) * np.uint64(GAMMA))
    counters = np.arange(1, n + 1, dtype=np.uint64)
    return _mix(base + counters * np.uint64(GAMMA))


def _uniform53(h: np.ndarray) -> np.ndarray:
    """Uniform float64 in [0, 1) from the top 53 bits (exact: no rounding)."""
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _uniform(h: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype == np.float32:  # 24 bits: exact in float32, so never rounded up to 1.0
        return ((h >> np.uint64(40)).astype(np.float64) * 2.0 ** -24).astype(np.float32)
    return _uniform53(h).astype(dtype)


# ------------------------------------------------------------------------- rules


def _check_key(key: Any) -> None:
    if tuple(key.shape) != () or np.dtype(key.dtype) != np.int64:
        raise ValueError(f"random op: the key must be a 0-d int64 value, got "
                         f"{tuple(key.shape)} {key.dtype}")


def _draw_infer(key: Any, shape: tuple, dtype: Any, stream: int) -> tuple:
    _check_key(key)
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"random op: dtype must be floating, got {dtype}")
    return tuple(shape), dtype


def _rand_impl(key: np.ndarray, shape: tuple, dtype: Any, stream: int) -> np.ndarray:
    n = math.prod(shape)
    return _uniform(bits(key, stream, n), np.dtype(dtype)).reshape(shape)


def _randn_impl(key: np.ndarray, shape: tuple, dtype: Any, stream: int) -> np.ndarray:
    n = math.prod(shape)
    h = bits(key, stream, 2 * n)
    u1 = 1.0 - _uniform53(h[0::2])  # in (0, 1]: log is finite
    u2 = _uniform53(h[1::2])
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(TWO_PI * u2)
    return z.astype(np.dtype(dtype)).reshape(shape)


def dropout_scale(p: float, dtype: Any) -> Any:
    """What a kept element is multiplied by, in ``dtype`` (0 when everything is dropped)."""
    return np.dtype(dtype).type(0.0 if p >= 1.0 else 1.0 / (1.0 - p))


def dropout_noise(key: Any, shape: tuple, dtype: Any, p: float, stream: int) -> np.ndarray:
    """The multiplier of each element: ``1 / (1 - p)`` where kept, 0 where dropped."""
    keep = _uniform53(bits(key, stream, math.prod(shape))) >= p
    return (keep * dropout_scale(p, dtype)).astype(dtype).reshape(shape)


def _dropout_impl(x: np.ndarray, key: np.ndarray, p: float, stream: int) -> np.ndarray:
    x = np.asarray(x)
    return x * dropout_noise(key, x.shape, x.dtype, p, stream)


def _dropout_infer(x: Any, key: Any, p: float, stream: int) -> tuple:
    _check_key(key)
    if np.dtype(x.dtype).kind != "f":
        raise ValueError(f"dropout: the input must be floating, got {x.dtype}")
    return tuple(x.shape), np.dtype(x.dtype)


def _dropout_vjp(ctx: Any, g: Any) -> tuple:
    # dropout is x times a mask that depends on the key only, so its VJP is the same
    # dropout of g: the mask is regenerated from the saved key, never stored.
    _, key = ctx.args
    return dropout(g, key, **ctx.attrs), None


RANDN = register(OpDef("randn", _randn_impl, _draw_infer, None, "", differentiable=False))
RAND = register(OpDef("rand", _rand_impl, _draw_infer, None, "", differentiable=False))
# PyTorch's CPU dropout multiplies by a noise tensor, so its node is MulBackward0.
DROPOUT = register(OpDef("dropout", _dropout_impl, _dropout_infer, _dropout_vjp,
                         "MulBackward0", saves=(1,)))


# ------------------------------------------------------------------ functional form


def randn(key: Any, shape: tuple, dtype: Any = np.float32, stream: int = 0) -> Any:
    """Standard normal samples of ``shape`` for ``key`` (a 0-d int64 tensor)."""
    return bind(RANDN, key, shape=tuple(int(d) for d in shape), dtype=np.dtype(dtype),
                stream=int(stream))


def rand(key: Any, shape: tuple, dtype: Any = np.float32, stream: int = 0) -> Any:
    """Uniform samples in [0, 1) of ``shape`` for ``key`` (a 0-d int64 tensor)."""
    return bind(RAND, key, shape=tuple(int(d) for d in shape), dtype=np.dtype(dtype),
                stream=int(stream))


def dropout(x: Any, key: Any, p: float, stream: int = 0) -> Any:
    """``x`` with each element zeroed with probability ``p`` (the mask drawn from ``key``)
    and the others scaled by ``1 / (1 - p)``."""
    return bind(DROPOUT, x, key, p=float(p), stream=int(stream))
