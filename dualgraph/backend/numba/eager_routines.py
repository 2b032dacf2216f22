"""Eager kernels as compiled loops, where NumPy's passes cost several times the work: exact
float32 GELU and its backward, and the rows' scatter-add of an embedding's gradient. Each
does the NumPy form's operations in its order (`dualgraph.ops.activation`,
`dualgraph.ops.gather`), so it gives the same bits; those NumPy forms stay the reference.

Eager mode reaches these through `dualgraph.eager.routines`, which imports this module on
the first operand large enough to use them: an eager program that never has one does not
import Numba. The functions are built once per installation and kept in Numba's disk cache,
keyed on the backend's sources (`cache_key.cached_njit`).

GELU. The NumPy form makes about 25 passes over the array forward (``erf_f32``'s two
polynomials, the tail's gather and scatter, then ``(x * 0.5) * (erf + 1)``) and 8 backward.
Here the same float32 operations run in two loops each way around one NumPy ``exp`` pass
(the function the NumPy form calls, so its bits):

- forward: `gelu_fwd_polys` evaluates ``erf``'s small-argument fit and the exponent of its
  tail fit for every element (vectorised), then packs the tail's exponents (where
  ``|x / sqrt(2)| >= 1``, about a sixth of normal data) with their indices; NumPy's
  ``exp`` runs over the packed exponents only; `gelu_fwd_finish` writes the tail's ``erf``
  back, then GELU and ``erf(x / sqrt(2)) + 1``, which the backward reads;
- backward: `gelu_bwd_exponent` writes ``-x*x/2``, NumPy's ``exp`` runs over it, and
  `gelu_bwd_finish` writes ``g * (Phi(x) + x phi(x))``.

The loops over every element have no branches and no calls, so LLVM vectorises them. The
fits' coefficients are arguments, not constants, so the cached machine code cannot outlive
an edit of ``erf32``.

The scatter-add. `add_rows` adds each value row to its row of the output in the values'
order: `np.add.at`'s additions, one at a time in the same order, in one loop.
"""

from __future__ import annotations

import numpy as np

from ...ops import erf32
from .cache_key import cached_njit

_F = np.float32
_HALF = _F(0.5)
_NEG_HALF = _F(-0.5)
_ONE = _F(1.0)
_SQRT_HALF = _F(1.0 / np.sqrt(2.0))
_INV_SQRT_2PI = _F(1.0 / np.sqrt(2.0 * np.pi))
_JIT = {"nogil": True, "error_model": "numpy"}


@cached_njit(**_JIT)
def gelu_fwd_polys(x, scale, p, q, clamp, center, split, small, expo, tail):  # pragma: no cover
    """``small = u P(u^2)`` with ``u = x * scale`` for every element, and for the ``n``
    elements where ``u^2 >= split`` (the tail), in order, their index in ``tail[:n]`` and
    ``Q(min(|u|, clamp) - center)`` in ``expo[:n]``; returns ``n``. ``p`` and ``q`` are
    the fits' coefficients, highest degree first (unpacked by name: a loop over them would
    keep LLVM from vectorising the loop over the elements)."""
    p0, p1, p2, p3, p4, p5, p6 = p
    q0, q1, q2, q3, q4, q5, q6, q7, q8, q9 = q
    # Every element's tail exponent is evaluated in the vectorised loop, then the tail's
    # are packed (no branch: each iteration writes and advances on the condition).
    for i in range(x.size):
        u = x[i] * scale
        t = u * u
        s = (((((t * p0 + p1) * t + p2) * t + p3) * t + p4) * t + p5) * t + p6
        small[i] = s * u
        a = min(abs(u), clamp) - center
        r = ((((((((a * q0 + q1) * a + q2) * a + q3) * a + q4) * a + q5) * a + q6) * a
              + q7) * a + q8) * a + q9
        expo[i] = r
    n = 0
    for i in range(x.size):
        u = x[i] * scale
        expo[n] = expo[i]
        tail[n] = i
        n += u * u >= split
    return n


@cached_njit(**_JIT)
def gelu_fwd_finish(x, scale, tail, n, small, cdf):  # pragma: no cover - jitted
    """With ``cdf[:n]`` holding the tail's ``exp(Q)``: the tail's ``erf = 1 - exp(Q)``
    (signed) into ``small``, then ``cdf = erf + 1`` and ``small = (x * 0.5) * cdf``
    (GELU) for every element."""
    one, half = _ONE, _HALF
    for j in range(n):
        i = tail[j]
        small[i] = np.copysign(one - cdf[j], x[i] * scale)
    for i in range(x.size):
        c = small[i] + one
        cdf[i] = c
        small[i] = (x[i] * half) * c


@cached_njit(**_JIT)
def gelu_bwd_exponent(x, out):  # pragma: no cover - jitted
    """``out = (x * x) * -0.5``."""
    h = _NEG_HALF
    for i in range(x.size):
        out[i] = (x[i] * x[i]) * h


@cached_njit(**_JIT)
def gelu_bwd_finish(g, x, erf1, gauss, inv_sqrt_2pi, out):  # pragma: no cover - jitted
    """``out = g * (erf1 * 0.5 + (gauss * inv_sqrt_2pi) * x)``; ``out`` may be ``gauss``."""
    half = _HALF
    for i in range(x.size):
        out[i] = g[i] * (erf1[i] * half + (gauss[i] * inv_sqrt_2pi) * x[i])


@cached_njit(nogil=True)
def add_rows_loop(out, vals, rows):  # pragma: no cover - jitted
    """``out[rows[i]] += vals[i]`` for every ``i`` in order."""
    for i in range(rows.size):
        r = rows[i]
        for j in range(out.shape[1]):
            out[r, j] += vals[i, j]


def gelu_keep(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GELU of a C-contiguous float32 array and ``erf(x / sqrt(2)) + 1``, both new arrays
    of ``x``'s shape."""
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    cdf = np.empty_like(flat)
    tail = np.empty(flat.size, np.int32 if flat.size < 1 << 31 else np.int64)
    n = gelu_fwd_polys(flat, _SQRT_HALF, erf32.P, erf32.Q, erf32.CLAMP, erf32.CENTER,
                       erf32.SPLIT, out, cdf, tail)
    np.exp(cdf[:n], out=cdf[:n])
    gelu_fwd_finish(flat, _SQRT_HALF, tail, n, out, cdf)
    return out.reshape(x.shape), cdf.reshape(x.shape)


def gelu_grad(g: np.ndarray, x: np.ndarray, erf1: np.ndarray) -> np.ndarray:
    """``g * (erf1 / 2 + x exp(-x*x/2) / sqrt(2 pi))`` of C-contiguous float32 arrays of
    one shape, as a new array."""
    xf = x.reshape(-1)
    gauss = np.empty_like(xf)
    gelu_bwd_exponent(xf, gauss)
    np.exp(gauss, out=gauss)
    gelu_bwd_finish(g.reshape(-1), xf, erf1.reshape(-1), gauss, _INV_SQRT_2PI, gauss)
    return gauss.reshape(x.shape)


def add_rows(out: np.ndarray, vals: np.ndarray, rows: np.ndarray) -> None:
    """``np.add.at(out, rows, vals)`` for a C-contiguous 2-D ``out``, ``vals`` of
    ``(rows.size, out.shape[1])`` in its dtype and C order, and 1-D ``rows`` in range (not
    negative)."""
    add_rows_loop(out, vals, rows)
