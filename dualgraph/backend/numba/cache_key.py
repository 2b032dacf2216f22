"""Numba's disk cache of the backend's own compiled functions, keyed on the backend's sources.

Numba knows a cached function by its bytecode and by the file that defines it (its
modification time and size). A function that compiles in code from another module (an
inlined njit helper, an intrinsic, an overload) would keep its old machine code when only
that other module changes: a development checkout then runs stale code that a fresh
installation does not. So every cached function of the backend is made by `cached_njit`
or `cached_cfunc`, whose cache files are stamped with `digest()`: one digest of the
source of every backend module that holds compiled code (`SOURCES`). An edit to any of
them makes every such function compile again; the other backend modules (the code
generator, the printer, the worker) only write text and stay out of the digest, so
editing them keeps the built functions.

The generated kernels name the same digest in their modules' header (`cache.module_source`),
so they too are compiled again when a function they inline changes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

import numba
from numba.core import caching

# The backend modules whose functions, intrinsics and overloads Numba compiles; a test
# checks that every module of this folder defining compiled code is named here.
SOURCES = ("kernels", "blas", "blas_parallel", "lapack", "raw", "row_simd", "row_kernels",
           "recurrent_kernels", "channel_kernels", "eager_routines")
_HERE = os.path.dirname(os.path.abspath(__file__))
_DIGEST: dict[tuple[str, ...], str] = {}


def source_files() -> tuple[str, ...]:
    """The files `digest` reads, in its order."""
    return tuple(os.path.join(_HERE, f"{name}.py") for name in SOURCES)


def digest() -> str:
    """A digest of the source of the `SOURCES` modules, read once per process (the files
    of an installed package do not change while it runs)."""
    files = source_files()
    key = _DIGEST.get(files)
    if key is None:
        h = hashlib.sha256()
        for path in files:
            with open(path, "rb") as f:
                h.update(f.read())
            h.update(b"\0")  # a byte moved across a file boundary is another digest
        key = _DIGEST[files] = h.hexdigest()[:24]
    return key


class KeyedCache(caching.FunctionCache):
    """Numba's disk cache of one function, its index stamped with `digest()` besides its
    own file's: an index written under another digest is dropped whole, and its entries
    are rewritten, rather than kept beside new ones."""

    def __init__(self, py_func: Callable) -> None:
        super().__init__(py_func)
        stamp = (self._impl.locator.get_source_stamp(), digest())
        self._cache_file = caching.IndexDataCacheFile(
            cache_path=self._cache_path, filename_base=self._impl.filename_base,
            source_stamp=stamp)


def cached_njit(**options: Any) -> Callable:
    """``numba.njit(cache=True, **options)`` with the disk cache keyed on `digest()`,
    for a function of a module file, as in ``@cached_njit(nogil=True, error_model="numpy")``.
    """
    def wrap(py_func: Callable) -> Any:
        disp = numba.njit(**options)(py_func)
        if hasattr(disp, "enable_caching"):  # not under NUMBA_DISABLE_JIT
            disp._cache = KeyedCache(py_func)
        return disp
    return wrap


def cached_cfunc(sig: Any, **options: Any) -> Callable:
    """``numba.cfunc(sig, cache=True, nopython=True, **options)`` with the disk cache keyed
    on `digest()`; compiled (or loaded) at once, as Numba's is."""
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    def wrap(py_func: Callable) -> Any:
        fn = CFunc(py_func, sigutils.normalize_signature(sig), locals={},
                   options={"nopython": True, **options})
        fn._cache = KeyedCache(py_func)
        fn.compile()
        return fn
    return wrap
