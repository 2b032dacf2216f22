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

# isort: split
# Issue 12: activation modules.
from .modules import (  # noqa: E402
    CELU,
    ELU,
    GELU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    ReLU6,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softsign,
)

__all__ += [
    "CELU", "ELU", "GELU", "SELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
    "LogSigmoid", "LogSoftmax", "Mish", "ReLU6", "SiLU", "Softmax", "Softmin", "Softplus",
    "Softsign",
]

# isort: split
# Issue 12: losses and attention.
from .modules import (  # noqa: E402
    BCELoss,
    CosineSimilarity,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MultiheadAttention,
    NLLLoss,
    PairwiseDistance,
    SmoothL1Loss,
    SoftMarginLoss,
)

__all__ += ["BCELoss", "CosineSimilarity", "HuberLoss", "KLDivLoss", "L1Loss",
            "MultiheadAttention", "NLLLoss", "PairwiseDistance", "SmoothL1Loss",
            "SoftMarginLoss"]
