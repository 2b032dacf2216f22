"""``torch.nn.parameter``'s names, where programs import `Parameter` and `Buffer` from."""

from .modules.module import Buffer, Parameter

__all__ = ["Buffer", "Parameter"]
