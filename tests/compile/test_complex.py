"""Complex values inside ``dg.compile``: each is a pair of traced real values and the
complex ops decompose into real ops at trace time, so a compiled training step through
Meta's LLaMA rotary embedding, and one through FNO's spectral layer and an STFT round trip,
give the eager answers. Each compiled step serves many checks (complex arguments, complex
outputs, gradients, the optimizer step)."""

from __future__ import annotations

import math

import numpy as np

import dualgraph as torch
import dualgraph.nn.functional as F
from dualgraph import nn


# ---- Meta's LLaMA (llama/model.py), the rotary embedding and one block, as written there
def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)  # type: ignore
    freqs = torch.outer(t, freqs).float()  # type: ignore
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    return freqs_cis


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, freqs_cis, mask):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        xq, keys, values = xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class Block(nn.Module):
    def __init__(self, dim: int, n_heads: int, hidden: int):
        super().__init__()
        self.attention = Attention(dim, n_heads)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)

    def forward(self, x, freqs_cis, mask):
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask)
        n = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


def test_llama_block_training_step_compiled_equals_eager():
    dim, heads, seqlen = 16, 2, 6
    freqs_cis = precompute_freqs_cis(dim // heads, seqlen * 2)[:seqlen]
    mask = torch.full((seqlen, seqlen), float("-inf")).triu(1)
    x = torch.tensor(np.random.default_rng(0).standard_normal((2, seqlen, dim)),
                     dtype=torch.float32)
    target = torch.tensor(np.random.default_rng(1).standard_normal((2, seqlen, dim)),
                          dtype=torch.float32)

    def run(compiled: bool) -> tuple:
        torch.manual_seed(0)
        block = Block(dim, heads, 24)
        opt = torch.optim.AdamW(block.parameters(), lr=1e-2)

        def step(x, freqs_cis):
            out = block(x, freqs_cis, mask)
            loss = F.mse_loss(out, target)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss, freqs_cis * 2j  # a complex output, from a complex argument

        fn = torch.compile(step, strict=True) if compiled else step
        results = [fn(x, freqs_cis) for _ in range(3)]
        weights = [p.detach().numpy().copy() for p in block.parameters()]
        return results, weights, fn

    eager, w_eager, _ = run(False)
    compiled, w_compiled, fn = run(True)
    assert fn.stats.traces == 1 and fn.stats.calls == 3 and fn.stats.kernels > 0
    for (le, ze), (lc, zc) in zip(eager, compiled):
        torch.testing.assert_close(lc.item(), le.item(), rtol=1e-5, atol=0, check_dtype=False)
        assert zc.dtype == torch.complex64 and zc.shape == (seqlen, dim // heads // 2)
        torch.testing.assert_close(zc.numpy(), ze.numpy(), rtol=1e-6, atol=0, check_dtype=False)
    for a, b in zip(w_compiled, w_eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, check_dtype=False)


class SpectralConv1d(nn.Module):
    """FNO's spectral convolution (its fourier_1d.py SpectralConv1d), as written there."""

    def __init__(self, in_channels, out_channels, modes1):
        super().__init__()
        self.in_channels, self.out_channels, self.modes1 = in_channels, out_channels, modes1
        self.scale = 1 / (in_channels * out_channels)
        self.weights1 = nn.Parameter(
            self.scale * torch.rand(in_channels, out_channels, self.modes1, dtype=torch.cfloat))

    def compl_mul1d(self, input, weights):  # noqa: A002 - as written there
        return torch.einsum("bix,iox->box", input, weights)

    def forward(self, x):
        batchsize = x.shape[0]
        x_ft = torch.fft.rfft(x)
        out_ft = torch.zeros(batchsize, self.out_channels, x.size(-1) // 2 + 1,
                             device=x.device, dtype=torch.cfloat)
        out_ft[:, :, :self.modes1] = self.compl_mul1d(x_ft[:, :, :self.modes1], self.weights1)
        return torch.fft.irfft(out_ft, n=x.size(-1))


def test_spectral_layer_and_stft_compiled_equal_eager():
    # Inside dg.compile the FFTs decompose into real DFT products: one trace, real kernels.
    torch.manual_seed(0)
    layer = SpectralConv1d(3, 2, 4)
    x = torch.tensor(np.random.default_rng(3).standard_normal((2, 3, 10)), dtype=torch.float32)
    window = torch.hann_window(8)

    def step(x):
        y = layer(x)
        loss = (y * y).sum() + torch.fft.fftshift(torch.fft.fft(y, norm="ortho")).abs().sum()
        spec = torch.stft(y.flatten(0, 1), 8, hop_length=2, window=window, return_complex=True)
        back = torch.istft(spec * 0.5, 8, hop_length=2, window=window, length=10)
        loss = loss + spec.abs().mean() + back.pow(2).sum()
        loss.backward()
        return loss

    eager = step(x).item()
    g_eager = layer.weights1.grad.numpy()
    assert g_eager.dtype == np.complex64
    layer.weights1.grad = None
    f = torch.compile(step, strict=True)
    compiled = f(x).item()
    assert f.stats.traces == 1 and f.stats.kernels > 0
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=0, check_dtype=False)
    torch.testing.assert_close(layer.weights1.grad.numpy(), g_eager, rtol=1e-4, atol=1e-6,
                               check_dtype=False)


def test_a_pair_made_outside_and_first_stacked_inside_stays_eager():
    # llama's Transformer keeps torch.polar's result on self and first slices it inside the
    # step: the slice stacks the pair into storage, which must stay an eager tensor on the
    # object (a traced one would have escaped into the eager code after the call).
    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.freqs_cis = precompute_freqs_cis(4, 8)

        def forward(self, x, start_pos: int):
            self.freqs_cis = self.freqs_cis.to(x.device)
            f = self.freqs_cis[start_pos: start_pos + x.shape[1]]
            return torch.view_as_real(torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * f)

    x = torch.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), dtype=torch.float32)
    want = Rotary()(x, 1)
    m = Rotary()
    fn = torch.compile(m)
    for _ in range(2):
        torch.testing.assert_close(fn(x, 1), want, rtol=1e-6, atol=0)
    assert fn.stats.traces == 1
    # eagerly after the compiled calls, the memo on the module is usable
    torch.testing.assert_close(m(x, 1), want, rtol=1e-6, atol=0)
    torch.testing.assert_close(torch.view_as_real(m.freqs_cis),
                               torch.view_as_real(Rotary().freqs_cis))
