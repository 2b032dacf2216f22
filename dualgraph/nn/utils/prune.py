"""Pruning, as ``torch.nn.utils.prune``: ``module.<name>`` becomes ``<name>_orig`` (the
parameter, still trained) times ``<name>_mask`` (a buffer of zeros and ones), recomputed
by a forward pre-hook. Pruning the same tensor again narrows the mask: the new method
chooses among the entries (or channels) that are still kept.

>>> m = l1_unstructured(dg.nn.Linear(4, 3), "weight", amount=0.5)
>>> sorted(m.state_dict())
['bias', 'weight_mask', 'weight_orig']
>>> int(m.weight_mask.sum())
6
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ..modules.module import Module, Parameter
from .weight_norm import RecomputedWeight

__all__ = ["BasePruningMethod", "CustomFromMask", "Identity", "L1Unstructured", "LnStructured",
           "RandomUnstructured", "custom_from_mask", "global_unstructured", "identity",
           "is_pruned", "l1_unstructured", "ln_structured", "random_unstructured", "remove"]


def _n_to_prune(amount: Any, size: int) -> int:
    """PyTorch's rule: an int is a count, a float a fraction of ``size`` (rounded)."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"amount must be an int or a float, got {type(amount).__name__}")
    if isinstance(amount, numbers.Integral):
        if amount < 0:
            raise ValueError(f"amount={amount} should be a non-negative integer")
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of "
                             f"parameters to prune={size}")
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise ValueError(f"amount={amount} should be a float in the range [0, 1]")
    return int(round(amount * size))


def _array(t: Any) -> np.ndarray:
    return t.detach().numpy() if isinstance(t, Tensor) else np.asarray(t)


class BasePruningMethod(RecomputedWeight):
    """A pruning method is also the forward pre-hook that applies its mask."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def compute_weight(self, module: Module, training: bool = True) -> Any:
        return getattr(module, self.name + "_orig") * getattr(module, self.name + "_mask")

    def _narrowed_mask(self, scores: np.ndarray, old: np.ndarray) -> np.ndarray:
        """The new mask, chosen only among the entries (or channels) ``old`` keeps."""
        if self.PRUNING_TYPE == "unstructured":
            keep = old != 0
            new = old.copy()
            new[keep] = self.compute_mask(scores[keep], old[keep])
            return new
        dim = self.dim % old.ndim
        other = tuple(d for d in range(old.ndim) if d != dim)
        kept = np.flatnonzero(np.abs(old).sum(axis=other) != 0)
        new = old.copy()
        sub = self.compute_mask(np.take(scores, kept, axis=dim), np.take(old, kept, axis=dim))
        idx = [slice(None)] * old.ndim
        idx[dim] = kept
        new[tuple(idx)] = sub
        return new

    @classmethod
    def apply(cls, module: Module, name: str, *args: Any, importance_scores: Any = None,
              **kwargs: Any) -> "BasePruningMethod":
        method = cls(*args, **kwargs)
        method.name = name
        previous = _find(module, name)
        if previous is None:
            param = module._parameters.get(name)
            if param is None:
                raise ValueError(f"Parameter '{name}' of module {module} has to be pruned "
                                 "but does not exist as a parameter")
            old = np.ones(param.shape, dtype=param.dtype)
        else:
            param = getattr(module, name + "_orig")
            old = _array(getattr(module, name + "_mask"))
        # PyTorch scores the current (already masked) values, not ``<name>_orig``.
        current = getattr(module, name)
        scores = _array(current if importance_scores is None else importance_scores)
        if scores.shape != tuple(param.shape):
            raise ValueError(f"importance_scores should have the same shape as parameter "
                             f"{name} of {module}: {tuple(scores.shape)} vs {tuple(param.shape)}")
        mask = method._narrowed_mask(scores, old).astype(param.dtype)
        if previous is None:
            del module._parameters[name]
            module.register_parameter(name + "_orig", param)
            module.register_buffer(name + "_mask", Tensor(mask))
        else:
            previous.detach()
            module._buffers[name + "_mask"] = Tensor(mask)
        # Detached, as every forward inside a compiled function leaves it (`weight_norm`
        # does the same): a compiled step's first call then finds the kind of value the
        # later ones do (one trace).
        with no_grad():
            object.__setattr__(module, name, method.compute_weight(module))
        method.attach(module)
        return method

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module).detach()
        object.__delattr__(module, self.name)
        del module._parameters[self.name + "_orig"]
        del module._buffers[self.name + "_mask"]
        module.register_parameter(self.name, Parameter(weight))


def _find(module: Module, name: str) -> BasePruningMethod | None:
    hooks = module.__dict__.get("_hooks")
    for hook in (hooks.forward_pre.values() if hooks else ()):
        if isinstance(hook, BasePruningMethod) and hook.name == name:
            return hook
    return None


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (keeps the reparametrisation)."""

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        return default_mask


