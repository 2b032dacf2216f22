"""``torch.jit`` as CPU passthroughs, so programs that decorate with it run unchanged:
``script`` and ``trace`` return the function or module itself (it runs eagerly; use
``dg.compile`` to compile it), ``ignore``, ``unused``, ``export`` and ``interface`` are
identity decorators, ``is_scripting()`` and ``is_tracing()`` are False. Saving and loading
TorchScript archives (``jit.save``/``jit.load``) is not provided.

    >>> dg.jit.script(lambda x: x * 2)(dg.tensor(3.0))
    tensor(6.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final  # noqa: F401  (torch.jit.Final is typing's)


def script(obj: Any = None, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """``obj`` itself: a function or module runs eagerly as written."""
    return obj


def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``func`` itself (not a recording of one call: it keeps its Python control flow)."""
    return func


def trace_module(mod: Any, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``mod`` itself."""
    return mod


def _identity_decorator(fn: Any = None, **kwargs: Any) -> Any:
    if fn is None:
        return lambda f: f
    return fn


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """Identity decorator (``@jit.ignore`` or ``@jit.ignore(drop=True)``)."""
    if callable(drop):
        return drop
    return lambda fn: fn


unused = _identity_decorator
export = _identity_decorator
interface = _identity_decorator
script_method = _identity_decorator


def is_scripting() -> bool:
    """False: nothing runs as TorchScript."""
    return False


def is_tracing() -> bool:
    """False: ``jit.trace`` does not record."""
    return False


def annotate(the_type: Any, the_value: Any) -> Any:
    """``the_value`` (a type hint for TorchScript)."""
    return the_value


def freeze(mod: Any, preserved_attrs: Any = None, optimize_numerics: bool = True) -> Any:
    """``mod`` itself."""
    return mod


def optimize_for_inference(mod: Any, other_methods: Any = None) -> Any:
    """``mod`` itself."""
    return mod


def fork(func: Callable, *args: Any, **kwargs: Any) -> Any:
    """Runs ``func`` now; `wait` returns its result."""
    return _Future(func(*args, **kwargs))


def wait(future: Any) -> Any:
    """The result of a `fork`."""
    return future.value


class _Future:
    def __init__(self, value: Any) -> None:
        self.value = value

    def wait(self) -> Any:
        return self.value


__all__ = [
    "Final", "annotate", "export", "fork", "freeze", "ignore", "interface", "is_scripting",
    "is_tracing", "optimize_for_inference", "script", "script_method", "trace",
    "trace_module", "unused", "wait",
]
