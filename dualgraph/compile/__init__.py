"""`dg.compile`: trace once per signature, optimize, lower to Numba, cache, run."""

from .api import (  # noqa: F401
    CompiledFunction,
    CompiledModule,
    CompileStats,
    RetraceLimitError,
    StaleTraceError,
    compile,  # noqa: A004
)
