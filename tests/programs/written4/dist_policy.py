# In the manner of PPO implementations with torch.distributions and of VAEs that use
# them: an actor-critic whose forward returns a Categorical(logits=...) for discrete
# actions and a Normal(mu, log_std.exp()) with a state-independent nn.Parameter log_std
# for continuous ones, log_prob(...).sum(-1), entropy(), the clipped surrogate with
# torch.exp(new_logp - old_logp), torch.clamp and torch.min, a value loss through
# F.mse_loss, approximate KL from log-ratios; then a VAE whose posterior is
# Independent(Normal(mu, std), 1), a KL term by kl_divergence against a standard Normal
# prior, and reparameterised samples mu + std * eps. Actions and noise come from NumPy
# (a test device: the two libraries' random streams differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Independent, Normal, kl_divergence


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim, n_actions, act_dim):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(), layer_init(nn.Linear(16, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(), layer_init(nn.Linear(16, n_actions), std=0.01))
        self.actor_mean = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(), layer_init(nn.Linear(16, act_dim), std=0.01))
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action, cont_action):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        action_std = torch.exp(action_logstd)
        dist = Normal(action_mean, action_std)
        logprob = probs.log_prob(action) + dist.log_prob(cont_action).sum(1)
        entropy = probs.entropy() + dist.entropy().sum(1)
        return logprob, entropy, self.critic(x)


class VAE(nn.Module):
    def __init__(self, x_dim=12, z_dim=3, h=16):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(x_dim, h), nn.ReLU())
        self.mu = nn.Linear(h, z_dim)
        self.logvar = nn.Linear(h, z_dim)
        self.dec = nn.Sequential(nn.Linear(z_dim, h), nn.ReLU(), nn.Linear(h, x_dim))

    def forward(self, x, eps):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        std = torch.exp(0.5 * logvar)
        q = Independent(Normal(mu, std), 1)
        p = Independent(Normal(torch.zeros_like(mu), torch.ones_like(std)), 1)
        z = mu + std * eps
        x_logits = self.dec(z)
        recon = F.binary_cross_entropy_with_logits(x_logits, x, reduction='none').sum(-1)
        kl = kl_divergence(q, p)
        elbo_check = q.log_prob(z) - p.log_prob(z)
        return (recon + kl).mean(), elbo_check.mean(), q.entropy().mean()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(12)
    obs_dim, n_actions, act_dim = 4, 3, 2
    agent = Agent(obs_dim, n_actions, act_dim)
    vae = VAE()
    w = {}
    for j, model in enumerate((agent, vae)):
        if weights is not None:
            model.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith(f'{j}.')})
        w.update({f'{j}.' + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})

    n = 32
    obs = torch.tensor(rng.standard_normal((n, obs_dim)).astype(np.float32))
    actions = torch.tensor(rng.integers(0, n_actions, n))
    cont_actions = torch.tensor(rng.standard_normal((n, act_dim)).astype(np.float32))
    returns = torch.tensor(rng.standard_normal(n).astype(np.float32))
    with torch.no_grad():
        old_logprob, _, old_values = agent.get_action_and_value(obs, actions, cont_actions)
        advantages = returns - old_values.flatten()
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    optimizer = torch.optim.Adam(agent.parameters(), lr=3e-3, eps=1e-5)
    clip_coef, ent_coef, vf_coef = 0.2, 0.01, 0.5

    def ppo_update(mb_obs, mb_actions, mb_cont, mb_oldlogp, mb_adv, mb_returns):
        newlogprob, entropy, newvalue = agent.get_action_and_value(mb_obs, mb_actions, mb_cont)
        logratio = newlogprob - mb_oldlogp
        ratio = logratio.exp()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - logratio).mean()
            clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
        pg_loss1 = -mb_adv * ratio
        pg_loss2 = -mb_adv * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
        pg_loss = torch.max(pg_loss1, pg_loss2).mean()
        v_loss = 0.5 * ((newvalue.view(-1) - mb_returns) ** 2).mean()
        entropy_loss = entropy.mean()
        loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
        optimizer.step()
        return loss, approx_kl, clipfrac

    step1 = torch.compile(ppo_update) if compiled else ppo_update
    losses = []
    b_inds = np.arange(n)
    for epoch in range(4):
        for start in range(0, n, 8):
            mb = b_inds[start:start + 8]
            mbt = torch.from_numpy(mb)
            loss, approx_kl, clipfrac = step1(obs[mbt], actions[mbt], cont_actions[mbt], old_logprob[mbt], advantages[mbt], returns[mbt])
            losses += [loss.item(), approx_kl.item(), clipfrac.item()]

    pa = Categorical(logits=agent.actor(obs))
    pb = Categorical(probs=torch.softmax(torch.zeros(n, n_actions), dim=-1))
    losses.append(kl_divergence(pa, pb).mean().item())
    na = Normal(agent.actor_mean(obs), agent.actor_logstd.exp())
    losses.append(kl_divergence(na, Normal(0.0, 1.0)).sum().item())

    x = torch.tensor((rng.random((48, 12)) > 0.5).astype(np.float32))
    opt2 = torch.optim.Adam(vae.parameters(), lr=1e-2)

    def vae_step(xb, eps):
        opt2.zero_grad()
        loss, check, ent = vae(xb, eps)
        loss.backward()
        opt2.step()
        return loss, check, ent

    step2 = torch.compile(vae_step) if compiled else vae_step
    for epoch in range(2):
        for i in range(0, 48, 16):
            eps = torch.from_numpy(rng.standard_normal((16, 3)).astype(np.float32))
            loss, check, ent = step2(x[i:i + 16], eps)
            losses += [loss.item(), check.item(), ent.item()]
    return {"losses": losses, "weights": w, "fn": [step1, step2]}
