"""The package's C routines: Numba ``cfunc``s compiled once per installation, called by symbol.

A family of routines (the row kernels, the recurrent cells, the convolution's pieces) is
a `Routines`: a name, the routines' kinds, and a function that makes one routine's
``cfunc`` for one dtype. Each (kind, dtype) is its own unit, compiled (or loaded from
Numba's disk cache) the first time a kernel needs it and registered with LLVM under
``dualgraph_<family>_<kind>_<dtype>``, so a program pays only for the routines it calls,
in the dtypes it uses: a float32 transformer never builds the float64 row kernels, a
classifier's log_softmax never builds layer_norm.

A kernel's typing asks for its unit (`Routines.need`) before it emits the call, and a
kernel module's header does the same before Numba loads its machine code
(`cache.module_source` writes the lines `needed_lines` makes). When a cold compile
shares its functions out among helper processes (`worker.compile_parallel`), the units
they call go first in the queue, each built by one process while the others go on with
the kernels, and a process that needs a unit being built elsewhere waits for it (at most
the time building it would take) and loads it from the disk cache.

Numba's disk cache knows a function by its own bytecode and the file that defines it, so
an edit to a helper a routine compiles in from another module would load the old
routine. Every cached function of the backend is keyed on the source of all its modules
holding compiled code (`cache_key`); a family's C functions are keyed on the source of
its module and of every module named in its ``inlines`` as well (`Routines.source_key`).

A routine may call another routine of its family by symbol (the convolution's routines
call its window copies, which are compiled and optimised once that way, not again inside
each routine): ``requires`` names them, and `Routines.need` registers them first, so the
calling routine's machine code, built or loaded from the disk cache, finds them.

A new family follows the same pattern: a ``Routines(family, kinds, make, inlines=...)``
at module level of its own file, whose ``make`` returns ``ROUTINES.cfunc(...)``,
intrinsics whose typing calls ``need(dtype, kind)``, generated code that names
``<module alias>.<family>_<kind>_<dtype>``, and an entry in `FAMILIES`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

DTYPES = ("float32", "float64")
# The families a kernel module may call: family -> (module, its alias in generated code,
# the module's name for its `Routines`). The alias is how `needed_by` finds the calls in a
# kernel's source.
FAMILIES = {
    "row": ("dualgraph.backend.numba.row_kernels", "dgw", "ROUTINES"),
    "rnn": ("dualgraph.backend.numba.recurrent_kernels", "dgr", "ROUTINES"),
    "conv": ("dualgraph.backend.numba.blas", "dgb", "ROUTINES"),
    "gemm": ("dualgraph.backend.numba.blas", "dgb", "GEMM_ROUTINES"),
    "chan": ("dualgraph.backend.numba.channel_kernels", "dgn", "ROUTINES"),
}


# The njit options of the helpers a family's C functions call and nothing else calls (not
# Python, not a kernel): no Python or C entry point of their own, which Numba would
# otherwise lower, optimise and emit for each helper on a fresh installation's first
# build, for no caller. The C functions' machine code is the same. Spelled
# ``@cached_njit(**HELPER_JIT)``: the disk cache keyed on the backend's sources.
HELPER_JIT = {"nogil": True, "error_model": "numpy",
              "no_cpython_wrapper": True, "no_cfunc_wrapper": True}


class Routines:
    """One family of C routines, each kind and dtype built on its first `need`."""

    def __init__(self, family: str, kinds: Iterable[str],
                 make: Callable[[str, Any], Any], aliases: dict | None = None,
                 inlines: Iterable[str] = (), requires: dict | None = None) -> None:
        self.family = family
        self.kinds = tuple(kinds)
        self._make = make  # (kind, Numba dtype) -> the routine's cfunc (`cfunc`)
        # A call name of generated code that runs another kind's routine.
        self.aliases = dict(aliases or {})
        # kind -> the kinds whose routines its machine code calls by symbol: registered
        # before it is built or loaded.
        self.requires = {k: tuple(v) for k, v in (requires or {}).items()}
        # The modules whose code the routines compile in: their own, then ``inlines``.
        self.modules = (make.__module__, *inlines)
        self._key = ""
        self._built: dict = {}

    def source_key(self) -> str:
        """A digest of the source of the family's modules: part of the disk cache's key
        of each of its cached functions."""
        if not self._key:
            import importlib.util

            digest = hashlib.sha256()
            for name in self.modules:
                with open(importlib.util.find_spec(name).origin, "rb") as f:
                    digest.update(f.read())
            self._key = digest.hexdigest()[:24]
        return self._key

    def cfunc(self, func: Callable, sig: Any, **options: Any) -> Any:
        """``numba.cfunc(sig, cache=True, nopython=True, **options)(func)``, its disk cache
        entry keyed on `source_key` too."""
        from numba.core import sigutils
        from numba.core.ccallback import CFunc

        fn = CFunc(func, sigutils.normalize_signature(sig), locals={},
                   options={"nopython": True, **options})
        fn._cache = _keyed_cache(func, self.source_key())
        fn.compile()
        return fn

    def symbol(self, kind: str, dtype: str) -> str:
        """The LLVM symbol generated code calls for routine ``kind`` in ``dtype``."""
        return f"dualgraph_{self.family}_{kind}_{dtype}"

    def built(self) -> frozenset:
        """The (kind, dtype) units this process has registered."""
        return frozenset(self._built)

    def need(self, dtype: str, kind: str | None = None) -> None:
        """Compile (or load from Numba's disk cache) routine ``kind`` (None: every kind)
        for ``dtype`` and register its symbol, once per process: before a kernel calling
        it is compiled (its typing does this) or loaded (its module's header does)."""
        kinds = self.kinds if kind is None else (self.aliases.get(kind, kind),)
        if all((k, dtype) in self._built for k in kinds):
            return
        from llvmlite import binding as llvm
        from numba import types
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.errors import NumbaIRAssumptionWarning

        # Numba's own lock: typing a kernel holds it already, so no other order is taken.
        with global_compiler_lock, warnings.catch_warnings():
            # Numba's pedantic IR check misreads inlined helpers' variables; the code is
            # right (the tests compare every routine with eager).
            warnings.simplefilter("ignore", NumbaIRAssumptionWarning)
            ty = types.float32 if dtype == "float32" else types.float64
            for k in kinds:
                for r in self.requires.get(k, ()):
                    self.need(dtype, r)
                if (k, dtype) not in self._built:
                    with _unit_lock(self.symbol(k, dtype)):
                        fn = self._make(k, ty)
                    llvm.add_symbol(self.symbol(k, dtype), fn.address)
                    self._built[(k, dtype)] = fn


def _keyed_cache(func: Callable, key: str) -> Any:
    """Numba's disk cache of ``func``, keyed on the backend's sources, with ``key`` added
    to each entry's key."""
    from .cache_key import KeyedCache

    class FamilyCache(KeyedCache):
        def _index_key(self, sig, codegen):
            return (*super()._index_key(sig, codegen), key)

    return FamilyCache(func)


@contextlib.contextmanager
def _unit_lock(symbol: str) -> Iterator[None]:
    """Hold the machine-wide lock of one unit while compiling or loading it: a process
    that needs a unit another one is compiling (a compile helper building it ahead)
    waits for it, then loads it from Numba's disk cache, instead of compiling it again;
    the wait is at most what compiling it would take. Without a usable lock directory
    every process compiles for itself, as Numba's cache allows."""
    try:
        import fcntl

        d = os.path.join(tempfile.gettempdir(), f"dualgraph-lib-{os.getuid()}")
        os.makedirs(d, mode=0o700, exist_ok=True)
        # One lock per installation and unit: another installation's routines are others.
        tag = hashlib.sha256(os.path.dirname(os.path.abspath(__file__)).encode()).hexdigest()
        f = open(os.path.join(d, f"{symbol}-{tag[:16]}.lock"), "a")  # noqa: SIM115
    except (ImportError, OSError, AttributeError):
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _family(name: str) -> Routines:
    import importlib

    module, _, attribute = FAMILIES[name]
    return getattr(importlib.import_module(module), attribute)


def needed_by(body: str) -> list[tuple[str, str, str]]:
    """The (family, kind, dtype) units a kernel's source calls, in a fixed order."""
    units = []
    for family, (_, alias, _) in FAMILIES.items():
        if f"{alias}.{family}_" not in body:
            continue
        routines = _family(family)
        for kind in (*routines.kinds, *routines.aliases):
            for dtype in DTYPES:
                if f"{alias}.{family}_{kind}_{dtype}(" in body:
                    units.append((family, routines.aliases.get(kind, kind), dtype))
    return list(dict.fromkeys(units))


def needed_lines(body: str, header: str = "") -> str:
    """The lines of a kernel module's header that import the families its code calls
    (those ``header`` does not import already) and register the units (empty when it
    calls none)."""
    units = needed_by(body)
    if not units:
        return ""
    lines = []
    for family in dict.fromkeys(f for f, _, _ in units):
        module, alias, _ = FAMILIES[family]
        if f" as {alias}" not in header:
            package, name = module.rsplit(".", 1)
            lines.append(f"from {package} import {name} as {alias}\n")
    lines.append("from dualgraph.backend.numba import library as dglib\n"
                 f"dglib.need_units({units!r})\n")
    return "".join(lines)


def missing(units: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The units of ``units`` and those their routines call (before them) this process
    has not built."""
    every = []
    for family, kind, dtype in units:
        every += [(family, r, dtype) for r in _family(family).requires.get(kind, ())]
        every.append((family, kind, dtype))
    return [u for u in dict.fromkeys(every) if (u[1], u[2]) not in _family(u[0]).built()]


def need_units(units: Iterable[tuple[str, str, str]]) -> None:
    """Build or load every (family, kind, dtype) of ``units`` in this process."""
    for family, kind, dtype in units:
        _family(family).need(dtype, kind)
