"""Attention: scaled dot-product attention and `nn.MultiheadAttention`'s computation on
explicit weights."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import ShapeError
from ...ops import elementwise as E
from ...ops import linalg as L
from ...ops import reduce as R
from ...ops import shape as S
from ...ops import softmax as SM
from ._args import _check_input
from .dropouts import dropout
from .linear_maps import linear

__all__ = [
    "multi_head_attention_forward", "scaled_dot_product_attention",
]


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Any:
    """``softmax(q @ k^T * scale + mask) @ v`` over (..., L, E) queries and (..., S, E) keys:
    PyTorch's ``F.scaled_dot_product_attention``. A bool ``attn_mask`` marks the pairs that
    take part (True), a float one is added to the scores; both broadcast over the batch and
    head dims. ``is_causal`` is the top-left causal mask (query i sees keys 0..i). A query
    row that every mask hides gives zeros, as PyTorch's math kernel does. A composition of
    matmul, where, softmax (and dropout): it traces, fuses and compiles.

    >>> out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_input("scaled_dot_product_attention", t)
        if t.ndim < 2:
            raise ShapeError(f"scaled_dot_product_attention: {name} must have at least 2 "
                             f"dimensions, got shape {tuple(t.shape)}")
    if enable_gqa:
        key, value = _repeat_kv_heads(query, key), _repeat_kv_heads(query, value)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: query {tuple(query.shape)}, key "
                         f"{tuple(key.shape)} and value {tuple(value.shape)} do not fit "
                         "(need query[-1] == key[-1] and key[-2] == value[-2])")
    n_q, n_k = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = E.mul(L.matmul(query, S.transpose(key, -2, -1)), scale)
    if is_causal:
        attn_mask = np.tril(np.ones((n_q, n_k), np.bool_))
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            scores = E.where(attn_mask, scores, -math.inf)
        else:
            scores = E.add(scores, attn_mask)
    if attn_mask is not None and not (is_causal and n_k > 0):
        # A row with no visible key: softmax of all -inf is nan; PyTorch gives zeros. (The
        # causal mask alone hides no whole row: query i always sees key 0.)
        dead = E.eq(R.amax(scores, -1, keepdims=True), -math.inf)
        attn = E.where(dead, 0.0, SM.softmax(E.where(dead, 0.0, scores), -1))
    else:
        attn = SM.softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return L.matmul(attn, value)


