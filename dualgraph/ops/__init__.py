"""The op registry and the functional form of every primitive."""

from ..ir.optable import install_ops
from . import elementwise, linalg, math, nnops, random, reduce, shape  # noqa: F401  (registers)
from .registry import OPS, OpDef, register

# The IR checks and runs graphs with the registry's rules, but must not import ops/ (ops/
# imports the IR), so the registry is handed to it here.
install_ops(OPS)

__all__ = ["OPS", "OpDef", "register"]
