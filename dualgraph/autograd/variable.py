"""``torch.autograd.variable``, where old programs import ``Variable`` from."""

from . import Variable

__all__ = ["Variable"]
