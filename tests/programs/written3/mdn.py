# In the manner of public mixture density network examples in PyTorch: a network giving
# mixture weights (softmax), means and standard deviations (exp) of a Gaussian mixture for
# an inverse problem with several answers, the negative log-likelihood through
# torch.distributions (Normal(...).log_prob, Categorical, MixtureSameFamily) and by hand
# with torch.logsumexp, Adam, and a prediction of each mixture's most likely component
# with gather.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, MixtureSameFamily, Normal


class MDN(nn.Module):
    def __init__(self, n_hidden, n_gaussians):
        super(MDN, self).__init__()
        self.z_h = nn.Sequential(
            nn.Linear(1, n_hidden),
            nn.Tanh()
        )
        self.z_pi = nn.Linear(n_hidden, n_gaussians)
        self.z_sigma = nn.Linear(n_hidden, n_gaussians)
        self.z_mu = nn.Linear(n_hidden, n_gaussians)

    def forward(self, x):
        z_h = self.z_h(x)
        pi = F.softmax(self.z_pi(z_h), -1)
        sigma = torch.exp(self.z_sigma(z_h))
        mu = self.z_mu(z_h)
        return pi, sigma, mu


def mdn_loss_fn(pi, sigma, mu, y):
    m = Normal(loc=mu, scale=sigma)
    log_prob = m.log_prob(y.expand_as(mu))
    loss = -torch.logsumexp(torch.log(pi) + log_prob, dim=1)
    return torch.mean(loss)


def mixture_nll(pi, sigma, mu, y):
    mix = MixtureSameFamily(Categorical(probs=pi), Normal(mu, sigma))
    return -mix.log_prob(y.squeeze(1)).mean()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n = 128
    y_data = rng.uniform(-10.5, 10.5, n).astype(np.float32)
    x_data = (7.0 * np.sin(0.75 * y_data) + 0.5 * y_data + rng.standard_normal(n)).astype(np.float32)
    x_tensor = torch.from_numpy(x_data.reshape(n, 1))
    y_tensor = torch.from_numpy(y_data.reshape(n, 1))
    network = MDN(n_hidden=20, n_gaussians=5)
    if weights is not None:
        network.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in network.state_dict().items()}
    optimizer = torch.optim.Adam(network.parameters())

    def train_step(x, y):
        pi, sigma, mu = network(x)
        loss = mdn_loss_fn(pi, sigma, mu, y)
        check = mixture_nll(pi, sigma, mu, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, check

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(20):
        loss, check = step(x_tensor, y_tensor)
        losses += [loss.item(), check.item()]
    with torch.no_grad():
        x_test = torch.linspace(-15, 15, 7).view(-1, 1)
        pi, sigma, mu = network(x_test)
        k = torch.argmax(pi, dim=1, keepdim=True)
        losses += mu.gather(1, k).squeeze(1).tolist()
    return {"losses": losses, "weights": w, "fn": step}
