"""`dg.multiprocessing`: Python's `multiprocessing`, as ``torch.multiprocessing`` wraps it.

Tensors whose memory is shared (`Module.share_memory`, ``Tensor.share_memory_``) live in
a shared memory file, so processes see one another's in-place updates (the Hogwild
pattern): forked processes share the mapping, and a shared tensor sent to a spawned process
is rebuilt there on the same memory. ``spawn`` starts
``nprocs`` processes running ``fn(i, *args)`` and joins them.
"""

from __future__ import annotations

import multiprocessing as _mp
from collections.abc import Callable
from multiprocessing import (  # noqa: F401 - the multiprocessing names torch re-exports
    Array,
    Barrier,
    Condition,
    Event,
    Lock,
    Manager,
    Pipe,
    Pool,
    Process,
    Queue,
    RLock,
    Semaphore,
    SimpleQueue,
    Value,
    active_children,
    cpu_count,
    current_process,
    get_all_start_methods,
    get_context,
    get_start_method,
    set_start_method,
)
from typing import Any

__all__ = ["Array", "Barrier", "Condition", "Event", "Lock", "Manager", "Pipe", "Pool",
           "Process", "ProcessContext", "ProcessRaisedException", "Queue", "RLock",
           "Semaphore", "SimpleQueue", "Value", "active_children", "cpu_count",
           "current_process", "get_all_sharing_strategies", "get_all_start_methods",
           "get_context", "get_sharing_strategy", "get_start_method",
           "set_sharing_strategy", "set_start_method", "spawn", "start_processes"]

_STRATEGIES = ("file_descriptor", "file_system")
_strategy = ["file_descriptor"]


def get_all_sharing_strategies() -> set:
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return _strategy[0]


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepted for PyTorch's two strategies (shared tensors here are anonymous shared
    mappings either way)."""
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"invalid sharing strategy {new_strategy!r}: expected one of "
                         f"{sorted(_STRATEGIES)}")
    _strategy[0] = new_strategy


class ProcessRaisedException(Exception):  # noqa: N818 - PyTorch's name
    """A process started by `spawn` failed."""


class ProcessContext:
    """The processes `spawn` started (``join()`` waits for them all)."""

    def __init__(self, processes: list) -> None:
        self.processes = processes

    def pids(self) -> list:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        for i, p in enumerate(self.processes):
            p.join(timeout)
            if p.exitcode not in (0, None):
                raise ProcessRaisedException(
                    f"process {i} terminated with exit code {p.exitcode}")
        return all(not p.is_alive() for p in self.processes)


def start_processes(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True,
                    daemon: bool = False, start_method: str = "spawn") -> Any:
    ctx = _mp.get_context(start_method)
    procs = []
    for i in range(nprocs):
        p = ctx.Process(target=fn, args=(i, *args), daemon=daemon)
        p.start()
        procs.append(p)
    context = ProcessContext(procs)
    if not join:
        return context
    context.join()
    return None


def spawn(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True,
          daemon: bool = False, start_method: str = "spawn") -> Any:
    """Start ``nprocs`` processes running ``fn(i, *args)``; wait for them when ``join``."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)



# Shared data lives in a memory file (``memfd``, Linux) mapped shared, so a tensor sent to a
# spawned process (pickled by multiprocessing) is rebuilt on the same memory from a
# duplicate of the file descriptor; elsewhere, an anonymous shared mapping, which forked
# processes share. mmap object id -> the descriptor (kept open while the mapping lives).
_FDS: dict = {}


def _shared_array(nbytes: int) -> tuple:
    import mmap
    import os

    size = max(nbytes, 1)
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("dualgraph-shared")
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size)
        _FDS[id(mm)] = fd
        return mm, fd
    return mmap.mmap(-1, size), None


def _share_memory_(self: Any) -> Any:
    """Move the tensor's data (once, in place) into shared memory, which forked processes
    and processes the tensor is sent to write to as well (Hogwild training); views made
    before keep the old memory, as PyTorch's storage move does."""
    import numpy as np

    from ..eager.internal import array_of, set_array
    from ..eager.tensor import Tensor

    if not isinstance(self, Tensor) or _is_shared(self):
        return self  # a traced value holds no memory
    data = array_of(self)
    mm, _ = _shared_array(data.nbytes)
    shared = np.frombuffer(mm, dtype=data.dtype, count=data.size).reshape(data.shape)
    shared[...] = data
    set_array(self, shared)
    return self


def _mapping_of(self: Any) -> Any:
    import mmap

    from ..eager.internal import array_of
    from ..eager.tensor import Tensor

    base: Any = array_of(self) if isinstance(self, Tensor) else None
    while base is not None:
        if isinstance(base, mmap.mmap):
            return base
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return None


def _is_shared(self: Any) -> bool:
    """Whether the tensor's data lives in shared memory (``share_memory_``)."""
    return _mapping_of(self) is not None


def _reduce_tensor(t: Any) -> Any:
    """Pickling for multiprocessing: a tensor in a memory file travels as a duplicate of
    its descriptor (the receiver maps the same memory); any other as usual."""
    import numpy as np

    from ..eager.internal import array_of

    mm = _mapping_of(t)
    fd = _FDS.get(id(mm)) if mm is not None else None
    data = array_of(t)
    if fd is None or not data.flags.c_contiguous:
        return t.__reduce_ex__(4)
    from multiprocessing.reduction import DupFd

    offset = data.__array_interface__["data"][0] - \
        np.frombuffer(mm, dtype=np.uint8).__array_interface__["data"][0]
    return (_rebuild_tensor, (DupFd(fd), len(mm), offset, data.dtype.str, data.shape,
                              type(t), bool(t.requires_grad)))


def _rebuild_tensor(dupfd: Any, size: int, offset: int, dtype: str, shape: tuple,
                    cls: type, requires_grad: bool) -> Any:
    import mmap

    import numpy as np

    from ..eager.tensor import from_numpy

    fd = dupfd.detach()
    mm = mmap.mmap(fd, size)
    _FDS[id(mm)] = fd
    count = int(np.prod(shape)) if shape else 1
    arr = np.frombuffer(mm, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
    t = from_numpy(arr)
    if cls is not type(t):
        t = cls(t, requires_grad) if requires_grad is not None else cls(t)
    elif requires_grad:
        t.requires_grad_(True)
    return t


def _install() -> None:
    from multiprocessing.reduction import ForkingPickler

    from ..eager.tensor import Tensor
    from ..nn.modules.module import Parameter
    from ..ops.mixin import TensorOps

    TensorOps.share_memory_ = _share_memory_
    TensorOps.is_shared = _is_shared
    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, _reduce_tensor)


_install()
