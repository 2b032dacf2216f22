"""Gradient clipping: `clip_grad_norm_` and `clip_grad_value_`, with PyTorch's formulas.

Both are tensor ops applied in place under `no_grad`, so they also run inside a compiled
training step (between ``loss.backward()`` and ``opt.step()``): no value is read back to
Python, the scale factor stays a tensor.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from ...eager.grad_mode import no_grad
from ...eager.tensor import tensor
from ...errors import TraceError
from ...modes import current_trace
from ...ops import elementwise as E
from ...ops import reduce as R
from ...ops.mixin import TensorOps
from ...ops.shape import stack


def _tensors(parameters: Any) -> list:
    if isinstance(parameters, TensorOps):
        return [parameters]
    return list(parameters)


def _norm(g: Any, norm_type: float) -> Any:
    """PyTorch's ``vector_norm``: max |g| for inf, the count of nonzeros for 0, else the
    p-norm (2: sqrt of the sum of squares)."""
    a = E.abs(g)
    if norm_type == math.inf:
        return R.amax(a) if math.prod(a.shape) else tensor(0.0, dtype=g.dtype)
    if norm_type == -math.inf:
        return R.amin(a)
    if norm_type == 0:
        return R.sum((a != 0).astype(g.dtype))
    if norm_type == 2:
        return E.sqrt(R.sum(E.mul(a, a)))
    return E.pow(R.sum(E.pow(a, float(norm_type))), 1.0 / norm_type)


def get_total_norm(tensors: Any, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Any:
    """The norm of the norms of ``tensors`` (as if they were one vector): a 0-d tensor."""
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        norms = [_norm(t, norm_type) for t in tensors]
        dtype = norms[0].dtype
        total = _norm(stack([n.astype(dtype) for n in norms], 0), norm_type)
    if error_if_nonfinite:
        if current_trace() is not None:
            raise TraceError("clip_grad_norm_(error_if_nonfinite=True) reads the norm's value, "
                             "which a compiled function cannot; leave it False there")
        if not math.isfinite(float(total)):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                               "`parameters` is non-finite, so it cannot be clipped. To disable "
                               "this error and scale the gradients by the non-finite norm "
                               "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grad_norm_(parameters: Any, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Any:
    """Scale the gradients of ``parameters`` in place so that their total ``norm_type``
    norm is at most ``max_norm``; returns the total norm before clipping (a 0-d tensor).
    The scale is ``min(max_norm / (total + 1e-6), 1)``, as PyTorch's.

    >>> lin = dg.nn.Linear(3, 1); lin(dg.ones(2, 3)).sum().backward()
    >>> float(dg.nn.utils.clip_grad_norm_(lin.parameters(), 0.5)) > 0.5
    True
    """
    params = _tensors(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters: Any, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Any:
    """PyTorch's deprecated spelling of `clip_grad_norm_` (it warns, then clips)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grads_with_norm_(parameters: Any, max_norm: float, total_norm: Any,
                          foreach: bool | None = None) -> None:
    """Scale the gradients of ``parameters`` in place by ``min(max_norm / (total_norm +
    1e-6), 1)``, given their total norm (`get_total_norm`): the second half of
    `clip_grad_norm_`."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = E.minimum(E.div(float(max_norm), E.add(total_norm, 1e-6)), 1.0)
        for g in grads:
            g.mul_(coef.astype(g.dtype))


def clip_grad_value_(parameters: Any, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient of ``parameters`` into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.copy_(p.grad.clamp(-clip_value, clip_value))


__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]
