"""The layers of `dg.nn`, one module per family as in `torch.nn.modules`."""

from __future__ import annotations

from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .attention import (
    MultiheadAttention,
)
from .container import (
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from .conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from .distance import (
    CosineSimilarity,
    PairwiseDistance,
)
from .dropout import (
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
)
from .flatten import (
    Flatten,
    Unflatten,
)
from .fold import (
    Fold,
    Unfold,
)
from .linear import (
    Identity,
    Linear,
)
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
)
from .module import (
    Module,
    Parameter,
)
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    LayerNorm,
)
from .padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .pixelshuffle import (
    PixelShuffle,
    PixelUnshuffle,
)
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from .sparse import (
    Embedding,
    EmbeddingBag,
)
from .upsampling import (
    Upsample,
)

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "CELU", "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "Conv1d", "Conv2d", "Conv3d",
    "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "CosineSimilarity",
    "CrossEntropyLoss", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "ELU", "Embedding",
    "EmbeddingBag", "Flatten", "Fold", "GELU", "GLU", "GroupNorm", "Hardshrink", "Hardsigmoid",
    "Hardswish", "Hardtanh", "HuberLoss", "Identity", "InstanceNorm1d", "InstanceNorm2d",
    "KLDivLoss", "L1Loss", "LayerNorm", "LeakyReLU", "Linear", "LogSigmoid", "LogSoftmax",
    "MSELoss", "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "Mish", "Module", "ModuleDict", "ModuleList", "MultiheadAttention", "NLLLoss", "PReLU",
    "PairwiseDistance", "Parameter", "ParameterDict", "ParameterList", "PixelShuffle",
    "PixelUnshuffle", "ReLU", "ReLU6", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "SELU", "Sequential", "SiLU",
    "Sigmoid", "SmoothL1Loss", "SoftMarginLoss", "Softmax", "Softmin", "Softplus", "Softshrink",
    "Softsign", "Tanh", "Tanhshrink", "Threshold", "Unflatten", "Unfold", "Upsample", "ZeroPad1d",
    "ZeroPad2d", "ZeroPad3d",
]
