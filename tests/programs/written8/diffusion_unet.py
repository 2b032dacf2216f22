# In the manner of openai/improved-diffusion's unet.py, nn.py and gaussian_diffusion.py
# (MIT licence): ``timestep_embedding`` (``torch.exp(-math.log(max_period) *
# torch.arange(start=0, end=half, dtype=torch.float32) / half)``, ``torch.cat([cos, sin])``),
# ``GroupNorm32`` (``super().forward(x.float()).type(x.dtype)``), ``SiLU``, ``zero_module``
# (``p.detach().zero_()``), ResBlocks with a timestep embedding broadcast by ``while
# len(emb_out.shape) < len(h.shape): emb_out = emb_out[..., None]`` and scale-shift norm by
# ``torch.chunk``, an attention block with ``qkv.reshape(b * heads, ch * 3, -1).split(ch,
# dim=1)`` and ``torch.einsum("bct,bcs->bts", q * scale, k * scale)``, upsampling by
# ``F.interpolate(x, scale_factor=2, mode="nearest")``, downsampling by ``nn.AvgPool2d``,
# a cosine beta schedule from ``betas_for_alpha_bar`` in NumPy, ``_extract_into_tensor``
# (``torch.from_numpy(arr).to(device=timesteps.device)[timesteps].float()`` expanded to the
# batch's shape), ``mean_flat``, and an EMA of the parameters by ``torch._foreach_mul_`` /
# ``torch._foreach_add_`` (and ``lerp_`` for the check).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupNorm32(nn.GroupNorm):
    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


def normalization(channels):
    return GroupNorm32(4, channels)


