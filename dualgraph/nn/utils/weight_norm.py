"""Weight normalisation with a forward pre-hook, as ``torch.nn.utils.weight_norm``:
parameters ``weight_g`` (magnitude) and ``weight_v`` (direction), and ``module.weight``
recomputed from them before every forward.

>>> m = weight_norm(dg.nn.Linear(4, 3))
>>> sorted(m.state_dict())
['bias', 'weight_g', 'weight_v']
"""

from __future__ import annotations

from typing import Any

from ...eager.grad_mode import no_grad
from ...modes import current_trace
from ..modules.module import Module, Parameter
from . import _norms

__all__ = ["WeightNorm", "remove_weight_norm", "weight_norm"]


class RecomputedWeight:
    """The forward pre-hook base of the old-style normalisations: ``module.<name>`` is a
    plain attribute set before each forward. Inside a compiled function the forward hook
    leaves it detached, so the compiled call writes back the weight its last forward
    computed (programs read it afterwards, as after an eager forward) without keeping
    the trace's history or asking for a backward in the call."""

    name: str

    def __call__(self, module: Module, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module, module.training))

    def after(self, module: Module, inputs: Any, output: Any) -> None:
        if current_trace() is not None:
            weight = module.__dict__.get(self.name)
            if hasattr(weight, "detach"):
                object.__setattr__(module, self.name, weight.detach())

    def compute_weight(self, module: Module, training: bool) -> Any:
        raise NotImplementedError

    def attach(self, module: Module) -> None:
        self.handles = (module.register_forward_pre_hook(self),
                        module.register_forward_hook(self.after, always_call=True))

    def detach(self) -> None:
        for h in self.handles:
            h.remove()


def find_hook(module: Module, kind: type, name: str) -> Any:
    """The ``kind`` hook of ``module`` normalising ``name``, or None."""
    hooks = module.__dict__.get("_hooks")
    for hook in (hooks.forward_pre.values() if hooks else ()):
        if isinstance(hook, kind) and hook.name == name:
            return hook
    return None


class WeightNorm(RecomputedWeight):
    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module, training: bool = True) -> Any:
        return _norms.weight_norm(getattr(module, self.name + "_v"),
                                  getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> "WeightNorm":
        if find_hook(module, WeightNorm, name) is not None:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                               f"{name}")
        fn = WeightNorm(name, dim)
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"Module '{type(module).__name__}' has no parameter '{name}'")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(
            _norms.norm_except_dim(weight.detach(), fn.dim)))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        # Detached, as every forward inside a compiled function leaves it: a first compiled
        # call then finds the kind of value the later ones do (one trace).
        with no_grad():
            object.__setattr__(module, name, fn.compute_weight(module))
        fn.attach(module)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        object.__delattr__(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight.detach()))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Split ``module.<name>`` into ``<name>_g`` (its norm over every dim but ``dim``;
    ``dim=None``: of the whole tensor) and ``<name>_v`` (the direction), recombined by a
    forward pre-hook. `parametrizations.weight_norm` is the newer spelling."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo `weight_norm`: ``module.<name>`` is one parameter again."""
    hook = find_hook(module, WeightNorm, name)
    if hook is None:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    hook.remove(module)
    hook.detach()
    return module
