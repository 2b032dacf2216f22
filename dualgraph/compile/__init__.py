"""`dg.compile`: trace once per signature, optimize, lower to Numba, cache, run.

A call is one of three kinds, decided when it is traced:

- **inference**: no gradient needed; one kernel computes the outputs;
- **train**: an input requires grad and the function does not call ``backward()`` itself;
  the forward kernel also returns the residuals, and the output gets one tape node,
  ``CompiledFunctionBackward``, whose backward runs the compiled backward kernel;
- **step**: the function calls ``backward()`` and/or changes tensors in place (an optimizer
  step, ``zero_grad``); everything is one graph and one kernel, and the new values of
  parameters, gradients and optimizer state are graph outputs written back after the call.

The modules, in the order a call meets them:

==============  ===========================================================================
`api`           the `compile` decorator, `CompiledFunction` (the per-call path),
                `CompiledModule`, `CompileStats`
`signature`     the signature key in words (`describe_change`), the guards an entry keeps
`guards`        the typed guards, each checked in Python or emitted as source
`retrace`       the retrace budget, `RetraceLimitError`
`capture`       tracing one call, putting back the ``.grad`` values it changed
`specialize`    inference/train/step, building an entry's plan and kernels
`plan`          the typed plan of an entry: kind, kernel inputs, writes, residuals
`callgen`       the entry's generated call path (the compiled call's tape node is in
                `eager.compiled_node`)
`tiered`        tier 0 (the optimized graphs in NumPy) while a worker process compiles,
                the swap to the compiled kernels (tier 1)
`stale`         ``verify=True`` checks, `StaleTraceError`
==============  ===========================================================================
"""

from ..eager.compiled_node import CompiledFunctionBackward
from .api import CompiledFunction, CompiledModule, CompileStats, compile  # noqa: A004
from .retrace import RetraceLimitError
from .stale import StaleTraceError

__all__ = [
    "CompileStats",
    "CompiledFunction",
    "CompiledFunctionBackward",
    "CompiledModule",
    "RetraceLimitError",
    "StaleTraceError",
    "compile",
]
