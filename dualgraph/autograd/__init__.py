"""``dg.autograd``: PyTorch's ``torch.autograd`` namespace.

The engine lives in `dualgraph.eager.autograd`; this package gives its public entry
points the names PyTorch code imports them by, and adds custom ops (`Function`) and
`functional` (``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``hvp``, ``vhp``).

>>> (gx,) = dg.autograd.grad(x * x, [x])
>>> dg.autograd.backward([y], [dg.ones(3)])
"""

from ..eager.autograd import detect_anomaly
from ..eager.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ..eager.tensor import backward, grad
from . import functional
from .function import Function, FunctionCtx, once_differentiable

__all__ = ["Function", "FunctionCtx", "backward", "detect_anomaly", "enable_grad",
           "functional", "grad", "is_grad_enabled", "no_grad", "once_differentiable",
           "set_grad_enabled"]
