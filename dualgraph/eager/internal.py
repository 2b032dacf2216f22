"""The internal API the rest of dualgraph uses to reach a tensor's state (not public API).

Only ``dualgraph/eager/`` touches the private attributes of `Tensor` and of tape nodes
(``tests/test_privates.py`` checks it); `compile`, `compare`, `optim`, `nn`, `testing` and
the tracer go through these functions, so how a tensor stores its array, gradient and
version stays eager's business. They skip the public API's checks and mode hooks on
purpose: callers use them to save and restore state, or on the compiled-call hot path,
where each is a single attribute access behind one call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..modes import current_trace
from .autograd import Function
from .grad_mode import GRAD_ENABLED as _GRAD
from .tensor import Tensor, _make, _ViewTensor

# A new tensor from an array: ``make_tensor(array, requires_grad, grad_fn)``. An alias, not
# a wrapper: the compiled call builds every output with it.
make_tensor = _make


def array_of(t: Tensor) -> np.ndarray:
    """The array holding ``t``'s data (shared, never copied)."""
    return t._data


def requires_grad_of(t: Tensor) -> bool:
    """``t.requires_grad``, without the property's cost (the compiled call's key reads it)."""
    return t._rg


def set_array(t: Tensor, array: np.ndarray) -> None:
    """Make ``t`` hold ``array`` (compare swaps a captured tensor to float64 and back)."""
    t._data = array


def set_grad(t: Tensor, grad: Tensor | None) -> None:
    """Set ``t.grad`` without the setter's checks or the tracer's write hook (to restore a
    saved value, or to write back the gradient a compiled step computed)."""
    t._grad = grad


def version_of(t: Tensor) -> int:
    """How many times ``t``'s data has been changed in place."""
    return t._version[0]


def bump_version(t: Tensor) -> None:
    """Record that ``t``'s data was changed in place (by a compiled kernel)."""
    t._version[0] += 1


def saved_arrays(fn: Function) -> list[np.ndarray]:
    """The arrays a tape node keeps alive for backward: its saved tensors', then its output."""
    out: list[Any] = [s._data for s in fn._saved if isinstance(s, Tensor)]
    if fn._out is not None:
        out.append(fn._out)
    return out


def tape_node(t: Tensor) -> Any:
    """The node ``t`` is as an op input: its grad_fn, its leaf's ``AccumulateGrad``, or a
    ``const`` node."""
    return t._input_node()


def sub_scaled_(p: Tensor, g: Tensor, scale: Any) -> bool:
    """``p -= g * scale`` straight on the arrays, for an eager optimizer step outside
    autograd, when it is exactly what ``p.sub_(g * scale)`` would compute: ``p`` a plain
    (not view) float tensor or parameter, ``g`` of its shape and dtype, ``scale`` a Python
    number (weak: the product keeps ``g``'s dtype), nothing recording. Returns False, doing nothing,
    otherwise (the caller then writes the ops out). Saves the product's tensor and the two
    dispatches: one in-place update per parameter."""
    if (type(scale) is not float and type(scale) is not int) or _GRAD.value:
        return False
    # An nn.Parameter is a plain tensor too (a subclass): only views are refused.
    if (not isinstance(p, Tensor) or type(p) is _ViewTensor or not isinstance(g, Tensor)
            or current_trace() is not None):
        return False
    data = p._data
    gd = g._data
    if gd.dtype != data.dtype or gd.shape != data.shape or data.dtype.kind != "f":
        return False
    np.subtract(data, np.multiply(gd, scale), out=data)
    p._version[0] += 1
    return True
