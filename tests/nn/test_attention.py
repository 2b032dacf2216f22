"""F.scaled_dot_product_attention: masks, causal, errors, compiled. Values
and gradients against PyTorch are the golden program `attention`."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F

RNG = np.random.default_rng(0)
Q = RNG.standard_normal((2, 3, 4))
K = RNG.standard_normal((2, 5, 4))
V = RNG.standard_normal((2, 5, 3))


def _ref(q, k, v, mask=None, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def test_plain_and_causal_match_reference():
    q, k, v = dg.tensor(Q), dg.tensor(K), dg.tensor(V)
    dg.testing.assert_close(F.scaled_dot_product_attention(q, k, v).numpy(), _ref(Q, K, V),
                            rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)
    causal = np.tril(np.ones((3, 5), bool))  # top-left: query i sees keys 0..i
    dg.testing.assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy(),
                            _ref(Q, K, V, causal), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)


def test_bool_mask_broadcasts_and_float_mask_adds():
    q, k, v = dg.tensor(Q), dg.tensor(K), dg.tensor(V)
    mask = RNG.random((5,)) > 0.3
    mask[0] = True
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=dg.tensor(mask)).numpy()
    dg.testing.assert_close(got, _ref(Q, K, V, mask), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    bias = np.where(mask, 0.0, -np.inf)
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=dg.tensor(bias), scale=0.7).numpy()
    dg.testing.assert_close(got, _ref(Q, K, V, mask, 0.7), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)


def test_fully_masked_row_is_zero_with_finite_gradients():
    q = dg.tensor(Q, requires_grad=True)
    mask = np.ones((3, 5), bool)
    mask[1] = False
    out = F.scaled_dot_product_attention(q, dg.tensor(K), dg.tensor(V), attn_mask=mask)
    assert (out.numpy()[:, 1] == 0).all()
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all() and (q.grad.numpy()[:, 1] == 0).all()


def test_errors():
    q = dg.ones(1, 3, 4)
    with pytest.raises(RuntimeError, match="should not be set when is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=dg.ones(3, 3) > 0, is_causal=True)
    with pytest.raises(ValueError, match=r"\(1, 3, 4\).*\(1, 3, 2\)"):
        F.scaled_dot_product_attention(q, dg.ones(1, 3, 2), q)


def test_dropout_one_zeroes_everything():
    q = dg.tensor(Q)
    assert (F.scaled_dot_product_attention(q, dg.tensor(K), dg.tensor(V), dropout_p=1.0)
            .numpy() == 0).all()


def test_compiled_equals_eager_and_traces_once():
    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    f = dg.compile(attend)
    for seed in (1, 2):
        r = np.random.default_rng(seed)
        args = [r.standard_normal(a.shape).astype(np.float32) for a in (Q, K, V)]
        ts = [dg.tensor(a, requires_grad=True) for a in args]
        te = [dg.tensor(a, requires_grad=True) for a in args]
        out, ref = f(*ts), attend(*te)
        dg.testing.assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                                check_dtype=False)
        out.sum().backward()
        ref.sum().backward()
        for a, b in zip(ts, te):
            dg.testing.assert_close(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-6,
                                    equal_nan=True, check_dtype=False)
    assert f.stats.traces == 1


def test_multihead_attention_parameters_and_shapes():
    dg.manual_seed(0)
    m = dg.nn.MultiheadAttention(8, 2)
    names = dict(m.named_parameters())
    assert {k: tuple(v.shape) for k, v in names.items()} == {
        "in_proj_weight": (24, 8), "in_proj_bias": (24,), "out_proj.weight": (8, 8),
        "out_proj.bias": (8,)}
    assert (names["in_proj_bias"].numpy() == 0).all()
    assert np.abs(names["in_proj_weight"].numpy()).max() <= math.sqrt(6 / 32)
    x = dg.randn(5, 3, 8)
    out, w = m(x, x, x)
    assert out.shape == (5, 3, 8) and w.shape == (3, 5, 5)
    sums = w.numpy().sum(-1)
    dg.testing.assert_close(sums, np.ones_like(sums), rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    _, w_heads = m(x, x, x, average_attn_weights=False)
    assert w_heads.shape == (3, 2, 5, 5)
    out_bf, none = dg.nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x, need_weights=False)
    assert out_bf.shape == (5, 3, 8) and none is None
    with pytest.raises(AssertionError, match="divisible"):
        dg.nn.MultiheadAttention(8, 3)


def test_mha_forward_added_keys_compiled_equals_eager():
    # bias_k/bias_v, add_zero_attn (with padded masks) and static_k/static_v in one program.
    r = np.random.default_rng(5)
    shapes = [(2, 2, 4), (3, 2, 4), (12, 4), (12,), (4,), (4,), (4, 4), (4, 3, 2)]
    args = [r.standard_normal(s).astype(np.float32) for s in shapes]
    pad = dg.tensor([[False, True, False], [False] * 3])

    def mha(q, k, w, b, bk, bv, ow, sk):
        a = F.multi_head_attention_forward(q, k, k, 4, 2, w, b, bk, bv, True, 0.0, ow, None,
                                           key_padding_mask=pad, average_attn_weights=False)
        s = F.multi_head_attention_forward(q, k, k, 4, 2, w, b, None, None, False, 0.0, ow,
                                           None, static_k=sk, static_v=sk * 2.0)[0]
        return (a[0] * a[0]).sum() + a[1].sum() + s.sum()

    f = dg.compile(mha)
    ts = [dg.tensor(a, requires_grad=True) for a in args]
    te = [dg.tensor(a, requires_grad=True) for a in args]
    out, ref = f(*ts), mha(*te)
    dg.testing.assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5, check_dtype=False)
    out.backward()
    ref.backward()
    for a, b in zip(ts, te):
        dg.testing.assert_close(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5,
                                check_dtype=False)
    assert f.stats.traces == 1
