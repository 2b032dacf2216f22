# In the manner of toy DDPM tutorials on 2-d data: a linear beta schedule from
# torch.linspace, alphas_cumprod by torch.cumprod, F.pad of the shifted cumprod, an
# extract() helper that gathers per-timestep coefficients and reshapes them to broadcast,
# q_sample with sqrt_alphas_cumprod, a sinusoidal timestep embedding (math.log(10000),
# torch.exp(arange), torch.cat of sin and cos), an MLP denoiser with SiLU, F.mse_loss
# against the noise, an EMA copy of the model updated by lerp_ under no_grad, and
# reverse sampling with @torch.no_grad() p_sample over reversed(range(T)).
# Noise and timesteps come from NumPy so that both libraries draw the same numbers.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def linear_beta_schedule(timesteps):
    beta_start = 0.0001
    beta_end = 0.02
    return torch.linspace(beta_start, beta_end, timesteps)


def extract(a, t, x_shape):
    batch_size = t.shape[0]
    out = a.gather(-1, t.cpu())
    return out.reshape(batch_size, *((1,) * (len(x_shape) - 1))).to(t.device)


class SinusoidalPositionEmbeddings(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, time):
        device = time.device
        half_dim = self.dim // 2
        embeddings = math.log(10000) / (half_dim - 1)
        embeddings = torch.exp(torch.arange(half_dim, device=device) * -embeddings)
        embeddings = time[:, None] * embeddings[None, :]
        embeddings = torch.cat((embeddings.sin(), embeddings.cos()), dim=-1)
        return embeddings


class Denoiser(nn.Module):
    def __init__(self, dim=2, hidden=32, time_dim=16):
        super().__init__()
        self.time_mlp = nn.Sequential(SinusoidalPositionEmbeddings(time_dim), nn.Linear(time_dim, hidden), nn.SiLU())
        self.inp = nn.Linear(dim, hidden)
        self.net = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, dim))

    def forward(self, x, t):
        return self.net(self.inp(x) + self.time_mlp(t))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(9)
    timesteps = 50
    betas = linear_beta_schedule(timesteps=timesteps)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, axis=0)
    alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
    sqrt_recip_alphas = torch.sqrt(1.0 / alphas)
    sqrt_alphas_cumprod = torch.sqrt(alphas_cumprod)
    sqrt_one_minus_alphas_cumprod = torch.sqrt(1.0 - alphas_cumprod)
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)

    def q_sample(x_start, t, noise=None):
        if noise is None:
            noise = torch.randn_like(x_start)
        sqrt_alphas_cumprod_t = extract(sqrt_alphas_cumprod, t, x_start.shape)
        sqrt_one_minus_alphas_cumprod_t = extract(sqrt_one_minus_alphas_cumprod, t, x_start.shape)
        return sqrt_alphas_cumprod_t * x_start + sqrt_one_minus_alphas_cumprod_t * noise

    model = Denoiser()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def p_losses(denoise_model, x_start, t, noise):
        x_noisy = q_sample(x_start=x_start, t=t, noise=noise)
        predicted_noise = denoise_model(x_noisy, t)
        return F.mse_loss(noise, predicted_noise)

    def train_step(batch, t, noise):
        optimizer.zero_grad()
        loss = p_losses(model, batch, t, noise)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        with torch.no_grad():
            for p_ema, p in zip(ema.parameters(), model.parameters()):
                p_ema.lerp_(p, 0.1)
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for i in range(16):
        ang = rng.uniform(0, 2 * np.pi, 64)
        batch = torch.from_numpy(np.stack([np.cos(ang), np.sin(ang)], 1).astype(np.float32))
        t = torch.from_numpy(rng.integers(0, timesteps, (64,)))
        noise = torch.from_numpy(rng.normal(size=(64, 2)).astype(np.float32))
        losses.append(step(batch, t, noise).item())

    @torch.no_grad()
    def p_sample(model, x, t, t_index, z):
        betas_t = extract(betas, t, x.shape)
        sqrt_one_minus_alphas_cumprod_t = extract(sqrt_one_minus_alphas_cumprod, t, x.shape)
        sqrt_recip_alphas_t = extract(sqrt_recip_alphas, t, x.shape)
        model_mean = sqrt_recip_alphas_t * (x - betas_t * model(x, t) / sqrt_one_minus_alphas_cumprod_t)
        if t_index == 0:
            return model_mean
        posterior_variance_t = extract(posterior_variance, t, x.shape)
        return model_mean + torch.sqrt(posterior_variance_t) * z

    img = torch.from_numpy(rng.normal(size=(8, 2)).astype(np.float32))
    for i in reversed(range(0, timesteps, 5)):
        z = torch.from_numpy(rng.normal(size=(8, 2)).astype(np.float32))
        img = p_sample(ema, img, torch.full((8,), i, dtype=torch.long), i, z)
    losses += img.flatten().tolist()
    losses.append(float(posterior_variance[1:].sum()))
    return {"losses": losses, "weights": w, "fn": step}
