"""Transformer layers with PyTorch's signatures, parameter names and initialisation:
`Transformer`, `TransformerEncoder`, `TransformerEncoderLayer`, `TransformerDecoder`,
`TransformerDecoderLayer`, built from `MultiheadAttention`, `Linear`, `LayerNorm` and
`Dropout`, so they run eagerly and compile with no lowering of their own.

PyTorch's fused inference fast path and nested tensors are an implementation detail there;
here every call takes the reference path, which computes the same values.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import default_float
from ..eager.creation import full
from ..eager.internal import set_array
from ..ops import shape as S
from . import functional as F
from .modules import Dropout, LayerNorm, Linear, Module, ModuleList, MultiheadAttention
from .modules.module import _uniform
from .rnn import _factory_dtype


def _activation(activation: str | Callable) -> Callable:
    """PyTorch's legacy strings ``"relu"`` / ``"gelu"``, or any unary callable (a module
    such as ``nn.GELU()`` included)."""
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(f"activation must be a string or a callable, got "
                        f"{type(activation).__name__}")
    return activation


def _cast(module: Module, device: Any, dtype: Any) -> None:
    dt = _factory_dtype(device, dtype)
    if dt != default_float():
        module.to(dt)


def _clones(module: Module, n: int) -> ModuleList:
    """``n`` independent deep copies, as PyTorch's encoder and decoder stacks are made."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"num_layers must be a non-negative int, got {n!r}")
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Any:
    """A ``(sz, sz)`` causal mask: ``-inf`` above the diagonal, ``0.`` elsewhere."""
    dt = _factory_dtype(device, dtype)
    return S.triu(full((sz, sz), -math.inf, dtype=dt), diagonal=1)


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: self-attention, the feed-forward block,
    one LayerNorm and one dropout per residual block (``_blocks`` of them), and the
    residual wiring (the norm after each block, or before it with ``norm_first``).
    Submodules are created in PyTorch's order, so parameter names and order match."""

    _blocks = 2

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        if self._blocks == 3:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                     bias=bias, batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        for i in range(1, self._blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        for i in range(1, self._blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)
        _cast(self, device, dtype)

    def _residual(self, x: Any, norm: Module, block: Callable, *args: Any) -> Any:
        if self.norm_first:
            return x + block(norm(x), *args)
        return norm(x + block(x, *args))

    def _sa_block(self, x: Any, mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=bool(is_causal))[0]
        return self.dropout1(x)

    def _ff_block(self, x: Any) -> Any:
        last = getattr(self, f"dropout{self._blocks}")
        return last(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each with a residual connection and a
    LayerNorm (after the block; before it with ``norm_first=True``).

    >>> layer = dg.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    >>> out = layer(dg.randn(5, 2, 16))   # (seq, batch, d_model)
    """

    _blocks = 2

    def forward(self, src: Any, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Any:
        x = self._residual(src, self.norm1, self._sa_block, src_mask, src_key_padding_mask,
                           is_causal)
        return self._residual(x, self.norm2, self._ff_block)


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention over the target, attention over the encoder's output (``memory``) and
    a feed-forward block, each with a residual connection and a LayerNorm.

    >>> layer = dg.nn.TransformerDecoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    >>> out = layer(dg.randn(3, 2, 16), dg.randn(5, 2, 16))
    """

    _blocks = 3

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Any:
        x = self._residual(tgt, self.norm1, self._sa_block, tgt_mask, tgt_key_padding_mask,
                           tgt_is_causal)
        x = self._residual(x, self.norm2, self._mha_block, memory, memory_mask,
                           memory_key_padding_mask, memory_is_causal)
        return self._residual(x, self.norm3, self._ff_block)

    def _mha_block(self, x: Any, mem: Any, mask: Any, key_padding_mask: Any,
                   is_causal: bool) -> Any:
        x = self.multihead_attn(x, mem, mem, attn_mask=mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=bool(is_causal))[0]
        return self.dropout2(x)


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer (``layers``), then an optional ``norm``.

    >>> layer = dg.nn.TransformerEncoderLayer(16, 4, 32)
    >>> encoder = dg.nn.TransformerEncoder(layer, num_layers=2)
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        # Nested tensors are PyTorch's inference fast path; accepted, never used here.
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False
        self.mask_check = mask_check

    def forward(self, src: Any, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Any:
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=bool(is_causal),
                           src_key_padding_mask=src_key_padding_mask)
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """``num_layers`` copies of a decoder layer (``layers``), then an optional ``norm``.

    >>> layer = dg.nn.TransformerDecoderLayer(16, 4, 32)
    >>> decoder = dg.nn.TransformerDecoder(layer, num_layers=2)
    """

    def __init__(self, decoder_layer: Module, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=bool(tgt_is_causal),
                           memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """PyTorch's encoder-decoder ``nn.Transformer``: an `encoder` (a `TransformerEncoder`
    with a final LayerNorm) and a `decoder`; every weight matrix Xavier-uniform.

    >>> model = dg.nn.Transformer(d_model=16, nhead=4, num_encoder_layers=1,
    ...                           num_decoder_layers=1, dim_feedforward=32)
    >>> out = model(dg.randn(5, 2, 16), dg.randn(3, 2, 16))   # (3, 2, 16)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 custom_encoder: Any = None, custom_decoder: Any = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self._reset_parameters()
        _cast(self, device, dtype)
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src: Any, tgt: Any, src_mask: Any = None, tgt_mask: Any = None,
                memory_mask: Any = None, src_key_padding_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Any:
        batched = src.ndim == 3
        axis = 0 if self.batch_first else 1
        if batched and src.shape[axis] != tgt.shape[axis]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Any:
        """A ``(sz, sz)`` causal mask: ``-inf`` above the diagonal, ``0.`` elsewhere."""
        return generate_square_subsequent_mask(sz, device, dtype)

    def _reset_parameters(self) -> None:
        # Xavier uniform on every matrix, as PyTorch: bound sqrt(6 / (fan_in + fan_out)).
        for p in self.parameters():
            if p.ndim > 1:
                fan_out, fan_in = p.shape[0], int(np.prod(p.shape[1:]))
                bound = math.sqrt(6.0 / (fan_in + fan_out))
                set_array(p, _uniform(tuple(p.shape), bound).astype(p.dtype))
