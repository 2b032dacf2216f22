"""`dg.utils.checkpoint`: PyTorch's activation checkpointing, with its answers.

``checkpoint(fn, *args)`` returns ``fn(*args)`` with the same values and gradients as
PyTorch's. dualgraph keeps the activations instead of recomputing them in the backward
pass (the memory saving is not reproduced; the numbers are). As in PyTorch, the reentrant
variant (``use_reentrant=True``) records no history when no tensor argument requires
grad: its output then requires no grad, and parameters used inside get no gradient
(PyTorch warns; so does this).

>>> lin = dg.nn.Linear(3, 2)
>>> y = dg.utils.checkpoint.checkpoint(lin, dg.ones(4, 3), use_reentrant=False)
>>> y.requires_grad
True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ..eager.grad_mode import is_grad_enabled, no_grad
from ..eager.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def _flat_tensors(args: Any) -> list:
    if isinstance(args, Tensor):
        return [args]
    if isinstance(args, (list, tuple)):
        return [t for a in args for t in _flat_tensors(a)]
    if isinstance(args, dict):
        return [t for a in args.values() for t in _flat_tensors(a)]
    return []


def _warn_unspecified(name: str) -> None:
    warnings.warn(f"dg.utils.checkpoint.{name}: the use_reentrant parameter should be passed "
                  "explicitly (True, the default when it is not, records no history when no "
                  "input requires grad; False is recommended).", UserWarning, stacklevel=3)


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable | None = None, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, as PyTorch's checkpoint computes it (activations
    are kept, not recomputed). ``use_reentrant=True`` (PyTorch's old default) takes no
    keyword arguments for ``function`` and records no history when no tensor argument
    requires grad."""
    if use_reentrant is None:
        _warn_unspecified("checkpoint")
        use_reentrant = True
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not None:
            raise ValueError("Passing `context_fn` is only supported when "
                             "use_reentrant=False.")
        if is_grad_enabled() and not any(t.requires_grad for t in _flat_tensors(args)):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          UserWarning, stacklevel=2)
            with no_grad():
                return function(*args)
    return function(*args, **kwargs)


def checkpoint_sequential(functions: Any, segments: int, input: Any,  # noqa: A002
                          use_reentrant: bool | None = None, **kwargs: Any) -> Any:
    """Run ``functions`` (a `Sequential` or a list of modules) in ``segments`` chunks, each
    chunk but the last through `checkpoint`; the result is the sequence's output."""
    from ..nn.modules import Sequential

    mods: Iterable = list(functions.children()) if isinstance(functions, Sequential) \
        else list(functions)
    mods = list(mods)
    if use_reentrant is None:
        _warn_unspecified("checkpoint_sequential")
        use_reentrant = True
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be at least 1, got {segments}")
    size = len(mods) // segments

    def run(start: int, end: int) -> Callable:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = mods[j](x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,  # noqa: A001
                           **kwargs)
    return run(end + 1, len(mods) - 1)(input)
