# In the manner of soft actor-critic implementations for continuous control: a Gaussian
# actor whose actions are squashed by tanh (with the log-probability corrected by
# log(1 - tanh(u)^2)), twin Q critics with Polyak-averaged target copies (deepcopy, then
# mul_/add_ under no_grad), the critics frozen with requires_grad = False while the actor
# is updated, and a learned entropy temperature.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# The reparameterised noise comes from NumPy and is passed in (a test device: torch's and
# dualgraph's random streams differ, so rsample draws would not match); the action is
# built as rsample builds it, mean + std * eps.
# ruff: noqa
import copy
import itertools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal

LOG_STD_MIN, LOG_STD_MAX = -20, 2


def mlp(sizes, activation=nn.ReLU, output_activation=nn.Identity):
    layers = []
    for j in range(len(sizes) - 1):
        act = activation if j < len(sizes) - 2 else output_activation
        layers += [nn.Linear(sizes[j], sizes[j + 1]), act()]
    return nn.Sequential(*layers)


class SquashedGaussianActor(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden, act_limit):
        super().__init__()
        self.net = mlp([obs_dim] + list(hidden), nn.ReLU, nn.ReLU)
        self.mu_layer = nn.Linear(hidden[-1], act_dim)
        self.log_std_layer = nn.Linear(hidden[-1], act_dim)
        self.act_limit = act_limit

    def forward(self, obs, eps, deterministic=False, with_logprob=True):
        net_out = self.net(obs)
        mu = self.mu_layer(net_out)
        log_std = self.log_std_layer(net_out)
        log_std = torch.clamp(log_std, LOG_STD_MIN, LOG_STD_MAX)
        std = torch.exp(log_std)
        pi_distribution = Normal(mu, std)
        if deterministic:
            pi_action = mu
        else:
            pi_action = mu + std * eps
        if with_logprob:
            logp_pi = pi_distribution.log_prob(pi_action).sum(axis=-1)
            logp_pi -= (2 * (np.log(2) - pi_action - F.softplus(-2 * pi_action))).sum(axis=1)
        else:
            logp_pi = None
        pi_action = torch.tanh(pi_action)
        pi_action = self.act_limit * pi_action
        return pi_action, logp_pi


class QFunction(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.q = mlp([obs_dim + act_dim] + list(hidden) + [1])

    def forward(self, obs, act):
        q = self.q(torch.cat([obs, act], dim=-1))
        return torch.squeeze(q, -1)


class ActorCritic(nn.Module):
    def __init__(self, obs_dim=3, act_dim=2, hidden=(16, 16), act_limit=2.0):
        super().__init__()
        self.pi = SquashedGaussianActor(obs_dim, act_dim, hidden, act_limit)
        self.q1 = QFunction(obs_dim, act_dim, hidden)
        self.q2 = QFunction(obs_dim, act_dim, hidden)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    ac = ActorCritic()
    if weights is not None:
        ac.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in ac.state_dict().items()}
    ac_targ = copy.deepcopy(ac)
    for p in ac_targ.parameters():
        p.requires_grad = False
    q_params = itertools.chain(ac.q1.parameters(), ac.q2.parameters())
    q_params = list(q_params)
    pi_optimizer = torch.optim.Adam(ac.pi.parameters(), lr=1e-3)
    q_optimizer = torch.optim.Adam(q_params, lr=1e-3)
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha_optimizer = torch.optim.Adam([log_alpha], lr=1e-2)
    target_entropy = -2.0
    gamma, polyak = 0.99, 0.9

    def compute_loss_q(o, a, r, o2, d, eps2):
        q1 = ac.q1(o, a)
        q2 = ac.q2(o, a)
        with torch.no_grad():
            a2, logp_a2 = ac.pi(o2, eps2)
            q1_pi_targ = ac_targ.q1(o2, a2)
            q2_pi_targ = ac_targ.q2(o2, a2)
            q_pi_targ = torch.min(q1_pi_targ, q2_pi_targ)
            alpha = log_alpha.exp()
            backup = r + gamma * (1 - d) * (q_pi_targ - alpha * logp_a2)
        loss_q1 = ((q1 - backup) ** 2).mean()
        loss_q2 = ((q2 - backup) ** 2).mean()
        return loss_q1 + loss_q2

    def compute_loss_pi(o, eps):
        pi, logp_pi = ac.pi(o, eps)
        q1_pi = ac.q1(o, pi)
        q2_pi = ac.q2(o, pi)
        q_pi = torch.min(q1_pi, q2_pi)
        alpha = log_alpha.exp().detach()
        loss_pi = (alpha * logp_pi - q_pi).mean()
        return loss_pi, logp_pi

    def update(o, a, r, o2, d, eps, eps2):
        q_optimizer.zero_grad()
        loss_q = compute_loss_q(o, a, r, o2, d, eps2)
        loss_q.backward()
        q_optimizer.step()

        # Freeze Q-networks so no computational effort is spent on their gradients
        # during the policy step.
        for p in q_params:
            p.requires_grad = False
        pi_optimizer.zero_grad()
        loss_pi, logp_pi = compute_loss_pi(o, eps)
        loss_pi.backward()
        pi_optimizer.step()
        for p in q_params:
            p.requires_grad = True

        alpha_optimizer.zero_grad()
        alpha_loss = -(log_alpha * (logp_pi.detach() + target_entropy)).mean()
        alpha_loss.backward()
        alpha_optimizer.step()

        with torch.no_grad():
            for p, p_targ in zip(ac.parameters(), ac_targ.parameters()):
                p_targ.data.mul_(polyak)
                p_targ.data.add_((1 - polyak) * p.data)
        return loss_q, loss_pi, alpha_loss

    step = torch.compile(update) if compiled else update
    rng = np.random.default_rng(0)
    n = 64
    obs = rng.standard_normal((n, 3)).astype(np.float32)
    act = np.tanh(rng.standard_normal((n, 2))).astype(np.float32) * 2
    rew = (-np.square(obs).sum(1) - 0.1 * np.square(act).sum(1)).astype(np.float32)
    obs2 = (obs + 0.1 * rng.standard_normal((n, 3))).astype(np.float32)
    done = (rng.random(n) < 0.1).astype(np.float32)
    losses = []
    for t in range(8):
        idx = rng.integers(0, n, 16)
        batch = [torch.as_tensor(x[idx]) for x in (obs, act, rew, obs2, done)]
        eps = torch.as_tensor(rng.standard_normal((16, 2)).astype(np.float32))
        eps2 = torch.as_tensor(rng.standard_normal((16, 2)).astype(np.float32))
        lq, lpi, la = step(*batch, eps, eps2)
        losses += [lq.item(), lpi.item(), la.item(), log_alpha.item()]
    with torch.no_grad():
        a, _ = ac.pi(torch.as_tensor(obs[:4]), None, deterministic=True, with_logprob=False)
        losses += a.flatten().tolist()
    losses.append(sum(p.sum().item() for p in ac_targ.parameters()))
    return {"losses": losses, "weights": w, "fn": step}
