"""Sampling functions: ``bernoulli``, ``normal`` and ``poisson``, as PyTorch's. ``bernoulli``
and ``normal`` are compositions of the counter-based random ops, so inside a compiled
function they draw fresh numbers on every call; ``poisson`` draws from NumPy eagerly
(its sampler is not a fixed-shape program) and raises `TraceError` when traced."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import as_dtype
from ..errors import TraceError
from ..modes import current_trace
from ..ops import elementwise as E
from ..ops import random as R
from ..ops import shape as S
from .creation import _key, _size_arg, factory_options
from .tensor import Tensor, numpy_generator, tensor


def _probabilities(x: Any) -> Any:
    """``x`` without gradient: a detached tensor, a stopped traced value, or the number."""
    if isinstance(x, Tensor):
        return x.detach()
    return S.stop_gradient(x) if hasattr(x, "shape") else x


def bernoulli(input: Any, p: float | None = None, *, generator: Any = None,  # noqa: A002
              out: Any = None) -> Any:
    """0/1 draws, 1 with probability ``input`` elementwise (or ``p``, in ``input``'s
    shape), in ``input``'s floating dtype. Not differentiable."""
    if out is not None:
        raise TypeError("bernoulli(): out= is not supported; assign the result instead")
    dtype = np.dtype(input.dtype)
    if dtype.kind != "f":
        raise RuntimeError(f"bernoulli: expected a floating point tensor, got {dtype}")
    probs = _probabilities(input) if p is None else float(p)
    if current_trace() is None:
        a = np.asarray(probs)
        if np.any((a < 0) | (a > 1)):
            raise RuntimeError("bernoulli: all probabilities must be in [0, 1]")
    key, stream = _key(generator)
    u = R.rand(key, tuple(input.shape), np.float64, stream)
    return S.astype(E.lt(u, probs), dtype)


def normal(mean: Any = 0.0, std: Any = 1.0, size: Any = None, *, generator: Any = None,
           dtype: Any = None, device: Any = None, requires_grad: bool = False,
           out: Any = None, **kwargs: Any) -> Any:
    """Normal samples: ``mean + std * randn``, where ``mean`` and ``std`` are tensors
    (broadcast together) or numbers with ``size``. Not differentiable in ``mean`` or
    ``std``, as PyTorch's."""
    if out is not None:
        raise TypeError("normal(): out= is not supported; assign the result instead")
    factory_options("normal()", device, kwargs)
    tensors = [x for x in (mean, std) if hasattr(x, "shape")]
    if tensors:
        if size is not None:
            raise RuntimeError("normal(): size is only allowed with numbers for mean and std")
        shape = tuple(np.broadcast_shapes(*(tuple(t.shape) for t in tensors)))
        out_dtype = np.result_type(*(np.dtype(t.dtype) for t in tensors))
        if out_dtype.kind != "f":
            raise RuntimeError("normal expects floating point mean and std")
    else:
        if size is None:
            raise TypeError("normal() with numbers for mean and std needs size")
        shape = _size_arg(size, "normal()")
        out_dtype = as_dtype(dtype or np.float32)
    if current_trace() is None:
        s = np.asarray(_probabilities(std))
        if np.any(s < 0):
            raise RuntimeError(f"normal expects std >= 0.0, but found std {float(s.min())}")
    key, stream = _key(generator)
    z = R.randn(key, shape, np.float64, stream)
    m = _probabilities(mean) if hasattr(mean, "shape") else float(mean)
    s = _probabilities(std) if hasattr(std, "shape") else float(std)
    res = S.astype(E.add(E.mul(z, s), m), out_dtype)
    if requires_grad:
        res = res.detach().requires_grad_(True) if isinstance(res, Tensor) else res
    return res


def poisson(input: Any, generator: Any = None) -> Any:  # noqa: A002
    """Poisson draws with rates ``input`` (same shape and dtype). Eager only."""
    if current_trace() is not None:
        raise TraceError("poisson draws from NumPy's sampler eagerly: draw the numbers "
                         "outside the compiled function and pass them in")
    rates = np.asarray(input)
    if np.any(rates < 0) or np.any(np.isnan(rates)):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    draws = numpy_generator(generator).poisson(rates.astype(np.float64))
    return tensor(draws.astype(rates.dtype))


# The sampling methods of tensors (``x.bernoulli()``, ``probs.multinomial(n)``) live with
# their functions: they are attached to the operator mixin here, one layer above it.
def _bernoulli_method(self: Any, p: float | None = None, *, generator: Any = None) -> Any:
    return bernoulli(self, p, generator=generator)


def _multinomial_method(self: Any, num_samples: int, replacement: bool = False, *,
                        generator: Any = None) -> Any:
    from .creation import multinomial

    return multinomial(self, num_samples, replacement, generator=generator)


def _install() -> None:
    from ..ops.mixin import TensorOps

    TensorOps.bernoulli = _bernoulli_method
    TensorOps.multinomial = _multinomial_method


_install()
