"""``dg.autograd.graph``: PyTorch's saved-tensor contexts.

`saved_tensors_hooks(pack_hook, unpack_hook)` hands every tensor an op saves for backward
to ``pack_hook`` when the op is recorded, and keeps what it returns; backward calls
``unpack_hook`` on that to get the tensor back (memory-saving schemes: offloading,
compression, recomputation). It is eager: a compiled function called inside the block runs
its Python function op by op, so the hooks see every saved tensor, and entering the block
while a function is being traced raises `dg.TraceError` (a compiled graph keeps its saved
values inside its kernels, where no Python hook can reach them).

`save_on_cpu` is PyTorch's memory-saving context for GPU training: saved activations are
moved to host memory and back. Every dualgraph tensor already lives in host memory, so the
context changes nothing and programs that use it run unchanged.

>>> calls = []
>>> def pack(t):
...     calls.append("pack")
...     return t
>>> x = dg.ones(2, requires_grad=True)
>>> with dg.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
...     y = (x * x).sum()
>>> calls
['pack', 'pack']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..eager.detours import ACTIVE as DETOURS
from ..eager.saved_hooks import STACK
from ..errors import TraceError
from ..modes import current_trace

__all__ = ["disable_saved_tensors_hooks", "save_on_cpu", "saved_tensors_hooks"]

_DISABLED: list[str] = []


class saved_tensors_hooks:  # noqa: N801
    """Pack and unpack hooks for the tensors ops save for backward, in this block.

    ``pack_hook(tensor)`` runs once per saved tensor when the op is recorded and may return
    any object; ``unpack_hook(packed)`` runs when backward needs the tensor and must return
    a tensor with the original's values. Nested blocks: the innermost pair applies."""

    def __init__(self, pack_hook: Callable[[Any], Any],
                 unpack_hook: Callable[[Any], Any]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> "saved_tensors_hooks":
        if _DISABLED:
            raise RuntimeError(_DISABLED[-1])
        if current_trace() is not None:
            raise TraceError(
                "saved_tensors_hooks inside a compiled function: a compiled graph keeps its "
                "saved values inside its kernels, where pack/unpack hooks cannot run. Enter "
                "the block outside the compiled function (the call then runs eagerly, op by "
                "op, with the hooks), or run this part eagerly")
        STACK.append((self.pack_hook, self.unpack_hook))
        DETOURS.append("saved_tensors_hooks")
        return self

    def __exit__(self, *exc: Any) -> None:
        STACK.pop()
        DETOURS.remove("saved_tensors_hooks")


class save_on_cpu:  # noqa: N801
    """Saved tensors stay where they are: in host memory, which is where they would be
    moved to. ``pin_memory`` and ``device_type`` are accepted."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        self.pin_memory, self.device_type = pin_memory, device_type

    def __enter__(self) -> "save_on_cpu":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class disable_saved_tensors_hooks:  # noqa: N801
    """PyTorch's guard: entering `saved_tensors_hooks` in this block raises
    ``RuntimeError(error_message)``."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> "disable_saved_tensors_hooks":
        _DISABLED.append(self.error_message)
        return self

    def __exit__(self, *exc: Any) -> None:
        _DISABLED.pop()