class L1Unstructured(BasePruningMethod):
    """Zeroes the ``amount`` entries of smallest absolute value."""

    def __init__(self, amount: Any) -> None:
        self.amount = amount

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        k = _n_to_prune(self.amount, t.size)
        mask = default_mask.copy().reshape(-1)
        mask[np.argsort(np.abs(t).reshape(-1), kind="stable")[:k]] = 0
        return mask.reshape(t.shape)


class RandomUnstructured(BasePruningMethod):
    """Zeroes ``amount`` entries chosen at random (dualgraph's global generator)."""

    def __init__(self, amount: Any) -> None:
        self.amount = amount

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        from ...eager.creation import randperm

        k = _n_to_prune(self.amount, t.size)
        mask = default_mask.copy().reshape(-1)
        mask[randperm(t.size).numpy()[:k]] = 0
        return mask.reshape(t.shape)


class LnStructured(BasePruningMethod):
    """Zeroes the ``amount`` slices along ``dim`` of smallest L``n`` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Any, n: Any, dim: int = -1) -> None:
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        dim = self.dim % t.ndim
        k = _n_to_prune(self.amount, t.shape[dim])
        rows = np.moveaxis(t, dim, 0).reshape(t.shape[dim], -1)
        n = self.n
        if n in ("fro", 2):
            norms = np.sqrt((rows * rows).sum(axis=1))
        elif n == "nuc":
            raise ValueError("ln_structured: n='nuc' is not a norm over a slice's entries")
        else:
            norms = np.linalg.norm(rows, ord=float(n), axis=1)
        mask = default_mask.copy()
        idx = [slice(None)] * t.ndim
        idx[dim] = np.argsort(norms, kind="stable")[:k]
        mask[tuple(idx)] = 0
        return mask


class CustomFromMask(BasePruningMethod):
    """Applies a given mask."""

    def __init__(self, mask: Any) -> None:
        self.mask = _array(mask)

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        return default_mask * self.mask.reshape(default_mask.shape)

    def _narrowed_mask(self, scores: np.ndarray, old: np.ndarray) -> np.ndarray:
        if self.mask.shape != old.shape:
            raise ValueError(f"custom mask shape {tuple(self.mask.shape)} differs from the "
                             f"parameter's {tuple(old.shape)}")
        return self.compute_mask(scores, old)


def identity(module: Module, name: str) -> Module:
    Identity.apply(module, name)
    return module


def l1_unstructured(module: Module, name: str, amount: Any,
                    importance_scores: Any = None) -> Module:
    """Prune ``amount`` (a count, or a fraction of the kept entries) of ``module.<name>``'s
    entries with the smallest absolute value (or ``importance_scores``)."""
    L1Unstructured.apply(module, name, amount, importance_scores=importance_scores)
    return module


def random_unstructured(module: Module, name: str, amount: Any) -> Module:
    """Prune ``amount`` entries of ``module.<name>`` chosen at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def ln_structured(module: Module, name: str, amount: Any, n: Any, dim: int,
                  importance_scores: Any = None) -> Module:
    """Prune ``amount`` whole slices along ``dim`` with the smallest L``n`` norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask: Any) -> Module:
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters: Iterable, pruning_method: type, importance_scores:
                        dict | None = None, **kwargs: Any) -> None:
    """Prune across several ``(module, name)`` tensors at once: the method chooses over
    their concatenation, so each tensor loses a share that depends on its values."""
    parameters = list(parameters)
    if getattr(pruning_method, "PRUNING_TYPE", None) != "unstructured":
        raise TypeError("global_unstructured only supports unstructured pruning methods")
    scores, masks = [], []
    for module, name in parameters:
        hook = _find(module, name)
        param = getattr(module, name + "_orig") if hook else module._parameters.get(name)
        if param is None:
            raise ValueError(f"Parameter '{name}' of module {module} does not exist")
        s = (importance_scores or {}).get((module, name), getattr(module, name))
        scores.append(_array(s).reshape(-1))
        masks.append(_array(getattr(module, name + "_mask")).reshape(-1) if hook
                     else np.ones(param.numel(), dtype=param.dtype))
    method = pruning_method(**kwargs)
    method.name = ""
    flat = method._narrowed_mask(np.concatenate(scores), np.concatenate(masks))
    start = 0
    for (module, name), m in zip(parameters, masks):
        part = flat[start:start + m.size]
        start += m.size
        shape = tuple(getattr(module, name).shape)
        CustomFromMask.apply(module, name, part.reshape(shape))


def remove(module: Module, name: str) -> Module:
    """Make the pruning permanent: ``module.<name>`` is one parameter again, holding the
    masked values, and ``<name>_orig``, ``<name>_mask`` and the hook are gone."""
    hook = _find(module, name)
    if hook is None:
        raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before "
                         "pruning can be removed")
    hook.remove(module)
    hook.detach()
    return module


def is_pruned(module: Module) -> bool:
    """True when ``module`` or any submodule has a pruning hook."""
    for m in module.modules():
        hooks = m.__dict__.get("_hooks")
        if hooks and any(isinstance(h, BasePruningMethod) for h in hooks.forward_pre.values()):
            return True
    return False
