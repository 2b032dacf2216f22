"""Grad mode: whether eager ops record the tape (``no_grad`` / ``enable_grad``)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any


class _ThreadFlag(threading.local):
    """A bool per thread, ``flag.value``. Grad mode is thread-local, as in PyTorch: a
    backward (which turns recording off while it runs) or a ``no_grad`` block in one thread
    must not change what a call in another thread records or compiles. Hot paths read the
    attribute directly, without a function call."""

    def __init__(self) -> None:
        self.value = True


GRAD_ENABLED = _ThreadFlag()


def is_grad_enabled() -> bool:
    """Whether ops on tensors that require grad are recorded."""
    return GRAD_ENABLED.value


class _GradMode:
    _mode: bool

    def __init__(self) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> "_GradMode":
        self._prev.append(GRAD_ENABLED.value)
        GRAD_ENABLED.value = self._mode
        return self

    def __exit__(self, *exc: Any) -> None:
        GRAD_ENABLED.value = self._prev.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class _BareDecorator(_GradMode):
    """A mode that also decorates without parentheses (``@dg.no_grad``), as PyTorch's."""

    def __new__(cls, orig_func: Callable | None = None) -> Any:
        if orig_func is not None:
            return cls()(orig_func)
        return super().__new__(cls)

    def __init__(self, orig_func: Callable | None = None) -> None:
        super().__init__()


class no_grad(_BareDecorator):  # noqa: N801 - PyTorch's name
    """Context manager and decorator (``@dg.no_grad()`` or ``@dg.no_grad``) that turns
    recording off.

    >>> with dg.no_grad():
    ...     y = x * 2          # y.requires_grad is False
    """

    _mode = False


class enable_grad(_BareDecorator):  # noqa: N801 - PyTorch's name
    """Context manager and decorator that turns recording back on inside ``no_grad``."""

    _mode = True


class set_grad_enabled(_GradMode):  # noqa: N801 - PyTorch's name
    """Turn recording on or off: at once as a function call, and until the block ends as a
    context manager (the previous mode comes back on exit), as ``torch.set_grad_enabled``.

    >>> dg.set_grad_enabled(False)          # off from here on
    >>> with dg.set_grad_enabled(True):     # on inside, off again after
    ...     y = x * 2
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self._mode = bool(mode)
        # The switch happens here, not in __enter__: the plain call must take effect.
        self._before = GRAD_ENABLED.value
        GRAD_ENABLED.value = self._mode

    def __enter__(self) -> "set_grad_enabled":
        return self

    def __exit__(self, *exc: Any) -> None:
        GRAD_ENABLED.value = self._before

    def __call__(self, fn: Callable) -> Callable:
        # As a decorator, building the object must not change the mode of the code that
        # defines the function; the mode applies only while the function runs.
        GRAD_ENABLED.value = self._before
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


class inference_mode(_GradMode):  # noqa: N801 - PyTorch's name
    """PyTorch's ``inference_mode``: a context manager and decorator (``@dg.inference_mode``
    or ``@dg.inference_mode()``) that turns recording off, as `no_grad` does; with
    ``mode=False`` it changes nothing. dualgraph has no separate inference tensors: what
    PyTorch gains from them (no version counters, no view tracking) is already cheap here.

    >>> with dg.inference_mode():
    ...     y = model(x)        # y.requires_grad is False
    """

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode) and not isinstance(mode, bool):  # bare @dg.inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self._enabled = bool(mode)

    def __enter__(self) -> "inference_mode":
        self._prev.append(GRAD_ENABLED.value)
        INFERENCE.value = INFERENCE.value + [self._enabled]
        if self._enabled:
            GRAD_ENABLED.value = False
        return self

    def __exit__(self, *exc: Any) -> None:
        GRAD_ENABLED.value = self._prev.pop()
        INFERENCE.value = INFERENCE.value[:-1]

    def __call__(self, fn: Callable) -> Callable:
        enabled = self._enabled

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(enabled):
                return fn(*args, **kwargs)

        return wrapper

    def clone(self) -> "inference_mode":
        return inference_mode(self._enabled)


class _ModeStack(threading.local):
    def __init__(self) -> None:
        self.value: list[bool] = []


INFERENCE = _ModeStack()


def is_inference_mode_enabled() -> bool:
    """Whether the innermost `inference_mode` block is on."""
    return bool(INFERENCE.value and INFERENCE.value[-1])
