"""The internal API the rest of dualgraph uses to reach a tensor's state (not public API).

Only ``dualgraph/eager/`` touches the private attributes of `Tensor` and of tape nodes
(``tests/test_privates.py`` checks it); `compile`, `compare`, `optim`, `nn`, `testing` and
the tracer go through these functions, so how a tensor stores its array, gradient and
version stays eager's business. They skip the public API's checks and mode hooks on
purpose: callers use them to save and restore state, or on the compiled-call hot path,
where each is a single attribute access behind one call.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..modes import current_trace
from .autograd import Function
from .grad_mode import GRAD_ENABLED as _GRAD
from .openblas import axpy_
from .tensor import Tensor, _init, _make, _set_new_grads, _ViewTensor

# A new tensor from an array: ``make_tensor(array, requires_grad, grad_fn)``. An alias, not
# a wrapper: the compiled call builds every output with it.
make_tensor = _make
# ``set_new_grads(tensors, arrays)``: set ``tensors[i].grad`` to a new tensor holding
# ``arrays[i]`` (arrays no other tensor holds, as a compiled step's gradients), as
# `set_grad` does, in one call for all.
set_new_grads = _set_new_grads
# Fill in a tensor object built without Tensor.__init__ (`nn.Parameter` does):
# ``init_tensor(t, array, requires_grad, grad_fn)``.
init_tensor = _init


# The attribute behind each reader below. Generated call paths (`compile.callgen`) write
# ``t.<field>`` into their source, as these getters read it: an attribute read in
# generated code costs no call, where the getter costs one per tensor and field.
FIELDS = {"array": "_data", "requires_grad": "_rg", "version": "_version", "node": "_node",
          "grad": "_grad"}

# The compiled call reads these for every argument: attrgetters run in C, with no Python
# frame per read.
array_of: Callable[[Tensor], np.ndarray] = operator.attrgetter(FIELDS["array"])
"""The array holding a tensor's data (shared, never copied)."""

requires_grad_of: Callable[[Tensor], bool] = operator.attrgetter(FIELDS["requires_grad"])
"""A tensor's ``requires_grad``, without the property's cost."""


version_cell_of: Callable[[Tensor], list] = operator.attrgetter(FIELDS["version"])
"""A tensor's version counter: a one-element list, shared by its views (``[0]`` is the
count of in-place writes)."""

cached_node_of: Callable[[Tensor], Any] = operator.attrgetter(FIELDS["node"])
"""The tape node a leaf or constant has been given as an op input (`tape_node`), or None
if it has none yet (a tensor with a ``grad_fn`` has none: its node is the ``grad_fn``)."""


def leaf_hooks_of(t: Tensor) -> list:
    """The gradient hooks of leaf ``t`` (``register_hook``, and the post-accumulate ones
    as `autograd.PostAccumulateHook`), in the order they run."""
    node = t._node
    return list(node._hooks) if node is not None else []


def set_array(t: Tensor, array: np.ndarray) -> None:
    """Make ``t`` hold ``array`` (compare swaps a captured tensor to float64 and back)."""
    t._data = array


# The slot's own setter, run in C: no Python frame per gradient a compiled step writes back.
set_grad: Callable[[Tensor, Tensor | None], None] = Tensor._grad.__set__
"""Set ``t.grad`` without the setter's checks or the tracer's write hook (to restore a
saved value, or to write back the gradient a compiled step computed)."""


def storage_of(t: Tensor) -> tuple[int, int]:
    """What ``t`` shares with the tensors ``t.detach()`` and ``t.data`` give (its array and
    version counter), as ids: equal for two tensors that are one value."""
    return id(t._data), id(t._version)


def version_of(t: Tensor) -> int:
    """How many times ``t``'s data has been changed in place."""
    return t._version[0]


def bump_version(t: Tensor) -> None:
    """Record that ``t``'s data was changed in place (by a compiled kernel)."""
    t._version[0] += 1


def saved_arrays(fn: Function) -> list[np.ndarray]:
    """The arrays a tape node keeps alive for backward: its saved tensors', then its output."""
    out: list[Any] = [s._data for s in fn._saved if isinstance(s, Tensor)]
    if isinstance(fn._out, np.ndarray):  # not a value packed by a saved-tensor hook
        out.append(fn._out)
    return out


def tape_node(t: Tensor) -> Any:
    """The node ``t`` is as an op input: its grad_fn, its leaf's ``AccumulateGrad``, or a
    ``const`` node."""
    return t._input_node()


def sub_scaled_(p: Tensor, g: Tensor, scale: Any, fused: bool = True) -> bool:
    """``p -= g * scale`` straight on the arrays, for an eager optimizer step outside
    autograd: ``p`` a plain (not view) float tensor or parameter, ``g`` of its shape and
    dtype, ``scale`` a Python number (weak: the product keeps ``g``'s dtype), nothing
    recording. Returns False, doing nothing, otherwise (the caller then writes the ops
    out). One in-place update per parameter, without the product's tensor and the two
    dispatches. Contiguous float32 arrays take BLAS's ``axpy``: one pass, each element
    rounded once, as PyTorch's ``p.add_(g, alpha=-lr)`` and the compiled float32 step
    compute it; other arrays, and ``fused=False`` (an update the compiled step does not
    fuse into one rounding, momentum SGD's), take ``p.sub_(g * scale)``'s two roundings."""
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
    if not (fused and axpy_(data, -scale, gd)):
        np.subtract(data, np.multiply(gd, scale), out=data)
    p._version[0] += 1
    return True


