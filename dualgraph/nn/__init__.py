"""`dg.nn`: modules, layers, losses and `functional`, laid out as `torch.nn` is."""

from . import functional, init, modules, parallel, utils
from .modules import *  # noqa: F403
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
    "TransformerEncoder", "TransformerEncoderLayer", "functional", "init", "parallel", "utils",
]
__all__ += modules.__all__
__all__.sort()
