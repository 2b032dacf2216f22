"""`gradcheck`: analytic gradients against central finite differences in float64."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .eager.internal import array_of
from .eager.tensor import Tensor, _make
from .eager.tensor import grad as _grad


class GradcheckError(AssertionError):
    """Analytic and numerical gradients disagree; the message names the worst element."""


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-6,
    rtol: float = 1e-4,
    seed: int = 0,
) -> bool:
    """Check ``fn``'s gradients w.r.t. every floating input, in float64.

    Inputs (tensors or arrays) are copied to float64 leaves. A non-scalar output is reduced
    with fixed random weights so every output element is checked. Raises `GradcheckError`
    naming the input, the element and both values at the worst mismatch.

    >>> gradcheck(lambda x: (x * x).sum(), dg.randn(3))
    True
    """
    leaves = []
    for x in inputs:
        arr = array_of(x) if isinstance(x, Tensor) else np.asarray(x)
        if arr.dtype.kind == "f":
            leaves.append(_make(arr.astype(np.float64), False, None).requires_grad_(True))
        else:
            leaves.append(_make(np.array(arr), False, None))
    diff = [i for i, t in enumerate(leaves) if t.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no floating-point input to differentiate")
    rng = np.random.default_rng(seed)
    out = fn(*leaves)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    weights = rng.standard_normal(out.shape) if out.shape else np.float64(1.0)

    def scalar(*xs: Any) -> Tensor:
        y = fn(*xs)
        return (y * np.asarray(weights, dtype=y.dtype)).sum() if y.shape else y * 1.0

    analytic = _grad(scalar(*leaves), [leaves[i] for i in diff], allow_unused=True)
    for k, i in enumerate(diff):
        x = leaves[i]
        num = np.zeros(x.shape)
        flat = array_of(x).reshape(-1)
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + eps
            hi = scalar(*[_detached(t) for t in leaves]).item()
            flat[j] = orig - eps
            lo = scalar(*[_detached(t) for t in leaves]).item()
            flat[j] = orig
            num.reshape(-1)[j] = (hi - lo) / (2 * eps)
        a = np.zeros(x.shape) if analytic[k] is None else array_of(analytic[k]).astype(np.float64)
        err = np.abs(a - num) - (atol + rtol * np.abs(num))
        if err.size and err.max() > 0:
            w = np.unravel_index(int(np.argmax(err)), err.shape) if err.shape else ()
            raise GradcheckError(
                f"gradcheck: gradient of input {i} (shape {x.shape}) mismatches at element "
                f"{tuple(int(v) for v in w)}: analytic {a[w]!r}, numerical {num[w]!r} "
                f"(atol={atol}, rtol={rtol})"
            )
    return True


def _detached(t: Tensor) -> Tensor:
    return _make(array_of(t), False, None)
