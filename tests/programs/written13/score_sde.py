# In the manner of Yang Song's score-based generative modelling tutorial (the Colab
# "Score-Based Generative Modeling through SDEs"): ``GaussianFourierProjection`` with fixed
# random features ``nn.Parameter(torch.randn(embed_dim // 2) * scale, requires_grad=False)``
# and ``x[:, None] * self.W[None, :] * 2 * np.pi``, a ``Dense`` layer reshaping to
# ``[..., None, None]``, a small score network conditioned on time through ``self.act =
# lambda x: x * torch.sigmoid(x)``, ``GroupNorm`` and ``h / self.marginal_prob_std(t)[:,
# None, None, None]``, ``marginal_prob_std``/``diffusion_coeff`` bound by
# ``functools.partial(..., sigma=sigma)`` and turning ``t`` into ``torch.tensor(t)``, the
# denoising score-matching loss ``torch.mean(torch.sum((score * std[:, None, None, None] +
# z) ** 2, dim=(1, 2, 3)))`` (the perturbation ``z`` and times are inputs here), an
# ``ExponentialMovingAverage`` of the weights kept in ``shadow_params`` and copied back by
# ``p.data.copy_(s_param.data)``, and a few Euler-Maruyama sampling steps under
# ``torch.no_grad()`` with ``torch.ones(batch_size) * time_step``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import functools

import numpy as np
import torch
import torch.nn as nn


class GaussianFourierProjection(nn.Module):
    def __init__(self, embed_dim, scale=30.):
        super().__init__()
        self.W = nn.Parameter(torch.randn(embed_dim // 2) * scale, requires_grad=False)

    def forward(self, x):
        x_proj = x[:, None] * self.W[None, :] * 2 * np.pi
        return torch.cat([torch.sin(x_proj), torch.cos(x_proj)], dim=-1)


class Dense(nn.Module):
    def __init__(self, input_dim, output_dim):
        super().__init__()
        self.dense = nn.Linear(input_dim, output_dim)

    def forward(self, x):
        return self.dense(x)[..., None, None]


class ScoreNet(nn.Module):
    def __init__(self, marginal_prob_std, channels=(4, 8), embed_dim=8):
        super().__init__()
        self.embed = nn.Sequential(GaussianFourierProjection(embed_dim=embed_dim),
                                   nn.Linear(embed_dim, embed_dim))
        self.conv1 = nn.Conv2d(1, channels[0], 3, stride=1, bias=False)
        self.dense1 = Dense(embed_dim, channels[0])
        self.gnorm1 = nn.GroupNorm(2, num_channels=channels[0])
        self.conv2 = nn.Conv2d(channels[0], channels[1], 3, stride=2, bias=False)
        self.dense2 = Dense(embed_dim, channels[1])
        self.gnorm2 = nn.GroupNorm(4, num_channels=channels[1])
        self.tconv2 = nn.ConvTranspose2d(channels[1], channels[0], 3, stride=2, bias=False, output_padding=1)
        self.dense3 = Dense(embed_dim, channels[0])
        self.tgnorm2 = nn.GroupNorm(2, num_channels=channels[0])
        self.tconv1 = nn.ConvTranspose2d(channels[0] + channels[0], 1, 3, stride=1)
        self.act = lambda x: x * torch.sigmoid(x)
        self.marginal_prob_std = marginal_prob_std

    def forward(self, x, t):
        embed = self.act(self.embed(t))
        h1 = self.conv1(x)
        h1 += self.dense1(embed)
        h1 = self.act(self.gnorm1(h1))
        h2 = self.conv2(h1)
        h2 += self.dense2(embed)
        h2 = self.act(self.gnorm2(h2))
        h = self.tconv2(h2)
        h += self.dense3(embed)
        h = self.act(self.tgnorm2(h))
        h = self.tconv1(torch.cat([h, h1], dim=1))
        h = h / self.marginal_prob_std(t)[:, None, None, None]
        return h


def marginal_prob_std(t, sigma):
    t = torch.tensor(t)
    return torch.sqrt((sigma ** (2 * t) - 1.) / 2. / np.log(sigma))


def diffusion_coeff(t, sigma):
    return torch.tensor(sigma ** t)


class ExponentialMovingAverage:
    def __init__(self, parameters, decay):
        self.decay = decay
        self.shadow_params = [p.clone().detach() for p in parameters if p.requires_grad]

    def update(self, parameters):
        one_minus_decay = 1.0 - self.decay
        with torch.no_grad():
            parameters = [p for p in parameters if p.requires_grad]
            for s_param, param in zip(self.shadow_params, parameters):
                s_param.sub_(one_minus_decay * (s_param - param))

    def copy_to(self, parameters):
        parameters = [p for p in parameters if p.requires_grad]
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.data)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1308)
    sigma = 25.0
    marginal_prob_std_fn = functools.partial(marginal_prob_std, sigma=sigma)
    diffusion_coeff_fn = functools.partial(diffusion_coeff, sigma=sigma)
    score_model = ScoreNet(marginal_prob_std=marginal_prob_std_fn)
    if weights is not None:
        score_model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in score_model.state_dict().items()}
    optimizer = torch.optim.Adam(score_model.parameters(), lr=1e-3)
    ema = ExponentialMovingAverage(score_model.parameters(), decay=0.9)
    eps = 1e-5
    images = [torch.from_numpy(np.tanh(rng.standard_normal((3, 1, 8, 8))).astype(np.float32)) for _ in range(3)]

    def loss_fn(model, x, marginal_prob_std, z, random_t):
        random_t = random_t * (1. - eps) + eps
        std = marginal_prob_std(random_t)
        perturbed_x = x + z * std[:, None, None, None]
        score = model(perturbed_x, random_t)
        loss = torch.mean(torch.sum((score * std[:, None, None, None] + z) ** 2, dim=(1, 2, 3)))
        return loss

    def train_step(x, z, t):
        loss = loss_fn(score_model, x, marginal_prob_std_fn, z, t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        avg_loss, num_items = 0., 0
        for x in images:
            z = torch.from_numpy(rng.standard_normal(x.shape).astype(np.float32))
            t = torch.from_numpy(rng.uniform(0, 1, x.shape[0]).astype(np.float32))
            loss = step(x, z, t)
            ema.update(score_model.parameters())
            avg_loss += loss.item() * x.shape[0]
            num_items += x.shape[0]
            losses.append(loss.item())
        losses.append(avg_loss / num_items)
    ema.copy_to(score_model.parameters())
    batch_size, num_steps = 2, 3
    t = torch.ones(batch_size)
    init_x = torch.from_numpy(rng.standard_normal((batch_size, 1, 8, 8)).astype(np.float32)) * marginal_prob_std_fn(t)[:, None, None, None]
    time_steps = torch.linspace(1., 1e-3, num_steps)
    step_size = time_steps[0] - time_steps[1]
    x = init_x
    with torch.no_grad():
        for time_step in time_steps:
            batch_time_step = torch.ones(batch_size) * time_step
            g = diffusion_coeff_fn(batch_time_step)
            mean_x = x + (g ** 2)[:, None, None, None] * score_model(x, batch_time_step) * step_size
            noise = torch.from_numpy(rng.standard_normal(x.shape).astype(np.float32))
            x = mean_x + torch.sqrt(step_size) * g[:, None, None, None] * noise
    losses.append(float(mean_x.abs().mean()))
    return {"losses": losses, "weights": w, "fn": step}
