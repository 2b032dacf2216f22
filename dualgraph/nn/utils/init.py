"""`skip_init`: a module constructed without its parameter initialisation mattering."""

from __future__ import annotations

from typing import Any


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Any:
    """``module_cls(*args, **kwargs)``, for code that initialises the parameters itself.
    PyTorch leaves them uninitialised; here they hold the layer's usual initial values,
    which such code overwrites. As in PyTorch, the module must accept ``device=``.

    >>> dg.nn.utils.skip_init(dg.nn.Linear, 2, 3).weight.shape
    (3, 2)
    """
    import inspect

    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