def _plain_float(t: Any, dtype: np.dtype | None = None) -> bool:
    """``t`` a tensor (not a view) holding a float array (of ``dtype``, when given)."""
    return (isinstance(t, Tensor) and type(t) is not _ViewTensor
            and t._data.dtype.kind == "f" and (dtype is None or t._data.dtype == dtype))


# The last step's bias corrections: a group's parameters share their step count and
# hyperparameters, so all but the first reuse them (the scalar operations cost about as
# much as an update of a small parameter).
_LAST_CORRECTIONS: list = [None, None]


def _bias_corrections(sd: np.ndarray, beta1: Any, beta2: Any, lr: Any,
                      dtype: np.dtype) -> tuple:
    """Adam's ``sqrt(1 - beta2 ** step)`` and ``lr / (1 - beta1 ** step)`` for the 0-d step
    count ``sd``, computed in float64 and cast to ``dtype`` (NumPy scalars: immutable)."""
    key = (sd.item(), sd.dtype, beta1, beta2, lr, type(beta1), type(beta2), type(lr), dtype)
    if _LAST_CORRECTIONS[0] == key:
        return _LAST_CORRECTIONS[1]
    step64 = sd.astype(np.float64)
    bc1 = np.subtract(1, np.power(beta1, step64))
    bc2_sqrt = np.sqrt(np.subtract(1, np.power(beta2, step64)))
    step_size = np.true_divide(lr, bc1)
    if dtype != np.float64:
        bc2_sqrt = bc2_sqrt.astype(dtype)
        step_size = step_size.astype(dtype)
    _LAST_CORRECTIONS[:] = [key, (bc2_sqrt, step_size)]
    return bc2_sqrt, step_size


def adam_update_(p: Tensor, g: Tensor, state: dict, lr: Any, betas: tuple, eps: Any,
                 weight_decay: Any, decoupled: bool, maximize: bool, amsgrad: bool) -> bool:
    """One `Adam` update of ``p`` (state ``step``, ``exp_avg``, ``exp_avg_sq`` and, with
    ``amsgrad``, ``max_exp_avg_sq``, all present) straight on the arrays, for an eager step
    outside autograd: the same NumPy operations, in the same order and dtypes, as the
    update written with tensor ops (``Adam._update``), so the same bits, with one version
    bump per in-place op as those ops make; temporaries are reused in place. Returns
    False, doing nothing, unless every operand is a plain float tensor of ``p``'s dtype,
    the hyperparameters Python numbers (weak scalars: they keep the arrays' dtype) and
    nothing records."""
    beta1, beta2 = betas
    for h in (lr, beta1, beta2, eps, weight_decay):
        if type(h) is not float and type(h) is not int:
            return False
    if _GRAD.value or current_trace() is not None:
        return False
    dtype = p._data.dtype if isinstance(p, Tensor) else None
    step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
    vmax = state["max_exp_avg_sq"] if amsgrad else None
    if (not _plain_float(p) or not _plain_float(g, dtype) or not _plain_float(m, dtype)
            or not _plain_float(v, dtype) or not _plain_float(step)
            or step._data.shape != () or (amsgrad and not _plain_float(vmax, dtype))):
        return False
    pd, gd, md, vd = p._data, g._data, m._data, v._data
    if not (gd.shape == pd.shape == md.shape == vd.shape):
        return False
    if maximize:
        gd = np.negative(gd)
    sd = step._data
    np.add(sd, 1, out=sd)
    step._version[0] += 1
    if weight_decay != 0:
        if decoupled:
            np.multiply(pd, 1 - lr * weight_decay, out=pd)
            p._version[0] += 1
        else:
            gd = gd + pd * weight_decay
    # One scratch array for every temporary (a 0-d result would be a NumPy scalar).
    t = np.empty_like(pd)
    # lerp_(m, g, 1 - beta1), from the nearer end.
    w = 1 - beta1
    np.subtract(gd, md, out=t)
    if w < 0.5:
        np.multiply(t, w, out=t)
        np.add(md, t, out=md)
    else:
        np.multiply(t, 1 - w, out=t)
        np.subtract(gd, t, out=md)
    m._version[0] += 1
    np.multiply(vd, beta2, out=vd)
    v._version[0] += 1
    np.multiply(gd, 1 - beta2, out=t)
    np.multiply(t, gd, out=t)
    np.add(vd, t, out=vd)
    v._version[0] += 1
    bc2_sqrt, step_size = _bias_corrections(sd, beta1, beta2, lr, dtype)
    if amsgrad:
        np.maximum(vmax._data, vd, out=vmax._data)
        vmax._version[0] += 1
        vd = vmax._data
    denom = np.sqrt(vd, out=t)
    np.true_divide(denom, bc2_sqrt, out=denom)
    np.add(denom, eps, out=denom)
    np.true_divide(md, denom, out=denom)
    np.multiply(denom, step_size, out=denom)
    np.subtract(pd, denom, out=pd)
    p._version[0] += 1
    return True
