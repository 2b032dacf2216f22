"""``dg.autograd.graph``: PyTorch's saved-tensor contexts.

`save_on_cpu` is PyTorch's memory-saving context for GPU training: saved activations are
moved to host memory and back. Every dualgraph tensor already lives in host memory, so the
context changes nothing and programs that use it run unchanged. Custom pack/unpack hooks
(`saved_tensors_hooks`) are refused with a clear error: the autograd engine keeps its saved
arrays itself, and does not call user code on them.

>>> with dg.autograd.graph.save_on_cpu(pin_memory=True):
...     y = (dg.ones(2, requires_grad=True) * 3).sum()
>>> y.backward()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["disable_saved_tensors_hooks", "save_on_cpu", "saved_tensors_hooks"]


class saved_tensors_hooks:  # noqa: N801
    """PyTorch's ``saved_tensors_hooks(pack_hook, unpack_hook)``: not supported here."""

    def __init__(self, pack_hook: Callable, unpack_hook: Callable) -> None:
        raise NotImplementedError(
            "dg.autograd.graph.saved_tensors_hooks: custom pack/unpack hooks on saved "
            "tensors are not supported (the engine keeps saved arrays itself); "
            "save_on_cpu is accepted, and changes nothing on the CPU")


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
    """PyTorch's guard that forbids saved-tensor hooks in a block: there are none to
    disable, so it only records the message."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> "disable_saved_tensors_hooks":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None
