"""Spectral normalisation with a forward pre-hook, as ``torch.nn.utils.spectral_norm``:
parameter ``weight_orig``, power-iteration buffers ``weight_u`` and ``weight_v``, and
``module.weight = weight_orig / sigma`` recomputed before every forward (one power
iteration step per forward in training mode, updating the buffers in place).

>>> m = spectral_norm(dg.nn.Linear(4, 3))
>>> sorted(m.state_dict())
['bias', 'weight_orig', 'weight_u', 'weight_v']
"""

from __future__ import annotations

from typing import Any

from ...eager.creation import randn
from ...eager.grad_mode import no_grad
from ...ops.products import dot, mv
from ..functional import normalize
from ..modules.module import Module, Parameter
from . import _norms
from .weight_norm import RecomputedWeight, find_hook

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]


class SpectralNorm(RecomputedWeight):
    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim = name, dim
        self.n_power_iterations, self.eps = n_power_iterations, eps

    def compute_weight(self, module: Module, training: bool) -> Any:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = _norms.as_matrix(weight, self.dim)
        if training:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mv(weight_mat.T, u), dim=0, eps=self.eps))
                    u.copy_(normalize(mv(weight_mat, v), dim=0, eps=self.eps))
        u, v = u.clone(), v.clone()
        return weight / dot(u, mv(weight_mat, v))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> "SpectralNorm":
        if find_hook(module, SpectralNorm, name) is not None:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                               f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        with no_grad():
            h, w = _norms.as_matrix(weight.detach(), dim).shape
            u = normalize(randn(h, dtype=weight.dtype), dim=0, eps=eps)
            v = normalize(randn(w, dtype=weight.dtype), dim=0, eps=eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        object.__setattr__(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        fn.attach(module)
        return fn

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, training=False)
        object.__delattr__(module, self.name)
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        del module._parameters[self.name + "_orig"]
        module.register_parameter(self.name, Parameter(weight.detach()))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm, estimated by power iteration before
    each forward. ``dim`` defaults to 1 for transposed convolutions, else 0.
    `parametrizations.spectral_norm` is the newer spelling."""
    if dim is None:
        dim = 1 if _norms.transposed_conv(module) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo `spectral_norm`: ``module.<name>`` is one parameter again (the normalised
    weight, without a power-iteration step)."""
    hook = find_hook(module, SpectralNorm, name)
    if hook is None:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    hook.remove(module)
    hook.detach()
    return module
