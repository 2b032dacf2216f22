# In the manner of nerf-pytorch's hierarchical sampling (yenchenlin/nerf-pytorch, MIT
# licence): ``get_rays`` by ``torch.meshgrid(..., indexing="ij")`` and ``torch.sum(dirs[...,
# np.newaxis, :] * c2w[:3, :3], -1)``, stratified depths ``near * (1. - t_vals) + far *
# t_vals`` perturbed by NumPy uniforms between midpoints, ``raw2outputs`` (``torch.cat`` of
# deltas with ``torch.Tensor([1e10]).expand(...)``, ``torch.norm(rays_d[..., None, :],
# dim=-1)``, ``alpha * torch.cumprod(torch.cat([torch.ones((n, 1)), 1. - alpha + 1e-10],
# -1), -1)[:, :-1]``, depth and disparity maps with ``torch.max(1e-10 *
# torch.ones_like(depth_map), ...)``), ``sample_pdf`` (pdf by ``weights /
# torch.sum(weights, -1, keepdim=True)``, ``torch.cumsum``, ``torch.searchsorted(cdf, u,
# right=True)``, ``torch.max(torch.zeros_like(inds - 1), inds - 1)``,
# ``torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)``, ``torch.where(denom <
# 1e-5, torch.ones_like(denom), denom)``), fine samples ``torch.sort(torch.cat([z_vals,
# z_samples], -1), -1)`` with ``z_samples.detach()``, coarse and fine models trained together
# on ``img2mse`` and PSNR, Adam with the exponential decay written into ``param_group['lr']``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

img2mse = lambda x, y: torch.mean((x - y) ** 2)
mse2psnr = lambda x: -10. * torch.log(x) / torch.log(torch.Tensor([10.]))


class Embedder:
    def __init__(self, multires):
        self.freq_bands = 2. ** torch.linspace(0., multires - 1, steps=multires)
        self.embed_fns = [lambda x: x]
        for freq in self.freq_bands:
            for p_fn in [torch.sin, torch.cos]:
                self.embed_fns.append(lambda x, p_fn=p_fn, freq=freq: p_fn(x * freq))
        self.out_dim = 3 * len(self.embed_fns)

    def embed(self, inputs):
        return torch.cat([fn(inputs) for fn in self.embed_fns], -1)


class NeRF(nn.Module):
    def __init__(self, D=3, W=16, input_ch=15, skips=(1,)):
        super(NeRF, self).__init__()
        self.skips = skips
        self.pts_linears = nn.ModuleList(
            [nn.Linear(input_ch, W)] + [nn.Linear(W, W) if i not in skips else nn.Linear(W + input_ch, W)
                                        for i in range(D - 1)])
        self.output_linear = nn.Linear(W, 4)

    def forward(self, x):
        h = x
        for i, l in enumerate(self.pts_linears):
            h = F.relu(self.pts_linears[i](h))
            if i in self.skips:
                h = torch.cat([x, h], -1)
        return self.output_linear(h)


def get_rays(H, W, K, c2w):
    i, j = torch.meshgrid(torch.linspace(0, W - 1, W), torch.linspace(0, H - 1, H), indexing="ij")
    i = i.t()
    j = j.t()
    dirs = torch.stack([(i - K[0][2]) / K[0][0], -(j - K[1][2]) / K[1][1], -torch.ones_like(i)], -1)
    rays_d = torch.sum(dirs[..., np.newaxis, :] * c2w[:3, :3], -1)
    rays_o = c2w[:3, -1].expand(rays_d.shape)
    return rays_o, rays_d


def raw2outputs(raw, z_vals, rays_d):
    raw2alpha = lambda raw, dists, act_fn=F.relu: 1. - torch.exp(-act_fn(raw) * dists)
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    alpha = raw2alpha(raw[..., 3], dists)
    weights = alpha * torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1. - alpha + 1e-10], -1), -1)[:, :-1]
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    depth_map = torch.sum(weights * z_vals, -1)
    disp_map = 1. / torch.max(1e-10 * torch.ones_like(depth_map), depth_map / torch.sum(weights, -1))
    acc_map = torch.sum(weights, -1)
    return rgb_map, disp_map, acc_map, weights, depth_map


