"""Grad mode: whether eager ops record the tape (``no_grad`` / ``enable_grad``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

# A one-element list so the hot path reads it without a function call.
GRAD_ENABLED = [True]


def is_grad_enabled() -> bool:
    """Whether ops on tensors that require grad are recorded."""
    return GRAD_ENABLED[0]


def set_grad_enabled(mode: bool) -> None:
    GRAD_ENABLED[0] = bool(mode)


class _GradMode:
    _mode: bool

    def __init__(self) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> "_GradMode":
        self._prev.append(GRAD_ENABLED[0])
        GRAD_ENABLED[0] = self._mode
        return self

    def __exit__(self, *exc: Any) -> None:
        GRAD_ENABLED[0] = self._prev.pop()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """Context manager and decorator that turns recording off.

    >>> with dg.no_grad():
    ...     y = x * 2          # y.requires_grad is False
    """

    _mode = False


class enable_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """Context manager and decorator that turns recording back on inside ``no_grad``."""

    _mode = True
