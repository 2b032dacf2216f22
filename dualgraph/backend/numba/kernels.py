"""Vectorizable float32 ``exp``, ``tanh`` and ``sigmoid`` for generated loops.

PyPI's llvmlite has no vector math library (SVML), so ``np.exp`` inside an njit loop is a
scalar libm call and blocks vectorization of the whole loop: a fused chain of
transcendentals then runs slower than NumPy's SIMD ufuncs. These functions use only
arithmetic, comparisons and a bit cast, so LLVM vectorizes the loops that inline them.

They are inlined at the Numba level (``inline="always"``): a call left for LLVM to inline
blocks vectorization of the loop around it.

Accuracy against float64 NumPy rounded to float32 (``tests/backend/test_fast_math.py``
measures it on every 1024th float32 bit pattern plus the edges): at most 1 ulp for ``exp``
(denormal results included), 2 ulp for ``tanh`` (1 measured) and ``sigmoid``, except that
``sigmoid(x)`` is 0 for x <= -88.72, where ``exp(-x)`` overflows, instead of the denormal
e^x. Exact special values (``exp(0) = 1``, ``exp(-inf) = 0``, ``exp(x) = inf`` past
overflow, ``tanh(±inf) = ±1``, ``tanh(±0) = 0``: +0 for -0, unlike NumPy) and nan
propagation.

The polynomial coefficients were fitted for dualgraph (least squares on Chebyshev nodes,
relative error): exp on [-ln2/2, ln2/2] after Cody-Waite range reduction, tanh as
``x + x^3 q(x^2)`` on [0, 0.625]; beyond that ``tanh(x) = 1 - 2/(exp(2x) + 1)``.
"""

from __future__ import annotations

import os

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)  # few mantissa bits: n * _LN2_HI is exact
_LN2_LO = np.float32(-2.12194440e-4)  # ln 2 - _LN2_HI
_EXP_HI = np.float32(89.0)  # exp overflows float32 above 88.72
_EXP_LO = np.float32(-104.0)  # exp underflows to 0 below -103.97
_E0 = np.float32(1.0)
_E1 = np.float32(1.0)
_E2 = np.float32(0.5)
_E3 = np.float32(0.1666666567325592)
_E4 = np.float32(0.041666269302368164)
_E5 = np.float32(0.00833342969417572)
_E6 = np.float32(0.0013946021208539605)
_E7 = np.float32(0.00019826495554298162)
_T1 = np.float32(-0.3333333134651184)
_T2 = np.float32(0.13333211839199066)
_T3 = np.float32(-0.05394745245575905)
_T4 = np.float32(0.021703999489545822)
_T5 = np.float32(-0.008184662088751793)
_T6 = np.float32(0.0021489840000867844)
_TANH_SMALL = np.float32(0.625)
_ONE = np.float32(1.0)
_TWO = np.float32(2.0)
_HALF = np.float32(0.5)


@intrinsic
def _f32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the low 32 bits of integer ``bits``."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if v.type.width != 32:
            v = builder.trunc(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(bits), codegen


@numba.njit(inline="always", cache=True, error_model="numpy")
def exp_f32(x):
    xc = x if x < _EXP_HI else _EXP_HI
    xc = xc if xc > _EXP_LO else _EXP_LO
    n = np.floor(xc * _LOG2E + _HALF)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = _E7
    p = p * r + _E6
    p = p * r + _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    p = p * r + _E1
    p = p * r + _E0
    # 2**n as two normal powers of two, so results down to the denormals scale exactly.
    ni = np.int32(n)
    n1 = ni >> 1
    n2 = ni - n1
    res = p * _f32_from_bits((n1 + 127) << 23) * _f32_from_bits((n2 + 127) << 23)
    return x if x != x else res


@numba.njit(inline="always", cache=True, error_model="numpy")
def tanh_f32(x):
    ax = abs(x)
    x2 = x * x
    q = _T6
    q = q * x2 + _T5
    q = q * x2 + _T4
    q = q * x2 + _T3
    q = q * x2 + _T2
    q = q * x2 + _T1
    small = x + x * x2 * q
    big = _ONE - _TWO / (exp_f32(_TWO * ax) + _ONE)
    big = big if x >= 0 else -big
    return small if ax < _TANH_SMALL else big


@numba.njit(inline="always", cache=True, error_model="numpy")
def sigmoid_f32(x):
    return _ONE / (_ONE + exp_f32(-x))


@numba.njit(inline="always", cache=True, error_model="numpy")
def sigmoid_f64(x):
    return 1.0 / (1.0 + np.exp(-x))


def source_digest() -> str:
    """Changes whenever this file or blas.py does: generated kernels that inline their
    functions must not be reused from Numba's cache after an edit."""
    import hashlib

    h = hashlib.sha1()
    for path in (__file__, os.path.join(os.path.dirname(__file__), "blas.py")):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]
