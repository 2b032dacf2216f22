"""The op registry and the functional form of every primitive."""

from . import elementwise, linalg, reduce, shape  # noqa: F401  (registers the ops)
from .registry import OPS, OpDef, register

__all__ = ["OPS", "OpDef", "register"]