def zero_module(module):
    for p in module.parameters():
        p.detach().zero_()
    return module


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
    ).to(device=timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


class TimestepBlock(nn.Module):
    pass


class TimestepEmbedSequential(nn.Sequential, TimestepBlock):
    def forward(self, x, emb):
        for layer in self:
            if isinstance(layer, TimestepBlock):
                x = layer(x, emb)
            else:
                x = layer(x)
        return x


class Upsample(nn.Module):
    def __init__(self, channels, use_conv):
        super().__init__()
        self.channels = channels
        self.use_conv = use_conv
        if use_conv:
            self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        assert x.shape[1] == self.channels
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        if self.use_conv:
            x = self.conv(x)
        return x


class Downsample(nn.Module):
    def __init__(self, channels, use_conv):
        super().__init__()
        self.channels = channels
        if use_conv:
            self.op = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        else:
            self.op = nn.AvgPool2d(kernel_size=2, stride=2)

    def forward(self, x):
        assert x.shape[1] == self.channels
        return self.op(x)


class ResBlock(TimestepBlock):
    def __init__(self, channels, emb_channels, dropout, out_channels=None, use_scale_shift_norm=False):
        super().__init__()
        self.out_channels = out_channels or channels
        self.use_scale_shift_norm = use_scale_shift_norm
        self.in_layers = nn.Sequential(normalization(channels), nn.SiLU(),
                                       nn.Conv2d(channels, self.out_channels, 3, padding=1))
        self.emb_layers = nn.Sequential(
            nn.SiLU(),
            nn.Linear(emb_channels, 2 * self.out_channels if use_scale_shift_norm else self.out_channels),
        )
        self.out_layers = nn.Sequential(
            normalization(self.out_channels), nn.SiLU(), nn.Dropout(p=dropout),
            zero_module(nn.Conv2d(self.out_channels, self.out_channels, 3, padding=1)),
        )
        if self.out_channels == channels:
            self.skip_connection = nn.Identity()
        else:
            self.skip_connection = nn.Conv2d(channels, self.out_channels, 1)

    def forward(self, x, emb):
        h = self.in_layers(x)
        emb_out = self.emb_layers(emb).type(h.dtype)
        while len(emb_out.shape) < len(h.shape):
            emb_out = emb_out[..., None]
        if self.use_scale_shift_norm:
            out_norm, out_rest = self.out_layers[0], self.out_layers[1:]
            scale, shift = torch.chunk(emb_out, 2, dim=1)
            h = out_norm(h) * (1 + scale) + shift
            h = out_rest(h)
        else:
            h = h + emb_out
            h = self.out_layers(h)
        return self.skip_connection(x) + h


class QKVAttention(nn.Module):
    def __init__(self, n_heads):
        super().__init__()
        self.n_heads = n_heads

    def forward(self, qkv):
        bs, width, length = qkv.shape
        assert width % (3 * self.n_heads) == 0
        ch = width // (3 * self.n_heads)
        q, k, v = qkv.reshape(bs * self.n_heads, ch * 3, length).split(ch, dim=1)
        scale = 1 / math.sqrt(math.sqrt(ch))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
        a = torch.einsum("bts,bcs->bct", weight, v)
        return a.reshape(bs, -1, length)


class AttentionBlock(nn.Module):
    def __init__(self, channels, num_heads=1):
        super().__init__()
        self.channels = channels
        self.num_heads = num_heads
        self.norm = normalization(channels)
        self.qkv = nn.Conv1d(channels, channels * 3, 1)
        self.attention = QKVAttention(self.num_heads)
        self.proj_out = zero_module(nn.Conv1d(channels, channels, 1))

    def forward(self, x):
        b, c, *spatial = x.shape
        x = x.reshape(b, c, -1)
        qkv = self.qkv(self.norm(x))
        h = self.attention(qkv)
        h = self.proj_out(h)
        return (x + h).reshape(b, c, *spatial)


class UNetModel(nn.Module):
    def __init__(self, in_channels=1, model_channels=8, out_channels=1, channel_mult=(1, 2),
                 attention_resolutions=(2,), num_heads=2, dropout=0.0):
        super().__init__()
        self.model_channels = model_channels
        time_embed_dim = model_channels * 4
        self.time_embed = nn.Sequential(nn.Linear(model_channels, time_embed_dim), nn.SiLU(),
                                        nn.Linear(time_embed_dim, time_embed_dim))
        self.input_blocks = nn.ModuleList([TimestepEmbedSequential(nn.Conv2d(in_channels, model_channels, 3, padding=1))])
        input_block_chans = [model_channels]
        ch = model_channels
        ds = 1
        for level, mult in enumerate(channel_mult):
            layers = [ResBlock(ch, time_embed_dim, dropout, out_channels=mult * model_channels,
                               use_scale_shift_norm=(level == 1))]
            ch = mult * model_channels
            if ds in attention_resolutions:
                layers.append(AttentionBlock(ch, num_heads=num_heads))
            self.input_blocks.append(TimestepEmbedSequential(*layers))
            input_block_chans.append(ch)
            if level != len(channel_mult) - 1:
                self.input_blocks.append(TimestepEmbedSequential(Downsample(ch, use_conv=(level == 0))))
                input_block_chans.append(ch)
                ds *= 2
        self.middle_block = TimestepEmbedSequential(ResBlock(ch, time_embed_dim, dropout),
                                                    AttentionBlock(ch, num_heads=num_heads))
        self.output_blocks = nn.ModuleList([])
        for level, mult in list(enumerate(channel_mult))[::-1]:
            for i in range(2):
                layers = [ResBlock(ch + input_block_chans.pop(), time_embed_dim, dropout,
                                   out_channels=model_channels * mult)]
                ch = model_channels * mult
                if level and i == 1:
                    layers.append(Upsample(ch, use_conv=True))
                self.output_blocks.append(TimestepEmbedSequential(*layers))
        self.out = nn.Sequential(normalization(ch), nn.SiLU(),
                                 zero_module(nn.Conv2d(model_channels, out_channels, 3, padding=1)))

    def forward(self, x, timesteps):
        hs = []
        emb = self.time_embed(timestep_embedding(timesteps, self.model_channels))
        h = x
        for module in self.input_blocks:
            h = module(h, emb)
            hs.append(h)
        h = self.middle_block(h, emb)
        for module in self.output_blocks:
            cat_in = torch.cat([h, hs.pop()], dim=1)
            h = module(cat_in, emb)
        return self.out(h)


def betas_for_alpha_bar(num_diffusion_timesteps, alpha_bar, max_beta=0.999):
    betas = []
    for i in range(num_diffusion_timesteps):
        t1 = i / num_diffusion_timesteps
        t2 = (i + 1) / num_diffusion_timesteps
        betas.append(min(1 - alpha_bar(t2) / alpha_bar(t1), max_beta))
    return np.array(betas)


def _extract_into_tensor(arr, timesteps, broadcast_shape):
    res = torch.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
    while len(res.shape) < len(broadcast_shape):
        res = res[..., None]
    return res.expand(broadcast_shape)


def mean_flat(tensor):
    return tensor.mean(dim=list(range(1, len(tensor.shape))))


class GaussianDiffusion:
    def __init__(self, betas):
        self.num_timesteps = int(betas.shape[0])
        alphas = 1.0 - betas
        self.alphas_cumprod = np.cumprod(alphas, axis=0)
        self.sqrt_alphas_cumprod = np.sqrt(self.alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - self.alphas_cumprod)

    def q_sample(self, x_start, t, noise):
        return (_extract_into_tensor(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                + _extract_into_tensor(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise)

    def training_losses(self, model, x_start, t, noise):
        x_t = self.q_sample(x_start, t, noise=noise)
        model_output = model(x_t, t)
        terms = {"mse": mean_flat((noise - model_output) ** 2)}
        terms["loss"] = terms["mse"]
        return terms


def update_ema(target_params, source_params, rate=0.99):
    torch._foreach_mul_(target_params, rate)
    torch._foreach_add_(target_params, source_params, alpha=1 - rate)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(803)
    model = UNetModel()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    betas = betas_for_alpha_bar(50, lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2)
    diffusion = GaussianDiffusion(betas)
    ema_params = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    data = [torch.tensor(rng.normal(size=(2, 1, 8, 8)).astype(np.float32)) for _ in range(3)]

    def forward_backward(batch, t, noise):
        opt.zero_grad()
        losses = diffusion.training_losses(model, batch, t, noise)
        loss = (losses["loss"] * 1.0).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():
            update_ema(ema_params, list(model.parameters()))
        return loss

    step = torch.compile(forward_backward) if compiled else forward_backward
    losses = [float(len(list(model.parameters()))), float(betas[0]), float(betas[-1]),
              float(sum(p.abs().sum() for p in model.out.parameters()))]
    losses += timestep_embedding(torch.tensor([0, 3]), 7)[1].tolist()
    for i in range(9):
        batch = data[i % 3]
        t = torch.tensor(rng.integers(0, diffusion.num_timesteps, size=(2,)))
        noise = torch.tensor(rng.normal(size=batch.shape).astype(np.float32))
        losses.append(step(batch, t, noise).item())
    losses.append(float(sum((e - p).abs().sum() for e, p in zip(ema_params, model.parameters()))))
    # the same average by lerp_
    ema2 = [p.detach().clone() for p in model.parameters()]
    for e in ema2:
        e.lerp_(torch.zeros_like(e), 0.5)
    losses.append(float(sum(e.abs().sum() for e in ema2)))
    model.eval()
    with torch.no_grad():
        out = model(data[0], torch.tensor([1, 40]))
    losses += out.flatten()[:8].tolist()
    return {"losses": losses, "weights": w, "fn": step}
