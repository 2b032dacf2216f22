"""`MultivariateNormal`: the normal distribution over vectors, parameterised by its
covariance, its precision or the lower Cholesky factor of its covariance, all computed
through ``scale_tril`` (so ``log_prob``, ``entropy``, ``rsample`` and the KL divergence
differentiate through the Cholesky factorization and triangular solves)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..eager.creation import randn
from ..ops import decomp as DC
from ..ops import elementwise as E
from ..ops import reduce as R
from ..ops import shape as S
from ..ops.mixin import TensorOps
from . import constraints
from .distribution import Distribution

__all__ = ["MultivariateNormal"]

_LOG_2PI = math.log(2 * math.pi)


def _expand(x: Any, shape: tuple) -> Any:
    return x if tuple(x.shape) == shape else S.broadcast_to(x, shape)


def _mahalanobis(L: Any, x: Any) -> Any:  # noqa: N803
    """``|L⁻¹ x|²`` over the last dim, batch dims broadcast."""
    y = DC.solve_triangular_left(L, S.reshape(x, tuple(x.shape) + (1,)), upper=False)
    return R.sum(E.mul(y, y), (-2, -1))


def _half_log_det(L: Any) -> Any:  # noqa: N803
    return R.sum(E.log(S.diagonal(L, 0, -2, -1)), -1)


def _precision_to_scale_tril(P: Any) -> Any:  # noqa: N803
    # The Cholesky factor of P reversed gives the inverse of the wanted factor without
    # inverting P (PyTorch's construction, better conditioned than cholesky(inv(P))).
    Lf = DC.cholesky_lower(S.flip(P, -2, -1))  # noqa: N806
    L_inv = S.swapaxes(S.flip(Lf, -2, -1), -1, -2)  # noqa: N806
    eye = E.add(E.mul(P, 0.0), np.eye(P.shape[-1], dtype=np.dtype(P.dtype)))
    return DC.solve_triangular_left(L_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    """The multivariate normal with mean ``loc`` and exactly one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (the lower Cholesky factor of the covariance);
    ``rsample`` is ``loc + scale_tril @ eps``.

    >>> m = dg.distributions.MultivariateNormal(dg.zeros(2), dg.eye(2))
    >>> m.rsample((3,)).shape
    (3, 2)
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Any, covariance_matrix: Any = None, precision_matrix: Any = None,
                 scale_tril: Any = None, validate_args: bool | None = None) -> None:
        if len(loc.shape) < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        (matrix,) = given
        if not isinstance(matrix, TensorOps) or len(matrix.shape) < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at "
                             "least two-dimensional, with optional leading batch dimensions")
        n = loc.shape[-1]
        if tuple(matrix.shape[-2:]) != (n, n):
            raise ValueError(f"The matrix must be {n} x {n} to match loc of shape "
                             f"{tuple(loc.shape)}, got shape {tuple(matrix.shape)}")
        batch = tuple(np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        mshape = batch + (n, n)
        if scale_tril is not None:
            self.scale_tril = _expand(scale_tril, mshape)
        elif covariance_matrix is not None:
            self.covariance_matrix = _expand(covariance_matrix, mshape)
        else:
            self.precision_matrix = _expand(precision_matrix, mshape)
        self.loc = _expand(loc, batch + (n,))
        super().__init__(batch, (n,), validate_args)
        if scale_tril is None:
            self.scale_tril = (DC.cholesky_lower(self.covariance_matrix)
                               if covariance_matrix is not None
                               else _precision_to_scale_tril(self.precision_matrix))
        self._unbroadcasted_scale_tril = self.scale_tril

    def __getattr__(self, name: str) -> Any:
        # The two matrices not given are computed from scale_tril when first read.
        if name == "covariance_matrix":
            L = self.__dict__["scale_tril"]  # noqa: N806
            return L @ S.swapaxes(L, -1, -2)
        if name == "precision_matrix":
            return DC.cholesky_inverse(self.__dict__["scale_tril"])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def variance(self) -> Any:
        return R.sum(E.mul(self.scale_tril, self.scale_tril), -1)

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        eps = randn(*shape, dtype=self.loc.dtype)
        noise = S.reshape(self.scale_tril @ S.reshape(eps, shape + (1,)), shape)
        return E.add(self.loc, noise)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        diff = E.sub(value, self.loc)
        m = _mahalanobis(self.scale_tril, diff)
        n = self._event_shape[0]
        return E.sub(E.mul(E.add(m, n * _LOG_2PI), -0.5), _half_log_det(self.scale_tril))

    def entropy(self) -> Any:
        n = self._event_shape[0]
        h = E.add(_half_log_det(self.scale_tril), 0.5 * n * (1.0 + _LOG_2PI))
        return _expand(h, self._batch_shape) if self._batch_shape else h


def kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Any:
    """``KL(p || q)`` of two multivariate normals of the same event size."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    n = p.event_shape[0]
    half_term1 = E.sub(_half_log_det(q.scale_tril), _half_log_det(p.scale_tril))
    t = DC.solve_triangular_left(q.scale_tril, p.scale_tril, upper=False)
    term2 = R.sum(E.mul(t, t), (-2, -1))
    term3 = _mahalanobis(q.scale_tril, E.sub(q.loc, p.loc))
    return E.add(half_term1, E.mul(E.sub(E.add(term2, term3), float(n)), 0.5))
