"""Process-wide settings under PyTorch's names: threads, print options, the default dtype
and the determinism and matmul-precision flags a CPU build accepts.

    >>> dg.get_num_threads() >= 1
    True
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .dtypes import DEFAULT_FLOAT, as_dtype, default_float, float16, float32, float64
from .eager.tensor import PRINT_OPTIONS
from .modes import current_trace

_FLAGS = {"deterministic": False, "warn_only": False, "matmul_precision": "highest",
          "warn_always": False}


# Variables through which a user chooses how idle OpenMP workers wait (GNU's and Intel's).
WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
_POOL: dict[str, str] = {}  # filled once Numba's pool runs: its threading layer and wait
_POOL_LOCK = threading.Lock()


def start_thread_pool() -> dict[str, str]:
    """Start Numba's thread pool, the one ``parallel=True`` kernels run on, with workers
    that sleep as soon as a parallel loop ends, and say how it runs: ``{"layer": Numba's
    threading layer, "wait": "passive" | "set by the user: VAR=value" | "as started
    before dualgraph"}``.

    A parallel kernel alternates Numba's parallel loops with BLAS products made from the
    calling thread, on BLAS's own threads. GNU OpenMP (Numba's layer on Linux) keeps its
    workers spinning for milliseconds after each loop: on two cores they took the core
    BLAS's thread needed, and the batch-1024 MLP step ran twice as slow on two threads as
    on one. libgomp reads its wait policy once, when it is loaded, which is when Numba
    starts its pool; so ``OMP_WAIT_POLICY=PASSIVE`` is in the environment for that moment
    only (a library loaded later, PyTorch's own libgomp, or a child process never sees it),
    unless the user set one of `WAIT_VARS`. A pool Numba started before (a ``parallel``
    function of the user's, ``numba.set_num_threads``) keeps the policy it started with.
    """
    if _POOL:
        return _POOL
    import numba

    with _POOL_LOCK:
        if _POOL:
            return _POOL
        try:
            numba.threading_layer()  # raises until the pool runs
            wait = "as started before dualgraph"
        except ValueError:
            user = [f"{v}={os.environ[v]}" for v in WAIT_VARS if v in os.environ]
            wait = f"set by the user: {', '.join(user)}" if user else "passive"
            if not user:
                os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
            try:
                numba.get_num_threads()  # loads the layer (and libgomp) and starts the pool
            finally:
                if not user:
                    del os.environ["OMP_WAIT_POLICY"]
        _POOL.update(layer=str(numba.threading_layer()), wait=wait)
    return _POOL


def get_num_threads() -> int:
    """The threads compiled kernels may use (``dg.compile(parallel=True)``): Numba's."""
    import numba

    start_thread_pool()
    return _read(lambda: int(numba.get_num_threads()), "the number of threads")


def set_num_threads(n: int) -> None:
    """Set the threads compiled kernels use (at most the number Numba started with)."""
    import numba

    if int(n) < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n}")
    start_thread_pool()
    numba.set_num_threads(min(int(n), numba.config.NUMBA_NUM_THREADS))


def get_num_interop_threads() -> int:
    return 1


def set_num_interop_threads(n: int) -> None:
    """Accepted: dualgraph runs no inter-op thread pool."""
    if int(n) < 1:
        raise RuntimeError(f"set_num_interop_threads expects a positive integer, got {n}")


def set_printoptions(precision: int | None = None, threshold: int | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print, as ``torch.set_printoptions``: digits after the point
    (``precision``, 4), the element count past which the middle is summarized
    (``threshold``, 1000) keeping ``edgeitems`` (3) at each end, the line width (80),
    and ``sci_mode`` (None: decided by the values). ``profile`` ``"default"``, ``"short"``
    or ``"full"`` sets them all first."""
    if profile is not None:
        presets = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
                   "full": (4, 2 ** 63 - 1, 3, 80)}
        if profile not in presets:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}")
        p, t, e, w = presets[profile]
        PRINT_OPTIONS.update(precision=p, threshold=t, edgeitems=e, linewidth=w, sci_mode=None)
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            PRINT_OPTIONS[key] = int(value)
    if sci_mode is not None or profile is not None:
        PRINT_OPTIONS["sci_mode"] = sci_mode


def set_default_dtype(d: Any) -> None:
    """Set the default floating dtype, as ``torch.set_default_dtype``: Python floats,
    the float factories (``zeros``, ``randn``, ``tensor([1.0])``, ``arange(0.5, 2)``),
    integer inputs to float ops and new layers' parameters take it. float16, float32
    (the initial default) or float64; a compiled function traces again for a new default.

    >>> dg.set_default_dtype(dg.float64); dg.tensor([1.0]).dtype
    dtype('float64')
    >>> dg.set_default_dtype(dg.float32)
    """
    dtype = as_dtype(d)
    if dtype.kind != "f":
        raise TypeError(f"only floating-point types are supported as the default type, got "
                        f"{dtype}")
    DEFAULT_FLOAT[0] = dtype


def get_default_dtype() -> Any:
    """The default floating dtype (float32 unless `set_default_dtype` changed it)."""
    return default_float()


_TENSOR_TYPES = {"FloatTensor": float32, "DoubleTensor": float64, "HalfTensor": float16}


def set_default_tensor_type(t: Any) -> None:
    """`set_default_dtype` of a legacy floating tensor type (``dg.DoubleTensor``) or its
    name (``"torch.DoubleTensor"``)."""
    name = t if isinstance(t, str) else getattr(t, "__name__", "")
    if name.startswith("torch.cuda.") or name.startswith("dualgraph.cuda."):
        raise TypeError(f"set_default_tensor_type({name!r}): dualgraph runs on the CPU only")
    dtype = _TENSOR_TYPES.get(name.split(".")[-1])
    if dtype is None:
        raise TypeError(f"invalid type: {name or t!r} (expected FloatTensor, DoubleTensor or "
                        "HalfTensor)")
    set_default_dtype(dtype)


def _read(get: Any, what: str) -> Any:
    """A setting's value; read while a function is traced, the compiled call is guarded on
    it (a program that branches on it runs the other branch once it changes, as eagerly)."""
    value = get()
    trace = current_trace()
    if trace is not None:
        trace.guard_value(get, value, f"{what} changed since the trace")
    return value


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Accepted and recorded: dualgraph's CPU kernels are deterministic already."""
    _FLAGS["deterministic"] = bool(mode)
    _FLAGS["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _read(lambda: _FLAGS["deterministic"], "the deterministic-algorithms flag")


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _read(lambda: _FLAGS["warn_only"], "the deterministic-algorithms warn-only flag")


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """``0``/``"default"``, ``1``/``"warn"`` or ``2``/``"error"``: `use_deterministic_algorithms`
    off, on with ``warn_only``, or on (as PyTorch maps them)."""
    mode = _DEBUG_MODES.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else \
        debug_mode
    if mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, "
                           f"`error`, but got {debug_mode}")
    use_deterministic_algorithms(mode > 0, warn_only=mode == 1)


def get_deterministic_debug_mode() -> int:
    """0, 1 or 2 (see `set_deterministic_debug_mode`)."""
    if not are_deterministic_algorithms_enabled():
        return 0
    return 1 if is_deterministic_algorithms_warn_only_enabled() else 2


def set_warn_always(b: bool) -> None:
    """Accepted and recorded: dualgraph's warnings follow Python's own filters."""
    _FLAGS["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    return bool(_FLAGS["warn_always"])


def set_float32_matmul_precision(precision: str) -> None:
    """Accepted and recorded (``"highest"``, ``"high"``, ``"medium"``): float32 products
    always run in float32 here."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected highest, high or medium")
    _FLAGS["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    return _read(lambda: _FLAGS["matmul_precision"], "the float32 matmul precision")


def set_default_device(device: Any) -> None:
    """Accepts the CPU (the only device); any other raises naming it."""
    from .dtypes import check_device

    check_device(device, "set_default_device()")


def get_default_device() -> Any:
    from .dtypes import CPU

    return CPU


def set_flush_denormal(mode: bool) -> bool:
    """False: flushing denormals is not supported (PyTorch's answer on such CPUs)."""
    return False


__all__ = [
    "get_deterministic_debug_mode", "is_warn_always_enabled", "set_deterministic_debug_mode",
    "set_warn_always",
    "are_deterministic_algorithms_enabled", "get_default_device", "get_float32_matmul_precision",
    "get_num_interop_threads", "get_num_threads", "is_deterministic_algorithms_warn_only_enabled",
    "get_default_dtype", "set_default_device", "set_default_dtype", "set_default_tensor_type",
    "set_float32_matmul_precision", "set_flush_denormal", "set_num_interop_threads",
    "set_num_threads", "set_printoptions", "use_deterministic_algorithms",
]
