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
# activation modules.
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
# normalisation and modules.
from .modules import (  # noqa: E402
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    Identity,
    InstanceNorm1d,
    InstanceNorm2d,
    LayerNorm,
    ModuleDict,
    ModuleList,
)

__all__ += [
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "Identity", "InstanceNorm1d",
    "InstanceNorm2d", "LayerNorm", "ModuleDict", "ModuleList",
]
# convolution modules.
from .modules import Conv1d, Conv2d, ConvTranspose2d, Fold, Unfold  # noqa: E402

__all__ += ["Conv1d", "Conv2d", "ConvTranspose2d", "Fold", "Unfold"]
# indexing.
from .modules import Embedding  # noqa: E402

__all__ += ["Embedding"]
# pooling, resampling and reshaping modules.
from .modules import (  # noqa: E402
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    Flatten,
    MaxPool1d,
    MaxPool2d,
    Unflatten,
    Upsample,
)

__all__ += [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "AvgPool1d", "AvgPool2d", "Flatten", "MaxPool1d", "MaxPool2d", "Unflatten", "Upsample",
]
# losses and attention.
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
# Recurrent layers.
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: E402

__all__ += ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]
# Transformer layers.
from .transformer import (  # noqa: E402
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ += ["Transformer", "TransformerDecoder", "TransformerDecoderLayer",
            "TransformerEncoder", "TransformerEncoderLayer"]
# Initialisation, gradient clipping, data-parallel wrappers.
from . import init, parallel, utils  # noqa: E402
from .parallel import DataParallel  # noqa: E402

__all__ += ["DataParallel", "init", "parallel", "utils"]
# Volumetric convolution and pooling, unpooling, gated and pixel-rearranging layers.
from .modules import (  # noqa: E402
    GLU,
    AvgPool3d,
    Conv3d,
    ConvTranspose3d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
    PixelShuffle,
    PixelUnshuffle,
)

__all__ += ["GLU", "AvgPool3d", "Conv3d", "ConvTranspose3d", "MaxPool3d", "MaxUnpool1d",
            "MaxUnpool2d", "MaxUnpool3d", "PixelShuffle", "PixelUnshuffle"]
# Padding modules, channel dropout, PReLU and the shrinking activations, ConvTranspose1d,
# parameter containers.
from .layers_extra import (  # noqa: E402  # noqa: E402
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ConvTranspose1d,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    EmbeddingBag,
    Hardshrink,
    ParameterDict,
    ParameterList,
    PReLU,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    Softshrink,
    Tanhshrink,
    Threshold,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)

__all__ += ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
            "ConstantPad3d", "ConvTranspose1d", "Dropout1d", "Dropout2d", "Dropout3d",
            "EmbeddingBag", "Hardshrink", "PReLU", "ParameterDict", "ParameterList",
            "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
            "ReplicationPad2d", "ReplicationPad3d", "Softshrink", "Tanhshrink", "Threshold",
            "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]
