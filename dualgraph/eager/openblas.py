"""NumPy's own OpenBLAS, found once by its exported names: the compiled backend's products
call it from generated code, and eager mode calls its ``axpy`` for an optimizer's in-place
update (one pass with one rounding, as PyTorch's ``add_(g, alpha=...)``)."""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np


def numpy_openblas(patterns: list[tuple[str, int]], keys: str | tuple) -> tuple[dict, int] | None:
    """The addresses of ``pattern.format(key)`` for every key, from the OpenBLAS bundled
    with NumPy (the first library and the first pattern that has them all), and that
    pattern's integer width; or ``None``."""
    root = os.path.dirname(os.path.dirname(np.__file__))
    libs = sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*")))
    libs += sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas*")))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)  # already loaded by NumPy: this only finds its handle
        except OSError:
            continue
        for pattern, width in patterns:
            try:
                found = {k: getattr(lib, pattern.format(k)) for k in keys}
            except AttributeError:
                continue
            return {k: ctypes.cast(fn, ctypes.c_void_p).value for k, fn in found.items()}, width
    return None


def numpy_cblas(routine: str, keys: str) -> tuple[dict, int] | None:
    """`numpy_openblas` of the cblas ``routine`` (``"{}gemm"``: a key, a dtype letter, in
    the braces), NumPy >= 2's ILP64 names (``scipy_cblas_sgemm64_``) first; ``None`` also
    when ``DUALGRAPH_BLAS=numba`` opts out of NumPy's BLAS."""
    if os.environ.get("DUALGRAPH_BLAS", "") == "numba":
        return None
    return numpy_openblas([(f"scipy_cblas_{routine}64_", 64), (f"cblas_{routine}64_", 64),
                           (f"scipy_cblas_{routine}", 32), (f"cblas_{routine}", 32)], keys)


def _find_axpy() -> dict | None:
    """``cblas_saxpy`` as a ctypes function by its dtype, or ``None``. float32 only: the
    compiled kernels contract ``p - lr * g`` to one fused multiply-add only when all their
    float values are float32, so a float64 update stays two roundings in both modes."""
    hit = numpy_cblas("{}axpy", "s")
    if hit is None:
        return None
    found, width = hit
    n = ctypes.c_int64 if width == 64 else ctypes.c_int32
    ptr = ctypes.c_void_p
    return {np.dtype(np.float32): ctypes.CFUNCTYPE(None, n, ctypes.c_float, ptr, n, ptr, n)(
        found["s"])}


_AXPY = _find_axpy()
_BYREF = ctypes.byref
_AT = ctypes.c_char.from_buffer


def axpy_(y: np.ndarray, alpha: float, x: np.ndarray) -> bool:
    """``y += alpha * x`` in place in one pass, each element rounded once (a fused
    multiply-add where the CPU has one, as PyTorch's ``add_(x, alpha=alpha)`` and the
    compiled kernels' contracted update compute it), when ``x`` and ``y`` are float32
    arrays of one shape, both C-contiguous, ``y`` writeable and not overlapping ``x`` but
    for being ``x`` itself. Returns False, doing nothing, otherwise.

    >>> y = np.ones(3, np.float32); axpy_(y, -0.5, np.ones(3, np.float32)); y  # doctest: +SKIP
    """
    fn = _AXPY.get(y.dtype) if _AXPY is not None else None
    if (fn is None or x.dtype != y.dtype or x.shape != y.shape
            or not (y.flags.c_contiguous and x.flags.c_contiguous and y.flags.writeable)
            or x is not y and np.may_share_memory(x, y)):
        return False
    n = y.size
    if n:
        # A read-only x has no writeable buffer to take the address of: copy it (rare: a
        # gradient is the optimizer's own array).
        xs = x if x.flags.writeable else x.copy()
        fn(n, alpha, _BYREF(_AT(xs)), 1, _BYREF(_AT(y)), 1)
    return True
