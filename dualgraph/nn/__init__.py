"""`dg.nn`: modules, layers, losses and `functional`."""

from . import functional
from .modules import (
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Linear,
    Module,
    MSELoss,
    Parameter,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)

__all__ = [
    "BCEWithLogitsLoss", "CrossEntropyLoss", "Linear", "MSELoss", "Module", "Parameter",
    "ReLU", "Sequential", "Sigmoid", "Tanh", "functional",
]
