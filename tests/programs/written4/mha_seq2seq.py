# In the manner of hand-built transformer encoder-decoders over nn.MultiheadAttention
# (batch_first=True): sinusoidal positions in a registered buffer, a key_padding_mask from
# `src == PAD_IDX`, a causal attn_mask from torch.triu(torch.ones(T, T, dtype=torch.bool),
# diagonal=1), post-norm residual blocks with LayerNorm, cross-attention whose keys are
# masked by the source padding, CrossEntropyLoss(ignore_index=PAD_IDX), Adam with a
# warmup LambdaLR, clip_grad_norm_, attention weights averaged over heads for a look,
# and greedy decoding.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn

PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return x + self.pe[:, :x.size(1)]


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, src_key_padding_mask):
        attn_out, _ = self.self_attn(x, x, x, key_padding_mask=src_key_padding_mask, need_weights=False)
        x = self.norm1(x + attn_out)
        x = self.norm2(x + self.ff(x))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, x, memory, tgt_mask, tgt_key_padding_mask, memory_key_padding_mask):
        attn_out, _ = self.self_attn(x, x, x, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask)
        x = self.norm1(x + attn_out)
        attn_out, weights = self.cross_attn(x, memory, memory, key_padding_mask=memory_key_padding_mask)
        x = self.norm2(x + attn_out)
        x = self.norm3(x + self.ff(x))
        return x, weights


class Seq2Seq(nn.Module):
    def __init__(self, vocab, d_model=16, n_heads=2, d_ff=32, n_layers=1):
        super().__init__()
        self.src_emb = nn.Embedding(vocab, d_model, padding_idx=PAD_IDX)
        self.tgt_emb = nn.Embedding(vocab, d_model, padding_idx=PAD_IDX)
        self.pos = PositionalEncoding(d_model)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.out = nn.Linear(d_model, vocab)
        self.d_model = d_model

    def encode(self, src):
        src_mask = src == PAD_IDX
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x, src_mask

    def decode(self, tgt, memory, src_mask):
        T = tgt.size(1)
        tgt_mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tgt.device), diagonal=1)
        tgt_pad = tgt == PAD_IDX
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        for layer in self.decoder:
            x, weights = layer(x, memory, tgt_mask, tgt_pad, src_mask)
        return self.out(x), weights

    def forward(self, src, tgt):
        memory, src_mask = self.encode(src)
        logits, _ = self.decode(tgt, memory, src_mask)
        return logits


def make_batch(rng, batch, src_len, vocab):
    src = np.full((batch, src_len), PAD_IDX)
    tgt = np.full((batch, src_len + 2), PAD_IDX)
    for i in range(batch):
        n = int(rng.integers(2, src_len + 1))
        s = rng.integers(3, vocab, n)
        src[i, :n] = s
        tgt[i, 0] = BOS_IDX
        tgt[i, 1:n + 1] = s[::-1]
        tgt[i, n + 1] = EOS_IDX
    return torch.tensor(src), torch.tensor(tgt)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(9)
    vocab = 10
    model = Seq2Seq(vocab)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    batches = [make_batch(rng, 8, 5, vocab) for _ in range(6)]
    criterion = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    warmup = 4
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min((step + 1) / warmup, 1.0))

    def train_step(src, tgt):
        tgt_input = tgt[:, :-1]
        tgt_out = tgt[:, 1:]
        logits = model(src, tgt_input)
        optimizer.zero_grad()
        loss = criterion(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        model.train()
        for src, tgt in batches:
            loss = step(src, tgt)
            scheduler.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        src, tgt = batches[0]
        memory, src_mask = model.encode(src)
        ys = torch.full((src.size(0), 1), BOS_IDX, dtype=torch.long)
        for i in range(4):
            logits, attn = model.decode(ys, memory, src_mask)
            next_word = logits[:, -1].argmax(dim=-1, keepdim=True)
            ys = torch.cat([ys, next_word], dim=1)
        losses += ys.flatten().tolist()
        losses.append(attn.sum().item())
        losses.append(attn[:, :, -1].sum().item())
    return {"losses": losses, "weights": w, "fn": step}
