# In the manner of BlinkDL/RWKV-LM's RWKV-v4 model (Apache-2.0 licence) as its plain-PyTorch
# ports write it: token shift by ``nn.ZeroPad2d((0, 0, 1, -1))`` (a negative pad that
# crops), ``time_mix_k/v/r`` parameters of shape (1, 1, C) mixing ``x * m + xx * (1 - m)``,
# ``time_decay``/``time_first`` set under ``torch.no_grad()`` from ``torch.ones`` ratios
# and ``math.log(0.3)``-based curves, the WKV recurrence written as a Python loop with
# ``torch.maximum`` and ``torch.exp`` in the numerically stable form, ``torch.sigmoid(r) *
# wkv``, channel mixing with ``torch.square(torch.relu(k))``, LayerNorm ``ln0`` on the
# first block, a ``head`` tied to nothing, weight decay only for 2-D ``named_parameters``
# via ``set``s of names, and ``torch.optim.Adam(..., eps=1e-8)`` in two groups.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class RWKV_TimeMix(nn.Module):
    def __init__(self, args, layer_id):
        super().__init__()
        self.layer_id = layer_id
        n_embd = args.n_embd
        attn_sz = n_embd
        with torch.no_grad():
            ratio_0_to_1 = layer_id / (args.n_layer - 1)
            ratio_1_to_almost0 = 1.0 - (layer_id / args.n_layer)
            ddd = torch.ones(1, 1, n_embd)
            for i in range(n_embd):
                ddd[0, 0, i] = i / n_embd
            decay_speed = torch.ones(attn_sz)
            for h in range(attn_sz):
                decay_speed[h] = -5 + 8 * (h / (attn_sz - 1)) ** (0.7 + 1.3 * ratio_0_to_1)
            self.time_decay = nn.Parameter(decay_speed)
            zigzag = torch.tensor([(i + 1) % 3 - 1 for i in range(attn_sz)]) * 0.5
            self.time_first = nn.Parameter(torch.ones(attn_sz) * math.log(0.3) + zigzag)
            self.time_mix_k = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
            self.time_mix_v = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
            self.time_mix_r = nn.Parameter(torch.pow(ddd, 0.5 * ratio_1_to_almost0))
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.key = nn.Linear(n_embd, attn_sz, bias=False)
        self.value = nn.Linear(n_embd, attn_sz, bias=False)
        self.receptance = nn.Linear(n_embd, attn_sz, bias=False)
        self.output = nn.Linear(attn_sz, n_embd, bias=False)

    def wkv(self, w, u, k, v):
        B, T, C = k.size()
        w = -torch.exp(w)
        aa = torch.zeros(B, C)
        bb = torch.zeros(B, C)
        pp = torch.full((B, C), -1e38)
        out = []
        for t in range(T):
            kk = k[:, t]
            vv = v[:, t]
            ww = u + kk
            p = torch.maximum(pp, ww)
            e1 = torch.exp(pp - p)
            e2 = torch.exp(ww - p)
            out.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
            ww = w + pp
            p = torch.maximum(ww, kk)
            e1 = torch.exp(ww - p)
            e2 = torch.exp(kk - p)
            aa = e1 * aa + e2 * vv
            bb = e1 * bb + e2
            pp = p
        return torch.stack(out, dim=1)

    def forward(self, x):
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k = self.key(xk)
        v = self.value(xv)
        r = self.receptance(xr)
        sr = torch.sigmoid(r)
        rwkv = sr * self.wkv(self.time_decay, self.time_first, k, v)
        rwkv = self.output(rwkv)
        return rwkv


