# In the manner of NeRF reimplementations (nerf-pytorch, tiny NeRF notebooks): a
# positional encoding that concatenates x with sin/cos of 2**i * x (torch.cat over a
# list), an MLP with a skip connection that re-concatenates the encoded input, separate
# sigma/rgb heads (F.relu on density, torch.sigmoid on colour), volume rendering along rays
# with torch.linspace samples, deltas via torch.cat with a 1e10 tail, alpha = 1 - exp(-sigma
# * delta), transmittance by torch.cumprod with an exclusive shift, img2mse and mse2psnr with
# torch.log10, and Adam with a per-step exponential learning-rate decay.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Embedder:
    def __init__(self, multires, include_input=True):
        self.freq_bands = 2.0 ** torch.linspace(0.0, multires - 1, steps=multires)
        self.include_input = include_input
        self.out_dim = 3 * (int(include_input) + 2 * multires)

    def embed(self, inputs):
        outs = [inputs] if self.include_input else []
        for freq in self.freq_bands:
            for p_fn in (torch.sin, torch.cos):
                outs.append(p_fn(inputs * freq))
        return torch.cat(outs, -1)


class NeRF(nn.Module):
    def __init__(self, D=4, W=32, input_ch=27, skips=(2,)):
        super().__init__()
        self.skips = skips
        self.pts_linears = nn.ModuleList(
            [nn.Linear(input_ch, W)] + [nn.Linear(W + input_ch, W) if i in skips else nn.Linear(W, W) for i in range(1, D)])
        self.alpha_linear = nn.Linear(W, 1)
        self.rgb_linear = nn.Linear(W, 3)

    def forward(self, x):
        input_pts = x
        h = x
        for i, l in enumerate(self.pts_linears):
            if i in self.skips:
                h = torch.cat([input_pts, h], -1)
            h = F.relu(l(h))
        alpha = self.alpha_linear(h)
        rgb = self.rgb_linear(h)
        return torch.cat([rgb, alpha], -1)


def raw2outputs(raw, z_vals, rays_d):
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    alpha = 1.0 - torch.exp(-F.relu(raw[..., 3]) * dists)
    weights = alpha * torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    depth_map = torch.sum(weights * z_vals, -1)
    acc_map = torch.sum(weights, -1)
    return rgb_map, depth_map, acc_map


img2mse = lambda x, y: torch.mean((x - y) ** 2)
mse2psnr = lambda x: -10.0 * torch.log(x) / torch.log(torch.Tensor([10.0]))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(2)
    embed = Embedder(4)
    model = NeRF(input_ch=embed.out_dim)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    lrate, lrate_decay = 5e-3, 50
    optimizer = torch.optim.Adam(params=model.parameters(), lr=lrate, betas=(0.9, 0.999))
    near, far, N_samples = 2.0, 6.0, 8
    t_vals = torch.linspace(0.0, 1.0, steps=N_samples)
    z_vals_base = near * (1.0 - t_vals) + far * t_vals

    def train_step(rays_o, rays_d, target_s):
        z_vals = z_vals_base.expand([rays_o.shape[0], N_samples])
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        pts_flat = torch.reshape(pts, [-1, pts.shape[-1]])
        raw = model(embed.embed(pts_flat))
        raw = torch.reshape(raw, list(pts.shape[:-1]) + [raw.shape[-1]])
        rgb, depth, acc = raw2outputs(raw, z_vals, rays_d)
        optimizer.zero_grad()
        img_loss = img2mse(rgb, target_s)
        loss = img_loss
        psnr = mse2psnr(img_loss)
        loss.backward()
        optimizer.step()
        return loss, psnr, depth.mean()

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for global_step in range(12):
        rays_o = torch.from_numpy(rng.normal(0, 0.1, (32, 3)).astype(np.float32))
        d = rng.normal(0, 1, (32, 3)).astype(np.float32)
        d[:, 2] = 1.0
        rays_d = torch.from_numpy(d)
        rays_d = rays_d / torch.norm(rays_d, dim=-1, keepdim=True)
        target_s = torch.from_numpy((0.5 + 0.4 * np.sin(3 * d)).astype(np.float32))
        loss, psnr, depth = step(rays_o, rays_d, target_s)
        decay_rate = 0.1
        decay_steps = lrate_decay * 1000
        new_lrate = lrate * (decay_rate ** (global_step / decay_steps))
        for param_group in optimizer.param_groups:
            param_group['lr'] = new_lrate
        losses += [loss.item(), psnr.item(), depth.item()]
    return {"losses": losses, "weights": w, "fn": step}
