"""`dg.backends`: PyTorch's backend switches, accepted as a CPU-only build has them.

Scripts set ``torch.backends.cudnn.benchmark = True`` or
``torch.backends.cuda.matmul.allow_tf32 = True`` and ask
``torch.backends.mps.is_available()``. Here the flags can be read and set and change
nothing (there is no cuDNN, CUDA or MPS; dualgraph's float32 matmuls are always full
float32), and the availability queries answer False, as on a CPU build of PyTorch.

>>> dg.backends.cudnn.benchmark = True
>>> dg.backends.mps.is_available()
False
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class _Backend:
    """A namespace of settable flags and an ``is_available()`` answer."""

    def __init__(self, name: str, available: bool, **flags: Any) -> None:
        self._name = name
        self._available = available
        self.__dict__.update(flags)

    def is_available(self) -> bool:
        return self._available

    def is_built(self) -> bool:
        return self._available

    def __repr__(self) -> str:
        return f"<dg.backends.{self._name}>"


class _Cudnn(_Backend):
    def version(self) -> None:
        """None, as PyTorch answers without cuDNN."""
        return None

    @contextlib.contextmanager
    def flags(self, enabled: bool = False, benchmark: bool = False,
              deterministic: bool = False, allow_tf32: bool = True) -> Iterator[None]:
        """Set the flags for a block and restore them after (they change nothing here)."""
        old = (self.enabled, self.benchmark, self.deterministic, self.allow_tf32)
        self.enabled, self.benchmark = enabled, benchmark
        self.deterministic, self.allow_tf32 = deterministic, allow_tf32
        try:
            yield
        finally:
            self.enabled, self.benchmark, self.deterministic, self.allow_tf32 = old


cudnn = _Cudnn("cudnn", False, enabled=True, benchmark=False, deterministic=False,
               allow_tf32=True, benchmark_limit=10)
cuda = _Backend("cuda", False,
                matmul=_Backend("cuda.matmul", False, allow_tf32=False,
                                allow_fp16_reduced_precision_reduction=True,
                                allow_bf16_reduced_precision_reduction=True),
                flash_sdp_enabled=lambda: False, mem_efficient_sdp_enabled=lambda: False)
mps = _Backend("mps", False)
mkldnn = _Backend("mkldnn", False, enabled=False)
openmp = _Backend("openmp", False)
mkl = _Backend("mkl", False)
cpu = _Backend("cpu", True)
cpu.get_cpu_capability = lambda: "DEFAULT"

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp"]