def _repeat_kv_heads(query: Any, kv: Any) -> Any:
    """Grouped-query attention: each of ``kv``'s heads (dim -3) serves ``Hq / Hkv``
    consecutive query heads (PyTorch's ``repeat_interleave``), by a broadcast view."""
    if query.ndim < 3 or kv.ndim < 3:
        return kv
    hq, hk = query.shape[-3], kv.shape[-3]
    if hq == hk:
        return kv
    if hk == 0 or hq % hk:
        raise RuntimeError(f"scaled_dot_product_attention: number of heads in key/value "
                           f"({hk}) must divide the number of heads in query ({hq})")
    lead, (s_len, e) = tuple(kv.shape[:-3]), tuple(kv.shape[-2:])
    wide = S.broadcast_to(S.reshape(kv, lead + (hk, 1, s_len, e)),
                          lead + (hk, hq // hk, s_len, e))
    return S.reshape(wide, lead + (hq, s_len, e))


# Multi-head attention: `nn.MultiheadAttention`'s computation on explicit weights.
def _additive_mask(mask: Any, dtype: Any) -> Any:
    """A bool mask (True: may not attend) as 0 / -inf; a float mask as it is."""
    if mask is None or mask.dtype != np.bool_:
        return mask
    return E.where(mask, -math.inf, np.zeros((), dtype))


def _padded(mask: Any, added: int) -> Any:
    """An additive mask with ``added`` zero (attending) columns at the end of its last dim."""
    if mask is None or not added:
        return mask
    return S.concatenate([mask, E.mul(S.broadcast_to(S.getitem(mask, (Ellipsis, slice(0, 1))),
                                       tuple(mask.shape[:-1]) + (added,)), 0.0)], -1)


def multi_head_attention_forward(
    query: Any, key: Any, value: Any, embed_dim_to_check: int, num_heads: int,
    in_proj_weight: Any, in_proj_bias: Any, bias_k: Any, bias_v: Any, add_zero_attn: bool,
    dropout_p: float, out_proj_weight: Any, out_proj_bias: Any, training: bool = True,
    key_padding_mask: Any = None, need_weights: bool = True, attn_mask: Any = None,
    use_separate_proj_weight: bool = False, q_proj_weight: Any = None,
    k_proj_weight: Any = None, v_proj_weight: Any = None, static_k: Any = None,
    static_v: Any = None, average_attn_weights: bool = True, is_causal: bool = False,
) -> tuple:
    """PyTorch's ``F.multi_head_attention_forward`` over (L, N, E) (or unbatched (L, E))
    inputs: the input projections (packed ``in_proj_weight`` (3E, E), or
    ``q/k/v_proj_weight`` with ``use_separate_proj_weight``), ``num_heads`` heads of
    scaled dot-product attention and the output projection. Returns ``(output, weights)``,
    the weights averaged over heads unless ``average_attn_weights=False`` (``None`` when
    ``need_weights=False``). A bool ``attn_mask`` or ``key_padding_mask`` marks the pairs
    that may NOT attend; a float one is added to the scores. ``bias_k``/``bias_v`` (E)
    append one key and value per sequence, ``add_zero_attn`` one zero key and value per
    head, and ``static_k``/``static_v`` (N * H, S, D) replace the projected keys and
    values, as in PyTorch; the masks gain an attending column for each added key."""
    if (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k and bias_v must both be given or both be None")
    if bias_k is not None and (static_k is not None or static_v is not None):
        raise AssertionError("bias cannot be added to static key or value")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                           "the Transformer module method `generate_square_subsequent_mask`"
                           " to create this mask.")
    batched = query.ndim == 3
    if not batched:  # (L, E): one sequence
        query, key, value = (S.reshape(t, (t.shape[0], 1, t.shape[1]))
                             for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = S.reshape(key_padding_mask, (1, -1))
    e = query.shape[2]
    if e != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, "
                             f"but got {e}")
    h = num_heads
    d = e // h
    if d * h != e:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {h}")
    if use_separate_proj_weight:
        weights = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        weights = tuple(in_proj_weight[i * e:(i + 1) * e] for i in range(3))
    biases = (None,) * 3 if in_proj_bias is None else \
        tuple(in_proj_bias[i * e:(i + 1) * e] for i in range(3))
    parts = [linear(t, w, b) for t, w, b in zip((query, key, value), weights, biases)]
    n_l, n = query.shape[0], query.shape[1]
    if bias_k is not None:  # one more key and value per sequence: (S + 1, N, E)
        parts[1:] = [S.concatenate([p, S.broadcast_to(S.reshape(b, (1, 1, e)), (1, n, e))], 0)
                     for p, b in zip(parts[1:], (bias_k, bias_v))]
    # (T, N, E) -> (N, H, T, D)
    q, k, v = (S.permute(S.reshape(p, (p.shape[0], n, h, d)), 1, 2, 0, 3) for p in parts)
    if static_k is not None:
        k = S.reshape(static_k, (n, h, static_k.shape[1], d))
    if static_v is not None:
        v = S.reshape(static_v, (n, h, static_v.shape[1], d))
    if add_zero_attn:
        k, v = (S.concatenate([t, E.mul(S.getitem(t, (Ellipsis, slice(0, 1), slice(None))),
                                        0.0)], 2) for t in (k, v))
    n_s = k.shape[2]
    added = int(bias_k is not None) + int(bool(add_zero_attn))
    scores = E.mul(L.matmul(q, S.transpose(k, -2, -1)), 1.0 / math.sqrt(d))
    mask = _padded(_additive_mask(attn_mask, scores.dtype), added)
    if mask is not None:
        if mask.ndim == 3:  # (N * H, L, S)
            mask = S.reshape(mask, (n, h, n_l, n_s))
        scores = E.add(scores, mask)
    if key_padding_mask is not None:
        pad_mask = _padded(_additive_mask(key_padding_mask, scores.dtype), added)
        scores = E.add(scores, S.reshape(pad_mask, (n, 1, 1, n_s)))
    attn = SM.softmax(scores, -1)
    if training and dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    out = S.reshape(S.permute(L.matmul(attn, v), 2, 0, 1, 3), (n_l, n, e))
    out = linear(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = S.reshape(out, (n_l, e))
    if not need_weights:
        return out, None
    weights_out = R.mean(attn, 1) if average_attn_weights else attn
    if not batched:
        weights_out = S.reshape(weights_out, tuple(weights_out.shape[1:]))
    return out, weights_out

