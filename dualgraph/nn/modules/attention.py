"""`MultiheadAttention`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

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
            self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, np.float32))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = Parameter(np.zeros(embed_dim, np.float32))

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True, is_causal: bool = False) -> tuple:
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask`"
                               " to create this mask.")
        batched = query.ndim == 3
        if not batched:  # (L, E): one sequence
            query, key, value = (t.reshape(t.shape[0], 1, t.shape[1])
                                 for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape(1, -1)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        # Now (L, N, E), PyTorch's own layout.
        e, h, d = self.embed_dim, self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        parts = [F.linear(t, w[i * e:(i + 1) * e], None if b is None else b[i * e:(i + 1) * e])
                 for i, t in enumerate((query, key, value))]
        n_l, n = query.shape[0], query.shape[1]
        n_s = key.shape[0]
        # (T, N, E) -> (N, H, T, D)
        q, k, v = (p.reshape(p.shape[0], n, h, d).permute(1, 2, 0, 3) for p in parts)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = _additive_mask(attn_mask, scores.dtype)
        if mask is not None:
            if mask.ndim == 3:  # (N * H, L, S)
                mask = mask.reshape(n, h, n_l, n_s)
            scores = scores + mask
        if key_padding_mask is not None:
            pad = _additive_mask(key_padding_mask, scores.dtype)
            scores = scores + pad.reshape(n, 1, 1, n_s)
        attn = F.softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            attn = F.dropout(attn, self.dropout)
        out = (attn @ v).permute(2, 0, 1, 3).reshape(n_l, n, e)
        out = self.out_proj(out)
        if not batched:
            out = out.reshape(n_l, e)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = attn.mean(1) if average_attn_weights else attn
        if not batched:
            weights = weights.reshape(weights.shape[1:])
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _additive_mask(mask: Any, dtype: Any) -> Any:
    """A bool mask (True: may not attend) as 0 / -inf; a float mask as it is."""
    if mask is None:
        return None
    from ...ops import elementwise as E

    if mask.dtype == np.bool_:
        return E.where(mask, -math.inf, np.zeros((), dtype))
    return mask
