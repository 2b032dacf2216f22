"""`dg.nn`: modules, layers, losses and `functional`."""

from . import functional
from .modules import (
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
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
    "BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "Linear", "MSELoss", "Module", "Parameter",
    "ReLU", "Sequential", "Sigmoid", "Tanh", "functional",
]