def sample_pdf(bins, weights, N_samples, u):
    weights = weights + 1e-5
    pdf = weights / torch.sum(weights, -1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    u = u.contiguous()
    inds = torch.searchsorted(cdf, u, right=True)
    below = torch.max(torch.zeros_like(inds - 1), inds - 1)
    above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
    inds_g = torch.stack([below, above], -1)
    matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
    denom = (cdf_g[..., 1] - cdf_g[..., 0])
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    samples = bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])
    return samples


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1208)
    embedder = Embedder(2)
    model = NeRF(input_ch=embedder.out_dim)
    model_fine = NeRF(input_ch=embedder.out_dim)
    if weights is not None:
        model.load_state_dict({k[7:]: torch.tensor(v) for k, v in weights.items() if k.startswith("coarse.")})
        model_fine.load_state_dict({k[5:]: torch.tensor(v) for k, v in weights.items() if k.startswith("fine.")})
    w = {**{"coarse." + k: v.detach().numpy().copy() for k, v in model.state_dict().items()},
         **{"fine." + k: v.detach().numpy().copy() for k, v in model_fine.state_dict().items()}}
    grad_vars = list(model.parameters()) + list(model_fine.parameters())
    lrate, lrate_decay = 5e-3, 10
    optimizer = torch.optim.Adam(params=grad_vars, lr=lrate, betas=(0.9, 0.999))
    H = W = 4
    focal = 5.0
    K = np.array([[focal, 0, 0.5 * W], [0, focal, 0.5 * H], [0, 0, 1]])
    near, far, N_samples, N_importance = 2., 6., 8, 8
    t_vals = torch.linspace(0., 1., steps=N_samples)

    def render(rays_o, rays_d, t_rand, u):
        z_vals = near * (1. - t_vals) + far * (t_vals)
        z_vals = z_vals.expand([rays_o.shape[0], N_samples])
        mids = .5 * (z_vals[..., 1:] + z_vals[..., :-1])
        upper = torch.cat([mids, z_vals[..., -1:]], -1)
        lower = torch.cat([z_vals[..., :1], mids], -1)
        z_vals = lower + (upper - lower) * t_rand
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        raw = model(embedder.embed(pts))
        rgb_map, disp_map, acc_map, weights, depth_map = raw2outputs(raw, z_vals, rays_d)
        rgb_map_0 = rgb_map
        z_vals_mid = .5 * (z_vals[..., 1:] + z_vals[..., :-1])
        z_samples = sample_pdf(z_vals_mid, weights[..., 1:-1], N_importance, u)
        z_samples = z_samples.detach()
        z_vals, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        raw = model_fine(embedder.embed(pts))
        rgb_map, disp_map, acc_map, weights, depth_map = raw2outputs(raw, z_vals, rays_d)
        return rgb_map, disp_map, rgb_map_0

    def train_step(rays_o, rays_d, target_s, t_rand, u):
        rgb, disp, rgb0 = render(rays_o, rays_d, t_rand, u)
        optimizer.zero_grad()
        img_loss = img2mse(rgb, target_s)
        loss = img_loss + img2mse(rgb0, target_s)
        psnr = mse2psnr(img_loss)
        loss.backward()
        optimizer.step()
        return loss, psnr, disp.mean()

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for i in range(6):
        angle = 0.3 * i
        c2w = torch.Tensor(np.array([[np.cos(angle), 0, np.sin(angle), 4 * np.sin(angle)],
                                     [0, 1, 0, 0], [-np.sin(angle), 0, np.cos(angle), 4 * np.cos(angle)]]))
        rays_o, rays_d = get_rays(H, W, K, c2w)
        rays_o, rays_d = rays_o.reshape(-1, 3), rays_d.reshape(-1, 3)
        target = torch.from_numpy(rng.random((H * W, 3)).astype(np.float32))
        t_rand = torch.from_numpy(rng.random((H * W, N_samples)).astype(np.float32))
        u = torch.from_numpy(rng.random((H * W, N_importance)).astype(np.float32))
        loss, psnr, disp = step(rays_o, rays_d, target, t_rand, u)
        decay_rate = 0.1
        new_lrate = lrate * (decay_rate ** ((i + 1) / (lrate_decay * 1000)))
        for param_group in optimizer.param_groups:
            param_group['lr'] = new_lrate
        losses += [loss.item(), psnr.item(), disp.item()]
    return {"losses": losses, "weights": w, "fn": step}
