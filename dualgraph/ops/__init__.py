"""The op registry and the functional form of every primitive."""

from ..ir.optable import install_ops
from . import (  # noqa: F401  (importing each family registers its ops)
    activation,
    conv,
    custom,
    decomp,
    elementwise,
    gather,
    index,
    linalg,
    loss,
    math,
    matrix,
    norm,
    pool,
    precision,
    products,
    random,
    recurrent,
    reduce,
    scan,
    shape,
    softmax,
    special,
    statistics,
)

# Importing the op modules registers their ops.
from .broadcast import add_axis_aliases
from .registry import OPS, OpDef, register

# The IR checks and runs graphs with the registry's rules, but must not import ops/ (ops/
# imports the IR), so the registry is handed to it here.
install_ops(OPS)

# ``axis=`` is ``dim=`` for every public function that takes ``dim`` (PyTorch's parser).
for _family in (conv, decomp, elementwise, gather, index, linalg, loss, math, matrix, norm, pool,
                products, random, recurrent, reduce, scan, shape, softmax, special, statistics):
    add_axis_aliases(vars(_family))

__all__ = ["OPS", "OpDef", "register"]
