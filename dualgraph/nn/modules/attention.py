"""`MultiheadAttention`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...dtypes import default_float
from .. import functional as F
from .linear import Linear
from .module import Module, Parameter, _uniform, accepts_device_dtype

__all__ = ["MultiheadAttention"]


@accepts_device_dtype
class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention``: one packed input projection (``in_proj_weight``
    (3E, E), ``in_proj_bias``), ``num_heads`` heads of scaled dot-product attention and
    ``out_proj``; PyTorch's initialisation (Xavier-uniform input projection, zero biases).
    ``forward`` returns ``(attn_output, attn_weights)``, the weights averaged over heads by
    default (``None`` when ``need_weights=False``). A bool ``attn_mask`` or
    ``key_padding_mask`` marks the pairs that may NOT attend (PyTorch's convention here,
    the opposite of ``scaled_dot_product_attention``'s).

    >>> mha = dg.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> out, weights = mha(x, x, x)
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: Any = None,
                 vdim: Any = None, batch_first: bool = False) -> None:
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or \
                vdim not in (None, embed_dim):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and "
                                      "kdim/vdim other than embed_dim are not supported")
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        # Xavier uniform over the packed (3E, E) matrix, as PyTorch's _reset_parameters.
        bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))
        self.in_proj_weight = Parameter(_uniform((3 * embed_dim, embed_dim), bound))
        if bias:
            self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, default_float()))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = Parameter(np.zeros(embed_dim, default_float()))

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True, is_causal: bool = False) -> tuple:
        batched = query.ndim == 3
        if batched and self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, None, None, False, self.dropout, self.out_proj.weight,
            self.out_proj.bias, training=self.training, key_padding_mask=key_padding_mask,
            need_weights=need_weights, attn_mask=attn_mask,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"

