"""Orthogonal matrices, weight and spectral normalisation as parametrizations, as
``torch.nn.utils.parametrizations``.

>>> m = weight_norm(dg.nn.Linear(4, 3))
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...eager.creation import randn
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ...ops.decomp import householder_product, matrix_exp, qr
from ...ops.matrix import solve
from ...ops.products import mv, vdot
from ...ops.shape import concatenate
from ..functional import normalize
from ..modules.module import Module
from . import _norms, parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]

_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


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


class _Orthogonal(Module):
    """A matrix (or batch) with orthonormal columns, or rows when it is wide, as a function
    of an unconstrained one: ``matrix_exp`` or ``cayley`` of its skew-symmetric part (a
    tall matrix is the first columns of a square one), or the product of the Householder
    reflectors it stores as LAPACK's ``geqrf`` does. With ``use_trivialization`` the result
    is ``base @ map(original)``: assigning a weight stores it (made orthogonal) in the
    buffer ``base`` and resets ``original`` to where the map gives the identity."""

    def __init__(self, weight: Tensor, orthogonal_map: str, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Any) -> Any:  # noqa: N803
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n  # noqa: N806
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()  # noqa: N806
            if n != k:
                pad = np.zeros(tuple(X.shape[:-2]) + (n, n - k), X.dtype)
                X = concatenate([X, pad], -1)  # noqa: N806
            A = X - X.mT  # noqa: N806
            if self.orthogonal_map == "matrix_exp":
                Q = matrix_exp(A)  # noqa: N806
            else:
                eye = np.eye(n, dtype=A.dtype)
                Q = solve(eye - A * 0.5, eye + A * 0.5)  # noqa: N806
            if n != k:
                Q = Q[..., :k]  # noqa: N806
        else:
            A = X.tril(-1)  # noqa: N806
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = householder_product(A, tau)  # noqa: N806
            # The diagonal holds the reflectors' signs (+-1; a truncation, as PyTorch's).
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)  # noqa: N806
        if "base" in self._buffers:
            Q = self.base @ Q  # noqa: N806
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Any) -> Any:  # noqa: N803
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape "
                             f"{tuple(self.shape)}. "
                             f"Got a tensor of shape {tuple(Q.shape)}.")
        with no_grad():
            return self._right_inverse(Q.detach())

    def _right_inverse(self, Q: Any) -> Any:  # noqa: N803
        q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transposed = n < k
        if transposed:
            Q, n, k = Q.mT, k, n  # noqa: N806
        if "base" not in self._buffers:
            if self.orthogonal_map != "householder":
                raise NotImplementedError("It is not possible to assign to the matrix "
                                          "exponential or the Cayley parametrizations when "
                                          "use_trivialization=False.")
            # LAPACK's geqrf, with the diagonal made the signs the forward reads.
            h, tau = np.linalg.qr(Q.numpy(), mode="raw")
            A = np.ascontiguousarray(np.swapaxes(h, -1, -2))  # noqa: N806
            diag = np.sign(np.diagonal(A, axis1=-2, axis2=-1))
            diag = np.where(tau == 0.0, -diag, diag)
            idx = np.arange(k)
            A[..., idx, idx] = diag
            out = Tensor(A.astype(q_init.dtype))
            return out.mT if transposed else out
        if n == k and _is_orthogonal(Q):
            base = Q.clone()
        else:
            if n != k:
                extra = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
                Q = concatenate([Q, extra], -1)  # noqa: N806
            base = _make_orthogonal(Q)
        self.base = base
        neg_id = np.zeros(tuple(q_init.shape), q_init.dtype)
        idx = np.arange(min(q_init.shape[-2:]))
        neg_id[..., idx, idx] = -1.0
        return Tensor(neg_id)


def _is_orthogonal(Q: Any) -> bool:  # noqa: N803
    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * float(np.finfo(Q.dtype).eps)
    gram = (Q.mT @ Q).numpy()
    return bool(np.allclose(gram, np.eye(k), rtol=1e-5, atol=eps))


def _make_orthogonal(A: Any) -> Any:  # noqa: N803
    """The Q of A's QR decomposition with R's diagonal made non-negative (unique)."""
    Q, R = qr(A)  # noqa: N806
    return Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Reparametrize the matrix (or batch) ``module.<name>`` to have orthonormal columns
    (or rows, if wide). ``orthogonal_map``: ``"matrix_exp"``, ``"cayley"`` or
    ``"householder"``; by default ``matrix_exp`` for square matrices, else ``householder``.
    The weight keeps its value at registration (made orthogonal if it is not).

    >>> m = orthogonal(dg.nn.Linear(4, 3))
    >>> sorted(m.state_dict())
    ['bias', 'parametrizations.weight.0.base', 'parametrizations.weight.original']
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. "
                         f"Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.shape[-2] == weight.shape[-1]
                          else "householder")
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
