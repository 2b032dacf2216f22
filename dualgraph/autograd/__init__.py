"""``dg.autograd``: PyTorch's ``torch.autograd`` namespace.

The engine lives in `dualgraph.eager.autograd`; this package gives its public entry
points the names PyTorch code imports them by, and adds custom ops (`Function`) and
`functional` (``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``hvp``, ``vhp``),
`forward_ad` (dual tensors: ``dual_level``, ``make_dual``, ``unpack_dual``), and the
finite-difference checks ``gradcheck`` and ``gradgradcheck``.

>>> (gx,) = dg.autograd.grad(x * x, [x])
>>> dg.autograd.backward([y], [dg.ones(3)])
"""

from typing import Any

from ..eager.autograd import detect_anomaly, set_detect_anomaly
from ..eager.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ..eager.tensor import backward
from ..eager.tensor import grad as _grad
from ..ops.mixin import TensorOps
from . import forward_ad, functional, graph, profiler
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["Function", "FunctionCtx", "GradcheckError", "Variable", "backward",
           "detect_anomaly", "enable_grad", "forward_ad", "functional", "grad", "graph",
           "gradcheck", "gradgradcheck", "is_grad_enabled", "no_grad", "once_differentiable",
           "profiler", "set_detect_anomaly", "set_grad_enabled"]


def Variable(data: Any, requires_grad: bool = False, volatile: bool = False) -> Any:  # noqa: N802
    """PyTorch's deprecated wrapper, kept for old tutorials (``Variable(x,
    requires_grad=True)``): a tensor sharing ``data``'s values, a leaf that requires grad
    if asked; ``volatile`` is accepted and ignored, as PyTorch does."""
    if not isinstance(data, TensorOps):  # eager, or traced inside dg.compile
        raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
    out = data.detach() if data.requires_grad or requires_grad else data
    return out.requires_grad_(True) if requires_grad else out


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``,
    with PyTorch's signature. ``only_inputs`` is accepted and ignored (PyTorch ignores it
    too); ``materialize_grads`` gives zeros instead of None for inputs the outputs do not
    depend on (and implies ``allow_unused``).

    >>> (gx,) = dg.autograd.grad(x * x, [x])
    """
    if is_grads_batched:
        raise NotImplementedError("autograd.grad(is_grads_batched=True) is not supported: "
                                  "map over the grad_outputs with dg.func.vmap instead")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    unused = bool(allow_unused) or materialize_grads
    out = _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, unused)
    if not materialize_grads:
        return out
    from ..eager.creation import zeros_like

    listed = [inputs] if not isinstance(inputs, (list, tuple)) else list(inputs)
    return tuple(zeros_like(x) if g is None else g for g, x in zip(out, listed))
