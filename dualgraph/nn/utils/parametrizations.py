"""Weight and spectral normalisation as parametrizations, as
``torch.nn.utils.parametrizations``.

>>> m = weight_norm(dg.nn.Linear(4, 3))
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

from __future__ import annotations

from typing import Any

from ...eager.creation import randn
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ...ops.products import mv, vdot
from ..functional import normalize
from ..modules.module import Module
from . import _norms, parametrize

__all__ = ["spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    """``weight = g * v / ||v||`` with the norm over every dim but ``dim``; its
    ``right_inverse`` splits a weight into ``(g, v)``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Any, weight_v: Any) -> Any:
        return _norms.weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Any) -> tuple:
        return _norms.norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as magnitude ``original0`` (the norm over every dim
    but ``dim``; ``dim=None``: one norm of the whole tensor) times direction
    ``original1``. The state dict keys are ``parametrizations.<name>.original0`` and
    ``original1``, as PyTorch's."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """``weight / sigma``, ``sigma`` the largest singular value of the weight seen as a
    matrix along ``dim``, estimated by power iteration: in training mode each read runs
    ``n_power_iterations`` steps, updating the buffers ``_u`` and ``_v`` in place."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        dim = _norms.check_dim(dim, ndim)
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                w = _norms.as_matrix(weight.detach(), dim)
                h, k = w.shape
                self.register_buffer("_u", normalize(randn(h, dtype=w.dtype), dim=0, eps=eps))
                self.register_buffer("_v", normalize(randn(k, dtype=w.dtype), dim=0, eps=eps))
            self._power_method(w, 15)

    def _power_method(self, weight_mat: Any, n_power_iterations: int) -> None:
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(mv(weight_mat.T, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Any) -> Any:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = _norms.as_matrix(weight, self.dim)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = vdot(u, mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Any) -> Any:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Reparametrize ``module.<name>`` divided by its spectral norm (power iteration;
    buffers ``parametrizations.<name>.0._u`` and ``._v``). ``dim`` defaults to 1 for
    transposed convolutions, else 0."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _norms.transposed_conv(module) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
