"""`dg.nn.utils`: gradient clipping, parameter/vector conversion, packed sequences
(`rnn`), parametrizations (`parametrize`, `parametrizations`), pruning (`prune`) and the
hook-based weight and spectral normalisation, as PyTorch's."""

from . import parametrizations, parametrize, prune, rnn, stateless
from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .init import skip_init
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["rnn", "clip_grad_norm", "clip_grads_with_norm_", "skip_init", "clip_grad_norm_",
           "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "parametrizations", "parametrize", "prune",
           "remove_spectral_norm", "remove_weight_norm", "spectral_norm", "stateless",
           "weight_norm"]
