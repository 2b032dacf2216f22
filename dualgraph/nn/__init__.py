"""`dg.nn`: modules, layers, losses and `functional`, laid out as `torch.nn` is."""

from . import common_types, functional, init, modules, parallel, parameter, utils
from .modules import *  # noqa: F403

# The module paths programs import from as under torch (``from torch.nn.parameter import
# Parameter``, ``from torch.nn.modules.utils import _pair``), loaded with the package so
# that a program importing them under the name ``torch`` finds them.
from .modules import batchnorm, instancenorm  # noqa: F401
from .modules import rnn as _modules_rnn  # noqa: F401
from .modules import transformer as _modules_transformer  # noqa: F401
from .modules import utils as _modules_utils  # noqa: F401
from .parallel import DataParallel
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "DataParallel", "GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell",
    "RNNCellBase", "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerEncoderLayer", "common_types", "functional", "init",
    "parallel", "parameter", "utils",
]
__all__ += modules.__all__
__all__.sort()