class RWKV_ChannelMix(nn.Module):
    def __init__(self, args, layer_id):
        super().__init__()
        self.layer_id = layer_id
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        with torch.no_grad():
            ratio_1_to_almost0 = 1.0 - (layer_id / args.n_layer)
            ddd = torch.ones(1, 1, args.n_embd)
            for i in range(args.n_embd):
                ddd[0, 0, i] = i / args.n_embd
            self.time_mix_k = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
            self.time_mix_r = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
        hidden_sz = 4 * args.n_embd
        self.key = nn.Linear(args.n_embd, hidden_sz, bias=False)
        self.receptance = nn.Linear(args.n_embd, args.n_embd, bias=False)
        self.value = nn.Linear(hidden_sz, args.n_embd, bias=False)

    def forward(self, x):
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k = self.key(xk)
        k = torch.square(torch.relu(k))
        kv = self.value(k)
        rkv = torch.sigmoid(self.receptance(xr)) * kv
        return rkv


class Block(nn.Module):
    def __init__(self, args, layer_id):
        super().__init__()
        self.args = args
        self.layer_id = layer_id
        self.ln1 = nn.LayerNorm(args.n_embd)
        self.ln2 = nn.LayerNorm(args.n_embd)
        if self.layer_id == 0:
            self.ln0 = nn.LayerNorm(args.n_embd)
        self.att = RWKV_TimeMix(args, layer_id)
        self.ffn = RWKV_ChannelMix(args, layer_id)

    def forward(self, x):
        if self.layer_id == 0:
            x = self.ln0(x)
        x = x + self.att(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return x


class RWKV(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.emb = nn.Embedding(args.vocab_size, args.n_embd)
        self.blocks = nn.ModuleList([Block(args, i) for i in range(args.n_layer)])
        self.ln_out = nn.LayerNorm(args.n_embd)
        self.head = nn.Linear(args.n_embd, args.vocab_size, bias=False)

    def configure_optimizers(self):
        lr_decay = set()
        lr_1x = set()
        for n, p in self.named_parameters():
            if ("time_mix" in n) or ("time_decay" in n) or ("time_first" in n):
                lr_decay.add(n)
            else:
                lr_1x.add(n)
        lr_decay = sorted(list(lr_decay))
        lr_1x = sorted(list(lr_1x))
        param_dict = {n: p for n, p in self.named_parameters()}
        optim_groups = [
            {"params": [param_dict[n] for n in lr_1x], "weight_decay": 0.0, "my_lr_scale": 1.0},
            {"params": [param_dict[n] for n in lr_decay], "weight_decay": 0.0, "my_lr_scale": 2.0},
        ]
        return torch.optim.Adam(optim_groups, lr=self.args.lr_init, betas=self.args.betas, eps=1e-8)

    def forward(self, idx):
        args = self.args
        B, T = idx.size()
        assert T <= args.ctx_len, "Cannot forward, model ctx_len is exhausted."
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        x = self.ln_out(x)
        x = self.head(x)
        return x


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(129)
    args = types.SimpleNamespace(n_embd=12, n_layer=2, vocab_size=17, ctx_len=6,
                                 lr_init=4e-3, betas=(0.9, 0.99))
    model = RWKV(args)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = model.configure_optimizers()
    seqs = rng.integers(0, args.vocab_size, size=(3, 2, args.ctx_len + 1))

    def training_step(idx, targets):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(training_step) if compiled else training_step
    losses = [len(optimizer.param_groups[1]["params"]), optimizer.param_groups[1]["my_lr_scale"]]
    for it in range(9):
        for param_group in optimizer.param_groups:
            param_group["lr"] = args.lr_init * param_group["my_lr_scale"] * (0.9 ** it)
        seq = torch.tensor(seqs[it % 3])
        losses.append(step(seq[:, :-1].contiguous(), seq[:, 1:].contiguous()).item())
    with torch.no_grad():
        x = torch.arange(12.).view(1, 3, 4)
        losses += nn.ZeroPad2d((0, 0, 1, -1))(x).flatten().tolist()
        losses += nn.ZeroPad2d((-1, 1, 0, 0))(x).flatten().tolist()
        losses += model(torch.tensor(seqs[0][:1, :-1]))[0, -1, :5].tolist()
        losses += model.blocks[1].att.time_first[:4].tolist()
    return {"losses": losses, "weights": w, "fn": step}
