"""``dg.autograd``: PyTorch's ``torch.autograd`` namespace.

The engine lives in `dualgraph.eager.autograd`; this module only gives its public entry
points the names PyTorch code imports them by.

>>> (gx,) = dg.autograd.grad(x * x, [x])
>>> dg.autograd.backward([y], [dg.ones(3)])
"""

from .eager.autograd import detect_anomaly
from .eager.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .eager.tensor import backward, grad

__all__ = ["backward", "detect_anomaly", "enable_grad", "grad", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]
