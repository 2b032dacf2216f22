"""One thread for every library of the single-core rows: BLAS, Numba, XLA and PyTorch.

``set_env()`` must run before NumPy, Numba or JAX is imported (they read these variables
once, at import); ``limit()`` pins what is loaded already (threadpoolctl, when installed,
for the BLAS and OpenMP pools; PyTorch's intra-op pool) and is cheap to call again after
a library was loaded.
"""

from __future__ import annotations

import os
import sys

ENV = {
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}
_LIMITS: list = []  # threadpoolctl controllers, kept alive


def set_env() -> None:
    for k, v in ENV.items():
        os.environ.setdefault(k, v)


def limit() -> None:
    # One core for the whole process: XLA's CPU runtime does not honour XLA_FLAGS' thread
    # settings (jax.jit's MLP step at batch 1024 ran 5.5 ms with them, on both cores, and
    # 9.1 ms pinned), so only the affinity makes its rows single-core.
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            os.sched_setaffinity(0, {cpus[0]})
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    _LIMITS.append(threadpool_limits(1))
